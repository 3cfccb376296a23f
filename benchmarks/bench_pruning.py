"""What pruning commutations (search/symmetry.py) and idle inlines (search/idle_inlines.py) does to
the searches' results and time on the arithmetic sets.

Run:  python benchmarks/bench_pruning.py [--search astar] [--depth 10] [--budget 5000]

For each arithmetic set of ksdata/arithmetic_sets.json (with its rule set), searches every
expression with no pruning, with ``prune_commutes``, and with both, and prints per setting the total
best cost, how many expressions end at or below the best-known cost, the seconds of search, and the
time ratio to no pruning, measured in one run.  blas_test's figures come from
``experiments/blas_test/run.py --prune-commutes --prune-inlines``.
"""

from __future__ import annotations

from ksbench.harness import announce, pin_threads

pin_threads()  # before numpy loads: one thread, as every benchmark

import argparse  # noqa: E402
import json  # noqa: E402
import time  # noqa: E402

from knossos.parser import parse_expr  # noqa: E402
from knossos.perf import fewer_gc_pauses  # noqa: E402
from ksdata.loader import DATA  # noqa: E402
from search.plan import Plan, run  # noqa: E402
from search.registry import get_search  # noqa: E402

SETS = DATA / "arithmetic_sets.json"


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--search", default="astar")
    ap.add_argument("--depth", type=int, default=10)
    ap.add_argument("--budget", type=int, default=5000)
    args = ap.parse_args()
    announce("bench_pruning")
    get_search(args.search)  # an unknown search is refused before any is run
    sets = json.loads(SETS.read_text())["sets"]
    print(f"{args.search}, depth {args.depth}, {args.budget} evaluations")
    print("| set | exprs | pruning | total best | at best known | s | time ratio |")
    print("|---|---|---|---|---|---|---|")
    settings = {"none": (False, False), "commutations": (True, False), "both": (True, True)}
    with fewer_gc_pauses():
        for name, s in sets.items():
            rules = s["rule_set"]
            exprs = [(parse_expr(e["expr"])[0], float(e["best_known_cost"])) for e in s["expressions"]]
            first = 0.0
            for label, (commutes, inlines) in settings.items():
                total, at_best, seconds = 0.0, 0, 0.0
                for e, best_known in exprs:
                    plan = Plan(rules=rules).overridden(
                        algorithm=args.search,
                        depth=args.depth,
                        budget=args.budget,
                        prune_commutes=commutes,
                        prune_inlines=inlines,
                    )
                    started = time.perf_counter()
                    r = run(e, plan)
                    seconds += time.perf_counter() - started
                    total += r.best_cost
                    at_best += r.best_cost <= best_known + 1e-9
                first = first or seconds
                print(
                    f"| {name} | {len(exprs)} | {label} | {total:.1f} | {at_best} | {seconds:.1f} | {seconds / first:.2f} |",
                    flush=True,
                )


if __name__ == "__main__":
    main()
