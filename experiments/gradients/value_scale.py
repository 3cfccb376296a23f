"""Choose the `gradients` model's value scale on its training defs (never on rev$conv1d).

Run:  python experiments/gradients/value_scale.py CHECKPOINT [--budget N] [--out FILE]

For each value scale (0 is plain search: the zero value function), the checkpoint's search, rules,
depth, prunings and cost model on six training defs of gradients_train.kso, each with --budget
(5000) evaluations; one JSON line per scale with the total best cost over the defs and the seconds,
in experiments/results/gradients/value_scale.jsonl (--out to choose).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from app.models import load_value_function
from knossos.parser import load_program
from ksbench.harness import write_rows
from ksdata.loader import DATA
from search.plan import Plan, run
from search.value import ValueFunction, ZeroValue

ROOT = Path(__file__).resolve().parents[2]

PROGRAM = DATA / "programs" / "gradients_train.kso"
DEFS = (
    "rev$matrix_multiply",
    "rev$maxpool",
    "rev$dotvv",
    "rev$gmm_knossos_makeQ",
    "rev$mul$R$VecVecR",
    "rev$log_wishart_prior",
)
SCALES = (0.0, 0.1, 0.25, 0.5, 1.0)
RESULTS = ROOT / "experiments" / "results" / "gradients" / "value_scale.jsonl"


def main() -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("checkpoint")
    ap.add_argument("--budget", type=int, default=5000)
    ap.add_argument("--out", type=Path, default=RESULTS)
    args = ap.parse_args()
    program = load_program(PROGRAM)
    network = load_value_function(args.checkpoint)
    plan = Plan().of_model(network).overridden(budget=args.budget)
    rows = []
    for scale in SCALES:
        value: ValueFunction = ZeroValue()
        if scale != 0.0:
            network.scale = scale  # type: ignore[attr-defined]
            value = network
        total, started = 0.0, time.perf_counter()
        for name in DEFS:
            total += run(program.defs[name].body, plan, value).best_cost
        row = {"checkpoint": args.checkpoint, "value_scale": scale, "budget": args.budget, "defs": list(DEFS)}
        row |= {"total_best_cost": round(total, 3), "seconds": round(time.perf_counter() - started, 1)}
        print(json.dumps(row), flush=True)
        rows.append(row)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    write_rows(args.out, rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
