"""Outputs are written only where a user meant them (issue 31, items 8-10): never over a device, FIFO or
socket (whatever --force says), never over a file that appeared during the search unless --force, and
`knossos cpp -o` and `optimize.py -o ''` give one-line errors.  Through the real entry points."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from app.optimize_cli import _Outputs, main, write_atomic
from knossos.atomic import NotARegularFile, atomic_write_text
from knossos.cli import main as knossos_main
from knossos.errors import KsUsageError
from knossos.parser import load_program

from conftest import PROGRAMS, run_cli

GELU = str(PROGRAMS / "gelu.kso")


@pytest.fixture
def fifo(tmp_path: Path) -> Path:
    path = tmp_path / "pipe"
    os.mkfifo(path)
    return path


def test_atomic_writes_never_replace_a_special_file(fifo: Path) -> None:
    with pytest.raises(NotARegularFile, match="not a regular file"):
        atomic_write_text(fifo, "x")
    assert stat.S_ISFIFO(fifo.stat().st_mode)
    assert [p.name for p in fifo.parent.iterdir()] == ["pipe"]  # no temporary file left behind


def test_without_replace_a_file_that_appeared_is_left_alone(tmp_path: Path) -> None:
    target = tmp_path / "out.ks"
    atomic_write_text(target, "new", replace=False)
    assert target.read_text() == "new"
    with pytest.raises(FileExistsError):
        atomic_write_text(target, "newer", replace=False)
    assert target.read_text() == "new" and len(list(tmp_path.iterdir())) == 1
    atomic_write_text(target, "newer")
    assert target.read_text() == "newer"


def test_optimize_refuses_a_fifo_even_with_force(fifo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_cli(main, capsys, GELU, "--rules", "ml_rules", "--budget", "5", "-o", str(fifo), "--force")
    assert code == 1 and out == "" and err.count("\n") == 1 and "not a regular file" in err
    assert stat.S_ISFIFO(fifo.stat().st_mode)


def test_a_file_that_appears_during_the_search_is_not_overwritten(tmp_path: Path) -> None:
    # what -o does after the search: the target was checked before it (absent), then appeared
    target = tmp_path / "out.ks"
    program = load_program(GELU)
    d = next(iter(program.defs.values()))
    outputs = _Outputs("gelu.kso", str(target), False, None, None, replace_out=False)
    target.write_text("the user's")
    with pytest.raises(KsUsageError, match="appeared during the search; add --force"):
        outputs.write(program, d, d)
    assert target.read_text() == "the user's"
    write_atomic(str(target), "forced", force=True)
    assert target.read_text() == "forced"


def test_an_empty_output_name_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run_cli(main, capsys, GELU, "--rules", "ml_rules", "--budget", "5", "-o", "")
    assert code == 1 and "-o needs a file name" in err and err.count("\n") == 1


def test_knossos_cpp_needs_force_to_overwrite(tmp_path: Path, capsys: pytest.CaptureFixture[str], fifo: Path) -> None:
    out = tmp_path / "gelu.cpp"
    out.write_text("mine")
    assert knossos_main(["cpp", GELU, "-o", str(out)]) == 1
    assert "add --force" in capsys.readouterr().err and out.read_text() == "mine"
    assert knossos_main(["cpp", GELU, "-o", str(out), "--force"]) == 0
    assert "#include" in out.read_text()
    assert knossos_main(["cpp", GELU, "-o", str(fifo), "--force"]) == 1
    assert "not a regular file" in capsys.readouterr().err and stat.S_ISFIFO(fifo.stat().st_mode)
