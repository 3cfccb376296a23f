"""Optimise a def or expression by searching over rewrite sequences (thin entry point).

The search (issue: "Search: the rewrite MDP, deep A*...") is not built yet; until then this entry
point says so instead of pretending.  Costing and evaluating programs works today: see ``knossos --help``.
"""

from __future__ import annotations

import sys


def main() -> int:
    print(
        "optimize.py: error: the rewrite search is not implemented yet; "
        "use `knossos cost FILE` and `knossos eval FILE DEF --args ARGS.json` meanwhile",
        file=sys.stderr,
    )
    return 2


if __name__ == "__main__":
    sys.exit(main())
