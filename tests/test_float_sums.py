"""Float sums have one meaning: IEEE double additions in index order from +0.0, in the interpreter
(``sum``, ``sumbuild``, the ``dotv``/``mul$Mat$Vec``/``rev$mul$Mat$Vec`` natives) and in the emitted
C++, to the bit; infinities and NaN propagate and nothing raises (issue 31, item 4: ``math.fsum`` gave
0.6 for [0.1, 0.2, 0.3] where C++ gives 0.6000000000000001, and raised on [inf, 1, -inf] and on
[1e308, 1e308])."""

from __future__ import annotations

import json
import math
import random
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cpp_backend.driver import compile_program
from knossos.arith import fsum_in_order
from knossos.cli import main as knossos_main
from knossos.interpreter import Interpreter
from knossos.parser import parse_program
from knossos.program import Program
from knossos.values import Value

from conftest import run_cli

INF, NAN = math.inf, math.nan

SUMS = """\
(edef dotv Float ((Vec Float) (Vec Float)))
(edef mul$Mat$Vec (Vec Float) ((Vec (Vec Float)) (Vec Float)))
(edef rev$mul$Mat$Vec (Tuple (Vec (Vec Float)) (Vec Float)) ((Vec (Vec Float)) (Vec Float) (Vec Float)))
(def total Float ((v : Vec Float)) (sum v))
(def loop Float ((v : Vec Float)) (sumbuild (size v) (lam (i : Integer) (index i v))))
(def pairs (Tuple Float Float) ((v : Vec Float))
  (sumbuild (size v) (lam (i : Integer) (tuple (index i v) (mul -1.0 (index i v))))))
(def columns (Vec Float) ((m : Vec (Vec Float))) (sum m))
(def dot Float ((v : Vec Float) (w : Vec Float)) (dotv v w))
(def matvec (Vec Float) ((m : Vec (Vec Float)) (v : Vec Float)) (mul$Mat$Vec m v))
(def rev_matvec (Tuple (Vec (Vec Float)) (Vec Float)) ((m : Vec (Vec Float)) (v : Vec Float) (dr : Vec Float))
  (rev$mul$Mat$Vec m v dr))
"""

REPRODUCERS = [
    ([INF, 1.0, -INF], NAN),  # math.fsum: ValueError
    ([1e308, 1e308], INF),  # math.fsum: OverflowError
    ([0.1, 0.2, 0.3], 0.6000000000000001),  # math.fsum: 0.6
]

#: Terms where the order and the rounding of the additions show: infinities, NaN, overflow, the
#: extremes of the range, subnormals, signed zeros and cancellation.
SPECIAL = [INF, -INF, NAN, 1e308, -1e308, 1.7976931348623157e308, 5e-324, -5e-324, 2.2250738585072014e-308]
ORDINARY = [0.0, -0.0, 0.1, 0.2, 0.3, 1.0, -1.0, 1e16, -1e16, 3.0, 1e-300]


@pytest.fixture(scope="module")
def program() -> Program:
    return parse_program(SUMS, "sums.ks")


def same_bits(a: Value, b: Value) -> bool:
    """Equal to the bit, signs of zeros included (any NaN equals any NaN: C++ and Python may differ in
    the sign of the NaN that inf + -inf makes, and the driver's text format does not keep it)."""
    if isinstance(a, list | tuple):
        return type(a) is type(b) and len(a) == len(b) and all(same_bits(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, float) and math.isnan(a):
        return isinstance(b, float) and math.isnan(b)
    return bool(isinstance(b, float) and a.hex() == b.hex())


def in_order(terms: list[float]) -> float:
    acc = 0.0
    for t in terms:
        acc += t
    return acc


@pytest.mark.parametrize(("terms", "want"), REPRODUCERS)
@pytest.mark.parametrize("name", ["total", "loop"])
def test_reproducers_in_the_interpreter(program: Program, name: str, terms: list[float], want: float) -> None:
    assert same_bits(Interpreter().call(program.defs[name], [terms]), want)


@pytest.mark.parametrize(("terms", "want"), REPRODUCERS)
def test_reproducers_through_knossos_eval(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], terms: list[float], want: float
) -> None:
    path = tmp_path / "sums.ks"
    path.write_text(SUMS)
    code, out, err = run_cli(knossos_main, capsys, "eval", str(path), "total", "--args", json.dumps([terms]))
    assert code == 0 and err == ""
    assert same_bits(json.loads(out), want)


def test_the_natives_add_in_order(program: Program) -> None:
    a, b = [1e308, 1e308, -1e308], [1.0, 1.0, 1.0]
    run = Interpreter().call
    assert run(program.defs["dot"], [a, b]) == INF  # fsum: OverflowError
    assert math.isnan(run(program.defs["dot"], [[INF, 1.0, -INF], b]))  # fsum: ValueError
    assert run(program.defs["dot"], [[0.1, 0.2, 0.3], b]) == 0.6000000000000001
    assert run(program.defs["matvec"], [[a, [0.1, 0.2, 0.3]], b]) == [INF, 0.6000000000000001]
    _, d_v = run(program.defs["rev_matvec"], [[[0.1], [0.2], [0.3]], [1.0], [1.0, 1.0, 1.0]])
    assert d_v == [0.6000000000000001]


def test_vector_and_tuple_sums_add_element_wise_in_order(program: Program) -> None:
    run = Interpreter().call
    assert run(program.defs["columns"], [[[1e308, INF], [1e308, -INF], [-1e308, 1.0]]])[0] == INF
    assert math.isnan(run(program.defs["columns"], [[[1e308, INF], [1e308, -INF], [-1e308, 1.0]]])[1])
    assert run(program.defs["pairs"], [[0.1, 0.2, 0.3]]) == (0.6000000000000001, -0.6000000000000001)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from(SPECIAL + ORDINARY) | st.floats(allow_nan=True, allow_infinity=True), max_size=8))
def test_fsum_in_order_is_left_to_right_ieee(terms: list[float]) -> None:
    assert same_bits(fsum_in_order(terms), in_order(terms))


def sum_cases(rng: random.Random) -> list[tuple[str, list[object]]]:
    """Calls of every def of SUMS on vectors of special and ordinary values, lengths 0 to 5."""
    pool = SPECIAL + ORDINARY

    def vector(n: int) -> list[float]:
        return [rng.choice(pool) for _ in range(n)]

    calls: list[tuple[str, list[object]]] = [(name, [terms]) for name in ("total", "loop") for terms, _ in REPRODUCERS]
    for n in range(6):
        for _ in range(12):
            v, w, dr = vector(n), vector(n), vector(n)
            m = [vector(n) for _ in range(n)]
            calls += [("total", [v]), ("loop", [v]), ("pairs", [v]), ("dot", [v, w])]
            calls += [("matvec", [m, w]), ("rev_matvec", [m, v, dr])]
            if n:
                calls.append(("columns", [m]))
    return calls


@pytest.mark.usefixtures("cpp_cache")
def test_interpreter_and_cpp_agree_to_the_bit(program: Program) -> None:
    """inf, nan, huge, tiny and signed-zero terms through the emitted C++ (-O3, no contraction) and the
    interpreter: the same bits, NaN wherever either has NaN."""
    compiled = compile_program(program, exact_order=True)  # bit identity needs the in-order sums
    calls = sum_cases(random.Random(31))
    got = compiled.run(calls)
    for (name, args), have in zip(calls, got, strict=True):
        want = Interpreter().call(program.defs[name], args)
        assert same_bits(want, have), (name, args, want, have)
    assert sum(1 for (name, _), v in zip(calls, got, strict=True) if name == "total" and math.isnan(v)) > 3
