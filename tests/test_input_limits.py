"""Program files are read only when they are regular files of a sane size (issue 31, item 5, and the BOM
of item 10): `knossos check /dev/zero` and `optimize.py /dev/urandom` are one-line errors, not a memory
blow-up or a run that never ends.  Through the real entry points."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from app.optimize_cli import main as optimize_main
from knossos.cli import main as knossos_main

from conftest import PROGRAMS, run_cli


@pytest.mark.parametrize("device", ["/dev/zero", "/dev/urandom"])
def test_devices_are_refused(device: str, capsys: pytest.CaptureFixture[str]) -> None:
    if not Path(device).exists():
        pytest.skip(f"no {device} here")
    for main, argv in ((knossos_main, ["check", device]), (optimize_main, [device, "--budget", "5"])):
        code, out, err = run_cli(main, capsys, *argv)
        assert code == 1 and out == "" and err.count("\n") == 1
        assert f"{device}: error: not a regular file" in err


def test_a_fifo_is_refused_without_waiting_for_a_writer(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    fifo = tmp_path / "p.ks"
    os.mkfifo(fifo)
    code, _, err = run_cli(knossos_main, capsys, "check", str(fifo))
    assert code == 1 and "not a regular file" in err


def test_a_file_over_the_limit_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    big = tmp_path / "big.ks"
    big.write_text("(def f Float ((x : Float)) x)\n" + " " * (2 * 2**20))
    monkeypatch.setenv("KNOSSOS_MAX_SOURCE_MIB", "1")
    code, _, err = run_cli(knossos_main, capsys, "check", str(big))
    assert code == 1 and err.count("\n") == 1 and "larger than 1 MiB" in err and "KNOSSOS_MAX_SOURCE_MIB" in err
    monkeypatch.setenv("KNOSSOS_MAX_SOURCE_MIB", "3")
    assert run_cli(knossos_main, capsys, "check", str(big))[0] == 0


def test_a_utf8_bom_is_read_as_text(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    src = tmp_path / "bom.ks"
    src.write_bytes("\ufeff(def f Float ((x : Float)) (add x 1.0))\n".encode())
    code, out, _ = run_cli(knossos_main, capsys, "check", str(src))
    assert code == 0 and "ok" in out


def test_bench_sizes_that_cannot_fit_are_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    argv = (str(PROGRAMS / "blas_test.kso"), "--def", "gemm", "--rules", "ml_rules_no_bind", "--budget", "5")
    code, out, err = run_cli(optimize_main, capsys, *argv, "--bench", "n=99999999999999")
    assert code == 1 and out == "" and err.count("\n") == 1 and "more than 268,435,456 numbers" in err


def test_a_size_with_more_lengths_than_levels_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    src = str(PROGRAMS / "blas_test.kso")
    code, _, err = run_cli(knossos_main, capsys, "cost", src, "--def", "gemm", "--size", "mat_x=2x2x2x2")
    assert code == 1 and "--size mat_x: 4 lengths for a parameter with 2 level(s) of vectors" in err
    assert run_cli(knossos_main, capsys, "cost", src, "--def", "gemm", "--size", "mat_x=2x3")[0] == 0


@pytest.mark.parametrize(
    ("size", "message"),
    [
        ("a=2x2x2x2", "blas_test.kso: error: --size a: 4 lengths for a parameter with 2 level(s) of vectors"),
        ("alpha=2x2", "blas_test.kso: error: --size alpha: 2 lengths for a parameter with 0 level(s) of vectors"),
        (
            "mat_q=3",
            "optimize.py: error: --size names mat_q, which the expression being optimised does not use (it uses: ",
        ),
    ],
)
def test_optimize_sizes_are_checked_as_knossos_cost_checks_them(
    capsys: pytest.CaptureFixture[str], size: str, message: str
) -> None:
    """Was: optimize.py --cost alloc --size a=2x2x2x2 ran, the extra lengths ignored (mat_x is a parameter of
    a def gemm calls: knossos cost sizes the callees too, optimize.py the expression it rewrites)."""
    argv = (str(PROGRAMS / "blas_test.kso"), "--def", "gemm", "--cost", "alloc", "--budget", "5", "--model", "none")
    code, out, err = run_cli(optimize_main, capsys, *argv, "--size", size, "--quiet")
    assert code == 1 and out == "" and err.count("\n") == 1 and message in err, err
    code, _, err = run_cli(optimize_main, capsys, *argv, "--size", "a=2x3", "--quiet")
    assert code == 0, err
    code, _, err = run_cli(optimize_main, capsys, "--expr", "(add x 1.0)", "--cost", "alloc", "--size", "x=2x2")
    assert code == 1 and err == "<expr>: error: --size x: 2 lengths for a parameter with 0 level(s) of vectors\n"
