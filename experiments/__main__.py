"""Run or plot a figure: ``python -m experiments FIGURE run|plot [OPTIONS]``; ``--help`` lists the figures.

OPTIONS go to the figure's run or plot as they are (``python -m experiments fig5_bootstrap run --help``
shows them).  The figures are the registry's (experiments.figures).
"""

from __future__ import annotations

import argparse
import sys

from experiments.figures import Figure, figures

ACTIONS = ("run", "plot")


def listing(known: dict[str, Figure]) -> str:
    """The figures, what each can do, and what each shows."""
    lines = ["figures:"]
    for f in known.values():
        actions = "|".join(a for a in ACTIONS if getattr(f, a) is not None) or "(tables)"
        lines.append(f"  {f.name:<20} {actions:<9} {f.what}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    known = figures()
    ap = argparse.ArgumentParser(
        prog="python -m experiments",
        description=(__doc__ or "").splitlines()[0],
        epilog=listing(known) + "\n\n(tables): its tables only, made by python -m experiments.summary",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ap.add_argument("figure", choices=list(known), metavar="FIGURE", help="one of the figures below")
    ap.add_argument("action", choices=ACTIONS, help="run the experiment, or plot its results")
    args = ap.parse_args(argv[:2])
    script = getattr(known[args.figure], args.action)
    if script is None:
        ap.error(f"{args.figure} has no {args.action}")
    # the figures' scripts name themselves after sys.argv[0] in their usage and error lines
    sys.argv[0] = f"python -m experiments {args.figure} {args.action}"
    return script(argv[2:]) or 0


if __name__ == "__main__":
    sys.exit(main())
