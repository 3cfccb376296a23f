"""The value network's settings: a training config's ``model:`` section, and a checkpoint's ``model_config``."""

from __future__ import annotations

import typing
from dataclasses import dataclass, field
from typing import Literal

from search.settings import CostName, SettingError, check_types

#: The value networks: the paper's GGNN, or the bottom-up tree network of :mod:`gnn.tree_model`.
ModelKind = Literal["ggnn", "tree"]
MODEL_KINDS: tuple[str, ...] = typing.get_args(ModelKind)
#: What the network's outputs measure: cost reductions, or reductions of log(1 + cost)
#: (:mod:`gnn.normalization`).
CostNormalization = Literal["none", "log"]
COST_NORMALIZATIONS: tuple[str, ...] = typing.get_args(CostNormalization)

#: The most features per node (``model.hidden``).
MAX_HIDDEN = 8192


#: The metadata key of a field that is no key of its YAML section: where its value comes from.
FILLED_FROM = "filled_from"


@dataclass(frozen=True)
class ModelConfig:
    """The value network: the config's ``model:`` section, and a checkpoint's ``model_config``.

    ``depth`` is no key of the section: a training config takes it from ``search.depth``.
    """

    #: Features per node (Table 2: 200).
    hidden: int = 200
    #: Propagation steps T (Table 2: 10); 0 is the NoGNN ablation.
    steps: int = 10
    #: Outputs: per-step values for 1..depth steps left.
    depth: int = field(default=10, metadata={FILLED_FROM: "search.depth"})
    #: The paper's MLP head instead of a single dense output layer.
    mlp_head: bool = False
    dropout: float = 0.2
    #: Put the squashed value of constants in the last input feature (not in the paper).
    constant_values: bool = True
    #: Which network (:data:`MODEL_KINDS`): "ggnn" (the paper's) or "tree" (bottom-up, embeds each
    #: interned node once: see gnn/tree_model.py); the tree network ignores steps, mlp_head, dropout
    #: and constant_values.
    kind: ModelKind = "ggnn"
    #: What the outputs measure: cost reductions ("none", the paper's) or reductions of
    #: log(1 + cost) ("log", for programs whose costs span many orders of magnitude); see
    #: gnn/normalization.py.
    cost_normalization: CostNormalization = "none"
    #: The cost model whose reductions the outputs measure (knossos.cost_models); a training config
    #: takes it from ``search.cost``.
    cost_model: CostName = field(default="reference", metadata={FILLED_FROM: "search.cost"})

    def __post_init__(self) -> None:
        from gnn.graph import NUM_NODE_TYPES  # torch: imported when a model's settings are made, not before
        from search.limits import MAX_DEPTH

        def bad(key: str, reason: str) -> SettingError:
            return SettingError(key, reason, "model")

        check_types(self, "model")  # a checkpoint's model_config comes here unchecked: the types first
        if self.hidden < 1:
            raise bad("hidden", f"must be at least 1, not {self.hidden}")
        if self.hidden < NUM_NODE_TYPES + 1:
            raise bad("hidden", f"must be at least {NUM_NODE_TYPES + 1} (one feature per node type, + 1)")
        if not 0.0 <= self.dropout < 1.0:
            raise bad("dropout", f"must be in [0, 1), not {self.dropout}")
        if self.steps < 0:
            raise bad("steps", f"must be at least 0, not {self.steps}")
        if self.depth < 1:
            raise bad("depth", f"must be at least 1, not {self.depth}")
        for key, value, most, why in (  # sizes no machine can run: refused rather than left to run out of memory
            ("steps", self.steps, 1000, "each step is a pass over every graph"),
            ("hidden", self.hidden, MAX_HIDDEN, "the weights grow with its square"),
            ("depth", self.depth, MAX_DEPTH, "each state keeps a value per step left"),
        ):
            if value > most:
                raise bad(key, f"must be at most {most} ({why}), not {value}")
