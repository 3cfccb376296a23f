"""Limits every search honours, so that no setting makes one run without end or outgrow memory.

A search stops, with the best expression found so far and a note saying why, at the first of: its
time limit (``seconds``), its state limit (distinct expressions in the explored graph, about 2 KiB
each for the paper's arithmetic expressions and more for large programs) and its memory limit (the
process's resident memory, checked a few times a second).  Settings no machine could honour (a
depth or budget beyond what memory can hold) are refused up front.
"""

from __future__ import annotations

import math
import os
import resource
import sys
import time
from collections.abc import Callable

#: The most rewrites in a sequence: each evaluated state keeps a value per number of steps left,
#: so the depth multiplies memory (the paper's deepest searches are 40 steps).
MAX_DEPTH = 1000
#: The most value-function evaluations (or, for exhaustive search, states) a search may be given:
#: each evaluation keeps a state, and a billion states is far beyond any machine's memory.
MAX_BUDGET = 10**9
#: The default state limit: about 2 GiB of the paper's arithmetic expressions.
DEFAULT_MAX_STATES = 1_000_000
#: The default memory limit is this share of the machine's physical memory.
DEFAULT_MEMORY_SHARE = 0.5
#: How often, in seconds, a search looks at its memory.
MEMORY_CHECK_INTERVAL = 0.25


#: A limit to look at now and then from a loop inside a search (building or extracting an e-graph,
#: tidying, featurising): the note once a limit is reached, else None.
Stop = Callable[[], str | None]


class LimitReached(Exception):
    """A loop deep inside a search stopped because ``stop`` said a limit was reached; ``note`` says which.
    Whoever called into the loop catches it and keeps the best it had before."""

    def __init__(self, note: str) -> None:
        super().__init__(note)
        self.note = note


def check_stop(stop: Stop | None) -> None:
    """Raise :class:`LimitReached` if ``stop`` says a limit is reached."""
    if stop is not None:
        note = stop()
        if note is not None:
            raise LimitReached(note)


def check_depth(depth: int) -> int:
    """``depth``, or a ValueError saying why no search can take it."""
    if not 1 <= depth <= MAX_DEPTH:
        raise ValueError(f"the search depth must be at least 1 and at most {MAX_DEPTH}, not {depth}")
    return depth


def check_budget(budget: int) -> int:
    if not 1 <= budget <= MAX_BUDGET:
        raise ValueError(
            f"the evaluation budget must be at least 1 and at most {MAX_BUDGET} (no memory holds more states), not {budget}"
        )
    return budget


def check_seconds(seconds: float | None) -> float | None:
    if seconds is not None and not (seconds >= 0 and math.isfinite(seconds)):
        raise ValueError(f"the time limit must be a finite number of seconds, at least 0, not {seconds!r}")
    return seconds


def check_max_states(states: int) -> int:
    if states < 1:
        raise ValueError(f"the state limit must be at least 1, not {states}")
    return states


def check_max_memory(mib: float | None) -> float | None:
    if mib is not None and not (mib > 0 and math.isfinite(mib)):
        raise ValueError(f"the memory limit must be a positive number of MiB, not {mib!r}")
    return mib


def default_max_memory_mib() -> float | None:
    """Half of the machine's physical memory, where the system says how much that is."""
    try:
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, ValueError, OSError):
        return None
    return DEFAULT_MEMORY_SHARE * total / 2**20 if total > 0 else None


def resident_mib() -> float:
    """This process's resident memory now (Linux), else its peak so far."""
    try:
        with open("/proc/self/statm") as f:
            pages = int(f.read().split()[1])
        return pages * os.sysconf("SC_PAGE_SIZE") / 2**20
    except (OSError, ValueError, IndexError):
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        return peak / 2**20 if sys.platform == "darwin" else peak / 2**10  # bytes on macOS, KiB elsewhere


class Limits:
    """The clock, state count and memory of one search against its limits.

    ``reached(states)`` is cheap enough to call once per expansion: it reads the clock, and the
    memory only every :data:`MEMORY_CHECK_INTERVAL` seconds.  Once a limit is reached, ``note``
    says which, and ``reached`` stays true.
    """

    def __init__(
        self, seconds: float | None, max_states: int, max_memory_mib: float | None, since: float | None = None
    ) -> None:
        self.started = time.perf_counter()
        self.seconds = seconds
        # `since`: the clock of a search made of several (two-phase) starts with the first
        self.deadline = None if seconds is None else (self.started if since is None else since) + seconds
        self.max_states = max_states
        self.max_memory_mib = max_memory_mib
        self._next_memory_check = self.started
        self.note: str | None = None
        self._states_note: str | None = None

    def reached(self, states: int) -> bool:
        if self.note is not None:
            return True
        self.note = self._time()
        if self.note is None and states >= self.max_states:
            self.note = self._states_note = f"stopped at the state limit of {self.max_states:,} distinct expressions"
        elif self.note is None:
            self.note = self._memory()
        return self.note is not None

    def stop(self) -> str | None:
        """The note once a limit is reached, else None (a :data:`Stop`; it counts no states)."""
        return self.note if self.reached(0) else None

    def out_of_time_or_memory(self) -> bool:
        """Whether the time or memory limit is reached, even after the state limit was: what a search
        still does after its state limit stopped it (reaching the children made so far) stops here."""
        if self.note is None:
            self.note = self._clock_or_memory()
            return self.note is not None
        return self.note != self._states_note or self._clock_or_memory() is not None

    def _clock_or_memory(self) -> str | None:
        return self._time() or self._memory()

    def _time(self) -> str | None:
        if self.deadline is not None and time.perf_counter() > self.deadline:
            return f"stopped at the time limit of {self.seconds:g} s"
        return None

    def _memory(self) -> str | None:
        now = time.perf_counter()
        if self.max_memory_mib is not None and now >= self._next_memory_check:
            self._next_memory_check = now + MEMORY_CHECK_INTERVAL
            used = resident_mib()
            if used > self.max_memory_mib:
                return f"stopped at the memory limit of {self.max_memory_mib:,.0f} MiB ({used:,.0f} MiB in use)"
        return None
