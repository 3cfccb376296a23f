"""How to optimise an expression, as one value (:class:`Plan`), and the one function that runs it (:func:`run`).

A plan names the rule set, the search settings (:class:`~search.settings.SearchSettings`: which
search, depth, budget, prunings, cost model), the real sizes the alloc cost model is told, the
limits (time, states, memory), the seed, and whether the result is tidied (:mod:`search.tidy`).
optimize.py, ``app.compiled.compile_optimised``, the training searches, the examples and the benchmarks all make a
plan and call :func:`run`, so that they cannot drift apart.

Which setting wins is decided in :func:`choose_plan` alone: what the caller gives (a command line's
flags, a function's keywords) over what the model says (:meth:`Plan.of_model`: the rule set and settings it was
trained or exported with) over the default for the def (:meth:`Plan.default_for`).
"""

from __future__ import annotations

import dataclasses
import functools
import time
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from autodiff import Mode
from knossos.alloc_cost import AllocCost
from knossos.callee import CalleeKind
from knossos.cost_models import CostFunction, get_cost_model
from knossos.errors import KsUsageError
from knossos.expr import Expr, preorder
from knossos.ops import Op
from knossos.sized_cost import Sizes
from rules.rule_set import RuleSet
from rules.sets import get_rule_set
from search.limits import DEFAULT_MAX_STATES, Limits, default_max_memory_mib
from search.registry import get_search
from search.result import SearchResult
from search.settings import SearchSettings
from search.spec import FIRST_PHASE_RULES, LAZY_BATCH, SearchProgress, SearchSpec
from search.tidy import tidy_until
from search.value import ValueFunction, ZeroValue

#: The rule set of a plan that does not name one (and of a model that does not say its own).
DEFAULT_RULES = "ml_rules"
#: How ``knossos grad`` names a def's reverse-mode derivative (``rev$f``).
REV_PREFIX = Mode.REV.name_of("")


@runtime_checkable
class Trained(Protocol):
    """A value function that says the rule set and search settings it was trained or exported with
    (a model loaded from a checkpoint, gnn/model_file.py); None where it does not say."""

    rules: str | None
    settings: SearchSettings | None


@dataclass(frozen=True)
class Plan:
    """What to run on an expression: the search and everything it is configured with."""

    #: The rule set's name (rules/sets.py: ``+`` joins sets, ``strict:`` and ``unsafe-int:`` prefixes).
    rules: str = DEFAULT_RULES
    search: SearchSettings = field(default_factory=SearchSettings)
    #: With the alloc cost model: parameters' real lengths (others count 16; knossos/alloc_cost.py).
    sizes: Sizes = field(default_factory=dict)
    #: Wall-clock limit in seconds, tidying included (None: none).
    seconds: float | None = None
    #: The most distinct expressions in the explored graph (search/limits.py).
    max_states: int = DEFAULT_MAX_STATES
    #: The most resident memory of the process, in MiB (None: no limit; default: half the machine's).
    max_memory_mib: float | None = field(default_factory=default_max_memory_mib)
    #: For the searches that draw (random, mcts).
    seed: int = 0
    #: Remove the identity, variable and dead lets the search leaves (search/tidy.py).
    tidy: bool = False
    #: Two-phase search's first rule set.
    first_phase_rules: str = FIRST_PHASE_RULES
    #: Whether states are lazy (search/state.py; None: the search decides by the start's depth).
    lazy_states: bool | None = None
    #: Lazy A*'s batch: the unevaluated states at the top of its frontier evaluated together.
    lazy_batch: int = LAZY_BATCH

    @classmethod
    def default_for(cls, name: str | None, body: Expr) -> Plan:
        """The plan of the def ``name`` (None: a bare expression) with body ``body`` when no model and
        no setting is given: reverse-mode code (a ``rev$f`` that is not scalar arithmetic) gets
        :data:`REVERSE_PLAN`, scalar arithmetic :data:`ARITHMETIC_PLAN` and any other program :data:`PROGRAM_PLAN`."""
        if is_reverse_mode(name) and not is_arithmetic(body):
            return REVERSE_PLAN
        return ARITHMETIC_PLAN if is_arithmetic(body) else PROGRAM_PLAN

    def of_model(self, value: ValueFunction) -> Plan:
        """This plan with the rule set and search settings the model ``value`` says (those of its
        training), each where it says it (a value function that is not a trained model says neither)."""
        if not isinstance(value, Trained):
            return self
        return dataclasses.replace(self, rules=value.rules or self.rules, search=value.settings or self.search)

    def overridden(self, **given: object) -> Plan:
        """This plan with each given setting that is not None replaced: a field of the plan or of its
        search settings (``depth``, ``algorithm``, ...), by name; a TypeError on any other name."""
        given = {k: v for k, v in given.items() if v is not None}
        if not given:
            return self
        settings = {k: given.pop(k) for k in list(given) if k in _SETTINGS}
        unknown = set(given) - _FIELDS
        if unknown:
            raise TypeError(f"not a setting of a plan: {', '.join(sorted(unknown))}")
        search = dataclasses.replace(self.search, **settings) if settings else self.search  # type: ignore[arg-type]
        return dataclasses.replace(self, search=search, **given)  # type: ignore[arg-type]

    def rule_set(self) -> RuleSet:
        return _rule_set(self.rules)

    def cost(self) -> CostFunction:
        """The cost model the search minimises, told the real sizes (only the alloc model takes them)."""
        if not self.sizes:
            return get_cost_model(self.search.cost)
        if self.search.cost != "alloc":
            raise KsUsageError(f"--size is for --cost alloc, not the {self.search.cost} cost model")
        return AllocCost(dict(self.sizes))

    def spec(
        self,
        value: ValueFunction | None = None,
        progress: SearchProgress | None = None,
        clock_started: float | None = None,
    ) -> SearchSpec:
        """The spec a search of this plan takes, with ``value`` (None: the zero value function)."""
        s = self.search
        return SearchSpec(
            rules=self.rule_set(),
            depth=s.depth,
            budget=s.budget,
            value=ZeroValue() if value is None else value,
            cost=self.cost(),
            seed=self.seed,
            batch_size=s.batch_size,
            progress=progress,
            seconds=self.seconds,
            max_states=self.max_states,
            max_memory_mib=self.max_memory_mib,
            prune_commutes=s.prune_commutes,
            prune_inlines=s.prune_inlines,
            clock_started=clock_started,
            first_phase_rules=_rule_set(self.first_phase_rules),
            lazy_states=self.lazy_states,
            lazy_batch=self.lazy_batch,
        )


@functools.lru_cache(maxsize=32)
def _rule_set(name: str) -> RuleSet:
    """The rule set ``name``, built once per process (a union or a ``strict:`` set is built anew by
    :func:`rules.sets.get_rule_set`; rule sets do not change)."""
    return get_rule_set(name)


_SETTINGS = frozenset(SearchSettings.names())
_FIELDS = frozenset(f.name for f in dataclasses.fields(Plan))


def _default(algorithm: str, depth: int, budget: int, prune_commutes: bool, prune_inlines: bool) -> SearchSettings:
    return SearchSettings(
        algorithm=algorithm, depth=depth, budget=budget, prune_commutes=prune_commutes, prune_inlines=prune_inlines
    )


#: With no model, a program (a vector, a tuple, a lambda or a call of a def): the fusions and
#: inlinings of programs need deep, wide search, so pseudo-beam (depth 99, the prunings on) between
#: saturation passes.  Scalar arithmetic: saturation does it, and A* binds shared terms with lets in
#: 300 evaluations as well as in 5000.  Both chosen by benchmarks/bench_engines.py, blas_test and
#: benchmarks/bench_default_programs.py: docs/egraph.md, "The default".
PROGRAM_PLAN = Plan(search=_default("saturate-pseudo-beam", 99, 5000, True, True))
ARITHMETIC_PLAN = Plan(search=_default("saturate-astar", SearchSettings().depth, 300, False, False))
#: With no model, reverse-mode code (a def ``rev$f`` that is not scalar arithmetic): pseudo-beam
#: with the gradient rules under the alloc cost model, for at most 20 s (docs/gradients.md).
REVERSE_PLAN = Plan(
    rules="gradient_rules",
    search=dataclasses.replace(_default("pseudo-beam", 150, 2000, True, False), cost="alloc"),
    seconds=20.0,
)


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


def choose_plan(start: Expr, name: str | None = None, model: ValueFunction | None = None, **given: object) -> Plan:
    """The plan for ``start`` (the body of the def ``name``, None for a bare expression): each setting
    ``given`` (not None) wins over ``model``'s (:meth:`Plan.of_model`), which wins over the default.
    With no model (None; a model named ``none`` is the zero value function, and takes the plain
    defaults) the default is :meth:`Plan.default_for` the def, unless another search is given: then
    the plain defaults (the default plans' depths and budgets are chosen for their searches)."""
    if model is not None:
        base = Plan().of_model(model)
    else:
        base = Plan.default_for(name, start)
        if given.get("algorithm") not in (None, base.search.algorithm):
            base = Plan()
    return base.overridden(**given)


def run(
    start: Expr, plan: Plan, value: ValueFunction | None = None, progress: SearchProgress | None = None
) -> SearchResult:
    """Search from ``start`` as ``plan`` says, with ``value`` (None: the zero value function); the
    best tidied when the plan says so, within the plan's time and memory limits (the search's)."""
    spec = plan.spec(value, progress, clock_started=time.perf_counter())
    result = get_search(plan.search.algorithm)(start, spec)
    if not plan.tidy:
        return result
    limits = Limits(spec.seconds, spec.max_states, spec.max_memory_mib, spec.clock_started)
    return _tidied(result, spec.cost, limits)


def _tidied(result: SearchResult, cost: CostFunction, limits: Limits) -> SearchResult:
    """``result`` with its best tidied (:mod:`search.tidy`) until the limits: the tidying steps follow
    the search's, and a note says what they did."""
    best, steps, stopped = tidy_until(result.best, cost, limits.stop)
    cut = "" if stopped is None else f"; tidying {stopped}"
    if not steps:
        return result if not cut else dataclasses.replace(result, notes=[*result.notes, f"not tidied{cut}"])
    lets = sum(1 for s, _ in steps if s.rule != "inline_let")
    note = f"tidied: {lets} identity or dead let(s) removed in {len(steps)} steps, cost {result.best_cost:g} -> {cost(best):g}{cut}"
    # a result without a rewrite sequence (saturation) stays without one
    tail = [s for s, _ in steps] if result.steps or result.best is result.start else []
    return dataclasses.replace(
        result,
        best=best,
        best_cost=cost(best),
        steps=result.steps + tail,
        notes=[*result.notes, note],
        searched_best=result.best,
        tidied=[node for _, node in steps],
    )
