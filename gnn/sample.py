"""A value network's training sample: a visited state (an expression and the steps left ``t_s`` it
was reached with) and its target ``V_target(s)``, the largest cost drop found from it within ``t_s``
steps.  Training checkpoints hold them (the replay buffer), so the model file's loader knows them."""

from __future__ import annotations

from dataclasses import dataclass

from gnn.model_config import CostNormalization
from gnn.normalization import to_network
from knossos.cost_models import get_cost_model
from knossos.expr import Expr


@dataclass(frozen=True)
class Sample:
    expr: Expr
    steps_left: int
    target: float
    #: Targets for 1 .. steps_left - 1 steps, fitted too (empty: only ``steps_left``'s is).
    shorter: tuple[float, ...] = ()

    def fitted(
        self, depth: int, normalization: CostNormalization = "none", cost_model: str = "reference"
    ) -> list[tuple[int, float]]:
        """(steps, normalised target) of every column this sample fits, for a network of ``depth``
        whose outputs measure reductions of ``cost_model`` as ``normalization`` says (:mod:`gnn.normalization`)."""
        top = min(self.steps_left, depth)
        cost = get_cost_model(cost_model)(self.expr)
        pairs = [*enumerate(self.shorter[: top - 1], start=1), (top, self.target)]
        return [(t, to_network(normalization, cost, v) / t) for t, v in pairs]
