"""Rank correlation: how well one measure orders things the way another does (a cost model's costs
against measured times, say), whatever the scale of either."""

from __future__ import annotations

import math
from collections.abc import Sequence


def average_ranks(xs: Sequence[float]) -> list[float]:
    """The rank of each of ``xs`` in ascending order, from 1; equal values share the average of the
    ranks they span (``[10, 20, 20, 5]`` -> ``[2, 3.5, 3.5, 1]``)."""
    order = sorted(range(len(xs)), key=lambda i: xs[i])
    ranks = [0.0] * len(xs)
    start = 0
    while start < len(order):
        end = start
        while end + 1 < len(order) and xs[order[end + 1]] == xs[order[start]]:
            end += 1
        for i in order[start : end + 1]:
            ranks[i] = (start + end) / 2 + 1
        start = end + 1
    return ranks


def spearman(xs: Sequence[float], ys: Sequence[float]) -> float:
    """Spearman's rank correlation of the pairs ``(xs[i], ys[i])``: the Pearson correlation of their
    average ranks (:func:`average_ranks`), so ties are handled as scipy.stats.spearmanr does.

    1 when ``ys`` rises with ``xs`` (any increasing function), -1 when it falls, near 0 when the
    orders are unrelated; NaN when either side has one value only (no order to compare).  A
    ValueError for sequences of different lengths, fewer than two pairs, or a NaN among the values.
    """
    if len(xs) != len(ys):
        raise ValueError(f"spearman needs as many xs as ys, not {len(xs)} and {len(ys)}")
    if len(xs) < 2:
        raise ValueError(f"spearman needs at least two pairs, not {len(xs)}")
    if any(math.isnan(v) for v in (*xs, *ys)):
        raise ValueError("spearman of values with a NaN among them")
    rx, ry = average_ranks(xs), average_ranks(ys)
    mx, my = sum(rx) / len(rx), sum(ry) / len(ry)
    dx, dy = [r - mx for r in rx], [r - my for r in ry]
    sxx, syy = sum(d * d for d in dx), sum(d * d for d in dy)
    if sxx == 0 or syy == 0:
        return math.nan
    return sum(a * b for a, b in zip(dx, dy, strict=True)) / math.sqrt(sxx * syy)


__all__ = ["average_ranks", "spearman"]
