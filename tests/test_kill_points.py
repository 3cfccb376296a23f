"""SIGKILL and SIGINT at random points of ``optimize.py -o`` and ``train.py``: never a partial or
corrupted output file, never a traceback, and a killed training run resumes to the same result as an
uninterrupted one.

The points are drawn from a seeded generator over the whole life of each process (start-up, search or
training, writing), so every run of the suite tries the same ones; ``KNOSSOS_KILL_POINTS`` sets how
many (the slow test tries more).
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import torch

from knossos.parser import load_program
from training.checkpoint import load_checkpoint

from conftest import PROGRAMS, ROOT, without_seconds

ENV = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
POINTS = int(os.environ.get("KNOSSOS_KILL_POINTS", "3"))
BLAS = PROGRAMS / "blas_test.kso"
OPTIMIZE = ["optimize.py", str(BLAS), "--def", "gemm", "--rules", "ml_rules_no_bind", "--depth", "30", "--quiet"]
TINY_TRAINING = [
    *("--set", "training.epochs=2", "--set", "search.budget=30", "--set", "search.test_budget=200"),
    *("--set", "model.hidden=48", "--set", "model.steps=2", "--set", "training.exprs_per_epoch=2"),
    *("--set", "training.replay_epochs=2", "--set", "model.mlp_head=true"),
]


def run_to_end(argv: list[str], timeout: float = 300) -> subprocess.CompletedProcess[str]:
    done = subprocess.run([sys.executable, *argv], cwd=ROOT, env=ENV, capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, done.stderr
    return done


def interrupt_at(argv: list[str], delay: float, sig: int) -> subprocess.CompletedProcess[str]:
    """Start ``argv``, send ``sig`` after ``delay`` seconds (if it is still running), wait for it."""
    proc = subprocess.Popen(
        [sys.executable, *argv], cwd=ROOT, env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        out, err = proc.communicate(timeout=delay)
    except subprocess.TimeoutExpired:
        proc.send_signal(sig)
        out, err = proc.communicate(timeout=120)
    return subprocess.CompletedProcess(argv, proc.returncode, out, err)


def delays(seed: int, longest: float, n: int = POINTS) -> list[float]:
    rng = random.Random(seed)
    return sorted(rng.uniform(0.0, longest) for _ in range(n))


def assert_no_traceback(done: subprocess.CompletedProcess[str]) -> None:
    assert "Traceback" not in done.stderr, done.stderr
    if done.returncode not in (0, -signal.SIGKILL):
        assert done.returncode == 130 and len(done.stderr.strip().splitlines()) <= 1, (done.returncode, done.stderr)


# -- optimize.py -o ---------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def optimised(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, float]:
    """The output of an uninterrupted run, and how long the run took."""
    out = tmp_path_factory.mktemp("whole") / "out.ks"
    began = time.monotonic()
    run_to_end([*OPTIMIZE, "--budget", "10000", "-o", str(out)])
    return out.read_text(), time.monotonic() - began


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGINT], ids=["kill", "int"])
def test_optimize_output_is_whole_or_absent(tmp_path: Path, optimised: tuple[str, float], sig: int) -> None:
    whole, seconds = optimised
    original = BLAS.read_text()
    for k, delay in enumerate(delays(int(sig), seconds * 1.2)):
        out = tmp_path / f"out{k}.ks"
        done = interrupt_at([*OPTIMIZE, "--budget", "10000", "-o", str(out)], delay, sig)
        assert_no_traceback(done)
        if sig == signal.SIGKILL or not out.exists():
            assert not out.exists() or out.read_text() == whole, f"a partial file after {delay:.2f} s"
        else:  # Ctrl-C during the search writes the best found so far: a whole program, no worse
            program = load_program(out)
            assert program.defs["gemm"].body.cost <= load_program(BLAS).defs["gemm"].body.cost
            assert program.defs.keys() == load_program(BLAS).defs.keys()
        assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp") and done.returncode != -signal.SIGKILL]
    assert BLAS.read_text() == original


def test_optimize_over_an_existing_file_keeps_old_or_new(tmp_path: Path, optimised: tuple[str, float]) -> None:
    """-o --force over a file a user wrote: killed at any point, the file is the old text or the new, never a mix."""
    whole, seconds = optimised
    mine = "; my notes\n" + BLAS.read_text()
    for k, delay in enumerate(delays(7, seconds * 1.2)):
        out = tmp_path / f"mine{k}.ks"
        out.write_text(mine)
        done = interrupt_at([*OPTIMIZE, "--budget", "10000", "-o", str(out), "--force"], delay, signal.SIGKILL)
        assert_no_traceback(done)
        assert out.read_text() in (mine, whole)


# -- train.py ---------------------------------------------------------------------------------------
def metrics(folder: Path) -> list[dict[str, Any]]:
    path = folder / "metrics.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, float]:
    out = tmp_path_factory.mktemp("train") / "whole"
    began = time.monotonic()
    run_to_end(["train.py", "configs/bootstrap.yaml", "--out", str(out), "--quiet", *TINY_TRAINING])
    return out, time.monotonic() - began


def check_interrupted_run(folder: Path) -> None:
    """What a killed run leaves: no checkpoint, or one that loads, with metrics of at most its epochs."""
    ckpt = folder / "checkpoint.pt"
    if ckpt.exists():
        state = load_checkpoint(ckpt)
        assert state["epoch"] in (1, 2)
        assert len(metrics(folder)) in (state["epoch"] - 1, state["epoch"])
    else:
        assert not metrics(folder)


def check_resumes_to_the_same_result(folder: Path, whole: Path) -> None:
    run_to_end(["train.py", "configs/bootstrap.yaml", "--out", str(folder), "--quiet", "--resume", *TINY_TRAINING])
    assert without_seconds(metrics(folder)) == without_seconds(metrics(whole))
    resumed = load_checkpoint(folder / "checkpoint.pt")["model"]
    uninterrupted = load_checkpoint(whole / "checkpoint.pt")["model"]
    assert resumed.keys() == uninterrupted.keys()
    for name, tensor in uninterrupted.items():
        assert torch.equal(resumed[name], tensor), name


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGINT], ids=["kill", "int"])
def test_train_interrupted_anywhere_resumes_to_the_same_result(
    tmp_path: Path, trained: tuple[Path, float], sig: int
) -> None:
    whole, seconds = trained
    for k, delay in enumerate(delays(100 + int(sig), seconds, n=max(1, POINTS - 1))):
        folder = tmp_path / f"run{k}"
        done = interrupt_at(
            ["train.py", "configs/bootstrap.yaml", "--out", str(folder), "--quiet", *TINY_TRAINING], delay, sig
        )
        assert_no_traceback(done)
        check_interrupted_run(folder)
        check_resumes_to_the_same_result(folder, whole)


@pytest.mark.slow
def test_many_kill_points(tmp_path: Path, trained: tuple[Path, float], optimised: tuple[str, float]) -> None:
    """Twenty points each for optimize.py -o and train.py (KNOSSOS_KILL_POINTS sets the quick tests' number)."""
    whole_text, opt_seconds = optimised
    for k, delay in enumerate(delays(11, opt_seconds * 1.2, 20)):
        out = tmp_path / f"o{k}.ks"
        done = interrupt_at([*OPTIMIZE, "--budget", "10000", "-o", str(out)], delay, signal.SIGKILL)
        assert_no_traceback(done)
        assert not out.exists() or out.read_text() == whole_text
    whole, seconds = trained
    for k, delay in enumerate(delays(12, seconds, 20)):
        folder = tmp_path / f"t{k}"
        sig = signal.SIGKILL if k % 2 else signal.SIGINT
        done = interrupt_at(
            ["train.py", "configs/bootstrap.yaml", "--out", str(folder), "--quiet", *TINY_TRAINING], delay, sig
        )
        assert_no_traceback(done)
        check_interrupted_run(folder)
        check_resumes_to_the_same_result(folder, whole)


def test_ctrl_c_inside_the_write_leaves_the_old_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The one point random kills rarely hit: Ctrl-C while the output is being written (here, as it is
    flushed to disk).  The user's file keeps its text, no temporary file is left, one line says why."""
    from app.optimize_cli import main

    out = tmp_path / "mine.ks"
    out.write_text("; my notes\n")

    def interrupted(fd: int) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(os, "fsync", interrupted)
    code = main(
        [
            str(BLAS),
            "--def",
            "gemm",
            "--rules",
            "ml_rules_no_bind",
            "--budget",
            "50",
            "--quiet",
            "-o",
            str(out),
            "--force",
        ]
    )
    err = capsys.readouterr().err
    assert code == 130 and err.strip() == "optimize.py: interrupted (a file being written is left as it was)"
    assert out.read_text() == "; my notes\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mine.ks"]
