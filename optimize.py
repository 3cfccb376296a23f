"""Optimise a def or expression by searching over rewrite sequences.  See ``optimize.py --help``."""

from __future__ import annotations

import sys

from search.cli import main

if __name__ == "__main__":
    sys.exit(main())
