"""Choose the shipped model of a training run on the validation set: which weights, and which value scale.

Run:  python experiments/default_model/choose.py runs/default_model --average 11-20 21-30 [--epochs 20 30]
                                                 [--scales 0.2,0.3,0.5] [--export gnn/models/default.pt]

Each candidate (the weights of one epoch, or the average of a range of epochs' weights) is searched
with at every value scale: A* at 300 evaluations on the generated validation set (never the held-out
set), binding_simplify_rules, depth 10.  Rows go to ``experiments/results/default_model/selection.jsonl``
as they are measured (a rerun skips them), with plain A* at 300 and 5000 evaluations for reference
(rows of candidate ``plain A*``); the candidate and scale with the lowest total cost win, and
``--export`` writes them as a model file.  The run needs ``training.keep_weights: true``.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

from tqdm import tqdm

from gnn.model_file import value_function_from_file
from knossos.perf import fewer_gc_pauses
from ksbench.results import RESULTS, ResultsFile
from ksdata.loader import DataSource, load_targets
from search.plan import Plan, run
from training.checkpoint import export_model
from training.trainer import weights_path

RULES, DEPTH, BUDGET, SET = "binding_simplify_rules", 10, 300, "generated_validation"
PLAIN = "plain A*"
PLAIN_BUDGETS = (300, 5000)


def epoch_range(text: str) -> list[int]:
    first, _, last = text.partition("-")
    return list(range(int(first), int(last or first) + 1))


def candidates(run: Path, epochs: list[int], averages: list[str]) -> dict[str, list[Path]]:
    out = {f"epoch {e}": [weights_path(run, e)] for e in epochs}
    for text in averages:
        out[f"average {text}"] = [weights_path(run, e) for e in epoch_range(text)]
    for name, paths in out.items():
        missing = [p for p in paths if not p.is_file()]
        if missing:
            raise SystemExit(f"choose.py: error: {name}: no weights {missing[0]} (train with training.keep_weights)")
    return out


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("run", type=Path)
    ap.add_argument("--epochs", type=int, nargs="*", default=[])
    ap.add_argument("--average", nargs="*", default=[], metavar="FIRST-LAST")
    ap.add_argument("--scales", default="0.2,0.3,0.5")
    ap.add_argument("--export", type=Path, help="write the winner here")
    ap.add_argument("--out", type=Path, default=RESULTS / "default_model" / "selection.jsonl")
    args = ap.parse_args(argv)
    scales = [float(s) for s in args.scales.split(",")]
    models = candidates(args.run, args.epochs, args.average)
    results = ResultsFile(args.out, ("run", "candidate", "scale", "budget"))
    targets = load_targets(DataSource(set=SET), SET)
    plain = Plan(rules=RULES).overridden(algorithm="astar", depth=DEPTH)
    with fewer_gc_pauses(), tempfile.TemporaryDirectory() as tmp:
        for budget in PLAIN_BUDGETS:
            if not results.has(run=PLAIN, candidate=PLAIN, scale=0.0, budget=budget):
                costs = [run(t.expr, plain.overridden(budget=budget)).best_cost for t in targets]
                row = {"run": PLAIN, "candidate": PLAIN, "scale": 0.0, "budget": budget}
                results.add({**row, "total_cost": round(sum(costs), 4)})
        for name, paths in models.items():
            todo = [s for s in scales if not results.has(run=str(args.run), candidate=name, scale=s, budget=BUDGET)]
            if not todo:
                continue
            model = Path(tmp) / "model.pt"
            export_model(paths, model)
            for scale in todo:
                value = value_function_from_file(model, scale=scale)
                costs = [
                    run(t.expr, plain.overridden(budget=BUDGET), value).best_cost
                    for t in tqdm(targets, desc=f"{name} x {scale}", unit="expr", file=sys.stderr)
                ]
                results.add(
                    {"run": str(args.run), "candidate": name, "scale": scale, "total_cost": round(sum(costs), 4)}
                )
    rows = [r for r in results if r["run"] == str(args.run) and r["candidate"] in models and r["scale"] in scales]
    for r in results:
        if r["candidate"] == PLAIN:
            print(f"{PLAIN:<20} {r['budget']} evaluations: validation total {r['total_cost']:.1f}")
    for r in sorted(rows, key=lambda r: r["total_cost"]):
        print(f"{r['candidate']:<20} scale {r['scale']:<5g} validation total {r['total_cost']:.1f}")
    best = min(rows, key=lambda r: r["total_cost"])
    if args.export:
        export_model(models[best["candidate"]], args.export, best["scale"])
        print(f"wrote {args.export}: {best['candidate']}, value scale {best['scale']:g}")


if __name__ == "__main__":
    main()
