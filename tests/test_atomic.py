"""knossos.atomic: a file is either the old one or the new one, with the mode it had."""

from __future__ import annotations

import os
import re
import stat
import subprocess
import sys
from pathlib import Path
from typing import BinaryIO

import pytest

from knossos.atomic import atomic_output, atomic_write, atomic_write_bytes, atomic_write_text

from conftest import PACKAGES, ROOT


def test_writes_a_new_file_with_the_ordinary_mode(tmp_path: Path) -> None:
    target = tmp_path / "out.txt"
    atomic_write_text(target, "héllo\n")
    assert target.read_bytes() == "héllo\n".encode()
    umask = os.umask(0o022)
    os.umask(umask)
    assert stat.S_IMODE(target.stat().st_mode) == 0o666 & ~umask
    assert [p.name for p in tmp_path.iterdir()] == ["out.txt"]


def test_replaces_a_file_keeping_its_mode(tmp_path: Path) -> None:
    target = tmp_path / "out.bin"
    target.write_bytes(b"old")
    target.chmod(0o640)
    atomic_write_bytes(str(target), b"new")
    assert target.read_bytes() == b"new"
    assert stat.S_IMODE(target.stat().st_mode) == 0o640


def test_a_failed_write_leaves_the_old_file_and_no_temporary(tmp_path: Path) -> None:
    target = tmp_path / "out.txt"
    target.write_text("old")

    def half(f: BinaryIO) -> None:
        f.write(b"partial")
        raise RuntimeError("stopped")

    with pytest.raises(RuntimeError, match="stopped"):
        atomic_write(target, half)
    assert target.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["out.txt"]


def test_a_symbolic_link_is_followed(tmp_path: Path) -> None:
    real = tmp_path / "real.txt"
    real.write_text("old")
    link = tmp_path / "link.txt"
    link.symlink_to(real)
    atomic_write_text(link, "new")
    assert link.is_symlink() and real.read_text() == "new"


def test_a_missing_folder_is_an_os_error(tmp_path: Path) -> None:
    with pytest.raises(OSError):
        atomic_write_text(tmp_path / "no" / "out.txt", "x")


def test_atomic_output_renames_what_another_program_wrote(tmp_path: Path) -> None:
    target = tmp_path / "program"
    target.write_bytes(b"old")
    with atomic_output(target) as tmp:
        assert tmp.parent == tmp_path and not tmp.exists()
        subprocess.run([sys.executable, "-c", f"open({str(tmp)!r}, 'wb').write(b'new')"], check=True)
        assert target.read_bytes() == b"old"  # not yet
    assert target.read_bytes() == b"new"
    assert [p.name for p in tmp_path.iterdir()] == ["program"]


def test_atomic_output_that_fails_leaves_the_old_file_and_no_temporary(tmp_path: Path) -> None:
    target = tmp_path / "program"
    target.write_bytes(b"old")
    with pytest.raises(RuntimeError, match="compiler failed"), atomic_output(target) as tmp:
        tmp.write_bytes(b"half")
        raise RuntimeError("compiler failed")
    assert target.read_bytes() == b"old"
    assert [p.name for p in tmp_path.iterdir()] == ["program"]


def test_only_knossos_atomic_renames_files_into_place() -> None:
    """One atomic-write helper: no other module has its own temporary-file-and-rename."""
    renames = re.compile(r"\bos\.(replace|rename)\(|\.rename\(")  # os's, and pathlib's rename
    found = [
        f"{path.relative_to(ROOT)}:{number}: {line.strip()}"
        for folder in PACKAGES
        for path in sorted((ROOT / folder).rglob("*.py"))
        if path != ROOT / "knossos" / "atomic.py"
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if renames.search(line)
    ]
    assert not found, "\n".join(found)
