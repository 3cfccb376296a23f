"""``python -m gnn.export RUN/checkpoint.pt OUT.pt``: keep only what search needs from a training checkpoint."""

from __future__ import annotations

import sys
from pathlib import Path

from gnn.checkpoint import export_model
from knossos.errors import KsError, KsUsageError


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    try:
        if len(args) != 2:
            raise KsUsageError("usage: python -m gnn.export CHECKPOINT OUT")
        source, out = Path(args[0]), Path(args[1])
        if out.exists() and out.resolve() == source.resolve():
            raise KsUsageError("refusing to overwrite the checkpoint being exported", None, str(out))
        export_model(source, out)
    except KsError as err:
        print(err.render("gnn.export"), file=sys.stderr)
        return 1
    print(f"wrote {out} ({out.stat().st_size // 1024} KiB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
