"""Fit a value network to the targets of many searches (files of dataset.py), pass by pass, choosing on validation.

Run:  python experiments/default_model/fit_offline.py RUN DATA.jsonl.gz [DATA2 ...] [--config configs/default_offline.yaml]
                                                      [--passes 20] [--cosine] [--init W] [--scales 0.2,0.4,0.7,1.0] [--validation 300]

The files' samples are merged into one best target per expression and number of steps left (as
``training.best_targets`` does online), a twentieth of the expressions is held out for the loss,
and the network of ``--config`` (its model and training.lr / batch_size) is fitted one pass at a
time.  After each pass its weights go to RUN/weights/epoch_NNN.pt (so choose.py and training.export take
them), and A* at ``--validation`` evaluations searches the generated validation set with it at each
value scale; RUN/metrics.jsonl gets a line per pass.  RUN/checkpoint.pt resumes an interrupted run.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from tqdm import tqdm

from app.models import value_scale
from experiments.default_model.dataset import written_lines
from experiments.default_model.passes import PassMetrics, Validation
from gnn.model_file import save_model_file
from gnn.networks import build_network, value_function
from gnn.sample import Sample
from knossos.atomic import atomic_write_text
from knossos.cli import whole_number
from knossos.errors import KsError
from knossos.expr import Expr
from knossos.parser import parse_expr
from knossos.perf import fewer_gc_pauses
from ksdata.loader import DataSource, Target, load_targets
from search.limits import MAX_BUDGET
from search.plan import Plan, run
from training.checkpoint import load_checkpoint
from training.config import load_config
from training.fit import Fitter
from training.metrics import write_metrics
from training.ranking import SiblingGroup
from training.trainer import BestTargets, weights_path

ROOT = Path(__file__).resolve().parents[2]

RULES, DEPTH, VALIDATION = "binding_simplify_rules", 10, "generated_validation"
#: The run's file saying what it was fitted to (export_offline.py puts it in the model file).
PROVENANCE = "provenance.json"


@dataclass
class Data:
    """What the data files hold, read in one pass over them."""

    #: One sample per expression not excluded, with its best targets (see :func:`read_data`).
    samples: list[Sample]
    #: The lowest cost any search reached, per expression name (excluded ones too).
    best_costs: dict[str, float]
    #: Per file: its set, the value function and budget of its searches, and how many there are.
    files: list[dict[str, Any]]
    #: The sibling groups along the searches' best paths (dataset.py --groups), where some child is worse.
    groups: list[SiblingGroup] = dataclasses.field(default_factory=list)


def read_data(paths: list[Path], exclude: set[str]) -> Data:
    """The files' samples, merged to the best target per expression and steps left: one sample per
    expression, for the most steps it was seen with and for as many fewer steps as any search
    looked below it (a state only passed over is fitted for its own steps left alone, as online
    training does: its zero target says only that no search looked further).  Searches of
    ``exclude``d expressions count only towards ``best_costs``."""
    best = BestTargets(DEPTH)  # its horizon is the most steps left each expression was seen with
    shorter: dict[Expr, int] = {}  # expression -> the most shorter columns any of its samples had
    costs: dict[str, float] = {}
    files = []
    groups: list[SiblingGroup] = []
    for path in paths:
        lines = written_lines(path)[0]
        first = json.loads(lines[0]) if lines else {}
        set_name = str(first.get("name", "")).partition("[")[0]
        files.append(
            {"file": path.name, "model": first.get("model"), "budget": first.get("budget"), "set": set_name}
            | {"searches": len(lines)}
        )
        for line in tqdm(lines, desc=f"reading {path.name}", unit="search", file=sys.stderr):
            row = json.loads(line)
            costs[row["name"]] = min(costs.get(row["name"], math.inf), float(row["best_cost"]))
            if row["name"] in exclude:
                continue
            samples = [Sample(parse_expr(e)[0], int(t), float(v), tuple(sh)) for e, t, v, sh in row["samples"]]
            best.merge(samples)
            for s in samples:
                shorter[s.expr] = max(shorter.get(s.expr, 0), len(s.shorter))
            for parent, t, kids in row.get("groups", []):
                children = tuple(parse_expr(c)[0] for c, _ in kids)
                group = SiblingGroup(parse_expr(parent)[0], int(t), children, tuple(float(v) for _, v in kids))
                if group.informative():
                    groups.append(group)
    out = []
    for e, row in best.table.items():
        t, k = best.horizon[e], shorter[e]
        out.append(Sample(e, t, float(row[t]), tuple(float(row[i]) for i in range(1, min(k, t - 1) + 1))))
    return Data(out, costs, files, groups)


def validate(network: Any, scales: list[float], budget: int, sets: dict[str, list[Target]]) -> dict[str, Validation]:
    """Per value scale and validation set: total best cost and hits (at the best known cost) of A*."""
    plan = Plan(rules=RULES).overridden(algorithm="astar", depth=DEPTH, budget=budget)
    out: dict[str, Validation] = {}
    for scale in scales:
        value = value_function(network, scale=scale)
        for name, targets in sets.items():
            costs = []
            for t in targets:
                costs.append(run(t.expr, plan, value).best_cost)
                if hasattr(value, "clear"):
                    value.clear()
            known = [(c, t.best_known) for c, t in zip(costs, targets, strict=True) if t.best_known is not None]
            hits = sum(c <= k + 1e-9 for c, k in known)
            out[f"{name} {scale:g}"] = Validation(total_cost=round(sum(costs), 4), hits=int(hits))
    return out


def value_scales(text: str) -> list[float]:
    """An argparse type: comma-separated value scales, each one search accepts."""
    return [value_scale(part) for part in text.split(",")]


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("run", type=Path)
    ap.add_argument("data", type=Path, nargs="+")
    ap.add_argument("--config", default=str(ROOT / "configs" / "default_offline.yaml"))
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="override a config key")
    ap.add_argument("--passes", type=whole_number(), default=20)
    ap.add_argument(
        "--cosine", action="store_true", help="anneal the learning rate to zero over --passes (cosine), pass by pass"
    )
    ap.add_argument("--init", type=Path, help="start from these weights (a weights file of an earlier run)")
    ap.add_argument("--scales", type=value_scales, default="0.2,0.4,0.7,1.0")
    ap.add_argument(
        "--validation", type=whole_number(MAX_BUDGET), default=300, help="A* evaluations of each validation search"
    )
    ap.add_argument("--validation-count", type=whole_number(), help="only the first N of the validation set")
    ap.add_argument(
        "--hold-out", type=whole_number(), default=200, help="the last N of generated_train: not fitted, validated on"
    )
    ap.add_argument(
        "--rank-weight",
        type=float,
        default=0.0,
        help="add this times the sibling ranking loss (training/ranking.py); a pass is then one over the groups",
    )
    ap.add_argument("--rank-temperature", type=float, default=1.0, help="the ranking loss's softmax temperature")
    ap.add_argument("--lr", type=float, help="the learning rate (default: the config's training.lr)")
    args = ap.parse_args(argv)
    if args.rank_weight < 0 or args.rank_temperature <= 0:
        ap.error("--rank-weight must be at least 0 and --rank-temperature above 0")
    if args.lr is not None and args.lr <= 0:
        ap.error("--lr must be above 0")
    missing = [str(p) for p in [*args.data, *([args.init] if args.init else [])] if not p.is_file()]
    if missing:
        ap.error(f"no such file: {missing[0]}")
    try:
        config = load_config(args.config, args.set)
    except KsError as err:
        raise SystemExit(err.render("fit_offline.py")) from None
    scales = args.scales
    torch.set_num_threads(1)
    torch.manual_seed(config.training.seed)
    rng = np.random.default_rng(config.training.seed)

    # never fit what validation or the held-out benchmark searches
    exclude = {
        t.name
        for s in ("generated_validation", "generated_heldout", "bindgen_test")
        for t in load_targets(DataSource(set=s), s)
    }
    tail = load_targets(DataSource(set="generated_train"), "generated_train")[-args.hold_out :]
    exclude |= {t.name for t in tail}
    ckpt = args.run / "checkpoint.pt"
    state = load_checkpoint(ckpt) if ckpt.is_file() else None
    fitted_to = {"data": [p.name for p in args.data], "init": None if args.init is None else str(args.init)}
    if args.lr is not None:
        fitted_to["lr"] = args.lr
    if args.rank_weight > 0:
        fitted_to |= {"rank_weight": args.rank_weight, "rank_temperature": args.rank_temperature}
    if state is not None and state.get("fitted_to") != fitted_to:  # checked before the long read
        raise SystemExit(f"fit_offline.py: error: {ckpt} was fitted to other data; resume with the same files")
    with fewer_gc_pauses():
        data = read_data(args.data, exclude)
    samples = [s for s in data.samples if s.steps_left > 0]
    if len(samples) < 2:
        raise SystemExit("fit_offline.py: error: the data files hold no samples to fit (outside the held-out sets)")
    held_exprs = [dataclasses.replace(t, best_known=data.best_costs.get(t.name)) for t in tail]
    validation = load_targets(DataSource(set=VALIDATION), VALIDATION)[: args.validation_count]
    sets = {"validation": validation, "train_tail": held_exprs}
    order = rng.permutation(len(samples))
    held = max(1, len(samples) // 20)
    check = [samples[i] for i in order[:held]]
    train = [samples[i] for i in order[held:]]
    print(f"{len(samples)} expressions: {len(train)} fitted, {len(check)} held out for the loss", file=sys.stderr)
    if args.rank_weight > 0 and not data.groups:
        raise SystemExit(
            "fit_offline.py: error: --rank-weight needs data files with sibling groups (dataset.py --groups)"
        )
    lr = config.training.lr if args.lr is None else args.lr

    network = build_network(config.model)
    fitter = Fitter(network, lr=lr, batch_size=config.training.batch_size)
    done = 0
    history: list[PassMetrics] = []
    if state is not None:
        network.load_state_dict(state["model"])
        fitter.optimizer.load_state_dict(state["optimizer"])
        rng.bit_generator.state = state["numpy_rng"]
        torch.set_rng_state(state["torch_rng"])
        done = int(state["epoch"])
        history = [PassMetrics.from_json(m) for m in state["history"]]
    args.run.mkdir(parents=True, exist_ok=True)
    made_of = {**fitted_to, "data": data.files, "passes": args.passes, "cosine": args.cosine, "lr": lr}
    if args.rank_weight > 0:
        made_of |= {"rank_weight": args.rank_weight, "rank_temperature": args.rank_temperature}
    atomic_write_text(args.run / PROVENANCE, json.dumps(made_of) + "\n")
    saved_config = config.to_dict()
    if args.init is not None and done == 0:
        network.load_state_dict(load_checkpoint(args.init)["model"])
    for n in range(done + 1, args.passes + 1):
        if args.cosine:  # late passes move the weights less: one pass's noise is what validation sees
            for group in fitter.optimizer.param_groups:
                group["lr"] = lr * 0.5 * (1 + math.cos(math.pi * (n - 1) / args.passes))
        started = time.perf_counter()
        with fewer_gc_pauses():
            rank_loss = None
            if args.rank_weight > 0:
                loss, rank_loss = fitter.fit_ranked(train, data.groups, rng, args.rank_weight, args.rank_temperature)
            else:
                loss = fitter.fit(train, 1, rng)
            held_out = fitter.held_out_loss(check)
            network.eval()
            validated = validate(network, scales, args.validation, sets)
        metrics = PassMetrics(
            epoch=n,
            loss=loss,
            held_out_loss=held_out,
            samples=len(train),
            rank_loss=rank_loss,
            groups=None if rank_loss is None else len(data.groups),
            validation=validated,
            seconds=round(time.perf_counter() - started, 1),
        )
        history.append(metrics)
        kept = {
            "model": network.state_dict(),
            "model_config": dataclasses.asdict(network.config),
            "config": saved_config,
            "epoch": n,
        }
        weights_path(args.run, n).parent.mkdir(parents=True, exist_ok=True)
        save_model_file(weights_path(args.run, n), kept)
        save_model_file(
            ckpt,
            {
                **kept,
                "optimizer": fitter.optimizer.state_dict(),
                "numpy_rng": rng.bit_generator.state,
                "torch_rng": torch.get_rng_state(),
                "history": [m.to_json() for m in history],
                "fitted_to": fitted_to,
            },
        )
        write_metrics(args.run, history)
        print(json.dumps(metrics.to_json()), file=sys.stderr)


if __name__ == "__main__":
    main()
