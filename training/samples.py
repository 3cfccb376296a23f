"""A search's value targets as samples to fit (Algorithm 2), and drawing at most so many of them.

The two halves are apart so that searches can run elsewhere (training/executors.py): a worker returns
every sample of its search (:func:`split_samples`), and the trainer draws from them in the search's
order with its own generator (:func:`limit_samples`), as :func:`samples_of` does in one go, so the
draws are the same wherever the searches ran.
"""

from __future__ import annotations

import numpy as np

from gnn.sample import Sample
from search.result import SearchResult
from training.config import TARGET_SCHEMES, TargetScheme


def samples_of(
    result: SearchResult, scheme: TargetScheme = "reached", limit: int = 0, rng: np.random.Generator | None = None
) -> list[Sample]:
    """Algorithm 2's targets of a search, as samples to fit.

    ``reached`` (the paper's Algorithm 2 as written): every state reached with steps left, fitted
    for its steps left.  Most of those states were never expanded, so their target is zero only
    because nothing below them was looked at.  ``explored`` (as the reference implementation
    builds its datasets from the search's episodes): every expanded state, fitted for each number
    of steps ``1..h`` where ``h`` is how deep the search looked below it (see
    ``SearchGraph.value_targets``), all from one forward pass.  ``explored_and_reached``: those, and
    the states reached but never expanded as ``reached`` has them (the siblings a search passed
    over: without them the network never sees what a search did not choose).

    ``limit`` (with ``rng``): at most that many samples, drawn at random, half of them expanded
    states and half passed over where there are enough of both (a search reaches ten times more
    states than it expands).
    """
    expanded, passed_over = split_samples(result, scheme)
    return limit_samples(expanded, passed_over, limit, rng)


def split_samples(result: SearchResult, scheme: TargetScheme) -> tuple[list[Sample], list[Sample]]:
    """Every sample of ``result`` under ``scheme`` (see :func:`samples_of`): those of expanded
    states, and those of states passed over, each in the search graph's order."""
    if scheme not in TARGET_SCHEMES:
        raise ValueError(f"unknown target scheme {scheme!r} (known: {', '.join(TARGET_SCHEMES)})")
    vt = result.graph.value_targets()
    expanded: list[Sample] = []
    passed_over: list[Sample] = []
    for i, (e, t, h) in enumerate(zip(vt.exprs, vt.steps_left, vt.explored, strict=True)):
        if scheme != "reached" and h > 0:
            expanded.append(Sample(e, int(h), float(vt.table[i, h]), tuple(float(x) for x in vt.table[i, 1:h])))
        elif scheme != "explored" and t > 0:
            passed_over.append(Sample(e, int(t), float(vt.table[i, t])))
    return expanded, passed_over


def limit_samples(
    expanded: list[Sample], passed_over: list[Sample], limit: int = 0, rng: np.random.Generator | None = None
) -> list[Sample]:
    """At most ``limit`` of a search's samples (all with 0 or no ``rng``), drawn with ``rng``: half
    expanded and half passed over where there are enough of both, each kept in its order."""
    if limit and rng is not None and len(expanded) + len(passed_over) > limit:
        half = max(limit // 2, limit - len(passed_over))
        expanded = _draw(expanded, half, rng)
        passed_over = _draw(passed_over, limit - len(expanded), rng)
    return expanded + passed_over


def _draw(samples: list[Sample], k: int, rng: np.random.Generator) -> list[Sample]:
    """``k`` of ``samples`` at random, in their order (all of them if there are no more)."""
    if len(samples) <= k:
        return samples
    return [samples[i] for i in sorted(rng.choice(len(samples), size=k, replace=False).tolist())]
