"""Value functions by name, for the command line: ``none`` (zero), the name of a model that ships with
the package (``default``, ``ggnn``, ``tree_online``, ``blas``, ``blas_beam``, ``blas_astar``, ``cnn``: the
files of ``gnn/models/``) or a checkpoint
written by train.py or ``python -m gnn.export``; and the argparse type of a value scale."""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from knossos.cost_models import CostFunction, get_cost_model
from knossos.errors import KsUsageError
from rules.sets import get_rule_set
from search.spec import SearchSpec
from search.value import ValueFunction, ZeroValue, check_value_scale

if TYPE_CHECKING:  # gnn (torch) is imported only for a model that needs it
    from gnn.config import Precision


def load_value_function(spec: str, precision: Precision = "float32", scale: float | None = None) -> ValueFunction:
    """``precision`` (float32 or bfloat16) is the network's inference arithmetic and ``scale`` the
    factor on its values (None: the model's own); zero ignores both."""
    if spec in ("none", "zero"):
        return ZeroValue()
    shipped: list[str] = []
    if "/" not in spec and not spec.endswith(".pt"):
        try:
            from gnn.checkpoint import shipped_model, shipped_model_names
        except ImportError:
            raise KsUsageError(f"the model '{spec}' needs the gnn package (torch)") from None
        found = shipped_model(spec)
        if found is not None:
            spec = str(found)
        shipped = shipped_model_names()
    path = Path(spec)
    try:
        exists = path.is_file()
    except OSError:  # a name the file system cannot hold (too long, ...)
        exists = False
    if not exists:
        names = f"one of {', '.join(shipped)}" if shipped else "a shipped model's name"
        raise KsUsageError(f"no model file '{spec}' (give a checkpoint written by train.py, {names}, or 'none')")
    try:
        from gnn.checkpoint import load_value_function as load_checkpoint
    except ImportError:
        raise KsUsageError(f"{spec}: loading a trained model needs the gnn package (torch)") from None
    loaded: ValueFunction = load_checkpoint(path, precision, scale)
    return loaded


def value_scale(text: str) -> float:
    """An argparse type: a value scale search accepts (:func:`search.value.check_value_scale`)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{text}' is not a number") from None
    try:
        return check_value_scale(value)
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


#: The settings of a run whose model does not say them (or with no model).
DEFAULT_RULES, DEFAULT_SEARCH, DEFAULT_DEPTH, DEFAULT_COST, DEFAULT_BUDGET = "ml_rules", "astar", 10, "reference", 5000
#: With no --model: plain A* between two saturation passes (chosen by benchmarks/bench_engines.py and
#: blas_test, see docs/egraph.md, "Saturation inside the search").
DEFAULT_PIPELINE = "saturate-astar"


@dataclass(frozen=True)
class TrainedSearch:
    """A model's value function with the rules, search, depth, prunings, cost model and budget it was
    trained or exported with (what optimize.py takes from it where the command line does not say)."""

    value: ValueFunction
    rules: str
    search: str
    depth: int
    prune_commutes: bool
    prune_inlines: bool
    cost: str
    budget: int

    def spec(self, budget: int, seconds: float | None = None, cost: CostFunction | None = None) -> SearchSpec:
        """A search spec of these settings (``cost``: instead of the named model, e.g. with sizes)."""
        return SearchSpec(
            get_rule_set(self.rules),
            self.depth,
            budget,
            value=self.value,
            cost=cost if cost is not None else get_cost_model(self.cost),
            seconds=seconds,
            prune_commutes=self.prune_commutes,
            prune_inlines=self.prune_inlines,
        )


def trained_search(
    spec: str | None,
    precision: Precision = "float32",
    scale: float | None = None,
    *,
    rules: str = DEFAULT_RULES,
    depth: int = DEFAULT_DEPTH,
) -> TrainedSearch:
    """The model ``spec`` (loaded as :func:`load_value_function` loads it) with its training's settings;
    where it does not say one (and for ``none``), ``rules``, ``depth`` and the other defaults above.
    ``None`` (no model named): the zero value function with the default pipeline."""
    if spec is None:
        return TrainedSearch(ZeroValue(), rules, DEFAULT_PIPELINE, depth, False, False, DEFAULT_COST, DEFAULT_BUDGET)
    value = load_value_function(spec, precision, scale)
    trained: dict[str, object] = getattr(value, "trained_for", None) or {}
    trained_depth, budget = trained.get("depth"), trained.get("budget")
    return TrainedSearch(
        value,
        str(trained.get("rules", rules)),
        str(trained.get("search", DEFAULT_SEARCH)),
        trained_depth if isinstance(trained_depth, int) else depth,
        bool(trained.get("prune_commutes", False)),
        bool(trained.get("prune_inlines", False)),
        str(trained.get("cost", DEFAULT_COST)),
        budget if isinstance(budget, int) else DEFAULT_BUDGET,
    )
