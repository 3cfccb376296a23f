"""cpp_backend.compile_def: compiled defs called with numpy arrays (issue 33), and the C++ backend's
reassociated sums, parallel loops and exact-order option seen through it."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

import cpp_backend
import knossos
from cpp_backend.bench import same_bits, values_agree
from knossos.errors import KsError, KsEvalError, KsUsageError
from knossos.interpreter import Interpreter
from knossos.parser import parse_program

pytestmark = pytest.mark.usefixtures("cpp_cache")

BACKEND = Path(__file__).resolve().parent.parent / "benchmarks" / "programs" / "backend.ks"

SOURCE = """
(def total Float ((x : Vec Float)) (sum x))
(def loop Float ((x : Vec Float)) (sumbuild (size x) (lam (i : Integer) (index i x))))
(def stats (Tuple Float Integer Bool (Vec Float)) ((x : Vec Float) (k : Integer) (flag : Bool))
  (tuple (sum x) (mul k 2) (and flag (gt (size x) 1)) (build k (lam (i : Integer) (to_float i)))))
(def pairs (Vec (Tuple Float Integer)) ((v : Vec (Tuple Float Integer)))
  (build (size v) (lam (i : Integer) (tuple (mul 2.0 (get$1$2 (index i v))) (add 1 (get$2$2 (index i v)))))))
(def tri (Vec (Vec Float)) ((n : Integer))
  (build n (lam (i : Integer) (build (add i 1) (lam (j : Integer) (to_float j))))))
(def ints (Vec (Vec Integer)) ((m : Vec (Vec Integer)) (p : (Tuple Float (Vec Float))))
  (build (size m) (lam (i : Integer) (build (size (index i m)) (lam (j : Integer) (mul 3 (index j (index i m))))))))
(def scale (Vec Float) ((p : (Tuple Float (Vec Float))))
  (build (size (get$2$2 p)) (lam (i : Integer) (mul (get$1$2 p) (index i (get$2$2 p))))))
"""


@pytest.fixture(scope="module")
def program_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("compile-def") / "defs.ks"
    path.write_text(SOURCE, encoding="utf-8")
    return path


def test_values_of_every_kind(program_file: Path) -> None:
    stats = cpp_backend.compile_def(program_file, "stats")
    s, k2, flag, r = stats(np.array([1.0, 2.0, 3.5]), 3, True)
    assert (s, k2, flag) == (6.5, 6, True)
    assert isinstance(r, np.ndarray) and r.dtype == np.float64 and r.tolist() == [0.0, 1.0, 2.0]
    pairs = cpp_backend.compile_def(program_file, "pairs")
    assert pairs([(1.5, 2), (0.25, -1)]) == [(3.0, 3), (0.5, 0)]  # vectors of tuples: the interpreter's values
    tri = cpp_backend.compile_def(program_file, "tri")
    rows = tri(3)  # rows of different lengths: a list of arrays
    assert [list(x) for x in rows] == [[0.0], [0.0, 1.0], [0.0, 1.0, 2.0]]
    ints = cpp_backend.compile_def(program_file, "ints")
    out = ints(np.array([[1, 2], [3, 4]]), (1.0, np.ones(2)))
    assert out.dtype == np.int64 and out.tolist() == [[3, 6], [9, 12]]
    scale = cpp_backend.compile_def(program_file, "scale")
    assert scale((2.0, [1.0, 2.0])).tolist() == [2.0, 4.0]
    mv = cpp_backend.compile_def(BACKEND, "matvec")
    m = np.arange(12.0).reshape(3, 4)
    assert np.array_equal(mv(m, np.ones(4)), m @ np.ones(4))
    assert np.array_equal(mv(np.asfortranarray(m), np.ones(4)), m @ np.ones(4))  # copied to C order
    assert mv(np.zeros((0, 4)), np.ones(4)).shape == (0,)


def test_agrees_with_the_interpreter_within_the_tolerance() -> None:
    program = knossos.load_program(BACKEND)
    rng = np.random.default_rng(3)
    w, x, b = rng.normal(size=(200, 300)), rng.normal(size=300), rng.normal(size=200)
    for threads in (1, 2, 3):
        dense = cpp_backend.compile_def(BACKEND, "dense_relu", threads=threads)
        want = Interpreter().call(program.defs["dense_relu"], [w.tolist(), x.tolist(), b.tolist()])
        assert values_agree(want, dense(w, x, b).tolist())
    big = rng.normal(size=1 << 17)
    want = Interpreter().call(program.defs["sumsq"], [big.tolist()])
    got = {t: cpp_backend.compile_def(BACKEND, "sumsq", threads=t)(big) for t in (1, 2, 4)}
    for value in got.values():
        assert abs(value - want) <= 1e-9 * abs(want)


def test_exact_order_is_bit_identical(program_file: Path) -> None:
    program = knossos.load_program(program_file)
    terms = [1e16, 1.0, -1e16, 1.0, 0.1, 0.2, 0.3] * 300  # order-sensitive sums
    for name in ("total", "loop"):
        want = Interpreter().call(program.defs[name], [terms])
        for threads in (1, 2):
            f = cpp_backend.compile_def(program_file, name, exact_order=True, threads=threads)
            assert same_bits(want, f(np.array(terms)))
    f = cpp_backend.compile_def(program_file, "total", exact_order=True)
    assert math.isnan(f(np.array([math.inf, 1.0, -math.inf])))
    assert f(np.array([1e308, 1e308])) == math.inf


def test_bad_arguments_are_one_line_errors(program_file: Path) -> None:
    mv = cpp_backend.compile_def(BACKEND, "matvec")
    m = np.ones((3, 4))
    bad = [
        ((m,), "takes 2 argument(s), not 1"),
        ((np.ones(4), np.ones(4)), "must be a 2-d array of Floats"),
        ((m, "abc"), "must be a 1-d array of Floats"),
        ((m, np.ones((4, 1))), "must be a 1-d array"),
        ((m, np.array(["a", "b"])), "not of <U1"),
        ((m, np.ones(4, dtype=complex)), "not of complex128"),
        ((m, [[1.0], [2.0, 3.0]]), "rows have different lengths"),
    ]
    for args, text in bad:
        with pytest.raises(KsUsageError) as err:
            mv(*args)
        assert text in str(err.value) and "\n" not in str(err.value)
    with pytest.raises(KsEvalError, match="out of range"):  # the def's own error, as the interpreter's
        mv(m, np.ones(5))
    stats = cpp_backend.compile_def(program_file, "stats")
    with pytest.raises(KsUsageError, match="must be an Integer"):
        stats(np.ones(2), 2.5, True)
    with pytest.raises(KsUsageError, match="must be a Bool"):
        stats(np.ones(2), 2, 1)
    with pytest.raises(KsUsageError, match="int64"):
        cpp_backend.compile_def(program_file, "ints")(np.ones((2, 2)), (1.0, np.ones(2)))
    with pytest.raises(KsUsageError, match="threads"):
        cpp_backend.compile_def(BACKEND, "matvec", threads=0)
    with pytest.raises(KsUsageError, match="no def named"):
        cpp_backend.compile_def(BACKEND, "nope")
    with pytest.raises(KsError):
        cpp_backend.compile_def(program_file, "tri")(-1)  # build of negative size
    assert cpp_backend.compile_def(program_file, "tri")(2) is not None  # still usable after an error


def test_compilation_is_cached() -> None:
    from cpp_backend import compile as cpp_compile

    cpp_backend.compile_def(BACKEND, "axpby")
    before = cpp_compile.stats.compilations
    f = cpp_backend.compile_def(BACKEND, "axpby")
    assert cpp_compile.stats.compilations == before
    assert f(2.0, np.ones(3), 0.5, np.arange(3.0)).tolist() == [2.0, 2.5, 3.0]


def test_parallel_loop_reports_the_first_error_in_index_order(tmp_path: Path) -> None:
    path = tmp_path / "err.ks"
    path.write_text(
        "(def f (Vec Float) ((x : Vec Float) (k : Vec Integer))\n"
        "  (build (size x) (lam (i : Integer) (sumbuild (index i k) (lam (j : Integer) (index j x))))))\n",
        encoding="utf-8",
    )
    n = 4096
    k = np.full(n, 2, dtype=np.int64)
    k[1000], k[3000] = n + 7, n + 9  # the first bad row reads index n
    for threads in (1, 2, 4):
        with pytest.raises(KsEvalError, match=f"index {n} is out of range"):
            cpp_backend.compile_def(path, "f", threads=threads)(np.ones(n), k)
    k[1000], k[3000] = 2, 2
    assert cpp_backend.compile_def(path, "f", threads=2)(np.ones(n), k).tolist() == [2.0] * n


def test_optimised_first_by_a_rule_set() -> None:
    from app.compiled import compile_optimised

    program = parse_program(
        "(def f (Vec Float) ((x : Vec Float)) (let (y (build (size x) (lam (i : Integer) (mul 2.0 (index i x)))))"
        " (build (size y) (lam (i : Integer) (add 1.0 (index i y))))))"
    )
    f = compile_optimised(program, "f", "ml_rules_no_bind", budget=200)
    assert f(np.array([1.0, 2.0])).tolist() == [3.0, 5.0]
    assert "let" not in knossos.format_def(f.d) or f.d.body.cost <= program.defs["f"].body.cost
    with pytest.raises(KsUsageError, match="neither a rule set"):
        compile_optimised(program, "f", "no_such_thing")
