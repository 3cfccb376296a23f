"""Every search by name, all with the signature ``search(start, spec) -> SearchResult``."""

from __future__ import annotations

from knossos.errors import KsUsageError
from search.astar import astar, greedy
from search.beam import beam
from search.egraph import egraph
from search.exhaustive import exhaustive
from search.lazy_astar import lazy_astar
from search.mcts import mcts
from search.pseudo_beam import pseudo_beam
from search.random_search import random_search
from search.saturated import saturate_astar, saturate_lazy_astar, saturate_pseudo_beam
from search.spec import Search
from search.two_phase import two_phase

SEARCHES: dict[str, Search] = {
    "astar": astar,
    "lazy-astar": lazy_astar,
    "greedy": greedy,
    "beam": beam,
    "pseudo-beam": pseudo_beam,
    "mcts": mcts,
    "random": random_search,
    "exhaustive": exhaustive,
    "two-phase": two_phase,
    "egraph": egraph,
    "saturate-astar": saturate_astar,
    "saturate-lazy-astar": saturate_lazy_astar,
    "saturate-pseudo-beam": saturate_pseudo_beam,
}

#: The searches a value network trains and is evaluated with (a training config's
#: ``search.algorithm`` and ``search.test_algorithm``): those whose graph records every state with the
#: steps it was reached with, which the training targets are read from.
TRAINING_SEARCHES: tuple[str, ...] = ("astar", "lazy-astar", "two-phase", "beam", "pseudo-beam", "mcts")


def get_search(name: str) -> Search:
    found = SEARCHES.get(name)
    if found is None:
        raise KsUsageError(f"unknown search '{name}' (known: {', '.join(SEARCHES)})")
    return found
