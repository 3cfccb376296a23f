"""app.startup.load_main: Ctrl-C while an entry point's modules load exits 130 once loading is over."""

from __future__ import annotations

import signal
import sys
from pathlib import Path

import pytest

from app.startup import load_main


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


def test_without_an_interrupt_it_returns_main_and_restores_the_handler(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_module(tmp_path, "quiet_entry", "def main():\n    return 7\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert load_main("quiet_entry")() == 7
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
