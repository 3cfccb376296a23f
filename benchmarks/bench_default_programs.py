"""optimize.py's default on every program def, against plain A* and pruned pseudo-beam (issue 34).

Run:  python benchmarks/bench_default_programs.py [--programs NAME,...] [--seconds S] [--quick]

For each def of the public program files (``ksdata/programs``: blas_test, gelu,
binding_simplify_defs_tuples, gmm_test, conv1d_rev_test), with ``ml_rules_no_bind`` and no model,
three searches: the default pipeline (:meth:`search.plan.Plan.default_for`), plain A* (depth 10, 5000
evaluations) and pruned pseudo-beam (depth 99, 5000 evaluations, both prunings), each with at most
``--seconds`` (120).  Rows go to ``experiments/results/engines/programs.jsonl`` as searches end (a
rerun resumes); the summary (also docs/egraph.md's table, ``python -m experiments.summary --write``)
gives, per program file, each engine's total best cost and seconds, and the defs where the default
is worse than either of the others.  ``--quick``: the first 2 defs of
each file at 200 evaluations, into runs/quick/.
"""

from __future__ import annotations

import argparse
import sys

from tqdm import tqdm

from knossos.expr import Expr
from knossos.parser import load_program
from knossos.perf import fewer_gc_pauses
from ksbench.default_programs import PROGRAM_ENGINES, summary
from ksbench.results import QUICK, RESULTS, ResultsFile
from ksdata.loader import DATA
from search.plan import Plan, run

PROGRAMS = ("blas_test", "gelu", "binding_simplify_defs_tuples", "gmm_test", "conv1d_rev_test")
RULES = "ml_rules_no_bind"


def plan_of(engine: str, body: Expr, seconds: float, quick: bool) -> Plan:
    """The plan of ``engine`` (the default: for a bare expression, as these searches have always run)."""
    p = PROGRAM_ENGINES[engine] or Plan.default_for(None, body)
    return p.overridden(rules=RULES, seconds=seconds, budget=200 if quick else None)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--programs", default=",".join(PROGRAMS), help="program files (names in ksdata/programs)")
    ap.add_argument("--seconds", type=float, default=120.0, help="time limit of each search (120)")
    ap.add_argument("--quick", action="store_true", help="2 defs a file at 200 evaluations, into runs/quick/")
    args = ap.parse_args(argv)
    folder = QUICK / "engines" if args.quick else RESULTS / "engines"
    results = ResultsFile(folder / "programs.jsonl", ("program", "def_", "engine"))
    with fewer_gc_pauses():
        for name in [p.strip() for p in args.programs.split(",") if p.strip()]:
            program = load_program(DATA / "programs" / f"{name}.kso")
            defs = list(program.targets)[: 2 if args.quick else None]
            todo = [
                (d, e) for d in defs for e in PROGRAM_ENGINES if not results.has(program=name, def_=d.name, engine=e)
            ]
            for d, engine in tqdm(todo, desc=name, unit="search", file=sys.stderr):
                plan = plan_of(engine, d.body, args.seconds, args.quick)
                r = run(d.body, plan)
                results.add(
                    {
                        "program": name,
                        "def_": d.name,
                        "engine": engine,
                        "search": plan.search.algorithm,
                        "depth": plan.search.depth,
                        "budget": plan.search.budget,
                        "start_cost": round(r.start_cost, 6),
                        "best_cost": round(r.best_cost, 6),
                        "seconds": round(r.seconds, 3),
                        "evaluations": r.evaluations,
                        "notes": r.notes,
                    }
                )
    print(summary(list(results)))


if __name__ == "__main__":
    main()
