"""The value networks by kind: building one from its settings, and wrapping one for search."""

from __future__ import annotations

from typing import Union

from gnn.model import ValueNetwork
from gnn.model_config import ModelConfig
from gnn.tree_model import TreeValueNetwork
from gnn.tree_value import TreeValue
from gnn.value import NetworkValue
from search.settings import Precision, SearchSettings

Network = Union[ValueNetwork, TreeValueNetwork]


def build_network(config: ModelConfig) -> Network:
    return TreeValueNetwork(config) if config.kind == "tree" else ValueNetwork(config)


def value_function(
    network: Network,
    precision: Precision = "float32",
    scale: float = 1.0,
    *,
    settings: SearchSettings | None = None,
    rules: str | None = None,
) -> NetworkValue | TreeValue:
    """``network`` as search's value function (the tree network's runs in float32 only: its work
    per search state is a few rows, where bfloat16 would save nothing); ``settings`` and ``rules``:
    how a search with it is set by default (a model loaded from a checkpoint)."""
    if isinstance(network, TreeValueNetwork):
        if precision != "float32":
            raise ValueError(f"the tree network runs in float32 only, not {precision}")
        return TreeValue(network, scale=scale, settings=settings, rules=rules)
    return NetworkValue(network, precision=precision, scale=scale, settings=settings, rules=rules)
