"""Every engine side by side: the e-graph alone, the learned search alone, plain A*, and the searches
between saturation passes (search/saturated.py), on the arithmetic sets.

Run:  python benchmarks/bench_engines.py [--sets NAME,...] [--engines NAME,...] [--jobs N] [--quick]

Every expression of each set (default: the generated validation and held-out sets and the four public
arithmetic sets) is searched with ``binding_simplify_rules`` (the rules the default model was trained
with), depth 10, by each engine of :data:`ksbench.engines.ENGINES`.  Each engine runs in a process of
its own (``--jobs`` at once; 1 by default, so that the seconds of one engine are not slowed by another's), its value
function loaded once; each search starts with an empty cache of values, as an optimize.py run does.
Rows are appended to ``experiments/results/engines/results.jsonl`` as searches end (an interrupted run
resumes); ``python -m experiments.summary --write`` turns them into the table of docs/egraph.md: per
set and engine the expressions at the best cost known (the set's, lowered by anything this benchmark
found), the total best cost and the seconds of search (the sum of the searches' own times, start-up
aside).  ``--quick``: the first 3 expressions of each set, into runs/quick/.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

from tqdm import tqdm

from app.models import load_value_function
from knossos.expr import Expr
from knossos.perf import fewer_gc_pauses
from knossos.printer import format_expr
from ksbench.engines import BY_NAME, Engine, summarise
from ksbench.results import QUICK, RESULTS, ResultsFile
from ksdata.loader import DataSource, load_targets
from search.astar import astar
from search.plan import Plan, run
from search.result import SearchResult
from search.saturated import saturated
from search.settings import SearchSettings
from search.value import ValueFunction

ROOT = Path(__file__).resolve().parent.parent

RULES, DEPTH = "binding_simplify_rules", 10
SETS = (
    "generated_validation",
    "generated_heldout",
    "bindgen_36",
    "bindgen_test",
    "binding_simplify_8",
    "simplify_expressions",
)


def plan_of(engine: Engine, start: Expr) -> Plan:
    """The plan ``engine`` runs on ``start``: optimize.py's default for it, or the engine's search and budget."""
    if engine.search == "default":
        return Plan.default_for(None, start).overridden(rules=RULES)
    assert engine.budget is not None
    algorithm = "saturate-astar" if engine.search == "saturate-astar-before" else engine.search
    return Plan(rules=RULES, search=SearchSettings(algorithm=algorithm, depth=DEPTH, budget=engine.budget))


def engine_search(engine: Engine, start: Expr, value: ValueFunction) -> tuple[Plan, SearchResult]:
    """``engine``'s plan for ``start`` and its result (saturate-astar-before: the first pass only, then A*)."""
    plan = plan_of(engine, start)
    if engine.search == "saturate-astar-before":
        return plan, saturated(astar, after=False)(start, plan.spec(value))
    return plan, run(start, plan, value)


def results_file(quick: bool) -> ResultsFile:
    folder = QUICK / "engines" if quick else RESULTS / "engines"
    return ResultsFile(folder / "results.jsonl", ("set", "index", "engine"))


def run_engine(engine: Engine, sets: list[str], quick: bool) -> None:
    results = results_file(quick)
    value = load_value_function(engine.model)
    for set_name in sets:
        targets = load_targets(DataSource(set=set_name), "--sets")[: 3 if quick else None]
        todo = [(i, t) for i, t in enumerate(targets) if not results.has(set=set_name, index=i, engine=engine.name)]
        for i, t in tqdm(todo, desc=f"{engine.name} {set_name}", unit="expr", file=sys.stderr):
            if hasattr(value, "clear"):
                value.clear()
            plan, r = engine_search(engine, t.expr, value)
            results.add(
                {
                    "set": set_name,
                    "index": i,
                    "engine": engine.name,
                    "search": engine.search,
                    "model": engine.model,
                    "budget": plan.search.budget,
                    "depth": plan.search.depth,
                    "start_cost": round(r.start_cost, 6),
                    "best_known": t.best_known,
                    "best_cost": round(r.best_cost, 6),
                    "seconds": round(r.seconds, 4),
                    "evaluations": r.evaluations,
                    "complete": r.complete,
                    "best": format_expr(r.best),
                }
            )


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--sets", default=",".join(SETS), help="sets, comma-separated")
    ap.add_argument("--engines", default=",".join(BY_NAME), help=f"engines ({', '.join(BY_NAME)})")
    ap.add_argument("--jobs", type=int, default=1, help="engines at once, each in its own process (1)")
    ap.add_argument("--quick", action="store_true", help="three expressions a set, into runs/quick/")
    ap.add_argument("--engine-process", metavar="NAME", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    sets = args.sets.split(",")
    if args.engine_process:
        with fewer_gc_pauses():
            run_engine(BY_NAME[args.engine_process], sets, args.quick)
        return
    names = args.engines.split(",")
    unknown = [n for n in names if n not in BY_NAME]
    if unknown:
        raise SystemExit(f"bench_engines.py: error: unknown engines {', '.join(unknown)} (known: {', '.join(BY_NAME)})")
    from concurrent.futures import ThreadPoolExecutor

    def one(name: str) -> int:
        command = [sys.executable, str(Path(__file__).resolve()), "--engine-process", name, "--sets", args.sets]
        command += ["--quick"] if args.quick else []
        return subprocess.run(command, cwd=ROOT, env={**os.environ, "OMP_NUM_THREADS": "1"}).returncode

    with ThreadPoolExecutor(args.jobs) as pool:
        for name, code in zip(names, list(pool.map(one, names)), strict=True):
            if code != 0:
                raise SystemExit(f"bench_engines.py: error: the searches of {name} failed")
    for row in summarise(list(results_file(args.quick))):
        print(
            f"{row['set']:<22} {row['engine']:<16} {row['hits']:>3}/{row['expressions']:<3} "
            f"{row['total_cost']:>9.1f} {row['seconds']:>8.1f} s"
        )


if __name__ == "__main__":
    main()
