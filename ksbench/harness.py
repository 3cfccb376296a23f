"""What every benchmark does around its measurements: one thread, the revision stamp, searching
then timing in a fresh C++ cache, and the rows written.

A benchmark calls :func:`pin_threads` before anything imports numpy (or torch), then searches (each
search printed as it starts, :func:`search`), compiles and times what the searches found
(:func:`fresh_cpp_cache` around it all, :func:`guarded_main` as its ``main``), and writes its rows
stamped with :func:`stamp` (or :func:`machine` and :func:`ksbench.results.revision`) by
:func:`write_rows`.

Only the standard library is imported at the top: the packages load numpy, and :func:`pin_threads`
must run before numpy does.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import datetime
import json
import math
import os
import platform
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from knossos.expr import Expr
    from search.plan import Plan
    from search.result import SearchResult
    from search.value import ValueFunction

#: The thread counts of the BLAS and OpenMP libraries numpy and torch load.
THREAD_VARIABLES = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")

Row = dict[str, Any]


def pin_threads() -> None:
    """numpy, torch and OpenMP on one thread, as the compiled code runs (a variable already set is
    kept); only before numpy loads does it take effect."""
    for var in THREAD_VARIABLES:
        os.environ.setdefault(var, "1")


def announce(name: str) -> None:
    """One line on stderr: the benchmark, the code revision and the machine its figures come from."""
    from ksbench.results import revision

    print(f"{name}: revision {revision()[:12]}, {cpu_name()} ({machine()})", file=sys.stderr, flush=True)


def machine() -> str:
    """The machine's architecture and processor, as the rows say it."""
    return f"{platform.machine()} {platform.processor() or ''}".strip()


def cpu_name() -> str:
    """The host CPU's model name (from /proc/cpuinfo where there is one)."""
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            cpu = next((line.split(":", 1)[1].strip() for line in f if line.startswith("model name")), cpu)
    except OSError:
        pass
    return cpu


def compiler_version() -> str:
    """The first line of ``$CXX --version`` ("not found" when it cannot run)."""
    from cpp_backend import compile as cpp_compile

    try:
        gxx = subprocess.run([cpp_compile.compiler(), "--version"], capture_output=True, text=True, check=False)
    except OSError:
        return "not found"
    return gxx.stdout.splitlines()[0] if gxx.stdout else "?"


def host() -> Row:
    """The machine, its cores, and the C++ compiler and flags the compiled code is built with."""
    from cpp_backend import compile as cpp_compile

    return {
        "machine": platform.machine(),
        "cpus": os.cpu_count(),
        "compiler": cpp_compile.compiler(),
        "flags": cpp_compile.compile_flags(),
    }


def stamp(args: argparse.Namespace) -> Row:
    """The code revision, the date, the host and the timing options (:func:`add_timing_arguments`)."""
    from ksbench.results import revision

    return {
        "revision": revision(),
        "date": datetime.date.today().isoformat(),
        "host": host(),
        "timing": {"seconds": args.seconds, "rounds": args.rounds, "max_seconds_per_call": args.max_seconds_per_call},
        "quick": args.quick,
    }


def write_rows(path: Path, rows: Sequence[Row]) -> None:
    """``rows`` as JSON lines in ``path``, replaced whole (atomically: an interrupted run leaves the last)."""
    from knossos.atomic import atomic_write_text

    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(path, "".join(json.dumps(r) + "\n" for r in rows))


def search(label: str, start: Expr, plan: Plan, value: ValueFunction | None = None, indent: str = "") -> SearchResult:
    """``search.plan.run`` of ``plan`` from ``start``, said first (the search's name, rules, depth and seconds)."""
    from search.plan import run

    s = plan.search
    seconds = "no limit" if plan.seconds is None else f"{plan.seconds:g} s"
    print(f"{indent}searching: {label} ({s.algorithm}, {plan.rules}, depth {s.depth}, {seconds})...", flush=True)
    return run(start, plan, value)


@dataclasses.dataclass(frozen=True)
class Contender:
    """One search of a benchmark: its label, the settings it ran with (a results row's fields) and
    what it found."""

    label: str
    settings: Row
    result: SearchResult

    @property
    def rules_used(self) -> list[str]:
        return list(dict.fromkeys(s.rule for s in self.result.steps))

    def to_json(self) -> Row:
        return {**self.settings, **search_row(self.result), "rules_used": self.rules_used}

    def describe(self, cost: str = "cost") -> str:
        r = self.result
        rules = ", ".join(self.rules_used) or "none"
        return (
            f"{self.label}: {cost} {r.start_cost:.6g} -> {r.best_cost:.6g} in {len(r.steps)} steps ({rules}); "
            f"{r.evaluations} evaluations, {r.seconds:.1f} s"
        )


def search_row(result: SearchResult) -> Row:
    """What a search found and spent, for a results row."""
    return {
        "start_cost": result.start_cost,
        "best_cost": result.best_cost,
        "steps": len(result.steps),
        "evaluations": result.evaluations,
        "expanded": result.expanded,
        "search_seconds": round(result.seconds, 3),
        "notes": result.notes,
    }


def growth_exponent(t_a: float | None, t_b: float | None, n_a: float, n_b: float) -> float | None:
    """log(t_b / t_a) / log(n_b / n_a): the power of the size that the time grows with (None when one is missing)."""
    if t_a is None or t_b is None or t_a <= 0 or t_b <= 0:
        return None
    return math.log(t_b / t_a) / math.log(n_b / n_a)


def add_timing_arguments(ap: argparse.ArgumentParser) -> None:
    """The options of a benchmark that searches then times: the searches' seconds, the repeats, the
    skipping of slow calls and the results file."""
    from knossos.cli import whole_number

    ap.add_argument("--seconds-search", type=float, default=None, metavar="S", help="seconds per search (60; quick 5)")
    ap.add_argument("--max-seconds-per-call", type=float, default=2.0, metavar="T", help="skip slower (2)")
    ap.add_argument("--seconds", type=float, default=0.2, metavar="T", help="repeat each timed call this long (0.2)")
    ap.add_argument(
        "--rounds", type=whole_number(), default=3, metavar="R", help="time the variants in turn R times (3)"
    )
    ap.add_argument("--out", type=Path, default=None, metavar="FILE", help="the JSON lines file to write")


@contextlib.contextmanager
def fresh_cpp_cache() -> Iterator[None]:
    """An empty C++ compilation cache (so that every compilation is this run's) and fewer garbage-collector
    pauses, for the time of the block; the cache variable is put back after it."""
    from knossos.perf import fewer_gc_pauses

    saved = os.environ.get("KNOSSOS_CPP_CACHE")
    try:
        with tempfile.TemporaryDirectory(prefix="knossos-bench-") as cache, fewer_gc_pauses():
            os.environ["KNOSSOS_CPP_CACHE"] = cache
            yield
    finally:
        if saved is None:
            os.environ.pop("KNOSSOS_CPP_CACHE", None)
        else:
            os.environ["KNOSSOS_CPP_CACHE"] = saved


def guarded_main(run: Callable[[], bool], name: str) -> int:
    """``run()`` in a fresh C++ cache: exit status 0 when its checks pass, 1 when not or on a KsError
    (one line under ``name``); the total seconds printed last."""
    from knossos.errors import KsError

    started = time.perf_counter()
    try:
        with fresh_cpp_cache():
            ok = run()
    except KsError as err:
        print(err.render(name), file=sys.stderr)
        return 1
    print(f"total {time.perf_counter() - started:.0f} s (searches, compilations, checks and timing)")
    return 0 if ok else 1


__all__ = [
    "THREAD_VARIABLES",
    "add_timing_arguments",
    "compiler_version",
    "cpu_name",
    "fresh_cpp_cache",
    "growth_exponent",
    "guarded_main",
    "host",
    "machine",
    "pin_threads",
    "search",
    "search_row",
    "stamp",
    "write_rows",
]
