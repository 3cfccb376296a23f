"""What the value network's outputs measure: cost reductions as they are, or on a log scale.

``none`` (the paper's): the network fits ``V / t``, the cost reduction ``V`` reachable in ``t``
steps, per step.  On programs whose costs run from thousands to billions a reduction of 0.1 and one of
a million share one scale, and a Huber loss fitted to the large ones learns nothing of the small.
``log``: the network fits the reduction of ``log(1 + cost)``, ``L = log1p(c) - log1p(c - V)`` (per
step), which is the same for halving a cost of 10 and one of 10^9; search turns it back into a cost
reduction, ``V = (1 + c) * (1 - exp(-L))``, so A*'s priorities stay in cost units.  Costs below 0
count as 0 (``log1p`` of them is not defined; the MDP's costs are not negative).
"""

from __future__ import annotations

import numpy as np

from gnn.model_config import COST_NORMALIZATIONS, CostNormalization

#: The most a log-scale value may say the cost grows by: e^30 times (see :func:`from_network`).
LARGEST_LOG_GROWTH = 30.0


def check_normalization(name: str) -> str:
    if name not in COST_NORMALIZATIONS:
        raise ValueError(f"cost normalization must be one of {', '.join(COST_NORMALIZATIONS)}, not {name!r}")
    return name


def to_network(name: CostNormalization, cost: float, reduction: float) -> float:
    """The target the network fits for a state of ``cost`` from which ``reduction`` is reachable."""
    if name == "none":
        return reduction
    c = max(cost, 0.0)
    return float(np.log1p(c) - np.log1p(max(c - reduction, 0.0)))


def from_network(name: CostNormalization, costs: np.ndarray, table: np.ndarray) -> np.ndarray:
    """Cost reductions from the network's values ``table`` (rows: the states of ``costs``)."""
    if name == "none":
        return table
    c = np.maximum(np.asarray(costs, dtype=np.float64), 0.0)[:, None]
    # targets are never negative (the best reachable cost is at most the cost); a network's negative
    # output is read as a growth of the cost by at most e^30 rather than overflowing to -inf
    out: np.ndarray = (1.0 + c) * -np.expm1(-np.maximum(table, -LARGEST_LOG_GROWTH))
    return out
