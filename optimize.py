"""Optimise a def or expression by searching over rewrite sequences.  See ``optimize.py --help``."""

from __future__ import annotations

import signal
import sys

if __name__ == "__main__":
    try:
        from app.optimize_cli import main
    except KeyboardInterrupt:  # Ctrl-C while starting up: no traceback
        sys.exit(130)
    status = main()
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # done: Ctrl-C while the interpreter shuts down changes nothing
    sys.exit(status)
