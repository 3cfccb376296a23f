"""The settings every search takes, and the bookkeeping they share (timing, Ctrl-C, the result)."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

import numpy as np

from knossos.cost_models import reference_cost
from knossos.expr import Expr
from rules.actions import Action
from rules.rule_set import RuleSet
from rules.sets import get_rule_set
from search.graph import SearchGraph
from search.limits import (
    DEFAULT_MAX_STATES,
    Limits,
    check_budget,
    check_depth,
    check_max_memory,
    check_max_states,
    check_seconds,
    default_max_memory_mib,
)
from search.mdp import CostFunction, StateStop, Transitions, rlo_cost
from search.result import SearchResult
from search.state import LAZY_DEPTH, State, expr_of, reaches_depth
from search.value import Evaluator, ValueFunction, ZeroValue

#: Called now and then with (evaluations so far, best cost so far).
SearchProgress = Callable[[int, float], None]

#: Two-phase search's first rule set (search/two_phase.py): the paper's GEMM and CNN setting.
FIRST_PHASE_RULES = "phase1"
#: How many unevaluated states at the top of the frontier lazy A* (search/lazy_astar.py) evaluates
#: together (chosen on the validation set and the training corpus's tail with the default model:
#: 8 beat 4 and 16).
LAZY_BATCH = 8

#: What Ctrl-C does inside a search: return the best found so far (optimize.py), or, within
#: :func:`ctrl_c_stops_searches`, stop the program.
_ctrl_c_returns_best = True


@contextmanager
def ctrl_c_stops_searches() -> Iterator[None]:
    """Within this, Ctrl-C in a search propagates instead of ending the search with its best so far:
    for train.py, where a search cut short would silently change an epoch's targets."""
    global _ctrl_c_returns_best
    saved, _ctrl_c_returns_best = _ctrl_c_returns_best, False
    try:
        yield
    finally:
        _ctrl_c_returns_best = saved


def ctrl_c_returns_best() -> bool:
    """Whether Ctrl-C in a search returns its best so far (False within :func:`ctrl_c_stops_searches`)."""
    return _ctrl_c_returns_best


@dataclass
class SearchSpec:
    rules: RuleSet
    #: H: the most rewrites in a sequence.
    depth: int
    #: The most expressions sent to the value function (Table 1's "evaluations").
    budget: int
    value: ValueFunction = field(default_factory=ZeroValue)
    cost: CostFunction = rlo_cost
    seed: int = 0
    #: New states go to the value function in batches of at least this many (Table 1: 16).
    batch_size: int = 16
    progress: SearchProgress | None = None
    #: Wall-clock limit in seconds (None: none).
    seconds: float | None = None
    #: The most distinct expressions in the explored graph (see search/limits.py).
    max_states: int = DEFAULT_MAX_STATES
    #: The most resident memory of the process, in MiB (None: no limit; default: half the machine's).
    max_memory_mib: float | None = field(default_factory=default_max_memory_mib)
    #: Drop commutations that enable no other rule where they swap (search/symmetry.py).
    prune_commutes: bool = False
    #: Drop inlines that raise the cost and open nothing where they land (search/idle_inlines.py).
    prune_inlines: bool = False
    #: When the time limit started (``time.perf_counter()``; None: when the search starts).
    clock_started: float | None = None
    #: Whether states are lazy (search/state.py): children named and costed, built only when used.
    #: None: on starts at least ``LAZY_DEPTH`` deep, with the reference cost model.
    lazy_states: bool | None = None
    #: Lazy A*'s batch: the unevaluated states at the top of its frontier evaluated together.
    lazy_batch: int = LAZY_BATCH
    #: Two-phase search's rules for its first phase (its second takes ``rules``).
    first_phase_rules: RuleSet = field(default_factory=lambda: get_rule_set(FIRST_PHASE_RULES))

    def __post_init__(self) -> None:
        check_depth(self.depth)
        check_budget(self.budget)
        check_seconds(self.seconds)
        check_max_states(self.max_states)
        check_max_memory(self.max_memory_mib)
        if self.batch_size < 1:
            raise ValueError(f"the batch size must be at least 1, not {self.batch_size}")


#: A search: from a start, as a spec says, to its result (search/registry.py names them).
Search = Callable[[Expr, SearchSpec], SearchResult]


#: The most expression nodes in one value-function batch of :meth:`SearchRun.evaluate_waiting`; the
#: limits are looked at before each.  The paper's expressions never fill one (a thousand states of 20
#: nodes), but a thousand children of an 800-line gradient (4,367 nodes) took 10 s and 3 GiB in one.
EVALUATION_NODES = 50_000


class SearchRun:
    """The parts of one search: transitions, value cache, explored graph, clock."""

    def __init__(self, start: Expr, spec: SearchSpec) -> None:
        self.spec = spec
        self.transitions = Transitions(spec.rules, spec.cost, spec.prune_commutes, spec.prune_inlines)
        lazy = spec.lazy_states
        if lazy is None:
            lazy = spec.cost is reference_cost and reaches_depth(start, LAZY_DEPTH)
        #: The start as a state (the expression itself, or a lazy state of it).
        self.start = self.transitions.start(start, lazy)
        #: The cost of a state.
        self.cost = self.transitions.state_cost
        self.evaluator = Evaluator(spec.value, spec.depth, spec.budget)
        self.graph = SearchGraph(self.start, spec.depth, self.cost)
        self.start_cost = spec.cost(start)
        self.limits = Limits(spec.seconds, spec.max_states, spec.max_memory_mib, spec.clock_started)
        self.started = self.limits.started
        self.interrupted = False
        self._last_report = 0.0

    def on_ctrl_c(self) -> None:
        """Ctrl-C reached the search: note it and return the best so far, or pass it on (see above)."""
        if not _ctrl_c_returns_best:
            raise KeyboardInterrupt
        self.interrupted = True

    def stop(self) -> bool:
        """Whether a limit (time, states, memory) is reached: the search then returns what it has."""
        return self.limits.reached(len(self.graph.states))

    def stop_check(self) -> StateStop:
        """For one expansion: whether a limit is reached, counting the new children made so far as states."""
        states = self.graph.states
        new: set[State] = set()

        def reached(child: State) -> bool:
            if child in states or child in new:  # counted already: only time and memory can stop it
                return self.limits.out_of_time_or_memory()
            new.add(child)
            return self.limits.reached(len(states) + len(new))

        return reached

    def successors(self, e: State) -> list[tuple[Action, State]]:
        """The successors of ``e``, recorded as explored edges of the graph.

        The limits are checked after every child built, counting the children as states, so that one
        expansion of a deep program (whose children cost the square of its depth) cannot pass them;
        when one is reached, only the children built so far are returned and the search stops.
        """
        children = self.transitions.successors(e, self.stop_check())
        self.graph.add_edges(e, [child for _, child in children])
        return children

    def expand(self, e: State, steps_left: int) -> list[State]:
        """Expand ``e`` reached with ``steps_left``: the children that are new or now have more steps left.

        Reaching a child costs it (under the alloc cost model, a walk of the program): the limits are
        looked at after each, and the children left when one is reached are not reached."""
        out: list[State] = []
        for action, child in self.successors(e):
            if self.graph.reach(child, steps_left - 1, e, action):
                out.append(child)
            if self.limits.out_of_time_or_memory():
                break
        return out

    def evaluate_waiting(self, waiting: list[tuple[State, int]]) -> list[tuple[float, int, State]]:
        """Send what the budget still affords of ``waiting`` (states with their steps left; emptied)
        to the value function, as (A*'s priority ``V(s) + c(s0) - c(s)``, steps left, state).  A
        state since reached with more steps left is left out: that visit waits instead."""
        batch = self.evaluator.affordable(waiting, lambda w: w[0])
        waiting.clear()
        cost, c0 = self.cost, self.start_cost
        rows: list[np.ndarray] = []
        for chunk in self._chunks(batch):  # the limits are looked at before each chunk
            if self.limits.out_of_time_or_memory():
                batch = batch[: len(rows)]  # the rest is never evaluated: the search stops
                break
            rows.extend(self.evaluator([e for e, _ in chunk]))
        return [
            (row[t] + c0 - cost(e), t, e)
            for (e, t), row in zip(batch, rows, strict=True)
            if self.graph.steps_left(e) <= t
        ]

    def _chunks(self, batch: list[tuple[State, int]]) -> list[list[tuple[State, int]]]:
        """``batch`` in runs of at most :data:`EVALUATION_NODES` expression nodes (one state at least
        each); the zero value function's in one (it costs nothing)."""
        if isinstance(self.spec.value, ZeroValue):
            return [batch]
        out: list[list[tuple[State, int]]] = [[]]
        nodes = 0
        for item in batch:
            size = expr_of(item[0]).size
            if out[-1] and nodes + size > EVALUATION_NODES:
                out.append([])
                nodes = 0
            out[-1].append(item)
            nodes += size
        return out

    def report(self) -> None:
        if self.spec.progress is not None:
            now = time.perf_counter()
            if now - self._last_report >= 0.1:
                self._last_report = now
                self.spec.progress(self.evaluator.evaluations, self.graph.best_cost)

    def result(self, complete: bool = True, notes: list[str] | None = None) -> SearchResult:
        """The search's result; a limit it stopped at is noted once (the caller may have noted it already)."""
        g = self.graph
        best = expr_of(g.best)
        notes = list(notes or [])
        if self.limits.note is not None and not any(self.limits.note in n for n in notes):
            notes.append(f"{self.limits.note}; the best found so far")
        if self.spec.progress is not None:
            self.spec.progress(self.evaluator.evaluations, g.best_cost)
        return SearchResult(
            start=expr_of(g.start),
            best=best,
            start_cost=self.start_cost,
            best_cost=g.best_cost if best is g.best else self.spec.cost(best),
            steps=g.steps(g.best),
            graph=g,
            evaluations=self.evaluator.evaluations,
            expanded=self.transitions.expanded,
            seconds=time.perf_counter() - self.started,
            interrupted=self.interrupted,
            complete=complete,
            notes=notes,
        )
