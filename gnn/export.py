"""``python -m gnn.export RUN/checkpoint.pt OUT.pt [--value-scale S]``: keep only what search needs
from a training checkpoint (and the value scale to search with; the training's unless given)."""

from __future__ import annotations

import sys
from pathlib import Path

from gnn.checkpoint import export_model
from knossos.errors import KsError, KsUsageError


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    try:
        scale = None
        if len(args) == 4 and args[2] == "--value-scale":
            try:
                scale = float(args[3])
            except ValueError:
                raise KsUsageError(f"--value-scale: '{args[3]}' is not a number") from None
            args = args[:2]
        if len(args) != 2:
            raise KsUsageError("usage: python -m gnn.export CHECKPOINT OUT [--value-scale S]")
        source, out = Path(args[0]), Path(args[1])
        if out.exists() and out.resolve() == source.resolve():
            raise KsUsageError("refusing to overwrite the checkpoint being exported", None, str(out))
        try:
            export_model(source, out, scale)
        except ValueError as err:
            raise KsUsageError(str(err)) from None
    except KsError as err:
        print(err.render("gnn.export"), file=sys.stderr)
        return 1
    print(f"wrote {out} ({out.stat().st_size // 1024} KiB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
