"""Shared paths and helpers for the tests."""

from __future__ import annotations

import os
import random
import signal
import sys
import tomllib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from knossos.types import Kind, Type

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "ksdata"
PROGRAMS = DATA / "programs"
PROGRAM_FILES = sorted(PROGRAMS.glob("*.kso"))
#: Every package of the project (the list mypy checks): what the lint and atomic-write tests walk.
PACKAGES: tuple[str, ...] = tuple(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["mypy"]["packages"])


@pytest.fixture(scope="session")
def data_dir() -> Path:
    return DATA


@pytest.fixture(scope="module")
def cpp_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A fresh C++ compilation cache for the module that asks for it (KNOSSOS_CPP_CACHE)."""
    folder = tmp_path_factory.mktemp("knossos-cpp-cache")
    saved = os.environ.get("KNOSSOS_CPP_CACHE")
    os.environ["KNOSSOS_CPP_CACHE"] = str(folder)
    yield folder
    if saved is None:
        del os.environ["KNOSSOS_CPP_CACHE"]
    else:
        os.environ["KNOSSOS_CPP_CACHE"] = saved


def random_value(t: Type, rng: random.Random) -> object:
    """A random argument of type ``t``: Floats in [0.5, 2], Integers 1-3, vectors of length 3."""
    if t.kind is Kind.FLOAT:
        return rng.uniform(0.5, 2.0)
    if t.kind is Kind.INTEGER:
        return rng.randint(1, 3)
    if t.kind is Kind.BOOL:
        return rng.random() < 0.5
    if t.kind is Kind.VEC:
        return [random_value(t.elem, rng) for _ in range(3)]
    if t.kind is Kind.TUPLE:
        return tuple(random_value(c, rng) for c in t.children)
    raise TypeError(f"cannot make a value of type {t}")


def run_cli(main: Callable[[list[str]], int], capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    """A command line's ``main`` in-process: (exit code, stdout, stderr); argparse's usage errors
    exit, which counts as the exit code."""
    try:
        code = main(list(argv))
    except SystemExit as stop:
        code = stop.code if isinstance(stop.code, int) else 1
    out, err = capsys.readouterr()
    return code, out, err


def without_seconds(value: Any) -> Any:
    """``value`` (metrics, nested) without its ``seconds`` entries: what must repeat exactly between runs."""
    if isinstance(value, dict):
        return {k: without_seconds(v) for k, v in value.items() if k != "seconds"}
    if isinstance(value, list):
        return [without_seconds(v) for v in value]
    return value


@pytest.fixture
def restore_signal_handlers(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """For tests of code that installs process-wide Ctrl-C handlers (optimize.py, the knossos
    subcommands, app.startup): each test gets the handlers it started with back."""
    monkeypatch.setattr(sys, "unraisablehook", sys.unraisablehook)
    saved = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGALRM)}
    yield
    signal.setitimer(signal.ITIMER_REAL, 0)
    for s, handler in saved.items():
        signal.signal(s, handler)
