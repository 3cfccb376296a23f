"""Equality saturation: match every rewrite, apply every match, rebuild; again until nothing changes
or a limit is reached.

A rewrite that matches more than ``MATCH_LIMIT`` times in an iteration (doubled at each ban) is
banned for ``BAN_LENGTH`` iterations (doubled too), egg's backoff scheduler: commutativity and
associativity would otherwise fill the e-graph before the simplifying rules get their turn.  The
e-graph is saturated when an iteration with no rewrite banned changes nothing.  A time or memory
limit (``SaturationLimits.other``) reached while rebuilding raises :class:`search.limits.LimitReached` out of
:func:`saturate`, the e-graph not rebuilt.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from knossos.ops import Op
from search.egraph.graph import EGraph, ENode
from search.egraph.translate import ERewrite

MATCH_LIMIT = 1000
BAN_LENGTH = 5
#: Look at the clock after this many applications.
_CHECK_EVERY = 256


@dataclass
class SaturationLimits:
    nodes: int
    iterations: int
    #: Time and memory: a note once one is reached, else None.
    other: Callable[[], str | None]


@dataclass
class Saturation:
    iterations: int = 0
    saturated: bool = False
    #: Why it stopped before saturating.
    stopped: str | None = None


@dataclass
class _Ban:
    until: int = 0
    times: int = 0


def saturate(
    g: EGraph, rewrites: list[ERewrite], limits: SaturationLimits, progress: Callable[[int], None] | None = None
) -> Saturation:
    """Run ``rewrites`` on ``g`` until it saturates or a limit stops it; ``g`` is rebuilt either way."""
    out = Saturation()
    bans = {rw.name: _Ban() for rw in rewrites}
    try:
        while True:
            if out.iterations >= limits.iterations:
                out.stopped = f"stopped at the iteration limit of {limits.iterations} (the depth)"
                return out
            out.iterations += 1
            stopped, changed, banned = _iteration(g, rewrites, bans, out, limits)
            if progress is not None:
                progress(g.size)
            if stopped is not None:
                out.stopped = stopped
                return out
            if not changed:
                if not banned:
                    out.saturated = True
                    return out
                for ban in bans.values():  # only the banned rules are left: let them run
                    ban.until = 0
    finally:
        g.rebuild(limits.other)


def _iteration(
    g: EGraph, rewrites: list[ERewrite], bans: dict[str, _Ban], out: Saturation, limits: SaturationLimits
) -> tuple[str | None, bool, bool]:
    """One iteration: (why it stopped or None, whether ``g`` changed, whether a rule was banned)."""
    by_op: dict[Op, list[tuple[int, ENode]]] = {}
    for cls, eclass in g.classes.items():
        for node in eclass.nodes:
            by_op.setdefault(node[0], []).append((cls, node))
    found = []
    banned = False
    for rw in rewrites:
        ban = bans[rw.name]
        if ban.until > out.iterations:
            banned = True
            continue
        most = MATCH_LIMIT << ban.times
        matches = rw.search(g, by_op, most + 1)
        if len(matches) > most:
            ban.until = out.iterations + (BAN_LENGTH << ban.times)
            ban.times += 1
            banned = True
            continue
        found.append((rw, matches))
        note = limits.other()
        if note is not None:
            return note, False, banned
    size, merges = g.size, g.merges
    count = 0
    for rw, matches in found:
        for cls, m in matches:
            rw.apply(g, cls, m)
            if g.size >= limits.nodes:
                return f"stopped at the limit of {limits.nodes:,} e-nodes", True, banned
            count += 1
            if count % _CHECK_EVERY == 0:
                note = limits.other()
                if note is not None:
                    return note, True, banned
    g.rebuild(limits.other)
    return None, g.size != size or g.merges != merges, banned
