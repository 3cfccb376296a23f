"""Is the default model worth its time?  A* with it against plain A*, at the same budgets, on unseen expressions.

Run:  python benchmarks/bench_default_model.py [--sets generated_heldout,bindgen_test] [--budgets 300,1000,5000]
                                              [--models default,ggnn,none:lazy-astar,default:lazy-astar]
                                              [--json] [--quick]

For each set, budget and run (``none``: plain A*; each of ``--models``: A* guided by that value function,
``NAME:lazy-astar`` with the evaluations deferred, see search/lazy_astar.py), every expression is
searched (binding_simplify_rules, depth 10) and compared with its best known cost.
Reported per row: expressions at the best known cost (hits), the total best cost, and the seconds
of search (the sum over the set; the value function's start-up is not in it).  Start-up is measured
apart, in fresh processes: the seconds from the interpreter's start to a loaded value function
(``none`` and the model), and a whole ``optimize.py --expr`` run of each.  Threads: the model's
searches of the first 20 expressions of the first set at 300 evaluations, beside a process that keeps
one core busy, with the network on one thread (as it chooses for these batches) and, for a GGNN,
forced onto two (the tree network runs in numpy, on one thread).  Each search starts with an empty
embedding cache, as an optimize.py run does.

Each (run, set, budget) searches in a fresh process (``--jobs`` at once): a process that has searched
the same expressions before finds their nodes built (faster), and a long-lived one carries the memory
of its past searches (slower).  Search rows are appended to
``experiments/results/default_model/searches.jsonl`` as they finish, so an interrupted run resumes (``--quick``: a tiny run under runs/quick/).  ``--json`` prints the summary as
one JSON object; it is also written to ``experiments/results/default_model/summary.json``.  Times are
wall-clock on a shared machine: compare rows of one run.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from tqdm import tqdm

from app.models import load_value_function
from knossos.atomic import atomic_write_text
from knossos.cli import whole_number
from knossos.errors import KsError
from knossos.perf import fewer_gc_pauses
from ksbench.best_known import best_known
from ksbench.results import QUICK, RESULTS, ResultsFile, revision
from ksdata.loader import DataSource, load_targets
from search.plan import Plan, run

ROOT = Path(__file__).resolve().parent.parent

RULES, DEPTH = "binding_simplify_rules", 10
#: The searches a run may name (``MODEL:SEARCH``; plain MODEL is A*).
RUN_SEARCHES = ("astar", "lazy-astar")
#: A run: (value function, search).
Run = tuple[str, str]
EXAMPLE = "(div (div 1.0 x) (add 1.0 (div 1.0 x)))"
#: What a fresh process runs to get a value function, timed from the interpreter's start.
STARTUP_SNIPPET = (
    "import time, sys; t0 = time.perf_counter(); "
    "from app.models import load_value_function; load_value_function(sys.argv[1]); "
    "print(time.perf_counter() - t0)"
)


OPTIMIZE = ("optimize.py", "--expr", EXAMPLE, "--rules", RULES, "--budget", "300", "--quiet", "--json")


def startup_seconds(model: str, repeat: int) -> dict[str, float]:
    """Median seconds, over ``repeat`` fresh processes, to a loaded value function and to a whole
    optimize.py run at 300 evaluations (interpreter start-up included)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    load, whole = [], []
    for _ in range(repeat):
        done = subprocess.run(
            [sys.executable, "-c", STARTUP_SNIPPET, model],
            capture_output=True,
            text=True,
            cwd=ROOT,
            env=env,
            check=True,
        )
        load.append(float(done.stdout.strip()))
        t0 = time.perf_counter()
        subprocess.run(
            [sys.executable, *OPTIMIZE, "--model", model],
            capture_output=True,
            cwd=ROOT,
            env=env,
            check=True,
        )
        whole.append(time.perf_counter() - t0)
    return {"load_seconds": statistics.median(load), "optimize_seconds": statistics.median(whole)}


def busy_machine_seconds(model: str, set_name: str, count: int) -> dict[str, float | None]:
    """Seconds of the model's searches (300 evaluations) beside a busy process, on one thread and on two."""
    import torch

    plan = Plan(rules=RULES).overridden(algorithm="astar", depth=DEPTH, budget=300)
    targets = load_targets(DataSource(set=set_name), "--sets")[:count]
    value: Any = model_or_exit(model)  # a GGNN's thread settings are set below
    burner = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    out: dict[str, float | None] = {}
    threads_before = torch.get_num_threads()
    if hasattr(value, "one_thread_nodes"):  # a GGNN: its choice (one thread), then forced onto two
        settings = [("one_thread_seconds", value.one_thread_nodes, 1), ("two_threads_seconds", 0, 2)]
    else:  # the tree network runs in numpy on one thread: nothing to choose
        settings = [("one_thread_seconds", None, 1)]
        out["two_threads_seconds"] = None
    try:
        for label, one_thread_nodes, threads in settings:
            if one_thread_nodes is not None:
                value.one_thread_nodes, value.max_threads = one_thread_nodes, threads
            t0 = time.perf_counter()
            for t in targets:
                if hasattr(value, "clear"):
                    value.clear()
                run(t.expr, plan, value)
            out[label] = round(time.perf_counter() - t0, 3)
    finally:
        burner.kill()
        burner.wait()
        torch.set_num_threads(threads_before)
    return out


def model_or_exit(name: str) -> Any:
    """The value function ``name`` names, or a one-line error saying why there is none."""
    try:
        return load_value_function(name)
    except KsError as err:
        raise SystemExit(err.render("bench_default_model.py")) from None


def results_file(folder: Path) -> ResultsFile:
    """The benchmark's search rows (rows from before runs named their search were A*'s)."""
    return ResultsFile(folder / "searches.jsonl", ("set", "model", "search", "budget", "index"), {"search": "astar"})


def parse_runs(text: str) -> list[Run]:
    """``MODEL[:SEARCH],...`` as (model, search) pairs, plain A* first."""
    runs: list[Run] = [("none", "astar")]
    for item in (part.strip() for part in text.split(",")):
        if not item:
            continue
        model, _, search = item.partition(":")
        if (search or "astar") not in RUN_SEARCHES:
            raise SystemExit(
                f"bench_default_model.py: error: search '{search}' is not one of {', '.join(RUN_SEARCHES)}"
            )
        if (model, search or "astar") not in runs:
            runs.append((model, search or "astar"))
    return runs


def run_searches(
    results: ResultsFile, sets: list[str], budgets: list[int], runs: list[Run], limit: int | None = None
) -> None:
    """Every (model, search, set, budget, expression) not yet in ``results``; the first ``limit`` expressions
    of each set."""
    loaded: dict[str, Any] = {}
    for model, search_name in runs:
        if model not in loaded:
            loaded[model] = model_or_exit(model)  # the tree network also counts the nodes it embeds
        value = loaded[model]
        for set_name in sets:
            targets = load_targets(DataSource(set=set_name), "--sets")[:limit]
            for budget in budgets:
                todo = [
                    (i, t)
                    for i, t in enumerate(targets)
                    if not results.has(set=set_name, model=model, search=search_name, budget=budget, index=i)
                ]
                label = f"{set_name} {model}:{search_name} @ {budget}"
                for i, t in tqdm(todo, desc=label, unit="expr", file=sys.stderr):
                    if hasattr(value, "clear"):  # each search starts with no embeddings cached, as optimize.py does
                        value.clear()
                    embedded = getattr(value, "nodes_embedded", None)
                    plan = Plan(rules=RULES).overridden(algorithm=search_name, depth=DEPTH, budget=budget)
                    r = run(t.expr, plan, value)
                    row = {
                        "set": set_name,
                        "model": model,
                        "search": search_name,
                        "budget": budget,
                        "index": i,
                        "start_cost": r.start_cost,
                        "best_cost": round(r.best_cost, 6),
                        "best_known": t.best_known,
                        "seconds": round(r.seconds, 4),
                        "evaluations": r.evaluations,
                    }
                    if embedded is not None:  # the tree network: nodes it had to embed
                        row["new_nodes"] = value.nodes_embedded - embedded
                    results.add(row)


def run_in_fresh_processes(sets: list[str], budgets: list[int], runs: list[Run], jobs: int, quick: bool) -> None:
    """Each (run, set, budget) not yet measured, in a process of its own: a search in a process that
    has already searched the same expressions finds their nodes built and cached (faster), and one
    that has searched for long carries the memory of it (slower), so no run inherits another's."""
    from concurrent.futures import ThreadPoolExecutor

    def one(run: Run, set_name: str, budget: int) -> int:
        command = [sys.executable, str(Path(__file__).resolve()), "--searches-of", ":".join(run)]
        command += ["--sets", set_name, "--budgets", str(budget)] + (["--quick"] if quick else [])
        return subprocess.run(command, cwd=ROOT, env={**os.environ, "OMP_NUM_THREADS": "1"}).returncode

    work = [(run, set_name, budget) for run in runs for set_name in sets for budget in budgets]
    with ThreadPoolExecutor(jobs) as pool:
        for (run, set_name, budget), done in zip(work, [pool.submit(one, *w) for w in work], strict=True):
            if done.result() != 0:  # the process has said why on stderr
                raise SystemExit(
                    f"bench_default_model.py: error: the searches of {':'.join(run)} on {set_name} at {budget} failed"
                )


def summarise(rows: list[dict[str, Any]], sets: list[str], budgets: list[int], runs: list[Run]) -> list[dict[str, Any]]:
    known = best_known(rows)
    out = []
    for set_name in sets:
        for budget in budgets:
            for model, search in runs:
                mine = [
                    r
                    for r in rows
                    if (r["set"], r["model"], r["search"], r["budget"]) == (set_name, model, search, budget)
                ]
                if not mine:
                    continue
                row = {
                    "set": set_name,
                    "model": model,
                    "search": search,
                    "budget": budget,
                    "expressions": len(mine),
                    "hits": sum(r["best_cost"] <= known[r["set"], r["index"]] + 1e-9 for r in mine),
                    "total_cost": round(sum(r["best_cost"] for r in mine), 4),
                    "seconds": round(sum(r["seconds"] for r in mine), 4),
                }
                if all("new_nodes" in r for r in mine):
                    evaluations = sum(r["evaluations"] for r in mine)
                    row["new_nodes_per_evaluation"] = round(sum(r["new_nodes"] for r in mine) / max(evaluations, 1), 2)
                out.append(row)
    return out


def format_table(summary: dict[str, Any]) -> str:
    lines = [f"{'set':<20} {'budget':>6} {'model':<10} {'search':<10} {'hits':>9} {'total cost':>11} {'seconds':>8}"]
    for r in summary["searches"]:
        hits = f"{r['hits']}/{r['expressions']}"
        lines.append(
            f"{r['set']:<20} {r['budget']:>6} {r['model']:<10} {r['search']:<10} {hits:>9} {r['total_cost']:>11.1f} "
            f"{r['seconds']:>8.2f}"
        )
    for model, s in summary["startup"].items():
        lines.append(
            f"start-up, {model}: {s['load_seconds']:.2f} s to a loaded value function, "
            f"{s['optimize_seconds']:.2f} s for a whole optimize.py run at 300 evaluations"
        )
    for model, busy in summary["busy_machine"].items():
        two = "" if busy["two_threads_seconds"] is None else f", {busy['two_threads_seconds']:.2f} s on two"
        lines.append(
            f"beside a busy process, {model}'s searches at 300 evaluations: {busy['one_thread_seconds']:.2f} s on one "
            f"thread{two}"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--sets", default="generated_heldout,bindgen_test")
    ap.add_argument("--budgets", default="300,1000,5000")
    ap.add_argument(
        "--models",
        default="default,ggnn,none:lazy-astar,default:lazy-astar",
        help="the runs to compare with plain A*, comma-separated: MODEL (shipped name or checkpoint, or none) for "
        "A* with it, MODEL:lazy-astar for lazy A*",
    )
    ap.add_argument("--startup-repeat", type=int, default=3)
    ap.add_argument(
        "--searches-of",
        metavar="MODEL[:SEARCH]",
        help="only run the searches of this run (none or a model, A* or lazy-astar) and stop: two such runs side "
        "by side fill the results file on two cores; a run without it then reports",
    )
    ap.add_argument("--jobs", type=whole_number(256), default=1, help="processes searching at once (each on one core)")
    ap.add_argument("--json", action="store_true", help="print the summary as JSON")
    ap.add_argument("--quick", action="store_true", help="2 expressions of bindgen_test at 20 and 50 evaluations")
    args = ap.parse_args(argv)
    sets = [s.strip() for s in args.sets.split(",") if s.strip()]
    budgets = [int(b) for b in args.budgets.split(",")]
    folder = RESULTS / "default_model"
    if args.quick:
        sets, budgets, args.startup_repeat, folder = ["bindgen_test"], [20, 50], 1, QUICK / "default_model"
    runs = parse_runs(args.models)
    models = list(dict.fromkeys(model for model, _ in runs))
    if args.searches_of is not None:
        with fewer_gc_pauses():
            run_searches(
                results_file(folder), sets, budgets, parse_runs(args.searches_of)[-1:], 2 if args.quick else None
            )
        return
    for model in models:  # a name that loads nothing stops the benchmark before any search
        model_or_exit(model)
    run_in_fresh_processes(sets, budgets, runs, args.jobs, args.quick)
    results = results_file(folder)
    rows = [r for r in results if r["set"] in sets and r["budget"] in budgets and (r["model"], r["search"]) in runs]
    summary = {
        "revision": revision(),
        "rules": RULES,
        "depth": DEPTH,
        "searches": summarise(rows, sets, budgets, runs),
        "startup": {m: startup_seconds(m, args.startup_repeat) for m in models},
        "busy_machine": {m: busy_machine_seconds(m, sets[0], 2 if args.quick else 20) for m in models[1:]},
    }
    atomic_write_text(folder / "summary.json", json.dumps(summary, indent=1) + "\n")
    print(json.dumps(summary) if args.json else format_table(summary))


if __name__ == "__main__":
    main()
