"""Search with candidate value networks (one pass's weights, averaged weights, or an ensemble) at one budget.

Run:  python experiments/default_model/candidates.py CANDIDATE [CANDIDATE ...] [--on train_tail|validation|heldout]
                                                      [--scales 0.2,0.5] [--budget 300] [--data runs/offline/tree5000.jsonl.gz]
                                                      [--search astar|lazy-astar] [--batches 8]

A candidate is a weights file, ``A+B+C`` (their weights averaged, as ``python -m training.export
--average-with`` does) or ``A,B,C`` (an ensemble: the mean of the networks' values).  Each is
searched with A* (binding_simplify_rules, depth 10), eager or lazy (``--search lazy-astar``, with each of
``--batches``), on the last 200 of generated_train, which the offline fits never fit (``--on
train_tail``; the best cost is the lowest any search of ``--data`` reached), on the validation set
(``--on validation``: total cost only, it has no best costs), or on the held-out set (``--on
heldout``; the best cost is the set's, lowered by any search of benchmarks/bench_default_model.py,
as that benchmark counts hits).  Rows go to ``experiments/results/default_model/candidates.jsonl``
(a rerun skips those there).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
from tqdm import tqdm

from app.models import value_scale
from experiments.default_model.dataset import written_lines
from gnn.model_file import network_from
from gnn.networks import value_function
from knossos.cli import whole_number
from knossos.expr import Expr
from ksbench.best_known import best_known
from ksbench.results import RESULTS, ResultsFile
from ksdata.loader import DataSource, Target, load_targets
from search.limits import MAX_BUDGET
from search.plan import Plan, run
from search.settings import SearchSettings
from search.spec import LAZY_BATCH
from search.value import ValueFunction
from training.checkpoint import average_weights, load_checkpoint

ROOT = Path(__file__).resolve().parents[2]

OUT = RESULTS / "default_model" / "candidates.jsonl"
BENCHMARK = RESULTS / "default_model" / "searches.jsonl"
RULES, DEPTH = "binding_simplify_rules", 10
#: What names a row ("batch": lazy-astar's only).
KEY = ("candidate", "on", "scale", "budget", "search", "batch")


class Ensemble:
    """The mean of several value functions' values."""

    def __init__(self, members: Sequence[Any]) -> None:
        self.members = list(members)

    def values(self, exprs: Sequence[Expr], depth: int) -> np.ndarray:
        out: np.ndarray = np.mean([m.values(exprs, depth) for m in self.members], axis=0)
        return out

    def clear(self) -> None:
        for m in self.members:
            if hasattr(m, "clear"):
                m.clear()


def candidate_value(spec: str, scale: float) -> ValueFunction:
    """The value function of a candidate (see the module docstring) at ``scale``."""
    members = []
    for part in spec.split(","):
        paths = [Path(p) for p in part.split("+")]
        missing = [str(p) for p in paths if not p.is_file()]
        if missing:
            raise SystemExit(f"candidates.py: error: no such file: {missing[0]}")
        state = average_weights(paths) if len(paths) > 1 else load_checkpoint(paths[0])
        network = network_from(state, str(paths[0]))
        network.eval()
        members.append(value_function(network, scale=scale))
    return members[0] if len(members) == 1 else Ensemble(members)


def train_tail(data: list[Path]) -> list[Target]:
    costs: dict[str, float] = {}
    for path in data:
        for line in written_lines(path)[0]:
            row = json.loads(line)
            costs[row["name"]] = min(costs.get(row["name"], float("inf")), float(row["best_cost"]))
    tail = load_targets(DataSource(set="generated_train"), "generated_train")[-200:]
    return [dataclasses.replace(t, best_known=costs.get(t.name)) for t in tail]


def heldout() -> list[Target]:
    targets = load_targets(DataSource(set="generated_heldout"), "generated_heldout")
    rows = [json.loads(line) for line in BENCHMARK.read_text().splitlines()] if BENCHMARK.is_file() else []
    known = best_known([r for r in rows if r["set"] == "generated_heldout"])  # as the benchmark counts hits
    return [
        dataclasses.replace(t, best_known=known.get(("generated_heldout", i), t.best_known))
        for i, t in enumerate(targets)
    ]


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("candidates", nargs="+")
    ap.add_argument("--on", choices=["train_tail", "validation", "heldout"], default="train_tail")
    ap.add_argument("--scales", default="0.2,0.5", help="comma-separated value scales")
    ap.add_argument("--budget", type=whole_number(MAX_BUDGET), default=300)
    ap.add_argument("--data", type=Path, nargs="+", default=[ROOT / "runs" / "offline" / "tree5000.jsonl.gz"])
    ap.add_argument("--search", choices=["astar", "lazy-astar"], default="astar")
    ap.add_argument("--batches", default="8", help="lazy-astar: comma-separated batches of evaluation")
    args = ap.parse_args(argv)
    scales = [value_scale(s) for s in args.scales.split(",")]
    batches = [whole_number()(b) for b in args.batches.split(",")] if args.search == "lazy-astar" else [None]
    torch.set_num_threads(1)
    if args.on == "train_tail":
        missing = [str(p) for p in args.data if not p.is_file()]
        if missing:
            ap.error(f"no such file: {missing[0]}")
        targets = train_tail(args.data)
    elif args.on == "validation":
        targets = load_targets(DataSource(set="generated_validation"), "generated_validation")
    else:
        targets = heldout()
    results = ResultsFile(OUT, KEY)
    for spec, scale, batch in [(c, s, b) for c in args.candidates for s in scales for b in batches]:
        key = {"candidate": spec, "on": args.on, "scale": scale, "budget": args.budget, "search": args.search}
        key |= {"batch": batch} if batch is not None else {}
        if results.has(**key):
            continue
        value = candidate_value(spec, scale)
        search = SearchSettings(algorithm=args.search, depth=DEPTH, budget=args.budget)
        plan = Plan(rules=RULES, search=search, lazy_batch=LAZY_BATCH if batch is None else batch)
        costs, started = [], time.perf_counter()
        for t in tqdm(targets, desc=f"{spec} @ {scale:g}", unit="expr", file=sys.stderr):
            result = run(t.expr, plan, value)
            costs.append(result.best_cost)
            if hasattr(value, "clear"):
                value.clear()
        hits = sum(k is not None and c <= k + 1e-9 for c, k in zip(costs, [t.best_known for t in targets]))
        row = key | {
            "expressions": len(targets),
            "hits": int(hits),
            "total_cost": round(sum(costs), 4),
            "seconds": round(time.perf_counter() - started, 2),
        }
        results.add(row)
        print(json.dumps(row), file=sys.stderr)


if __name__ == "__main__":
    main()
