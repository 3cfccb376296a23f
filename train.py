"""Train a value function on a set of expressions (thin entry point).

The value network and its training loop (issue: "The GGNN value function...") are not built yet;
until then this entry point says so instead of pretending.
"""

from __future__ import annotations

import sys


def main() -> int:
    print("train.py: error: value-function training is not implemented yet", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
