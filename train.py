"""Train a value function on a set of expressions.  See ``train.py --help``."""

from __future__ import annotations

import sys

from gnn.train_cli import main

if __name__ == "__main__":
    sys.exit(main())
