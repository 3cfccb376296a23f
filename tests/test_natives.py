"""Edge cases of the natives and of pow, agreed with C++ (found by the C++ backend's tests)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from knossos import arith
from knossos.cli import main
from knossos.errors import KsEvalError
from knossos.natives import NATIVES

from conftest import run_cli


@pytest.mark.parametrize(
    ("a", "b", "expected"),
    [
        (-10.0, 401.0, -math.inf),  # overflow, negative base, odd exponent
        (-10.0, 400.0, math.inf),
        (10.0, 400.0, math.inf),
        (-0.0, -1.0, -math.inf),
        (0.0, -1.0, math.inf),
        (-0.0, -2.0, math.inf),
        (2.0, 3.0, 8.0),
    ],
)
def test_pow_follows_c(a: float, b: float, expected: float) -> None:
    assert arith.fpow(a, b) == expected


def test_pow_of_a_negative_base_and_a_fraction_is_nan() -> None:
    assert math.isnan(arith.fpow(-2.0, 0.5))


def test_abs_of_the_smallest_integer_overflows() -> None:
    with pytest.raises(KsEvalError, match="overflow"):
        NATIVES["abs"](-(2**63))
    assert NATIVES["abs"](-3) == 3
    assert NATIVES["abs"](-2.5) == 2.5


@pytest.mark.parametrize(
    ("name", "args"),
    [
        ("dotv", ([1.0], [1.0, 2.0])),
        ("mul$Mat$Vec", ([[1.0, 2.0], [3.0]], [1.0, 2.0])),
        ("rev$mul$Mat$Vec", ([[1.0, 2.0]], [1.0, 2.0], [1.0, 1.0])),
    ],
)
def test_size_mismatch_is_an_evaluation_error(name: str, args: tuple[object, ...]) -> None:
    with pytest.raises(KsEvalError, match="sizes differ"):
        NATIVES[name](*args)


def test_rev_mul_mat_vec_values() -> None:
    d_m, d_v = NATIVES["rev$mul$Mat$Vec"]([[1.0, 2.0], [3.0, 4.0]], [5.0, 6.0], [1.0, 10.0])
    assert d_m == [[5.0, 6.0], [50.0, 60.0]]
    assert d_v == [31.0, 42.0]


_LGAMMA = """
(edef lgamma Float (Float))
(edef fwd$lgamma Float (Float Float))
(edef rev$lgamma Float (Float Float))
(def fwd Float ((x : Float)) (fwd$lgamma x 1.0))
(def rev Float ((x : Float)) (rev$lgamma x 1.0))
(def value Float ((x : Float)) (lgamma x))
"""

_INF, _NAN = math.inf, math.nan


# digamma as ks::digamma in C++ gives it (so that interpreter and C++ agree): NaN at -inf, NaN and the
# poles, zero included (scipy's psi gives -1/x's infinity there; C++ and the interpreter would change together)
@pytest.mark.parametrize(
    ("x", "digamma", "lgamma"),
    [
        (-_INF, _NAN, _INF),
        (_INF, _INF, _INF),
        (_NAN, _NAN, _NAN),
        (0.0, _NAN, _INF),
        (-0.0, _NAN, _INF),
        (-1.0, _NAN, _INF),
        (-2.0, _NAN, _INF),
        (-1e308, _NAN, _INF),  # every Float this large is an integer: a pole
        (1e308, 709.1962086421661, _INF),
        (5e-324, -_INF, 744.4400719213812),  # -1/x overflows
        (-1e-300, 1e300, 690.7755278982137),
        (1.0, -0.5772156649015329, 0.0),
        (-0.5, 0.03648997397857652, 1.2655121234846454),
    ],
)
def test_lgamma_and_its_derivative_at_the_edges_through_eval(
    x: float, digamma: float, lgamma: float, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "lgamma.ks"
    path.write_text(_LGAMMA)
    for name, expected in (("fwd", digamma), ("rev", digamma), ("value", lgamma)):
        code, out, err = run_cli(main, capsys, "eval", str(path), name, "--args", json.dumps([x]))
        assert code == 0, err
        got = json.loads(out)
        if math.isnan(expected):
            assert math.isnan(got), (name, x, got)
        elif math.isinf(expected):
            assert got == expected, (name, x, got)
        else:
            assert got == pytest.approx(expected, rel=1e-9), (name, x, got)
