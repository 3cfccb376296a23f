"""The runtime precompiled once per compiler and flags (cpp_backend.pch), through compile_program and
compile_def: the programs agree with the interpreter, share one header, and g++ really reads it."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from cpp_backend.callable import compile_def
from cpp_backend.compile import compile_flags, compiler
from cpp_backend.driver import compile_program
from cpp_backend.pch import split_runtime
from knossos.interpreter import Interpreter
from knossos.parser import parse_program

pytestmark = pytest.mark.usefixtures("cpp_cache")

FLAGS = ("-O1",)
TEXT = """
(def scale (Vec Float) ((v : Vec Float) (a : Float)) (build (size v) (lam (i : Integer) (mul a (index i v)))))
(def total Float ((v : Vec Float)) (sum v))
"""


def _folders(cache: Path) -> list[Path]:
    return [p.parent for p in cache.glob("*/compile.log")]


def test_programs_share_one_precompiled_runtime_that_g_reads(cpp_cache: Path) -> None:
    program = parse_program(TEXT, "p.ks")
    v = [0.5, 1.5, -2.0]
    first = compile_program(program, ["scale"], FLAGS)
    second = compile_program(program, ["total"], FLAGS)
    assert first.call("scale", [v, 3.0]) == Interpreter().call(program.defs["scale"], [v, 3.0])
    assert second.call("total", [v]) == Interpreter().call(program.defs["total"], [v])
    gchs = list(cpp_cache.glob("runtime-*/ks_runtime.h.gch"))
    assert len(gchs) == 1
    units = [f / "unit.cpp" for f in _folders(cpp_cache)]
    assert len(units) == 2 and all(u.exists() for u in units)
    for unit in units:
        assert str(gchs[0].with_suffix("")) in unit.read_text()
        # g++ -H marks a precompiled header it uses with "!"
        shown = subprocess.run(
            [compiler(), *compile_flags(FLAGS), "-H", "-fsyntax-only", str(unit)],
            capture_output=True,
            text=True,
            check=True,
        ).stderr
        assert f"! {gchs[0]}" in shown.splitlines()


def test_exact_order_sources_compile_as_they_are(cpp_cache: Path, tmp_path: Path) -> None:
    path = tmp_path / "p.ks"
    path.write_text(TEXT)
    compiled = compile_def(path, "total", exact_order=True, extra_flags=FLAGS)
    assert compiled([0.1, 0.2, 0.3]) == Interpreter().call(parse_program(TEXT, "p.ks").defs["total"], [[0.1, 0.2, 0.3]])
    (folder,) = [f for f in _folders(cpp_cache) if "#define KS_EXACT_ORDER" in (f / "source.cpp").read_text()]
    source = (folder / "source.cpp").read_text()
    assert "#define KS_EXACT_ORDER" in source and split_runtime(source) is None
    assert not (folder / "unit.cpp").exists()
