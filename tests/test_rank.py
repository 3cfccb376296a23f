"""knossos.rank: average ranks and Spearman's rank correlation."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from knossos.rank import average_ranks, spearman


def test_average_ranks_share_ties() -> None:
    assert average_ranks([10, 20, 20, 5]) == [2, 3.5, 3.5, 1]
    assert average_ranks([3.0, 3.0, 3.0]) == [2, 2, 2]
    assert average_ranks([]) == []


def test_monotone_orders_are_one_and_minus_one() -> None:
    xs = [1.0, 5.0, 2.0, 9.0, 3.0]
    assert spearman(xs, [x**3 + 7 for x in xs]) == pytest.approx(1.0)
    assert spearman(xs, [math.exp(-x) for x in xs]) == pytest.approx(-1.0)


def test_ties_as_scipy_computes_them() -> None:
    # scipy.stats.spearmanr([1, 2, 2, 3], [1, 3, 2, 4]).statistic == 0.9486832980505138 (3 / sqrt(10))
    assert spearman([1, 2, 2, 3], [1, 3, 2, 4]) == pytest.approx(3 / math.sqrt(10))


def test_a_constant_side_is_nan() -> None:
    assert math.isnan(spearman([1, 1, 1], [1, 2, 3]))


@pytest.mark.parametrize(("xs", "ys"), [([1.0], [2.0]), ([1.0, 2.0], [1.0]), ([1.0, math.nan], [1.0, 2.0])])
def test_bad_input_is_a_value_error(xs: list[float], ys: list[float]) -> None:
    with pytest.raises(ValueError, match="spearman"):
        spearman(xs, ys)


distinct = st.lists(st.integers(-1000, 1000), min_size=2, max_size=30, unique=True)


@given(st.data())
def test_without_ties_it_is_the_textbook_formula(data: st.DataObject) -> None:
    xs = data.draw(distinct)
    ys = data.draw(st.permutations(xs))
    n = len(xs)
    rx, ry = average_ranks(xs), average_ranks(ys)
    d2 = sum((a - b) ** 2 for a, b in zip(rx, ry, strict=True))
    assert spearman(xs, ys) == pytest.approx(1 - 6 * d2 / (n * (n * n - 1)))


@given(st.lists(st.tuples(st.integers(0, 5), st.integers(0, 5)), min_size=2, max_size=20))
def test_symmetric_and_bounded(pairs: list[tuple[int, int]]) -> None:
    xs, ys = [float(p[0]) for p in pairs], [float(p[1]) for p in pairs]
    rho = spearman(xs, ys)
    if math.isnan(rho):
        assert len(set(xs)) == 1 or len(set(ys)) == 1
        return
    assert -1 - 1e-12 <= rho <= 1 + 1e-12
    assert spearman(ys, xs) == pytest.approx(rho)
