"""The measured tables of the documentation, made from the committed results files.

Run:  python -m experiments.summary           print every table
      python -m experiments.summary --write   rewrite the tables in every file of READMES

Each table sits in one of the READMES between ``<!-- table:NAME -->`` and ``<!-- /table -->``;
--write replaces only what is between those markers.  tests/test_experiments_readme.py checks that
the tables are what this module makes of the results, so the numbers there are measured ones.
"""

from __future__ import annotations

import argparse
import functools
import json
import re
import statistics
from collections.abc import Callable
from pathlib import Path
from typing import Any

from experiments.curves import unique_rows
from experiments.default_model.passes import PassMetrics
from knossos.atomic import atomic_write_text
from knossos.cpp.bench import format_seconds
from ksbench.results import RESULTS, ROOT, ResultsFile

README = ROOT / "experiments" / "README.md"
#: The files that hold marked tables (each table in exactly one of them).
READMES = (
    ROOT / "README.md",
    README,
    ROOT / "docs" / "default_model.md",
    ROOT / "docs" / "egraph.md",
    ROOT / "docs" / "programs.md",
    ROOT / "docs" / "torch.md",
    RESULTS / "training" / "README.md",
)
#: The training runs of experiments/results/training/ shown side by side, per table.
TRAINING_RUNS = {
    "training_arith": ("arith_h64_b300_seed0", "arith_h64_b300_seed1", "arith_h64_b300_seed2"),
    "training_bootstrap": ("bootstrap_explored_h200_bf16", "bootstrap_explored_h64", "bootstrap_replay_h64"),
    "gradients_training": ("../gradients/training",),
}
CURVES = ("fig5_generalisation", "fig5_bootstrap", "fig6_blas", "fig6_cnn", "fig6_gradients", "fig9_search")
MARKER = re.compile(r"(<!-- table:(?P<figure>[\w]+) -->\n)(?P<body>.*?)(<!-- /table -->)", re.S)


def _jsonl(path: Path) -> list[dict[str, Any]]:
    """The rows of a JSON-lines results file."""
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _rows(figure: str) -> list[dict[str, Any]]:
    path = RESULTS / figure / "results.jsonl"
    return _jsonl(path) if path.is_file() else []


def _g(x: float) -> str:
    return f"{x:.6g}"


def curve_table(figure: str) -> str:
    """Per agent and budget: the total test cost at the last epoch (median over seeds, range), the
    number of test expressions at their best-known cost, and the seeds; then baselines and references."""
    rows = unique_rows(_rows(figure))
    if not rows:
        return "_No results yet: run the experiment (see above)._\n"
    known = next((r["costs"] for r in rows if r["kind"] == "reference" and r["agent"] == "best_known"), None)

    def reached(costs: list[float]) -> int:
        return sum(c <= k + 1e-9 for c, k in zip(costs, known or [], strict=False))

    lines = [
        "| what | budget | epoch | total test cost (median [min, max] over seeds) | at best-known (median) | seeds |",
        "|---|---|---|---|---|---|",
    ]
    groups: dict[tuple[str, str, int | None], list[dict[str, Any]]] = {}
    for r in rows:
        groups.setdefault((r["kind"], r["agent"], r["budget"]), []).append(r)
    order = {"agent": 0, "baseline": 1, "reference": 2}
    for (kind, agent, budget), members in sorted(
        groups.items(), key=lambda kv: (order[kv[0][0]], kv[0][1], kv[0][2] or 0)
    ):
        if kind == "agent":  # the last epoch each seed reached
            last: dict[int, dict[str, Any]] = {}
            for r in members:
                if r["seed"] not in last or r["epoch"] > last[r["seed"]]["epoch"]:
                    last[r["seed"]] = r
            members = list(last.values())
            epochs = sorted({r["epoch"] for r in members})
            epoch = "-".join(map(str, (epochs[0], epochs[-1]))) if len(epochs) > 1 else str(epochs[0])
        else:
            epoch = ""
        totals = [r["total"] for r in members]
        spread = f" [{_g(min(totals))}, {_g(max(totals))}]" if len(totals) > 1 else ""
        at_known = _g(statistics.median(reached(r["costs"]) for r in members)) if known else ""
        seeds = str(len(members)) if kind != "reference" else ""
        lines.append(
            f"| {kind} {agent} | {budget if budget is not None else ''} | {epoch} | "
            f"{_g(statistics.median(totals))}{spread} | {at_known} | {seeds} |"
        )
    return "\n".join(lines) + "\n"


def walltime_table() -> str:
    """Per program and size: min seconds per call of each variant, and baseline / optimised."""
    rows = _rows("fig7_walltime")
    if not rows:
        return "_No results yet: run the experiment (see above)._\n"
    variants = list(dict.fromkeys(r["variant"] for r in rows))
    times: dict[tuple[str, str], dict[str, float]] = {}
    for r in rows:
        size = ", ".join(f"{k}={v}" for k, v in r["size"].items())
        times.setdefault((r["program"], size), {})[r["variant"]] = r["min_s"]
    lines = [
        "| program | size | " + " | ".join(variants) + " | baseline / optimised |",  # min seconds per call
        "|---|---|" + "---|" * len(variants) + "---|",
    ]
    for (program, size), t in times.items():
        cells = [f"{t[v]:.3g} s" if v in t else "" for v in variants]
        ratio = f"{t['baseline'] / t['optimised']:.2f}x" if "baseline" in t and "optimised" in t else ""
        lines.append(f"| {program} | {size} | " + " | ".join(cells) + f" | {ratio} |")
    return "\n".join(lines) + "\n"


def search_name(search: str) -> str:
    """A search as a table names it."""
    return {"astar": "A*", "lazy-astar": "lazy A*"}.get(search, search)


def run_name(model: str, search: str) -> str:
    """A benchmark run's column heading: the value function and the search."""
    return f"plain {search_name(search)}" if model == "none" else f"`--model {model}`, {search_name(search)}"


def default_model_table() -> str:
    """benchmarks/bench_default_model.py's summary: plain A* and the shipped models side by side."""
    path = RESULTS / "default_model" / "summary.json"
    if not path.is_file():
        return "_No results yet: run benchmarks/bench_default_model.py._\n"
    summary = json.loads(path.read_text())
    rows = {(r["set"], r["budget"], r["model"], r["search"]): r for r in summary["searches"]}
    runs = list(dict.fromkeys((r["model"], r["search"]) for r in summary["searches"]))
    lines = [
        "| set | evaluations | " + " | ".join(run_name(*run) for run in runs) + " |",
        "|---|---|" + "---|" * len(runs),
    ]
    for set_name, budget in dict.fromkeys((k[0], k[1]) for k in rows):
        cells = []
        for run in runs:
            r = rows.get((set_name, budget, *run))
            cells.append(f"{r['hits']}/{r['expressions']}, {r['total_cost']:.1f}, {r['seconds']:.1f} s" if r else "")
        lines.append(f"| {set_name} | {budget} | " + " | ".join(cells) + " |")
    embedded = [r for r in summary["searches"] if "new_nodes_per_evaluation" in r]
    if embedded:
        lines.append("")
        lines.append(
            "Nodes the tree network embedded per expression it evaluated: "
            + ", ".join(
                f"{r['new_nodes_per_evaluation']:.2f} ({run_name(r['model'], r['search'])}, {r['set']}, {r['budget']})"
                for r in embedded
            )
            + "."
        )
    lines.append("")
    lines.append(
        "Start-up (median of fresh processes): "
        + "; ".join(
            f"`--model {m}` {s['load_seconds']:.2f} s to a loaded value function, {s['optimize_seconds']:.2f} s "
            "for a whole `optimize.py --expr` run at 300 evaluations"
            for m, s in summary["startup"].items()
        )
        + f" (revision {summary['revision'][:7]})."
    )
    for model, busy in summary.get("busy_machine", {}).items():
        two = busy["two_threads_seconds"]
        forced = "" if two is None else f", {two:.2f} s with the network forced onto two threads"
        lines.append("")
        lines.append(
            f"Beside a process that keeps one of the two cores busy, `--model {model}`'s A\\* searches of 20 held-out "
            f"expressions at 300 evaluations took {busy['one_thread_seconds']:.2f} s on one thread{forced}."
        )
    return "\n".join(lines) + "\n"


def default_model_brief_table() -> str:
    """For the README: held-out hits and seconds of plain A* and of the default model (with the
    search it runs), per budget, from benchmarks/bench_default_model.py's summary."""
    path = RESULTS / "default_model" / "summary.json"
    if not path.is_file():
        return "_No results yet: run benchmarks/bench_default_model.py._\n"
    rows = {
        (r["model"], r["search"], r["budget"]): r
        for r in json.loads(path.read_text())["searches"]
        if r["set"] == "generated_heldout"
    }
    from gnn.checkpoint import DEFAULT_MODEL, load_checkpoint, trained_for

    search = str(trained_for(load_checkpoint(DEFAULT_MODEL)).get("search", "astar"))
    lines = [
        f"| evaluations | plain A* | `--model default` ({search_name(search)}) |",
        "|---|---|---|",
    ]
    for budget in sorted({b for (m, _, b) in rows if m == "default"}):
        cells = [rows.get((*run, budget)) for run in (("none", "astar"), ("default", search))]
        lines.append(
            f"| {budget} | "
            + " | ".join(f"{r['hits']}/{r['expressions']} in {r['seconds']:.1f} s" if r else "" for r in cells)
            + " |"
        )
    return "\n".join(lines) + "\n"


#: The passes of the offline fit the default model was chosen from, as candidates.py names them.
OFFLINE_WEIGHTS = "runs/offline/fitA/weights"


def default_model_training_table() -> str:
    """The default model's offline fit (experiments/default_model/fit_offline.py), pass by pass: the
    held-out loss, and A* with the pass's weights at 300 evaluations on the validation set (total
    cost) and on the held-out tail of generated_train (at the best cost of the run's data)."""
    path = RESULTS / "default_model" / "offline_fitA_metrics.jsonl"
    if not path.is_file():
        return "_No results yet: run experiments/default_model/fit_offline.py._\n"
    passes = [PassMetrics.from_json(json.loads(line)) for line in path.read_text().splitlines() if line.strip()]
    lines = [
        "| pass | samples | held-out loss | validation total, scale 0.2 | 0.5 | train tail at best cost, scale 0.2 | 0.5 |",
        "|---|---|---|---|---|---|---|",
    ]
    for p in passes:
        v = p.validation
        lines.append(
            f"| {p.epoch} | {p.samples} | {p.held_out_loss:.4f} | {v['validation 0.2'].total_cost:.1f} | "
            f"{v['validation 0.5'].total_cost:.1f} | {v['train_tail 0.2'].hits}/200 | {v['train_tail 0.5'].hits}/200 |"
        )
    return "\n".join(lines) + "\n"


def default_model_search_table() -> str:
    """How the default model's weights, search and value scale were chosen
    (experiments/default_model/candidates.py): passes of the offline fit searched at 300 evaluations,
    eager or lazy A*, on the corpus's held-out tail (at the best cost of the fit's data) and the
    validation set (total cost)."""
    path = RESULTS / "default_model" / "candidates.jsonl"
    if not path.is_file():
        return "_No results yet: run experiments/default_model/candidates.py._\n"
    rows = _jsonl(path)
    passes = {f"{OFFLINE_WEIGHTS}/epoch_{n:03d}.pt": n for n in range(1, 100)}
    by = {
        (passes[r["candidate"]], r["search"], r.get("batch") or 0, r["scale"], r["on"]): r
        for r in rows
        if r["candidate"] in passes and r["budget"] == 300
    }
    lines = [
        "| pass | search | batch | value scale | tail at best cost | tail total | validation total | both totals |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for n, search, batch, scale in sorted({k[:4] for k in by}):
        tail, valid = by.get((n, search, batch, scale, "train_tail")), by.get((n, search, batch, scale, "validation"))
        if tail is None or valid is None:
            continue
        lines.append(
            f"| {n} | {search_name(search)} | {batch or ''} | {scale:g} | "
            f"{tail['hits']}/{tail['expressions']} | {tail['total_cost']:.1f} | {valid['total_cost']:.1f} | "
            f"{tail['total_cost'] + valid['total_cost']:.1f} |"
        )
    return "\n".join(lines) + "\n"


def blas_test_table() -> str:
    """experiments/blas_test/run.py's searches: per def of blas_test, the reference's start and best
    known whole-def costs, and each run's (value function, search, budget, depth) best cost and seconds."""
    from experiments.blas_test.run import DEFAULTS, KEY, best_known

    path = RESULTS / "blas_test" / "searches.jsonl"
    if not path.is_file():
        return "_No results yet: run experiments/blas_test/run.py._\n"
    rows = list(ResultsFile(path, KEY, DEFAULTS))
    known = best_known()

    def run_of(r: dict[str, Any]) -> BlasTestRun:
        return (r["model"], r["search"], r["budget"], r["depth"], r["prune_commutes"], r["prune_inlines"])

    runs = list(dict.fromkeys(run_of(r) for r in rows))
    by_run = {(*run_of(r), r["def_"]): r for r in rows}

    def named(run: BlasTestRun) -> str:
        m, s, b, d, commutes, inlines = run
        plain = ("plain" if m == "none" else f"`--model {m}`") + f" {search_name(s)} @ {b}, depth {d}"
        pruned = [what for what, on in (("commutations", commutes), ("idle inlines", inlines)) if on]
        return plain + (f", {' and '.join(pruned)} pruned" if pruned else "")

    def hit(r: dict[str, Any], k: Any) -> bool:
        return bool(r["best_body_cost"] <= k.best + 1e-9)

    shown = [run for run in BLAS_TEST_COLUMNS if run in runs] or runs
    lines = ["| def | start | best known (by) | " + " | ".join(f"{named(run)} | s" for run in shown) + " |"]
    lines.append("|---|---|---|" + "---|---|" * len(shown))
    for name, k in known.items():
        cells = []
        for run in shown:
            r = by_run.get((*run, name))
            bold = "**" if r is not None and hit(r, k) else ""
            cells.append(" | " if r is None else f"{bold}{r['best_cost']:,.1f}{bold} | {r['seconds']:.1f}")
        lines.append(f"| {name} | {k.start:,.1f} | {k.best:,.1f} ({k.by}) | " + " | ".join(cells) + " |")
    rlo = sum(k.by == "rlo" for k in known.values())
    lines += ["", "Every run (the table above shows some of them):", ""]
    lines += ["| run | best known reached (of 49) | of the 30 the reference's agent found | seconds of search |"]
    lines += ["|---|---|---|---|"]
    for run in runs:
        mine = [(r, known[r["def_"]]) for r in rows if run_of(r) == run]
        reached = [k for r, k in mine if hit(r, k)]
        seconds = sum(r["seconds"] for r, _ in mine)
        lines.append(
            f"| {named(run)} | {len(reached)} | {sum(k.by == 'rlo' for k in reached)} of {rlo} | {seconds:.1f} |"
        )
    return "\n".join(lines) + "\n"


#: A blas_test run: value function, search, budget, depth, commutations pruned, idle inlines pruned.
BlasTestRun = tuple[str, str, int, int, bool, bool]

#: The runs blas_test's per-def table shows, when measured.
BLAS_TEST_COLUMNS: list[BlasTestRun] = [
    ("none", "astar", 5000, 30, False, False),
    ("blas_astar", "astar", 5000, 30, False, False),
    ("none", "beam", 5000, 60, False, False),
    ("blas_beam", "beam", 5000, 60, False, False),
    ("none", "pseudo-beam", 5000, 60, False, False),
    ("none", "pseudo-beam", 5000, 60, True, False),
    ("none", "pseudo-beam", 5000, 99, True, True),
    ("blas", "pseudo-beam", 5000, 99, True, True),
]


def egraph_table() -> str:
    """experiments/egraph_baseline/run.py's searches: per public set and search, the total best cost,
    the expressions at (or below) the reference's best-known cost, the seconds of search, and for the
    e-graph how many saturated."""
    path = RESULTS / "egraph_baseline" / "results.jsonl"
    if not path.is_file():
        return "_No results yet: run experiments/egraph_baseline/run.py._\n"
    rows = list(ResultsFile(path, ("set", "index", "search", "model", "budget", "depth")))
    lines = [
        "| set | search | total best cost | at best known | below it | seconds | saturated |",
        "|---|---|---|---|---|---|---|",
    ]
    runs = list(dict.fromkeys((r["search"], r["model"], r["budget"], r["depth"]) for r in rows))
    for set_name in dict.fromkeys(r["set"] for r in rows):
        mine = [r for r in rows if r["set"] == set_name]
        first = [r for r in mine if (r["search"], r["model"], r["budget"], r["depth"]) == runs[0]]
        known = sum(r["best_known"] for r in first)
        start = sum(r["start_cost"] for r in first)
        lines.append(f"| {set_name} ({len(first)}) | start / best known | {start:.1f} / {known:.1f} | | | | |")
        for search, model, budget, depth in runs:
            done = [
                r for r in mine if (r["search"], r["model"], r["budget"], r["depth"]) == (search, model, budget, depth)
            ]
            if not done:
                continue
            at = sum(r["best_cost"] <= r["best_known"] + 1e-9 for r in done)
            below = sum(r["best_cost"] < r["best_known"] - 1e-9 for r in done)
            if search == "egraph":
                what = f"egraph, {budget:,} e-nodes, {depth} iterations"
                saturated = f"{sum(r['complete'] for r in done)}/{len(done)}"
            else:
                what = f"{search} `--model {model}`, {budget} evaluations, depth {depth}"
                saturated = ""
            lines.append(
                f"| | {what} | {sum(r['best_cost'] for r in done):.1f} | {at}/{len(done)} | {below} | "
                f"{sum(r['seconds'] for r in done):.1f} | {saturated} |"
            )
    return "\n".join(lines) + "\n"


def engines_table() -> str:
    """benchmarks/bench_engines.py's searches: per set and engine, the expressions at the best cost known
    (the set's, lowered by any engine), the total best cost, the seconds and their ratio to the e-graph's."""
    path = RESULTS / "engines" / "results.jsonl"
    if not path.is_file():
        return "_No results yet: run benchmarks/bench_engines.py._\n"
    from ksbench.engines import BY_NAME, summarise

    rows = summarise(list(ResultsFile(path, ("set", "index", "engine"))))
    lines = [
        "| set | engine | at best known | total best cost | seconds | seconds / e-graph's |",
        "|---|---|---|---|---|---|",
    ]
    for set_name in dict.fromkeys(r["set"] for r in rows):
        mine = [r for r in rows if r["set"] == set_name]
        egraph = next((r["seconds"] for r in mine if r["engine"] == "egraph"), None)
        for i, r in enumerate(mine):
            engine = BY_NAME[r["engine"]].label if r["engine"] in BY_NAME else r["engine"]
            ratio = f"{r['seconds'] / egraph:.2f}" if egraph else ""
            first = f"{set_name} ({r['expressions']})" if i == 0 else ""
            lines.append(
                f"| {first} | {engine} | {r['hits']}/{r['expressions']} | {r['total_cost']:.1f} | "
                f"{r['seconds']:.1f} | {ratio} |"
            )
    return "\n".join(lines) + "\n"


def blas_engines_table() -> str:
    """blas_test with no model, one engine a row (``experiments/results/engines/blas_test.jsonl``): defs
    at the best-known cost, total body cost, seconds, and defs where the engine is worse than plain A*
    (depth 10, 5000) and than pruned pseudo-beam (depth 99, 5000, both prunings)."""
    path = RESULTS / "engines" / "blas_test.jsonl"
    if not path.is_file():
        return "_No results yet: see docs/egraph.md, The default._\n"
    from experiments.blas_test.run import best_known

    known = best_known()
    runs: dict[tuple[Any, ...], dict[str, dict[str, Any]]] = {}
    for r in _jsonl(path):
        key = (r["search"], r["budget"], r["depth"], r.get("prune_commutes", False), r.get("prune_inlines", False))
        runs.setdefault(key, {})[r["def_"]] = r
    astar = runs.get(("astar", 5000, 10, False, False), {})
    pruned = runs.get(("pseudo-beam", 5000, 99, True, True), {})
    lines = [
        "| search | evaluations | depth | prunings | at best known | total body cost | seconds | worse than A\\* | worse than pruned pseudo-beam |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for (search, budget, depth, commutes, inlines), rows in runs.items():
        hits = sum(r["best_body_cost"] <= known[d].best + 1e-9 for d, r in rows.items() if d in known)

        def worse(than: dict[str, dict[str, Any]], rows: dict[str, dict[str, Any]] = rows) -> str:
            if not than:
                return ""
            return str(
                sum(r["best_body_cost"] > than[d]["best_body_cost"] + 1e-9 for d, r in rows.items() if d in than)
            )

        prunings = "both" if commutes and inlines else "commutes" if commutes else "inlines" if inlines else "none"
        lines.append(
            f"| {search} | {budget} | {depth} | {prunings} | {hits}/{len(rows)} | "
            f"{sum(r['best_body_cost'] for r in rows.values()):,.1f} | {sum(r['seconds'] for r in rows.values()):.1f} | "
            f"{worse(astar)} | {worse(pruned)} |"
        )
    return "\n".join(lines) + "\n"


def torch_table() -> str:
    """benchmarks/bench_torch.py's rows: the translation's seconds in fresh processes, then per MLP size
    the largest relative difference from torch, the search, the alloc cost and the compiled gradient's
    time against PyTorch eager's."""
    path = RESULTS / "torch" / "results.jsonl"
    if not path.is_file():
        return "_No results yet: run benchmarks/bench_torch.py._\n"
    rows = _jsonl(path)
    lines = []
    translations = [r for r in rows if r["kind"] == "translate_20_ops"]
    if translations:
        totals = sorted(r["total_s"] for r in translations)
        imports = sorted(r["import_torch_s"] for r in translations)
        lines += [
            f"Translating `twenty_ops` ({translations[0]['nodes']} nodes) in a fresh process, {len(totals)} times: "
            f"{totals[0]:.2f}-{totals[-1]:.2f} s, torch's import ({imports[0]:.2f}-{imports[-1]:.2f} s) included.",
            "",
        ]
    lines += [
        "| batch x inputs x hidden x outputs | largest relative difference | alloc cost as written | "
        "found with the model | found without (plain) | compiled gradient | PyTorch eager | compiled / eager |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        if r["kind"] != "mlp_gradient":
            continue
        size = "x".join(str(r["size"][k]) for k in ("batch", "inputs", "hidden", "outputs"))
        found = {
            name: f"{s['alloc_cost']:.3g} in {s['seconds']:.0f} s" + (" (kept)" if r.get("kept") == name else "")
            for name, s in r.get("searches", {}).items()
        }
        lines.append(
            f"| {size} | {max(r['errors'].values()):.1e} | {r['alloc_cost']['before']:.3g} | "
            f"{found.get('model', '')} | {found.get('plain', '')} | {format_seconds(r['compiled_grad_s'])} | "
            f"{format_seconds(r['eager_grad_s'])} | **{r['compiled_grad_s'] / r['eager_grad_s']:.2f}x** |"
        )
    return "\n".join(lines) + "\n"


def egglog_table() -> str:
    """benchmarks/bench_egglog.py's rows: per set and engine, e-nodes, seconds, their rate, the total
    tree cost, how many trees cost what the Python engine's does, and how many saturated."""
    path = RESULTS / "engines" / "egglog.jsonl"
    if not path.is_file():
        return "_No results yet: run benchmarks/bench_egglog.py (needs pip install egglog)._\n"
    rows = _jsonl(path)
    lines = [
        "| set | engine | expressions | e-nodes | seconds | e-nodes/s | total tree cost | equal | saturated |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for set_name in dict.fromkeys(r["set"] for r in rows):
        mine = [r for r in rows if r["set"] == set_name]
        python_cost = {r["index"]: r["cost"] for r in mine if r["engine"] == "python"}
        for engine in dict.fromkeys(r["engine"] for r in mine):
            rs = [r for r in mine if r["engine"] == engine]
            nodes, seconds = sum(r["enodes"] for r in rs), sum(r["seconds"] for r in rs)
            equal = sum(abs(r["cost"] - python_cost[r["index"]]) < 1e-9 for r in rs if r["index"] in python_cost)
            lines.append(
                f"| {set_name} | {engine} | {len(rs)} | {nodes:,} | {seconds:.2f} | {nodes / seconds:,.0f} | "
                f"{sum(r['cost'] for r in rs):.1f} | {equal}/{len(rs)} | {sum(r['saturated'] for r in rs)}/{len(rs)} |"
            )
    return "\n".join(lines) + "\n"


def default_programs_table() -> str:
    """benchmarks/bench_default_programs.py's rows: the default against plain A* and pruned pseudo-beam."""
    path = RESULTS / "engines" / "programs.jsonl"
    if not path.is_file():
        return "_No results yet: run benchmarks/bench_default_programs.py._\n"
    from ksbench.default_programs import summary

    return summary(list(ResultsFile(path, ("program", "def_", "engine"))))


def torch_brief_table() -> str:
    """The README's view of benchmarks/bench_torch.py's MLP rows: agreement with torch and the time."""
    path = RESULTS / "torch" / "results.jsonl"
    if not path.is_file():
        return "_No results yet: run benchmarks/bench_torch.py._\n"
    rows = _jsonl(path)
    lines = [
        "| MLP: batch x inputs x hidden x outputs | values and gradients vs torch | compiled gradient / PyTorch eager |",
        "|---|---|---|",
    ]
    for r in rows:
        if r["kind"] == "mlp_gradient":
            size = "x".join(str(r["size"][k]) for k in ("batch", "inputs", "hidden", "outputs"))
            ratio = r["compiled_grad_s"] / r["eager_grad_s"]
            lines.append(f"| {size} | {max(r['errors'].values()):.0e} relative | {ratio:.2f}x the time |")
    return "\n".join(lines) + "\n"


def gradients_table(file: str = "bench.jsonl") -> str:
    """benchmarks/bench_gradients.py's rows: per size, each variant's search, costs, time, speed-up over
    the program as written and time over numpy's; then Spearman's rho of each cost with the time."""
    from knossos.rank import spearman

    path = RESULTS / "gradients" / file
    if not path.is_file():
        return "_No results yet: run benchmarks/bench_gradients.py._\n"
    rows = _jsonl(path)
    lines = [
        "| size | variant | found by | alloc cost | reference cost | time per call | vs as written | / numpy |",
        "|---|---|---|---|---|---|---|---|",
    ]
    rho_lines = []
    for size in dict.fromkeys(r["size_label"] for r in rows):
        at = [r for r in rows if r["size_label"] == size]
        timed = {r["variant"]: r["min_s"] for r in at if not r.get("skipped") and r.get("min_s")}
        original, numpy = timed.get("original"), timed.get("numpy")
        for r in at:
            if r.get("kind") == "path":
                continue  # ranked below with the others, not listed
            t = timed.get(r["variant"])
            found = _found_by(r)
            cost = "-" if r.get("alloc_cost") is None else f"{r['alloc_cost']:.4g}"
            ref = "-" if r.get("cost") is None else f"{r['cost']:.4g}"
            speed = f"{original / t:.0f}x" if original and t else "-"
            over = f"{t / numpy:.2f}" if numpy and t else "-"
            lines.append(
                f"| {size} | {r['variant']} | {found} | {cost} | {ref} | {'skipped' if t is None else format_seconds(t)} | "
                f"{speed} | {over} |"
            )
        programs = [r for r in at if r["variant"] != "numpy" and r["variant"] in timed]
        rhos = []
        for key, name in (("cost", "reference"), ("alloc_cost", "alloc")):
            pairs = [(r[key], timed[r["variant"]]) for r in programs if r.get(key) is not None]
            if len(pairs) > 1:
                rhos.append(f"{name} {spearman([p[0] for p in pairs], [p[1] for p in pairs]):.3f}")
        rho_lines.append(f"{size}: {', '.join(rhos)} ({len(programs)} programs)")
    return (
        "\n".join(lines)
        + "\n\nSpearman's rho of cost and time over these and the points along the best path: "
        + "; ".join(rho_lines)
        + ".\n"
    )


def gradients_brief_table() -> str:
    """For the README: rev$conv1d's seconds per call at k = l = kn = n = N, as written, the best plain
    search's program, the gradients model's and numpy's (benchmarks/bench_gradients.py)."""
    path = RESULTS / "gradients" / "bench.jsonl"
    if not path.is_file():
        return "_No results yet: run benchmarks/bench_gradients.py._\n"
    rows = _jsonl(path)
    lines = ["| N | as written | best plain search | `--model gradients` | numpy |", "|---|---|---|---|---|"]
    for n in dict.fromkeys(r["n"] for r in rows if r.get("n")):
        at = {r["variant"]: r for r in rows if r.get("n") == n and not r.get("skipped")}
        plain = [r for r in at.values() if r.get("kind") == "search" and r["search"].get("model") in (None, "none")]
        best = min(plain, key=lambda r: r["min_s"], default=None)
        cells = [at.get("original"), best, at.get("model gradients"), at.get("numpy")]
        lines.append(f"| {n} | " + " | ".join("-" if c is None else format_seconds(c["min_s"]) for c in cells) + " |")
    return "\n".join(lines) + "\n"


def gradients_program_table() -> str:
    """The optimised rev$conv1d of experiments/results/gradients/ (optimize.py's -o and --json files):
    its rewrite sequence, runs of one rule folded, and the def."""
    folder = RESULTS / "gradients"
    report, program = folder / "rev_conv1d.json", folder / "rev_conv1d.ks"
    if not (report.is_file() and program.is_file()):
        return "_No results yet: run the optimize.py command above._\n"
    found = json.loads(report.read_text())
    runs: list[list[Any]] = []
    for step in found["steps"]:
        if runs and runs[-1][0] == step["rule"]:
            runs[-1][1] += 1
        else:
            runs.append([step["rule"], 1])
    sequence = ", ".join(rule if n == 1 else f"{rule} x{n}" for rule, n in runs)
    text = program.read_text()
    body = text[text.index("(def rev$conv1d") :].rstrip()
    bench = ["| n | as written | ksc-style simplifier | optimised | as written / optimised | verified, agrees |"]
    bench.append("|---|---|---|---|---|---|")
    for n in dict.fromkeys(r["size"]["n"] for r in found.get("bench", [])):
        at = {r["variant"]: r for r in found["bench"] if r["size"]["n"] == n}
        o, b, opt = at["original"], at["baseline"], at["optimised"]
        checks = all(r["verified"] and r["agrees"] for r in at.values())
        bench.append(
            f"| {n} | {format_seconds(o['min_s'])} | {format_seconds(b['min_s'])} | {format_seconds(opt['min_s'])} | "
            f"{o['min_s'] / opt['min_s']:.0f}x | {'yes' if checks else 'NO'} |"
        )
    return (
        "\n".join(bench)
        + "\n\n"
        + (
            f"{len(found['steps'])} rewrites, cost ({found['cost_model']} model) {found['start_cost']:.6g} to "
            f"{found['best_cost']:.6g}, {found['evaluations']} evaluations, {found['seconds']:.1f} s: {sequence}.\n\n"
            f"```lisp\n{body}\n```\n"
        )
    )


def _found_by(row: dict[str, Any]) -> str:
    search = row.get("search")
    if not isinstance(search, dict):
        names = {"original": "as written", "baseline": "ksc-style simplifier", "numpy": "numpy"}
        return names.get(row["variant"], str(row.get("kind", "")))
    model = "" if search.get("model") in (None, "none") else f"`--model {search['model']}`, "
    cost = search.get("cost", "reference")
    return (
        f"{model}{search['search']}, {cost} cost, {search['search_seconds']:.0f} s, {search['evaluations']} evaluations"
    )


def training_table(name: str) -> str:
    """``python -m gnn.report`` of the committed training runs ``TRAINING_RUNS[name]``: per epoch and
    run, the training loss, the total best test cost, the test expressions at their best-known cost
    and the mean ratio to the start cost."""
    from gnn.report import table

    runs = [RESULTS / "training" / run for run in TRAINING_RUNS[name]]
    if not all((run / "metrics.jsonl").is_file() for run in runs):
        return "_No results yet: run the training runs listed above._\n"
    return "```text\n" + table(runs) + "\n```\n"


TABLES: dict[str, Callable[[], str]] = {figure: functools.partial(curve_table, figure) for figure in CURVES}
TABLES["fig7_walltime"] = walltime_table
TABLES["default_model"] = default_model_table
TABLES["default_model_training"] = default_model_training_table
TABLES["default_model_search"] = default_model_search_table
TABLES["default_model_brief"] = default_model_brief_table
TABLES["blas_test"] = blas_test_table
TABLES["egraph_baseline"] = egraph_table
TABLES["engines"] = engines_table
TABLES["blas_engines"] = blas_engines_table
TABLES["torch"] = torch_table
TABLES["torch_brief"] = torch_brief_table
TABLES["default_programs"] = default_programs_table
TABLES["egglog"] = egglog_table
TABLES["gradients_bench"] = gradients_table
TABLES["gradients_program"] = gradients_program_table
TABLES["gradients_brief"] = gradients_brief_table
TABLES.update({name: functools.partial(training_table, name) for name in TRAINING_RUNS})


def rewrite(text: str) -> str:
    """``text`` with every marked table replaced by the current one."""

    def table(m: re.Match[str]) -> str:
        make = TABLES.get(m["figure"])
        if make is None:
            raise SystemExit(f"error: no table named {m['figure']} (known: {', '.join(TABLES)})")
        return m.group(1) + make() + m.group(4)

    return MARKER.sub(table, text)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--write", action="store_true", help="rewrite the tables in every file that holds them")
    args = ap.parse_args()
    if args.write:
        for readme in READMES:
            text = readme.read_text()
            new = rewrite(text)
            if new != text:
                atomic_write_text(readme, new)
            print(f"{readme}: tables up to date")
        return
    for figure, make in TABLES.items():
        print(f"## {figure}\n\n{make()}")


if __name__ == "__main__":
    main()
