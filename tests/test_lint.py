"""The code base stays clean: ruff (lint and format) and mypy --strict on the core packages."""

from __future__ import annotations

import subprocess
import sys

from conftest import ROOT


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", *args], cwd=ROOT, capture_output=True, text=True)


def test_ruff_check() -> None:
    done = _run("ruff", "check", "--output-format", "concise", ".")
    assert done.returncode == 0, done.stdout + done.stderr


def test_ruff_format() -> None:
    done = _run("ruff", "format", "--check", ".")
    assert done.returncode == 0, done.stdout + done.stderr


def test_mypy() -> None:
    done = _run("mypy")
    assert done.returncode == 0, done.stdout + done.stderr
