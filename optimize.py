"""Optimise a def or expression by searching over rewrite sequences.  See ``optimize.py --help``."""

from __future__ import annotations

import sys

if __name__ == "__main__":
    try:
        from app.startup import ignore_late_interrupts, load_main
    except KeyboardInterrupt:  # Ctrl-C in the first milliseconds
        sys.exit(130)
    main = load_main("app.optimize_cli")  # Ctrl-C while importing the rest: exit 130, no traceback
    status = main()
    ignore_late_interrupts()  # done: Ctrl-C while the interpreter shuts down changes nothing
    sys.exit(status)
