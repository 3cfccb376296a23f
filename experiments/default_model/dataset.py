"""Value targets of many searches, written once and fitted offline: a training set for a value network.

Run:  python experiments/default_model/dataset.py OUT.jsonl.gz [--set generated_train] [--model none]
                                                  [--budget 5000] [--samples 600] [--workers N]

Each expression of ``--set`` is searched (A*, binding_simplify_rules, depth 10) with ``--model`` and
its search's targets (``explored_and_reached``, as training/trainer.py fits them; at most ``--samples``
per search, drawn with the expression's index as seed) are appended to OUT as one line per search:
``{"index", "name", "budget", "model", "best_cost", "samples": [[expr, steps_left, target, [shorter]]]}``.
Searches run in ``--workers`` processes; a rerun skips the indices OUT already has, so an interrupted
run resumes.  experiments/default_model/fit_offline.py fits a network to such files.
"""

from __future__ import annotations

import argparse
import gzip
import json
import multiprocessing
import sys
import time
import zlib
from pathlib import Path
from typing import Any, BinaryIO

from tqdm import tqdm

RULES, DEPTH = "binding_simplify_rules", 10

#: What every search needs, set in the parent before the workers fork from it (so a bad --set or
#: --model is one error there, and the model is loaded once, not once per worker).
_worker: dict[str, Any] = {}


def _prepare(set_name: str, model: str, budget: int, samples: int, groups: bool = False) -> None:
    import numpy as np

    from app.models import load_value_function
    from ksdata.loader import DataSource, load_targets
    from search.plan import Plan

    _worker.update(
        targets=load_targets(DataSource(set=set_name), "--set"),
        plan=Plan(rules=RULES).overridden(algorithm="astar", depth=DEPTH, budget=budget),
        value=load_value_function(model),
        budget=budget,
        samples=samples,
        groups=groups,
        model=model,
        np=np,
    )


def _search(index: int) -> str:
    from knossos.perf import fewer_gc_pauses
    from knossos.printer import format_expr
    from search.plan import run
    from training.trainer import samples_of

    w = _worker
    target = w["targets"][index]
    started = time.perf_counter()
    with fewer_gc_pauses():
        result = run(target.expr, w["plan"], w["value"])
    if hasattr(w["value"], "clear"):
        w["value"].clear()
    rng = w["np"].random.default_rng(index)
    found = samples_of(result, "explored_and_reached", w["samples"], rng)
    row = {
        "index": index,
        "name": target.name,
        "budget": w["budget"],
        "model": w["model"],
        "best_cost": result.best_cost,
        "seconds": round(time.perf_counter() - started, 3),
        "samples": [
            [format_expr(s.expr), s.steps_left, round(s.target, 6), [round(x, 6) for x in s.shorter]] for s in found
        ],
    }
    if w["groups"]:
        row["groups"] = sibling_groups(result)
    return json.dumps(row, separators=(",", ":"))


def sibling_groups(result: Any) -> list[list[Any]]:
    """The choices along the search's path to its best state: per state on it, its steps left and
    every child the search evaluated there with the child's target for one step fewer
    (``[parent, t, [[child, target], ...]]``).  The child on the path has the largest
    ``c(parent) - c(child) + target``; a ranking loss fits the network to put it first."""
    from knossos.printer import format_expr

    graph = result.graph
    vt = graph.value_targets()
    row_of = {e: i for i, e in enumerate(vt.exprs)}
    out: list[list[Any]] = []
    for parent, _ in graph.path(result.best):
        t = graph.steps_left(parent)
        children = graph.edges.get(parent, [])
        if t < 1 or len(children) < 2:
            continue
        kids = [[format_expr(c), round(float(vt.table[row_of[c], t - 1]), 6)] for c in children if c in row_of]
        out.append([format_expr(parent), t, kids])
    return out


def written_lines(path: Path) -> tuple[list[str], bool]:
    """The whole lines of ``path`` and whether nothing follows them (False: a killed writer left a
    cut-off line or gzip member at the end)."""
    if not path.is_file():
        return [], True
    lines: list[str] = []
    try:
        with gzip.open(path, "rt") as f:
            for line in f:
                json.loads(line)["index"]
                lines.append(line)
    except (EOFError, OSError, zlib.error, json.JSONDecodeError, KeyError, TypeError):
        return lines, False
    return lines, True


def done_indices(path: Path) -> set[int]:
    """Indices of the searches ``path`` holds whole."""
    return {int(json.loads(line)["index"]) for line in written_lines(path)[0]}


def drop_cut_off_end(path: Path) -> None:
    """Rewrite ``path`` without a cut-off end, so that lines appended now can be read after it."""
    lines, intact = written_lines(path)
    if intact:
        return
    from knossos.atomic import atomic_write

    def write(f: BinaryIO) -> None:
        with gzip.open(f, "wt") as g:
            g.writelines(lines)

    atomic_write(path, write)
    print(f"{path}: dropped the cut-off end a killed run left; {len(lines)} searches kept", file=sys.stderr)


def main(argv: list[str] | None = None) -> None:
    from knossos.cli import whole_number
    from knossos.errors import KsError
    from search.limits import MAX_BUDGET

    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("out", type=Path)
    ap.add_argument("--set", default="generated_train")
    ap.add_argument("--model", default="none")
    ap.add_argument("--budget", type=whole_number(MAX_BUDGET), default=5000)
    ap.add_argument("--samples", type=whole_number(), default=600)
    ap.add_argument("--workers", type=whole_number(), default=max(1, multiprocessing.cpu_count()))
    ap.add_argument("--first", type=whole_number(), default=None, help="only the first N expressions of the set")
    ap.add_argument("--groups", action="store_true", help="also write the sibling groups along each search's best path")
    args = ap.parse_args(argv)
    try:
        _prepare(args.set, args.model, args.budget, args.samples, args.groups)
    except KsError as err:
        raise SystemExit(err.render("dataset.py")) from None
    count = len(_worker["targets"])
    args.out.parent.mkdir(parents=True, exist_ok=True)
    drop_cut_off_end(args.out)
    done = done_indices(args.out)
    todo = [i for i in range(count if args.first is None else min(count, args.first)) if i not in done]
    with multiprocessing.get_context("fork").Pool(args.workers) as pool:
        for line in tqdm(pool.imap_unordered(_search, todo), total=len(todo), desc="searches", unit="expr"):
            # one gzip member per line: a killed run loses at most the line being written
            with gzip.open(args.out, "at") as f:
                f.write(line + "\n")


if __name__ == "__main__":
    main()
