"""Plot the default model's training and the benchmark against plain A*, from the committed results.

Run:  python experiments/default_model/plot.py [--out experiments/results/default_model/default_model.png]

Left: the validation set's total cost at 300 evaluations per epoch of the training runs (value scale
0.4) of the default model and of the GGNN (``ggnn_training_metrics.jsonl``, when there), with plain
A* at 300 and 5000 evaluations and the chosen model.  Right: held-out expressions at the best known
cost against seconds of search, for plain A* and every benchmarked model at 300, 1000 and 5000
evaluations (benchmarks/bench_default_model.py's summary).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from experiments.common import RESULTS, read_rows  # noqa: E402

FOLDER = RESULTS / "default_model"


def chosen_from() -> str:
    """The training run the shipped default model's weights came from (as choose.py names runs)."""
    from gnn.checkpoint import DEFAULT_MODEL, load_checkpoint

    weights = Path(load_checkpoint(DEFAULT_MODEL)["averaged"][0])  # RUN/weights/epoch_NNN.pt
    return str(weights.parents[1])


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--out", type=Path, default=FOLDER / "default_model.png")
    args = ap.parse_args(argv)
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    runs = {"default": FOLDER / "training_metrics.jsonl", "ggnn": FOLDER / "ggnn_training_metrics.jsonl"}
    training = {
        name: [r for r in read_rows(path, "plot.py") if "test" in r]
        for name, path in runs.items()
        if name == "default" or path.is_file()
    }
    selection = read_rows(FOLDER / "selection.jsonl", "plot.py")
    summary_path = FOLDER / "summary.json"
    if not summary_path.is_file():
        raise SystemExit(f"plot.py: error: no {summary_path} (run benchmarks/bench_default_model.py)")
    summary = json.loads(summary_path.read_text())

    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4.2))
    for name, rows in training.items():
        epochs, totals = [r["epoch"] for r in rows], [r["test"]["total_cost"] for r in rows]
        label = "default: tree" if name == "default" else "GGNN"
        left.plot(epochs, totals, "o-" if name == "default" else "^-", label=f"{label} (scale 0.4)")
    for r in (r for r in selection if r["candidate"] == "plain A*"):
        color = "grey" if r["budget"] == 300 else "black"
        left.axhline(r["total_cost"], ls="--", color=color, label=f"plain A* @ {r['budget']}")
    run = chosen_from()
    best = min((r for r in selection if r["run"] == run), key=lambda r: r["total_cost"])
    left.axhline(
        best["total_cost"], ls=":", color="tab:green", label=f"chosen: {best['candidate']}, scale {best['scale']:g}"
    )
    left.set(xlabel="epoch", ylabel="validation total cost (300 evaluations)", title="training")
    left.legend(fontsize=8)

    models = list(dict.fromkeys(r["model"] for r in summary["searches"]))
    for model, style in zip(models, ("s--", "o-", "^-", "v-", "d-"), strict=False):
        rows = [r for r in summary["searches"] if r["set"] == "generated_heldout" and r["model"] == model]
        right.plot(
            [r["seconds"] for r in rows],
            [r["hits"] for r in rows],
            style,
            label="plain A*" if model == "none" else f"--model {model}",
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
