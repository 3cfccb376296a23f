"""app.startup: Ctrl-C while an entry point's modules load exits 130 once loading is over, and once
loaded it is never raised inside a weakref callback, where Python would print and drop it."""

from __future__ import annotations

import signal
import sys
import time
import weakref
from pathlib import Path
from types import SimpleNamespace

import pytest

from app.startup import ignore_late_interrupts, interrupt_outside_callbacks, load_main
from knossos import expr

pytestmark = pytest.mark.usefixtures("restore_signal_handlers")  # (tests/conftest.py)


def write_module(folder: Path, name: str, body: str) -> None:
    (folder / f"{name}.py").write_text(body)


def test_an_interrupt_during_the_import_waits_for_the_import_then_exits_130(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The module interrupts itself mid-import, then finishes: the import must not be cut short.
    write_module(
        tmp_path,
        "interrupted_entry",
        "import os, signal\nos.kill(os.getpid(), signal.SIGINT)\nLOADED = True\ndef main():\n    return 0\n",
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(SystemExit) as exit_:
        load_main("interrupted_entry")
    assert exit_.value.code == 130
    assert sys.modules["interrupted_entry"].LOADED
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_without_an_interrupt_it_returns_main_and_ctrl_c_interrupts_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_module(tmp_path, "quiet_entry", "def main():\n    return 7\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert load_main("quiet_entry")() == 7
    handler = signal.getsignal(signal.SIGINT)
    assert callable(handler)  # no longer the import's recorder: Ctrl-C raises again
    with pytest.raises(KeyboardInterrupt):
        handler(signal.SIGINT, sys._getframe())


def test_ctrl_c_inside_a_node_table_callback_is_raised_after_it() -> None:
    interrupt_outside_callbacks()
    handler = signal.getsignal(signal.SIGINT)
    assert callable(handler)
    inside = SimpleNamespace(f_code=next(iter(expr.TABLE_CALLBACKS)))  # the frame SIGINT would find running
    handler(signal.SIGINT, inside)  # no KeyboardInterrupt here
    with pytest.raises(KeyboardInterrupt):
        time.sleep(1.0)  # ... but a millisecond later


def test_ctrl_c_elsewhere_raises_at_once() -> None:
    interrupt_outside_callbacks()
    handler = signal.getsignal(signal.SIGINT)
    assert callable(handler)
    with pytest.raises(KeyboardInterrupt):
        handler(signal.SIGINT, sys._getframe())


class Node:
    pass


def test_an_interrupt_another_callback_swallowed_is_raised_after_it(capsys: pytest.CaptureFixture[str]) -> None:
    interrupt_outside_callbacks()
    node = Node()

    def callback(ref: object) -> None:
        raise KeyboardInterrupt  # what SIGINT does when it arrives in someone else's callback

    ref = weakref.ref(node, callback)
    with pytest.raises(KeyboardInterrupt):
        del node  # the callback runs here, and Python cannot raise from it
        time.sleep(1.0)
    assert ref() is None
    assert "Exception ignored" not in capsys.readouterr().err


def test_other_exceptions_in_callbacks_are_still_reported() -> None:
    seen: list[type[BaseException] | None] = []
    sys.unraisablehook = lambda unraisable: seen.append(unraisable.exc_type)
    interrupt_outside_callbacks()
    node = Node()

    def broken(ref: object) -> None:
        raise ValueError("in a callback")

    ref = weakref.ref(node, broken)
    del node
    assert ref() is None and seen == [ValueError]


def test_a_deferred_interrupt_is_dropped_once_the_work_is_done() -> None:
    """A Ctrl-C that arrived inside a callback is deferred to a millisecond later (SIGALRM); once the
    command has finished, it must neither raise nor kill the process with SIGALRM at shutdown."""
    interrupt_outside_callbacks()
    signal.setitimer(signal.ITIMER_REAL, 0.05)  # as a deferred Ctrl-C arms it
    ignore_late_interrupts()
    time.sleep(0.1)  # no KeyboardInterrupt, no SIGALRM
    assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN and signal.getsignal(signal.SIGALRM) is signal.SIG_IGN
    assert signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)
