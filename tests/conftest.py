"""Shared paths and helpers for the tests."""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "experiments" / "data"
PROGRAMS = DATA / "programs"
PROGRAM_FILES = sorted(PROGRAMS.glob("*.kso"))


@pytest.fixture(scope="session")
def data_dir() -> Path:
    return DATA
