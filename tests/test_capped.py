"""ksbench.capped: a benchmark step run in a forked process with a wall-clock cap."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from ksbench.capped import Progress, StepFailed, call_capped


def test_the_value_and_the_measurements_come_back() -> None:
    def step(progress: Progress) -> list[int]:
        progress("grad", translate_s=0.5)
        return [1, 2]

    assert call_capped(step, 30.0, "translate") == ([1, 2], {"translate_s": 0.5})


def test_a_step_past_its_cap_is_killed_with_what_it_started() -> None:
    def slow(progress: Progress) -> None:
        child = subprocess.Popen(["sleep", "60"])  # as compile_def starts g++
        progress("compile_written", child=child.pid)
        time.sleep(60)

    start = time.monotonic()
    with pytest.raises(StepFailed) as caught:
        call_capped(slow, 1.0, "translate")
    assert time.monotonic() - start < 20
    failed = caught.value
    assert (failed.step, failed.status, failed.reason) == (
        "compile_written",
        "compile_written_timed_out",
        "ran past its cap of 1 s",
    )
    pid = failed.measured["child"]
    time.sleep(0.2)  # the group was killed: its sleep is gone (or a zombie of init's)
    try:
        state = Path(f"/proc/{pid}/stat").read_text().split()[2]
    except FileNotFoundError:
        state = "gone"
    assert state in ("gone", "Z")


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        (lambda: int("x"), "ValueError: invalid literal for int() with base 10: 'x'"),
        (lambda: os._exit(3), "the process ended with status 3"),
    ],
)
def test_a_step_that_fails_or_crashes_says_why(body: Any, reason: str) -> None:
    def step(progress: Progress) -> None:
        progress("grad", translate_s=0.1)
        body()

    with pytest.raises(StepFailed) as caught:
        call_capped(step, 30.0, "translate")
    assert (caught.value.status, caught.value.reason, caught.value.measured) == (
        "grad_failed",
        reason,
        {"translate_s": 0.1},
    )
