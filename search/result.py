"""What every search returns."""

from __future__ import annotations

from dataclasses import dataclass, field

from knossos.expr import Expr
from knossos.printer import format_expr
from search.graph import SearchGraph
from search.mdp import RewriteStep


@dataclass
class SearchResult:
    start: Expr
    best: Expr
    start_cost: float
    best_cost: float
    #: The rewrite sequence from ``start`` to ``best``.
    steps: list[RewriteStep]
    graph: SearchGraph
    #: Distinct expressions sent to the value function (the budget's unit).
    evaluations: int
    #: Expressions whose successors were computed.
    expanded: int
    seconds: float
    #: Stopped early by Ctrl-C; ``best`` is the best found until then.
    interrupted: bool = False
    #: False when a search that promises completeness (exhaustive) stopped at a limit.
    complete: bool = True
    notes: list[str] = field(default_factory=list)
    #: Where the result was tidied (search/plan.py): the search's own best, and the subexpression each
    #: tidying step (the last ``len(tidied)`` of ``steps``, where the search gave steps) rewrote.
    searched_best: Expr | None = None
    tidied: list[Expr] = field(default_factory=list)

    def to_json(self) -> dict[str, object]:
        return {
            "start_cost": round(self.start_cost, 6),
            "best_cost": round(self.best_cost, 6),
            "steps": [s.to_json() for s in self.steps],
            "best": format_expr(self.best),
            "evaluations": self.evaluations,
            "expanded": self.expanded,
            "seconds": round(self.seconds, 4),
            "interrupted": self.interrupted,
            "complete": self.complete,
            "notes": self.notes,
        }
