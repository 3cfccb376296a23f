"""default_model in the registry: how the shipped default model was chosen and what it is worth (the
tables of docs/default_model.md and the README), and `python -m experiments default_model plot`."""

from __future__ import annotations

import json

from experiments.default_model.passes import PassMetrics
from experiments.figures import Figure
from experiments.tables import jsonl, search_name
from ksbench.results import RESULTS


def plot(argv: list[str]) -> None:
    from experiments.default_model.plot import main

    main(argv)


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
    from gnn.model_file import DEFAULT_MODEL, search_settings_of
    from training.checkpoint import load_checkpoint

    search = search_settings_of(load_checkpoint(DEFAULT_MODEL)).algorithm
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
    rows = jsonl(path)
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


FIGURE = Figure(
    "default_model",
    "the shipped default model: its offline fit, its choice, and plain A* against it",
    {
        "default_model": default_model_table,
        "default_model_training": default_model_training_table,
        "default_model_search": default_model_search_table,
        "default_model_brief": default_model_brief_table,
    },
    plot=plot,
)
