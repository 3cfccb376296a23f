"""cpp_backend.compile_def at the edges (issue 44): the memory budget of the C++ driver applies to
compiled callables, sizes and numbers beyond what a call can hold are one-line errors, empty and
64-bit arguments cross unchanged, and lgamma is the interpreter's to the bit."""

from __future__ import annotations

import math
import shutil
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import cpp_backend
from cpp_backend.bench import same_bits
from cpp_backend.driver import BUDGET_VARIABLE, DEFAULT_BUDGET_MIB
from knossos.errors import KsEvalError, KsUsageError
from knossos.interpreter import Interpreter
from knossos.parser import parse_program

pytestmark = [
    pytest.mark.usefixtures("cpp_cache"),
    pytest.mark.skipif(shutil.which("g++") is None, reason="needs a C++ compiler"),
]

SOURCE = """
(edef lgamma Float (Float))
(def big (Tuple (Vec Float) (Vec Float) (Vec (Tuple Float Integer))) ((n : Integer) (m : Integer) (t : Integer))
  (tuple (build n (lam (i : Integer) (to_float i))) (constVec m 1.0) (constVec t (tuple 1.5 2))))
(def mix (Tuple Integer Integer Float Integer (Vec Integer) (Vec (Tuple Integer Float)))
         ((vi : Vec Integer) (vb : Vec Bool) (x : Float) (k : Integer) (p : Vec (Tuple Integer Float)))
  (tuple (sum vi) (size vb) (mul x 1.0) k vi p))
(def rows Integer ((m : Vec (Vec Float))) (size m))
(def lg (Tuple (Vec Float) Float Float) ((x : Vec Float) (y : Float))
  (tuple (build (size x) (lam (i : Integer) (lgamma (index i x)))) (lgamma 19.142668301840363) (lgamma y)))
"""
PROGRAM = parse_program(SOURCE)


def one_line(err: pytest.ExceptionInfo[Exception]) -> str:
    text = str(err.value)
    assert "\n" not in text
    return text


def test_the_memory_budget_applies_to_compiled_calls(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(BUDGET_VARIABLE, raising=False)
    big = cpp_backend.compile_def(PROGRAM, "big")
    budget = f"beyond the memory budget of {DEFAULT_BUDGET_MIB} MiB"
    # the C++ arena's; the result arrays'; the result's text (a vector of tuples)
    for n, m, t in [(10**10, 0, 0), (2**62, 0, 0), (0, 10**10, 0), (0, 2**62, 0), (0, 0, 2**62)]:
        with pytest.raises(KsEvalError) as err:  # were a raw MemoryError and ValueError
            big(n, m, t)
        assert budget in one_line(err)
    a, b, c = big(3, 2, 1)  # still usable after a refusal
    assert a.tolist() == [0.0, 1.0, 2.0] and b.tolist() == [1.0, 1.0] and c == [(1.5, 2)]
    monkeypatch.setenv(BUDGET_VARIABLE, "1")  # as the driver: the environment's budget
    small = cpp_backend.compile_def(PROGRAM, "big")
    for n, m, t in [(1 << 18, 0, 0), (0, 1 << 18, 0), (0, 0, 1 << 18)]:  # 2 MiB made; 2 MiB of result; text
        with pytest.raises(KsEvalError, match="beyond the memory budget of 1 MiB"):
            small(n, m, t)
    assert small(1 << 10, 1 << 10, 1 << 10)[0].size == 1 << 10
    with pytest.raises(KsEvalError, match="beyond the memory budget of 4 MiB"):  # the argument wins
        cpp_backend.compile_def(PROGRAM, "big", budget_mib=4)(0, 1 << 20, 0)  # 8 MiB of result
    monkeypatch.setenv(BUDGET_VARIABLE, "lots")
    with pytest.raises(KsUsageError, match=BUDGET_VARIABLE):
        cpp_backend.compile_def(PROGRAM, "big")
    with pytest.raises(KsUsageError, match="memory budget must be a whole number"):
        cpp_backend.compile_def(PROGRAM, "big", budget_mib=0)


def test_arguments_cross_unchanged_or_are_refused_in_one_line() -> None:
    mix = cpp_backend.compile_def(PROGRAM, "mix")
    interpreter = Interpreter()
    d = PROGRAM.defs["mix"]
    for vi, vb in [([], []), (np.array([]), np.array([])), (np.zeros(0, np.int32), np.zeros(0, bool))]:
        got = mix(vi, vb, 1.5, 2, [])  # empty Integer and Bool vectors were refused
        want = interpreter.call(d, [[], [], 1.5, 2, []])
        assert (got[:4], got[4].tolist(), got[5]) == (want[:4], want[4], want[5])
    big = 2**60 + 1  # not a double
    got = mix(np.array([big, 1]), [True], np.int64(3), np.int64(big), [(np.int64(big), 0.5)])
    assert got[0] == big + 1 and got[3] == big and got[4].tolist() == [big, 1] and got[5] == [(big, 0.5)]
    assert mix([], [], np.longdouble(0.5), 0, [])[2] == 0.5  # a long double a double holds exactly
    if np.finfo(np.longdouble).nmant > np.finfo(np.float64).nmant:
        with pytest.raises(KsUsageError) as err:
            mix([], [], np.longdouble(1) / 3, 0, [])
        assert "cannot hold exactly" in one_line(err)
    with pytest.raises(KsUsageError) as err:
        mix([], [], 10**400, 0, [])  # was a raw OverflowError
    assert "argument 'x' is out of the Float range" in one_line(err)
    with pytest.raises(KsUsageError, match="not of float64"):
        mix(np.array([1.5]), [], 1.0, 0, [])  # a non-empty float array is still no Integer vector


#: Peak memory of a call with a (10^8, 0) array, in a child process (ru_maxrss only grows).
EMPTY_ROWS = textwrap.dedent(
    """
    import resource, sys
    import numpy as np
    import cpp_backend
    from knossos.parser import parse_program

    f = cpp_backend.compile_def(parse_program(sys.argv[1]), "rows")
    x = np.zeros((10**8, 0))
    f(np.zeros((2, 0)))
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    n = f(x)
    after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(n, (after - before) // 1024)
    """
)


def test_empty_rows_take_no_memory_per_row() -> None:
    cpp_backend.compile_def(PROGRAM, "rows")  # compiled here, so that the child finds it cached
    done = subprocess.run(
        [sys.executable, "-c", EMPTY_ROWS, SOURCE], capture_output=True, text=True, timeout=300, check=False
    )
    assert done.returncode == 0, done.stderr[-2000:]
    n, grown_mib = map(int, done.stdout.split())
    assert n == 10**8
    assert grown_mib < 64  # was 1.6 GB: a 16-byte row header per empty row


def test_lgamma_in_exact_order_is_the_interpreters_to_the_bit() -> None:
    lg = cpp_backend.compile_def(PROGRAM, "lg", exact_order=True)
    xs = np.random.default_rng(5).uniform(-50.0, 200.0, 2000)
    xs = np.concatenate([xs, [0.5, 1.0, 2.0, 3.7, -2.0, 0.0, -0.0, 1e-300, 1e308, math.inf, -math.inf, math.nan]])
    vec, const, scalar = lg(xs, 19.142668301840363)  # glibc's is not correctly rounded there
    want_vec, want_const, want_scalar = Interpreter().call(PROGRAM.defs["lg"], [xs.tolist(), 19.142668301840363])
    differ = [x for x, a, b in zip(xs, vec.tolist(), want_vec) if not same_bits(a, b)]
    assert not differ, differ[:5]  # were about half of them (glibc's lgamma against CPython's)
    assert same_bits(const, want_const)  # a constant argument is the library's too, not a compiler's own
    assert same_bits(scalar, want_scalar) and same_bits(const, scalar)
