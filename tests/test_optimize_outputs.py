"""optimize.py's outputs: -o (the whole program, optimised), --in-place, --force, --emit-cpp, --bench.

C++ compilations use a fresh cache for this module; the --bench tests compile gemm of blas_test.kso
(the original and the baseline are the same source, so two compilations) and reuse them.
"""

from __future__ import annotations

import json
import random
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from app.optimize_cli import main, parse_bench
from cpp_backend import compile as cpp_compile
from cpp_backend.cpp_text import def_symbol
from knossos.interpreter import Interpreter
from knossos.parser import load_program
from knossos.printer import format_def
from knossos.program import Program
from knossos.values import isclose

from conftest import PROGRAMS, ROOT, random_value

BLAS = PROGRAMS / "blas_test.kso"
SEARCH = ["--rules", "ml_rules_no_bind", "--quiet"]


#: Each module compiles into a fresh cache of its own (see conftest.cpp_cache).
pytestmark = pytest.mark.usefixtures("cpp_cache")


def run(capsys: pytest.CaptureFixture[str], *argv: object) -> tuple[int, str, str]:
    """app.optimize_cli.main in-process; argparse's usage errors exit, which counts as the exit code."""
    try:
        code = main([str(a) for a in argv])
    except SystemExit as stop:
        code = stop.code if isinstance(stop.code, int) else 1
    out, err = capsys.readouterr()
    return code, out, err


def same_results(a: Program, b: Program, name: str, seed: int) -> None:
    rng = random.Random(seed)
    for _ in range(3):
        args = [random_value(p.type, rng) for p in a.defs[name].params]
        want = Interpreter().call(a.defs[name], args)
        assert isclose(Interpreter().call(b.defs[name], args), want)


def check_optimised_program(original: Program, written: Program, name: str) -> None:
    """``written`` is ``original`` with ``name`` cheaper or equal, every other def and edef unchanged."""
    assert list(written.defs) == list(original.defs) and list(written.edefs) == list(original.edefs)
    assert written.defs[name].body.cost <= original.defs[name].body.cost
    for other, d in original.defs.items():
        if other != name:
            # the same text (not the same Expr: calls carry the cost of the def they call)
            assert format_def(written.defs[other]) == format_def(d), other
    same_results(original, written, name, seed=1)


# -- -o and --in-place ---------------------------------------------------------------------------------
def test_o_writes_the_whole_program_optimised(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "out.ks"
    code, stdout, err = run(capsys, BLAS, "--def", "gemm", *SEARCH, "--depth", "30", "--budget", "500", "-o", out)
    assert code == 0 and err == ""
    assert f"wrote {out}" in stdout
    original, written = load_program(BLAS), load_program(out)
    check_optimised_program(original, written, "gemm")
    assert written.defs["gemm"].body.cost < original.defs["gemm"].body.cost
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.ks"]  # no temporary file left behind


def test_o_refuses_the_input_file_without_in_place(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    copy = tmp_path / "blas.ks"
    shutil.copy(BLAS, copy)
    before = copy.read_bytes()
    for target in (copy, tmp_path / "." / "blas.ks"):
        code, out, err = run(capsys, copy, "--def", "axpy", *SEARCH, "--budget", "50", "-o", target)
        assert code == 1 and out == ""
        assert err.count("\n") == 1 and "-o names the input file; add --in-place to overwrite it" in err
    assert copy.read_bytes() == before
    # --in-place writes over it, keeping its permissions
    copy.chmod(0o640)
    code, out, err = run(capsys, copy, "--def", "axpy", *SEARCH, "--budget", "200", "--in-place")
    assert code == 0 and err == "" and f"wrote {copy}" in out
    assert copy.read_bytes() != before and stat.S_IMODE(copy.stat().st_mode) == 0o640
    check_optimised_program(load_program(BLAS), load_program(copy), "axpy")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["blas.ks"]
    # -o FILE together with --in-place is the same thing
    code, _, err = run(capsys, copy, "--def", "axpy", *SEARCH, "--budget", "50", "--in-place", "-o", copy)
    assert code == 0 and err == ""


def test_o_refuses_another_existing_file_without_force(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "out.ks"
    out.write_text("keep me\n")
    code, stdout, err = run(capsys, BLAS, "--def", "axpy", *SEARCH, "--budget", "50", "-o", out)
    assert code == 1 and stdout == "" and "the file exists; add --force to overwrite it" in err
    assert out.read_text() == "keep me\n"
    code, _, err = run(capsys, BLAS, "--def", "axpy", *SEARCH, "--budget", "50", "-o", out, "--force")
    assert code == 0 and err == ""
    check_optimised_program(load_program(BLAS), load_program(out), "axpy")


@pytest.mark.parametrize(
    "extra, message",
    [
        (["-o", "{tmp}/missing/out.ks"], "-o: the folder does not exist"),
        (["-o", "{tmp}"], "-o names a folder"),
        (["--in-place", "-o", "{tmp}/other.ks"], "--in-place writes over FILE"),
        (["--emit-cpp", str(BLAS)], "--emit-cpp names the input file"),
        (["-o", "{tmp}/x.ks", "--emit-cpp", "{tmp}/x.ks"], "--emit-cpp and -o name the same file"),
    ],
)
def test_bad_output_paths_are_one_line_errors(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], extra: list[str], message: str
) -> None:
    argv = [a.replace("{tmp}", str(tmp_path)) for a in extra]
    code, out, err = run(capsys, BLAS, "--def", "axpy", *SEARCH, "--budget", "10", *argv)
    assert code == 1 and out == "" and err.count("\n") == 1 and message in err
    assert list(tmp_path.iterdir()) == []


# -- --emit-cpp --------------------------------------------------------------------------------------------
def test_emit_cpp_writes_compilable_cpp_with_the_called_defs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out, cpp = tmp_path / "out.ks", tmp_path / "out.cpp"
    # a short search: the optimised gemm still calls some of the defs it started with
    code, _, err = run(
        capsys, BLAS, "--def", "gemm", *SEARCH, "--depth", "2", "--budget", "40", "-o", out, "--emit-cpp", cpp
    )
    assert code == 0 and err == ""
    written = load_program(out)
    closure = [d.name for d in written.closure("gemm")]
    assert len(closure) > 1
    source = cpp.read_text()
    for name in closure:
        assert f" {def_symbol(name)}(" in source
    assert def_symbol("axpy") + "(" not in source  # only gemm and what it calls
    done = subprocess.run(
        [
            cpp_compile.compiler(),
            "-std=c++17",
            "-O0",
            "-Wall",
            "-Werror",
            "-c",
            "-o",
            str(tmp_path / "out.o"),
            str(cpp),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]


# -- --bench ---------------------------------------------------------------------------------------------
def test_bench_json(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(
        capsys, BLAS, "--def", "gemm", *SEARCH, "--depth", "30", "--budget", "500", "--bench", "n=8,16", "--json"
    )
    assert code == 0 and err == ""
    result = json.loads(out)
    assert result["best_cost"] < result["start_cost"]
    rows = result["bench"]
    assert [(r["variant"], r["size"]) for r in rows] == [
        (v, {"n": n}) for n in (8, 16) for v in ("original", "baseline", "optimised")
    ]
    for r in rows:
        assert {"variant", "size", "min_s", "median_s", "verified"} <= set(r)
        assert 0 < r["min_s"] <= r["median_s"]
        assert r["verified"] is True and r["agrees"] is True and r["runs"] >= 1


def test_bench_human_table(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, BLAS, "--def", "gemm", *SEARCH, "--depth", "30", "--budget", "500", "--bench", "n=5")
    assert code == 0 and err == ""
    lines = out.splitlines()
    header = next(i for i, line in enumerate(lines) if line.startswith("bench 'gemm'"))
    table = lines[header + 2 : header + 5]
    assert [line.split()[:2] for line in table] == [["n=5", v] for v in ("original", "baseline", "optimised")]
    assert all(line.endswith("yes") for line in table)
    assert table[1].split()[-2] == "1.00x"  # the baseline against itself


def test_bench_size_name_must_fit_the_def(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    sized = tmp_path / "sized.ks"
    sized.write_text("(def f Float ((x : Vec n Float)) (sumbuild n (lam (i : Integer) (mul 2.0 (index i x)))))\n")
    code, out, err = run(capsys, sized, *SEARCH, "--budget", "10", "--bench", "m=4")
    assert code == 1 and out == "" and "'m' is not a size variable of 'f' (its size variables: n)" in err
    code, out, err = run(capsys, sized, *SEARCH, "--budget", "10", "--bench", "n=6", "--json")
    assert code == 0 and err == ""
    assert [r["size"] for r in json.loads(out)["bench"]] == [{"n": 6}] * 3
    scalar = tmp_path / "scalar.ks"
    scalar.write_text("(def g Float ((x : Float)) (mul x 2.0))\n")
    code, out, err = run(capsys, scalar, *SEARCH, "--budget", "10", "--bench", "n=6")
    assert code == 1 and "'g' has no vector parameter to size" in err


def test_defs_without_cpp_form_fail_before_the_search(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    src = tmp_path / "edef.ks"
    src.write_text("(edef foo Float (Float))\n(def f Float ((x : Float)) (foo (add x 0.0)))\n")
    for flag in (["--emit-cpp", str(tmp_path / "f.cpp")], ["--bench", "n=4"]):
        code, out, err = run(capsys, src, *SEARCH, "--budget", "10", *flag)
        assert code == 1 and out == "" and err.count("\n") == 1
        assert "has no implementation of edef 'foo'" in err
    fn = tmp_path / "fn.ks"
    fn.write_text("(def g (Lam Float Float) ((v : Vec Float)) (lam (x : Float) (add x (index 0 v))))\n")
    code, out, err = run(capsys, fn, *SEARCH, "--budget", "10", "--bench", "n=4")
    assert code == 1 and "'g' takes or returns functions" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["edef.ks", "fn.ks"]


@pytest.mark.parametrize("spec", ["n", "n=", "=256", "n=256,", "n=0", "n=-4", "n=2.5", "n=256,m=128", "n=a,b"])
def test_bad_bench_spec_is_a_one_line_error(capsys: pytest.CaptureFixture[str], spec: str) -> None:
    code, out, err = run(capsys, BLAS, "--def", "gemm", *SEARCH, "--budget", "10", "--bench", spec)
    assert code == 1 and out == ""
    assert err.count("\n") == 1 and f"bad --bench '{spec}': expected NAME=N1,N2,..." in err


def test_parse_bench() -> None:
    assert parse_bench("n=256,512,1024") == ("n", [256, 512, 1024])
    assert parse_bench("size = 4") == ("size", [4])


# -- --expr --------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("flag", [["-o", "out.ks"], ["--emit-cpp", "out.cpp"], ["--bench", "n=4"], ["--in-place"]])
def test_expr_with_outputs_is_an_error(tmp_path: Path, flag: list[str]) -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "optimize.py"), "--expr", "(add x 0.0)", *flag],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 1 and done.stdout == ""
    assert (
        done.stderr == "optimize.py: error: -o, --in-place, --emit-cpp and --bench need FILE --def NAME, not --expr\n"
    )
    assert list(tmp_path.iterdir()) == []


def test_bench_says_what_it_is_doing_unless_quiet(capsys: pytest.CaptureFixture[str]) -> None:
    """Compiling and timing takes tens of seconds: without --quiet, each stage is a line on stderr."""
    argv = [BLAS, "--def", "axpy", "--rules", "ml_rules_no_bind", "--model", "none", "--budget", "20"]
    code, out, err = run(capsys, *argv, "--bench", "n=8", "--json")
    assert code == 0 and json.loads(out)["bench"]
    said = [line for line in err.splitlines() if line.startswith("bench: ")]
    assert (
        said[0] == "bench: compiling the original variant ..."
        and said[-1] == "bench: timing the optimised variant at n=8 ..."
    )
    code, _, err = run(capsys, *argv, "--bench", "n=8", "--json", "--quiet")
    assert code == 0 and "bench:" not in err


# -- -o and --in-place keep the file as written but for the def (issue 44, item 8b) ---------------------
COMMENTED = """\
; my program
#| a block comment, with a form in it: (def f Float ((x : Float)) x) |#
(def g Float ((x : Float)) (mul x 1.0)) ; g stays as written, mul x 1.0 and all

;; f: the one to optimise
(def f Float ((x : Float) (y : Float))
  ; scale first
  (add (mul x y)   ; the product
       (mul x 0.0))) ; after f's closing parenthesis
; the end
"""
#: f optimised (by add_of_muls, add_zero): only f's form changes; its two inner comments go above it.
COMMENTED_OPTIMISED = """\
; my program
#| a block comment, with a form in it: (def f Float ((x : Float)) x) |#
(def g Float ((x : Float)) (mul x 1.0)) ; g stays as written, mul x 1.0 and all

;; f: the one to optimise
; scale first
; the product
(def f Float ((x : Float) (y : Float)) (mul x y)) ; after f's closing parenthesis
; the end
"""
COMMENTS = ["--def", "f", "--rules", "ml_rules", "--model", "none", "--budget", "2000"]


@pytest.mark.parametrize("how", ["-o", "--in-place"])
def test_writing_the_program_keeps_its_comments(capsys: pytest.CaptureFixture[str], tmp_path: Path, how: str) -> None:
    source = tmp_path / "f.ks"
    source.write_text(COMMENTED)
    out = tmp_path / "out.ks" if how == "-o" else source
    code, text, err = run(capsys, source, *COMMENTS, *(["-o", out] if how == "-o" else ["--in-place"]))
    assert code == 0, err
    assert out.read_text() == COMMENTED_OPTIMISED
    assert "note: the 2 comment(s) inside 'f' cannot follow its rewritten body; they are kept above the def" in text
    assert load_program(out).defs["g"] == load_program(tmp_path / "f.ks" if how == "-o" else out).defs["g"]


def test_a_def_the_search_leaves_alone_is_written_as_it_was(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    source = tmp_path / "f.ks"
    source.write_text(COMMENTED)
    code, text, err = run(capsys, source, "--def", "f", "--rules", "binding_rules", "--model", "none", "--in-place")
    assert code == 0, err
    assert source.read_text() == COMMENTED and "note:" not in text


def test_comments_of_a_def_that_shares_its_line_start_a_line(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    source = tmp_path / "f.ks"
    source.write_text("(edef h Float (Float)) (def f Float ((x : Float)) ; one\n (mul x 1.0)) ; two\n")
    code, _, err = run(capsys, source, "--def", "f", "--rules", "simplify_rules", "--model", "none", "--in-place")
    assert code == 0, err
    assert source.read_text() == "(edef h Float (Float))\n; one\n(def f Float ((x : Float)) x) ; two\n"
