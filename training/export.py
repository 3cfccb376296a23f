"""``python -m training.export CHECKPOINT OUT.pt [--average-with CHECKPOINT ...] [--value-scale S] [--budget N]``:
keep only what search needs from a training checkpoint (and the value scale to search with, the
training's unless given; and a default evaluation budget, where given), or from the average of
several epochs' weights."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from knossos.cli import ArgumentParser, internal_error, whole_number
from knossos.errors import KsError, KsUsageError
from search.limits import MAX_BUDGET
from training.checkpoint import export_model


def build_parser() -> argparse.ArgumentParser:
    p = ArgumentParser(prog="python -m training.export", description=__doc__)
    p.add_argument("checkpoint", type=Path, metavar="CHECKPOINT")
    p.add_argument("out", type=Path, metavar="OUT.pt")
    p.add_argument("--average-with", type=Path, nargs="+", default=[], metavar="CHECKPOINT", help="average the weights")
    p.add_argument("--value-scale", type=float, default=None, metavar="S", help="the value scale to search with")
    p.add_argument(
        "--budget",
        type=whole_number(MAX_BUDGET),
        default=None,
        metavar="N",
        help="the evaluations optimize.py gives a search with this model unless --budget is given (5000)",
    )
    p.add_argument("--force", action="store_true", help="overwrite OUT.pt if it exists")
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    out: Path = args.out
    try:
        sources: list[Path] = [args.checkpoint, *args.average_with]
        if out.exists() and any(out.resolve() == s.resolve() for s in sources):
            raise KsUsageError("refusing to overwrite a checkpoint being exported", None, str(out))
        if out.is_dir():
            raise KsUsageError("OUT.pt names a folder", None, str(out))
        if out.exists() and not args.force:
            raise KsUsageError("the file exists; add --force to overwrite it", None, str(out))
        if not out.resolve().parent.is_dir():
            raise KsUsageError("the folder does not exist", None, str(out))
        try:
            export_model(sources, out, args.value_scale, args.budget)
        except ValueError as err:
            raise KsUsageError(str(err)) from None
        except OSError as err:
            raise KsUsageError(f"cannot write: {err.strerror}", None, str(out)) from None
    except KsError as err:
        print(err.render("training.export"), file=sys.stderr)
        return 1
    except Exception as err:
        return internal_error("training.export", err)
    print(f"wrote {out} ({out.stat().st_size // 1024} KiB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
