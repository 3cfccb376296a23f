"""What pruning commutations (search/symmetry.py) does to the searches' results and time.

Run:  python benchmarks/bench_prune_commutes.py [--search astar] [--depth 10] [--budget 5000]

For each arithmetic set of experiments/data/arithmetic_sets.json (with its rule set), searches every
expression with and without ``prune_commutes`` and prints the total best cost, how many expressions
end at or below the best-known cost, the seconds of search, and the time ratio (pruned / full),
measured in one run.  blas_test's figures come from ``experiments/blas_test/run.py --prune-commutes``.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from knossos.parser import parse_expr  # noqa: E402
from knossos.perf import fewer_gc_pauses  # noqa: E402
from rules.sets import get_rule_set  # noqa: E402
from search.registry import get_search  # noqa: E402
from search.spec import SearchSpec  # noqa: E402

SETS = ROOT / "experiments" / "data" / "arithmetic_sets.json"


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--search", default="astar")
    ap.add_argument("--depth", type=int, default=10)
    ap.add_argument("--budget", type=int, default=5000)
    args = ap.parse_args()
    search = get_search(args.search)
    sets = json.loads(SETS.read_text())["sets"]
    print(f"{args.search}, depth {args.depth}, {args.budget} evaluations")
    print("| set | exprs | total best, all | pruned | at best known, all | pruned | s, all | pruned | time ratio |")
    print("|---|---|---|---|---|---|---|---|---|")
    with fewer_gc_pauses():
        for name, s in sets.items():
            rules = get_rule_set(s["rule_set"])
            exprs = [(parse_expr(e["expr"])[0], float(e["best_known_cost"])) for e in s["expressions"]]
            cells: list[tuple[float, int, float]] = []
            for prune in (False, True):
                total, at_best, seconds = 0.0, 0, 0.0
                for e, best_known in exprs:
                    started = time.perf_counter()
                    r = search(e, SearchSpec(rules, args.depth, args.budget, prune_commutes=prune))
                    seconds += time.perf_counter() - started
                    total += r.best_cost
                    at_best += r.best_cost <= best_known + 1e-9
                cells.append((total, at_best, seconds))
            (t0, b0, s0), (t1, b1, s1) = cells
            print(
                f"| {name} | {len(exprs)} | {t0:.1f} | {t1:.1f} | {b0} | {b1} | {s0:.1f} | {s1:.1f} | {s1 / s0:.2f} |",
                flush=True,
            )


if __name__ == "__main__":
    main()
