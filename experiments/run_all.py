"""Run every figure's experiment, then its plot, then the documentation's tables (resumable throughout).

Run:  python experiments/run_all.py [--quick] [FIGURE ...]

Figures run in an order that shares work: fig9_search after fig5_generalisation (it reuses the A*
training runs).  Each run carries on where an interrupted one stopped, so rerunning this after an
interruption (or a machine's time limit) continues the whole set.  Without --quick this takes many
hours on a 2-core machine; see experiments/README.md for each figure's time.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FIGURES = (
    "fig7_walltime",
    "fig6_blas",
    "fig5_generalisation",
    "fig9_search",
    "fig5_bootstrap",
    "fig6_cnn",
    "fig6_gradients",
)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("figures", nargs="*", metavar="FIGURE", help=f"some of {', '.join(FIGURES)} (default: all)")
    ap.add_argument("--quick", action="store_true", help="the tiny version of each (results under runs/quick/)")
    args = ap.parse_args()
    unknown = [f for f in args.figures if f not in FIGURES]
    if unknown:
        ap.error(f"unknown figure {unknown[0]!r} (known: {', '.join(FIGURES)})")
    extra = ["--quick"] if args.quick else []
    for figure in args.figures or FIGURES:
        for action in ("run", "plot"):
            argv = [sys.executable, "-m", "experiments", figure, action, *extra]
            print(f"run_all: {figure} {action}", file=sys.stderr, flush=True)
            if subprocess.run(argv, cwd=ROOT, check=False).returncode != 0:
                print(f"run_all: {figure} {action} failed; rerun to carry on", file=sys.stderr)
                return 1
    if not args.quick:
        subprocess.run([sys.executable, "-m", "experiments.summary", "--write"], cwd=ROOT, check=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
