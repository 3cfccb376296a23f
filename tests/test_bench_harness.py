"""The benchmark harness (cpp_backend/bench.py): inputs, checks against the interpreter and between
variants, min and median times.

Compilations use ``-O1`` and a fresh cache for this module; the few programs here compile in a
second or two each.
"""

from __future__ import annotations

import math

import pytest

from cpp_backend.bench import Size, Variant, bench, format_seconds, make_inputs, time_python, values_close
from cpp_backend.cpp_text import def_symbol
from knossos.errors import KsEvalError, KsUsageError
from knossos.interpreter import Interpreter
from knossos.parser import parse_program
from knossos.program import Program
from knossos.values import isclose

FLAGS = ("-O1",)
SOURCE = """
(def scale (Vec Float) ((a : Float) (x : Vec n Float))
  (build n (lam (i : Integer) (mul a (index i x)))))

(def dot Float ((x : Vec n Float) (y : Vec n Float))
  (sumbuild n (lam (i : Integer) (mul (index i x) (index i y)))))

(def f Float ((a : Float) (x : Vec n Float) (y : Vec n Float))
  (let (sx (scale a x))
    (add (dot sx y) (mul 0.0 a))))

(def rows Float ((m : Vec r (Vec c Float)) (w : Vec c Float) (k : Integer))
  (add (to_float k) (sumbuild r (lam (i : Integer) (dot (index i m) w)))))

(def plain Float ((m : Vec (Vec Float)) (t : Tuple Float (Vec Integer)))
  (add (sum (index 0 m)) (to_float (sum (get$2$2 t)))))

(def picky Float ((x : Vec n Float))
  (assert (lt n 5) (index 0 x)))

(def big Float ((x : Vec n Float))
  (assert (gt n 3) (index 0 x)))
"""


#: Each module compiles into a fresh cache of its own (see conftest.cpp_cache).
pytestmark = pytest.mark.usefixtures("cpp_cache")


@pytest.fixture(scope="module")
def program() -> Program:
    return parse_program(SOURCE, "bench_test.ks")


def wrong_program() -> Program:
    """The program with ``f`` computing twice the right value."""
    return parse_program(SOURCE.replace("(add (dot sx y) (mul 0.0 a))", "(mul 2.0 (dot sx y))"), "wrong.ks")


# -- inputs ----------------------------------------------------------------------------------------------
def test_inputs_are_deterministic_for_a_seed(program: Program) -> None:
    d = program.defs["f"]
    first = make_inputs(d, Size(default=6), seed=3)
    assert first == make_inputs(d, Size(default=6), seed=3)
    assert first != make_inputs(d, Size(default=6), seed=4)
    a, x, y = first
    assert isinstance(a, float) and 0.5 <= a <= 2.0
    assert isinstance(x, list) and isinstance(y, list) and len(x) == len(y) == 6
    assert all(0.5 <= v <= 2.0 for v in x + y)


def test_inputs_follow_named_sizes_and_shapes(program: Program) -> None:
    rows = program.defs["rows"]
    m, w, k = make_inputs(rows, Size({"r": 3, "c": 5, "k": 7}))
    assert isinstance(m, list) and len(m) == 3 and all(len(row) == 5 for row in m)
    assert isinstance(w, list) and len(w) == 5 and k == 7
    # a vector parameter's shape binds its size variables for the other parameters
    m, w, k = make_inputs(rows, Size({"m": (2, 4)}, default=9))
    assert len(m) == 2 and all(len(row) == 4 for row in m) and len(w) == 4 and k in (1, 2, 3)
    # vectors nothing names take the default; nested vectors are rectangular; tuples and Integers too
    mat, (t1, t2) = make_inputs(program.defs["plain"], Size(default=3))
    assert [len(r) for r in mat] == [3, 3, 3] and isinstance(t1, float)
    assert len(t2) == 3 and all(isinstance(v, int) and 1 <= v <= 3 for v in t2)
    assert Interpreter().call(program.defs["rows"], make_inputs(rows, Size({"m": (2, 4)}, default=9))) > 0


@pytest.mark.parametrize(
    "size, message",
    [
        (Size({"q": 3}, 4), "size 'q' is not a size variable"),
        (Size({"r": (3, 4)}), "give one number"),
        (Size({"m": (2, 4), "c": 5}), "would be both"),
        (Size({"m": (2, 4, 5)}), "more dimensions"),
        (Size({"r": 3}), "no length given for size 'c'"),
        (Size({"r": -1}, 3), "negative"),
    ],
)
def test_bad_sizes_are_one_line_errors(program: Program, size: Size, message: str) -> None:
    with pytest.raises(KsUsageError, match=message) as err:
        make_inputs(program.defs["rows"], size)
    assert "\n" not in str(err.value)


def test_size_labels_and_capping() -> None:
    s = Size({"image": (8, 1024), "k": 3}, 512, "n")
    assert s.label() == {"image": [8, 1024], "k": 3, "n": 512}
    assert s.text() == "image=8x1024 k=3 n=512"
    assert s.capped(4) == Size({"image": (4, 4), "k": 3}, 4, "n")
    assert Size(default=300).label() == {"n": 300}


def test_values_close() -> None:
    assert values_close([[1.0, 2.0]], [[1.0, 2.0 + 1e-12]])
    assert not values_close([[1.0, 2.0]], [[1.0, 2.001]])
    assert not values_close([[1.0, 2.0]], [[1.0, 2.0, 3.0]])
    assert values_close([math.inf, math.nan, 0.0], [math.inf, math.nan, 1e-13])
    assert not values_close([math.inf], [1.0]) and not values_close([math.inf], [-math.inf])
    assert values_close(([1.0, [2.0]], 3), ([1.0, [2.0]], 3)) and not values_close((1.0, 3), (1.0, 4))
    assert values_close([], [])
    assert isclose(1.0, 1.0)


def test_time_python_and_formatting() -> None:
    lo, med, runs, result = time_python(lambda: sum(range(1000)), 0.01)
    assert 0 < lo <= med and runs >= 1 and result == 499500
    assert format_seconds(2.5) == "2.5 s" and format_seconds(0.00123) == "1.23 ms"
    assert format_seconds(4.56e-5) == "45.6 us" and format_seconds(3e-8) == "30 ns"


# -- timing and checks -------------------------------------------------------------------------------------
def test_bench_times_and_verifies_variants(program: Program) -> None:
    wrong = wrong_program()
    hand = f"""
double {def_symbol("f")}(double a, const ks::Vec<double>& x, const ks::Vec<double>& y) {{
    double s = 0.0;
    for (std::int64_t i = 0; i < x.n; ++i) s += (a * x.data[i]) * y.data[i];
    return s;
}}
"""
    variants = [
        Variant("original", program),
        Variant("wrong", wrong),
        Variant("hand", program, cpp=hand),
    ]
    seen: list[tuple[str, int]] = []

    def on_reference(size: Size, args: list[object], output: object) -> None:
        seen.append((size.text(), len(args[1])))  # type: ignore[arg-type]
        assert isclose(output, Interpreter().call(program.defs["f"], args))

    rows = bench(
        variants,
        "f",
        [Size(default=8), Size(default=1000)],
        min_seconds=0.02,
        extra_flags=FLAGS,
        on_reference=on_reference,
    )
    assert [(r.variant, r.size) for r in rows] == [
        (v, {"n": n}) for n in (8, 1000) for v in ("original", "wrong", "hand")
    ]
    assert seen == [("n=8", 8), ("n=1000", 1000)]
    for r in rows:
        assert 0 < r.min_s <= r.median_s and r.runs >= 1
        good = r.variant != "wrong"
        assert r.verified is good and r.agrees is good
        assert set(r.to_json()) >= {"variant", "size", "min_s", "median_s", "verified"}


def test_sized_defs_and_calls_to_other_defs(program: Program) -> None:
    rows = bench([Variant("original", program)], "rows", [Size({"r": 20, "c": 30, "k": 2})], min_seconds=0.01)
    (r,) = rows
    assert r.verified and r.agrees and r.size == {"r": 20, "c": 30, "k": 2}


def test_a_failing_variant_is_an_error(program: Program) -> None:
    notes: list[str] = []
    with pytest.raises(KsEvalError, match="original variant of 'picky' failed at n=9: assertion failed"):
        bench([Variant("original", program)], "picky", [Size(default=9)], min_seconds=0.01, notes=notes)
    # at the check size (4) the assert holds: verified
    rows = bench([Variant("original", program)], "picky", [Size(default=4)], min_seconds=0.01, notes=notes)
    assert rows[0].verified and notes == []


def test_unverifiable_when_the_interpreter_fails(program: Program) -> None:
    notes: list[str] = []
    rows = bench([Variant("original", program)], "big", [Size(default=8)], min_seconds=0.01, check_size=3, notes=notes)
    assert not rows[0].verified and rows[0].agrees
    assert notes == ["the interpreter failed at n=3: assertion failed"]


def test_unknown_def_or_no_variants(program: Program) -> None:
    with pytest.raises(KsUsageError, match="no def named 'nope'"):
        bench([Variant("original", program)], "nope", [Size(default=4)])
    with pytest.raises(KsUsageError, match="no variants"):
        bench([], "f", [Size(default=4)])
