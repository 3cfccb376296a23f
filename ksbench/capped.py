"""Steps of a benchmark that may run past any reasonable time, run with a wall-clock cap.

A benchmark of code nobody here tuned must finish whatever that code does: a gradient whose g++
takes minutes, or whose one call takes a minute, is a result to record ("compile timed out after
300 s"), not a run that stalls.  :func:`call_capped` runs a step in a forked copy of this process
(in a process group of its own, so that a g++ it started dies with it) and kills it at the cap;
:class:`StepFailed` names the step and why, with what the step measured before it stopped.

Forking keeps what the parent built (a loaded compiled library, the inputs) without pickling it;
only the step's result comes back, pickled through a pipe.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import time
import traceback
from collections.abc import Callable
from multiprocessing.connection import Connection
from typing import Any, TypeVar

_T = TypeVar("_T")

#: ``progress(step, **measured)``: the step a capped function starts now, and what it has measured.
Progress = Callable[..., None]


class StepFailed(Exception):
    """A step failed or ran past its cap: ``status`` is ``<step>_timed_out`` or ``<step>_failed``."""

    def __init__(self, step: str, timed_out: bool, reason: str, measured: dict[str, Any] | None = None) -> None:
        super().__init__(f"{step}: {reason}")
        self.step = step
        self.status = f"{step}_{'timed_out' if timed_out else 'failed'}"
        self.reason = reason
        self.measured = dict(measured or {})


def error_line(err: BaseException) -> str:
    """An exception as one line (a KsError's own line; otherwise its type and first line)."""
    text = str(err).strip().splitlines()
    first = text[0] if text else ""
    return first if type(err).__name__.startswith("Ks") else f"{type(err).__name__}: {first}".rstrip(": ")


def _child(fn: Callable[[Progress], Any], conn: Connection) -> None:
    os.setpgid(0, 0)  # a group of its own: the parent kills it and what it started (g++) together

    def progress(step: str, **measured: Any) -> None:
        conn.send(("progress", step, measured))

    try:
        value = fn(progress)
    except BaseException as err:  # any failure of the step is its result, sent back
        conn.send(("error", error_line(err), traceback.format_exc(limit=-3)))
    else:
        conn.send(("done", value, None))
    conn.close()


def _kill(process: multiprocessing.process.BaseProcess) -> None:
    if process.pid is not None:
        try:
            os.killpg(process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        except PermissionError:  # the child had not made its group yet: the process alone
            process.kill()
    process.join()


def call_capped(fn: Callable[[Progress], _T], limit: float, step: str) -> tuple[_T, dict[str, Any]]:
    """``fn(progress)`` in a forked process, killed after ``limit`` seconds of wall time.

    ``fn`` calls ``progress(name, **measured)`` as it starts each part (the step then reported is
    ``name``) and to hand back what it has measured.  Returns ``fn``'s value and everything it
    measured; raises :class:`StepFailed` (with those measurements) when it raises, crashes or runs
    past ``limit``.
    """
    ctx = multiprocessing.get_context("fork")
    receive, send = ctx.Pipe(duplex=False)
    process = ctx.Process(target=_child, args=(fn, send), daemon=True)
    measured: dict[str, Any] = {}
    deadline = time.monotonic() + limit
    process.start()
    send.close()
    try:
        while True:
            left = deadline - time.monotonic()
            if left <= 0 or not receive.poll(left):
                raise StepFailed(step, True, f"ran past its cap of {limit:g} s", measured)
            try:
                kind, value, detail = receive.recv()
            except EOFError:
                process.join()
                raise StepFailed(step, False, f"the process ended with status {process.exitcode}", measured) from None
            if kind == "progress":
                step = value
                measured.update(detail)
            elif kind == "error":
                raise StepFailed(step, False, value, measured)
            else:
                return value, measured
    finally:
        receive.close()
        _kill(process)


__all__ = ["Progress", "StepFailed", "call_capped", "error_line"]
