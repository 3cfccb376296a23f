"""The cost models an expression can be measured with, by name (``--cost``, ``search.cost``).

``reference``: the paper's (:mod:`knossos.cost`, cached on every node as ``Expr.cost``).
``alloc``: the reference plus every element a vector op writes (:mod:`knossos.alloc_cost`), which
ranks a scatter against its gather as compiled code runs them.
"""

from __future__ import annotations

from collections.abc import Callable

from knossos.alloc_cost import alloc_cost
from knossos.errors import KsUsageError
from knossos.expr import Expr

CostFunction = Callable[[Expr], float]


def reference_cost(e: Expr) -> float:
    """The reference cost model (cached on every node)."""
    return e.cost


COST_MODELS: dict[str, CostFunction] = {"reference": reference_cost, "alloc": alloc_cost}


def get_cost_model(name: str) -> CostFunction:
    """The cost model ``name``; a one-line error listing the names otherwise."""
    found = COST_MODELS.get(name)
    if found is None:
        raise KsUsageError(f"unknown cost model '{name}' (known: {', '.join(COST_MODELS)})")
    return found
