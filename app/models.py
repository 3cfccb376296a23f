"""Value functions by name, for the command line: ``none`` (zero), the name of a model that ships with
the package (``default``, ``ggnn``, ``tree_online``, ``blas``, ``blas_beam``, ``blas_astar``, ``cnn``: the
files of ``gnn/models/``) or a checkpoint
written by train.py or ``python -m training.export``; and the argparse type of a value scale."""

from __future__ import annotations

import argparse
import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from autodiff import Mode
from knossos.callee import CalleeKind
from knossos.cost_models import CostFunction
from knossos.errors import KsUsageError
from knossos.expr import Expr, preorder
from knossos.ops import Op
from rules.rule_set import RuleSet
from rules.sets import get_rule_set
from search.settings import Precision, SearchSettings
from search.spec import SearchSpec
from search.value import ValueFunction, ZeroValue, check_value_scale

if TYPE_CHECKING:  # gnn (torch) is imported only for a model that needs it
    from gnn.tree_value import TreeValue
    from gnn.value import NetworkValue


def load_value_function(spec: str, precision: Precision = "float32", scale: float | None = None) -> ValueFunction:
    """``precision`` (float32 or bfloat16) is the network's inference arithmetic and ``scale`` the
    factor on its values (None: the model's own); zero ignores both."""
    if spec in ("none", "zero"):
        return ZeroValue()
    return load_model(spec, precision, scale)


def load_model(spec: str, precision: Precision = "float32", scale: float | None = None) -> NetworkValue | TreeValue:
    """The trained model ``spec``: a shipped model's name or a checkpoint file (as :func:`load_value_function`)."""
    shipped: list[str] = []
    if "/" not in spec and not spec.endswith(".pt"):
        try:
            from gnn.model_file import shipped_model, shipped_model_names
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
        from gnn.model_file import load_value_function as load_checkpoint
    except ImportError:
        raise KsUsageError(f"{spec}: loading a trained model needs the gnn package (torch)") from None
    return load_checkpoint(path, precision, scale)


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


#: The rule set of a run whose model does not say it (or with no model).
DEFAULT_RULES = "ml_rules"
#: The search settings of a run whose model does not say them (or with no model named ``none``).
DEFAULTS = SearchSettings()
DEFAULT_DEPTH, DEFAULT_COST, DEFAULT_BUDGET = DEFAULTS.depth, DEFAULTS.cost, DEFAULTS.budget
#: How ``knossos grad`` names a def's reverse-mode derivative (``rev$f``).
REV_PREFIX = Mode.REV.name_of("")


@dataclass(frozen=True)
class Pipeline:
    """What optimize.py runs with no --model, where the command line does not say otherwise."""

    search: str
    depth: int
    budget: int
    prune_commutes: bool
    prune_inlines: bool
    #: The rule set (rules.sets.RULE_SETS) and the cost model (knossos.cost_models.COST_MODELS).
    rules: str = DEFAULT_RULES
    cost: str = DEFAULT_COST
    #: The time limit of a run that does not give --seconds (None: none).
    seconds: float | None = None

    @property
    def settings(self) -> SearchSettings:
        """These as search settings (the others the defaults)."""
        return SearchSettings(
            algorithm=self.search,
            depth=self.depth,
            budget=self.budget,
            prune_commutes=self.prune_commutes,
            prune_inlines=self.prune_inlines,
            cost=self.cost,
        )

    def spec(self, rules: RuleSet, value: ValueFunction, seconds: float | None = None) -> SearchSpec:
        """A search spec of these settings, with the zero value function or ``value``."""
        return self.settings.spec(rules, value, seconds=seconds)


#: With no --model, a program (a vector, a tuple, a lambda or a call of a def): the fusions and
#: inlinings of programs need deep, wide search, so pseudo-beam (depth 99, the prunings on) between
#: saturation passes.  Scalar arithmetic: saturation does it, and A* binds shared terms with lets in
#: 300 evaluations as well as in 5000.  Both chosen by benchmarks/bench_engines.py, blas_test and
#: benchmarks/bench_default_programs.py: docs/egraph.md, "The default".
PROGRAM = Pipeline("saturate-pseudo-beam", 99, 5000, True, True)
ARITHMETIC = Pipeline("saturate-astar", DEFAULT_DEPTH, 300, False, False)
#: With no --model, reverse-mode code (a def ``rev$f`` that is not scalar arithmetic): REVERSE_DOC
REVERSE = Pipeline("pseudo-beam", 150, 2000, True, False, rules="gradient_rules", cost="alloc", seconds=20.0)


def is_arithmetic(e: Expr) -> bool:
    """Whether ``e`` is scalar arithmetic: no loop, lambda or call of a def, every value a Float, an
    Integer or a Bool."""
    for node in preorder(e):
        if node.op in (Op.BUILD, Op.SUMBUILD, Op.LAM) or not node.type.is_scalar:
            return False
        if node.op is Op.CALL and node.data.kind is CalleeKind.DEF:
            return False
    return True


def is_reverse_mode(name: str | None) -> bool:
    """Whether the def ``name`` is reverse-mode code as ``knossos grad`` names it (``rev$f``)."""
    return name is not None and name.startswith(REV_PREFIX)


def default_pipeline(start: Expr, name: str | None = None) -> Pipeline:
    """The pipeline optimize.py runs on ``start`` (the body of the def ``name``, if a def's) with no --model."""
    if is_reverse_mode(name) and not is_arithmetic(start):
        return REVERSE
    return ARITHMETIC if is_arithmetic(start) else PROGRAM


@dataclass(frozen=True)
class TrainedSearch:
    """A model's value function with the rule set and search settings it was trained or exported
    with (what optimize.py takes from it where the command line does not say)."""

    value: ValueFunction
    rules: str
    settings: SearchSettings
    #: The time limit where the command line gives none (the default pipeline's; None: none).
    seconds: float | None = None

    # the settings by the names optimize.py's report gives them
    @property
    def search(self) -> str:
        return self.settings.algorithm

    @property
    def depth(self) -> int:
        return self.settings.depth

    @property
    def budget(self) -> int:
        return self.settings.budget

    @property
    def prune_commutes(self) -> bool:
        return self.settings.prune_commutes

    @property
    def prune_inlines(self) -> bool:
        return self.settings.prune_inlines

    @property
    def cost(self) -> str:
        return self.settings.cost

    def spec(self, budget: int, seconds: float | None = None, cost: CostFunction | None = None) -> SearchSpec:
        """A search spec of these settings (``cost``: instead of the named model, e.g. with sizes)."""
        return self.settings.spec(get_rule_set(self.rules), self.value, cost=cost, budget=budget, seconds=seconds)


def trained_search(
    spec: str | None,
    precision: Precision = "float32",
    scale: float | None = None,
    *,
    rules: str = DEFAULT_RULES,
    depth: int = DEFAULT_DEPTH,
    start: Expr | None = None,
    search: str | None = None,
    name: str | None = None,
) -> TrainedSearch:
    """The model ``spec`` (loaded as :func:`load_value_function` loads it) with its training's settings;
    where it does not say one (and for ``none``), ``rules``, ``depth`` and the other defaults above.
    ``None`` (no model named): the zero value function with :func:`default_pipeline` of ``start``
    (without one, a program's; ``name``: the def's name, which says whether it is reverse-mode code) and
    its rules, unless ``search`` names another search: then that search with the defaults above."""
    if spec is None:
        p = PROGRAM if start is None else default_pipeline(start, name)
        if search is not None and search != p.search:
            p = Pipeline(search, depth, DEFAULT_BUDGET, False, False)
        return TrainedSearch(ZeroValue(), p.rules if rules == DEFAULT_RULES else rules, p.settings, p.seconds)
    untrained = dataclasses.replace(DEFAULTS, depth=depth)
    if spec in ("none", "zero"):
        return TrainedSearch(ZeroValue(), rules, untrained)
    model = load_model(spec, precision, scale)
    return TrainedSearch(model, model.rules or rules, model.settings or untrained)
