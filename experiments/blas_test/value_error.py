"""How far a value network's predicted final costs are from what search reaches, on blas_test defs.

Run:  python experiments/blas_test/value_error.py --models blas,blas_astar [--defs gemm_climbed_mat_y]

For each def, one plain search (pseudo-beam, commutations pruned, depth 60, 20,000 evaluations by
default) explores the def; its graph gives every state's true target, the lowest cost reachable in
``--steps`` explored steps.  For the states whose ``--steps`` columns the search looked into and
whose cost is within ``--within`` of the start (the states a search ranks against each other), it
prints how many there are, the spread of their true final costs, and each model's median absolute
error of the predicted final cost ``c(s) - V(s)`` (at value scale 1), in cost units and relative.
A model can only order states usefully where its error is well below the differences between them.
"""

from __future__ import annotations

import argparse

import numpy as np

from app.models import load_value_function
from knossos.errors import KsError
from knossos.parser import load_program
from knossos.perf import fewer_gc_pauses
from ksdata.loader import DATA
from search.plan import Plan, run

PROGRAM = DATA / "programs" / "blas_test.kso"
DEPTH = 60


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--models", default="blas,blas_astar", help="shipped names or checkpoints, comma-separated")
    ap.add_argument("--defs", default="gemm_climbed_mat_y,gemm_no_maty")
    ap.add_argument("--budget", type=int, default=20_000)
    ap.add_argument("--steps", type=int, default=20, help="steps left at which targets are compared")
    ap.add_argument("--within", type=float, default=0.3, help="states costing at most (1 + this) x the start")
    args = ap.parse_args()
    program = load_program(PROGRAM)
    names = args.defs.split(",")
    unknown = [n for n in names if n not in program.defs]
    if unknown:
        raise SystemExit(f"value_error.py: error: no def {', '.join(unknown)} in {PROGRAM.name}")
    plan = Plan(rules="ml_rules_no_bind").overridden(
        algorithm="pseudo-beam", depth=DEPTH, budget=args.budget, prune_commutes=True
    )
    try:
        models = {m: load_value_function(m, scale=1.0) for m in args.models.split(",") if m}
    except KsError as err:
        raise SystemExit(str(err)) from None
    print(f"pseudo-beam, commutations pruned, depth {DEPTH}, {args.budget} evaluations; targets at {args.steps} steps")
    print("| def | states | spread of true final costs | " + " | ".join(f"{m}: median error" for m in models) + " |")
    print("|---|---|---|" + "---|" * len(models))
    with fewer_gc_pauses():
        for name in names:
            d = program.defs[name]
            result = run(d.body, plan)
            targets = result.graph.value_targets()
            limit = result.start_cost * (1 + args.within)
            chosen = [i for i, e in enumerate(targets.exprs) if targets.explored[i] >= args.steps and e.cost <= limit]
            if not chosen:
                print(f"| {name} | 0 | | " + " | ".join("" for _ in models) + " |", flush=True)
                continue
            exprs = [targets.exprs[i] for i in chosen]
            costs = np.array([e.cost for e in exprs])
            true_final = costs - targets.table[chosen, args.steps]
            cells = []
            for value in models.values():
                predicted_final = costs - value.values(exprs, DEPTH)[:, args.steps]
                error = np.abs(predicted_final - true_final)
                cells.append(f"{np.median(error):,.1f} ({np.median(error / true_final):.1%})")
            spread = true_final.max() - true_final.min()
            print(f"| {name} | {len(exprs)} | {spread:,.1f} | " + " | ".join(cells) + " |", flush=True)


if __name__ == "__main__":
    main()
