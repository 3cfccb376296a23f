"""Plot the default model's training and the benchmark against plain A*, from the committed results.

Run:  python experiments/default_model/plot.py [--out experiments/results/default_model/default_model.png]

Left: the validation set's total cost at 300 evaluations after each pass of the default model's
offline fit (``offline_fitA_metrics.jsonl``, value scales 0.2 and 0.5), with plain A* at 300 and
5000 evaluations and the pass that ships.  Right: held-out expressions at the best known
cost against seconds of search, for every benchmarked run (plain A*, each model, eager or lazy) at 300, 1000 and 5000
evaluations (benchmarks/bench_default_model.py's summary).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from experiments.common import read_rows
from experiments.default_model.figure import run_name
from experiments.default_model.passes import PassMetrics
from ksbench.results import RESULTS

FOLDER = RESULTS / "default_model"


def chosen_pass() -> int:
    """The pass of the offline fit whose weights the shipped default model holds."""
    from gnn.model_file import DEFAULT_MODEL
    from training.checkpoint import load_checkpoint

    return int(load_checkpoint(DEFAULT_MODEL)["epoch"])


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--out", type=Path, default=FOLDER / "default_model.png")
    args = ap.parse_args(argv)
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fit = [PassMetrics.from_json(r) for r in read_rows(FOLDER / "offline_fitA_metrics.jsonl", "plot.py")]
    selection = read_rows(FOLDER / "selection.jsonl", "plot.py")
    summary_path = FOLDER / "summary.json"
    if not summary_path.is_file():
        raise SystemExit(f"plot.py: error: no {summary_path} (run benchmarks/bench_default_model.py)")
    summary = json.loads(summary_path.read_text())

    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4.2))
    passes = [p.epoch for p in fit]
    for scale, style in (("0.2", "o-"), ("0.5", "^-")):
        left.plot(passes, [p.validation[f"validation {scale}"].total_cost for p in fit], style, label=f"scale {scale}")
    for r in (r for r in selection if r["candidate"] == "plain A*"):
        color = "grey" if r["budget"] == 300 else "black"
        left.axhline(r["total_cost"], ls="--", color=color, label=f"plain A* @ {r['budget']}")
    chosen = chosen_pass()
    left.axvline(chosen, ls=":", color="tab:green", label=f"shipped: pass {chosen}")
    left.set(xlabel="pass over the offline targets", ylabel="validation total cost (300 evaluations)", title="fitting")
    left.legend(fontsize=8)

    runs = list(dict.fromkeys((r["model"], r["search"]) for r in summary["searches"]))
    for (model, search), style in zip(runs, ("s--", "o-", "^-", "v--", "d-", "x-"), strict=False):
        rows = [
            r
            for r in summary["searches"]
            if r["set"] == "generated_heldout" and (r["model"], r["search"]) == (model, search)
        ]
        right.plot(
            [r["seconds"] for r in rows],
            [r["hits"] for r in rows],
            style,
            label=run_name(model, search).replace("`", ""),
        )
        for r in rows:
            right.annotate(
                str(r["budget"]), (r["seconds"], r["hits"]), fontsize=7, xytext=(3, -8), textcoords="offset points"
            )
    right.set(
        xscale="log",
        xlabel="seconds of search (120 expressions)",
        ylabel="at the best known cost (of 120)",
        title="held-out set",
    )
    right.legend(fontsize=8)
    fig.tight_layout()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(args.out, dpi=110)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
