"""Edge cases of the natives and of pow, agreed with C++ (found by the C++ backend's tests)."""

from __future__ import annotations

import math

import pytest

from knossos import arith
from knossos.errors import KsEvalError
from knossos.natives import NATIVES


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
