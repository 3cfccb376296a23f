"""Import an application's entry point with Ctrl-C held back until the import is over.

A KeyboardInterrupt raised inside a C extension's initialisation (numpy importing ``datetime``, torch
loading its libraries) is turned into an ``ImportError`` with a long message, so catching
KeyboardInterrupt around the import is not enough: the signal is only recorded while importing, and
acted on (exit 130, no output) once the modules are loaded.
"""

from __future__ import annotations

import importlib
import signal
import sys
from collections.abc import Callable
from types import FrameType


def load_main(module: str) -> Callable[[], int]:
    """``module.main``, imported with SIGINT deferred; exits with 130 if Ctrl-C came meanwhile."""
    interrupted: list[int] = []

    def record(signum: int, frame: FrameType | None) -> None:
        interrupted.append(signum)

    previous = signal.signal(signal.SIGINT, record)
    try:
        main: Callable[[], int] = importlib.import_module(module).main
    finally:
        signal.signal(signal.SIGINT, previous)
    if interrupted:
        sys.exit(130)
    return main
