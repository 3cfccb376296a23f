"""Import an application's entry point with Ctrl-C held back until the import is over.

A KeyboardInterrupt raised inside a C extension's initialisation (numpy importing ``datetime``, torch
loading its libraries) is turned into an ``ImportError`` with a long message, so catching
KeyboardInterrupt around the import is not enough: the signal is only recorded while importing, and
acted on (exit 130, no output) once the modules are loaded.

Once loaded, Ctrl-C is kept out of code that cannot pass an exception on: a weakref callback (the
expression tables drop dead nodes in one) or a finaliser. Python reports a KeyboardInterrupt raised
there as "Exception ignored in ..." with a traceback, and goes on as if no Ctrl-C had come.
:func:`interrupt_outside_callbacks` installs a SIGINT handler that, when the signal arrives inside
one of knossos's weakref callbacks, raises KeyboardInterrupt a millisecond later (SIGALRM) instead,
once the callback has returned, and a hook that does the same for a KeyboardInterrupt that another
library's callback swallowed.
"""

from __future__ import annotations

import importlib
import signal
import sys
from collections.abc import Callable
from types import CodeType, FrameType


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
    interrupt_outside_callbacks()
    return main


def ignore_late_interrupts() -> None:
    """The work is done: a Ctrl-C from now on changes nothing, nor one that arrived inside a callback
    and was deferred to a millisecond later (the SIGALRM of :func:`interrupt_outside_callbacks`, which
    would otherwise kill the process with that signal while the interpreter shuts down)."""
    signal.setitimer(signal.ITIMER_REAL, 0)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGALRM, signal.SIG_IGN)


def interrupt_outside_callbacks() -> None:
    """SIGINT raises KeyboardInterrupt as usual, but never inside knossos's weakref callbacks or the
    unraisable-exception hook: arriving there, it is raised a millisecond later (SIGALRM), once they
    have returned."""
    from knossos import expr

    def deferred_hook(unraisable: sys.UnraisableHookArgs) -> None:
        if unraisable.exc_type is not None and issubclass(unraisable.exc_type, KeyboardInterrupt):
            later()
            return
        previous_hook(unraisable)

    protected: frozenset[CodeType] = expr.TABLE_CALLBACKS | {deferred_hook.__code__}

    def later() -> None:
        signal.setitimer(signal.ITIMER_REAL, 0.001)

    def interrupt(signum: int, frame: FrameType | None) -> None:
        if frame is not None and frame.f_code in protected:
            later()
            return
        raise KeyboardInterrupt

    previous_hook = sys.unraisablehook
    sys.unraisablehook = deferred_hook
    signal.signal(signal.SIGINT, interrupt)
    signal.signal(signal.SIGALRM, interrupt)
