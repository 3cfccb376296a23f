"""What the Integer-overflow guard changes in bench_default_programs' searches (issue 44, item 7).

Run:  python benchmarks/bench_int_overflow.py [--seconds S]

The shipped program defs that have Integer arithmetic the regrouping rules could rewrite (gmm_test's
and conv1d_rev_test's index arithmetic and Integer sums), searched as benchmarks/bench_default_programs.py
searches them (each engine, ml_rules_no_bind, no model), with the default rules and with the opt-in
``unsafe-int:ml_rules_no_bind`` (the rules as they were before the guard): one line per def and
engine, each best cost and seconds.  Plain A* on rev$gmm_knossos_gmm_objective stops at its time
limit, so it is left out (not repeatable).
"""

from __future__ import annotations

import argparse
import json

from knossos.parser import load_program
from ksbench.default_programs import PROGRAM_ENGINES
from ksdata.loader import DATA
from search.plan import Plan, run

DEFS = [
    *(
        ("gmm_test", d)
        for d in (
            "gmm_knossos_makeQ",
            "rev$gmm_knossos_makeQ",
            "rev$log_wishart_prior",
            "rev$gmm_knossos_gmm_objective",
            "rev$dotv",
            "rev$sqnorm",
            "rev$logsumexp",
        )
    ),
    ("conv1d_rev_test", "rev$conv1d"),
]
RULES = ("ml_rules_no_bind", "unsafe-int:ml_rules_no_bind")


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--seconds", type=float, default=120.0, help="time limit of each search (120)")
    args = ap.parse_args(argv)
    for program, name in DEFS:
        d = load_program(DATA / "programs" / f"{program}.kso").defs[name]
        for engine in PROGRAM_ENGINES:
            if engine == "astar" and name == "rev$gmm_knossos_gmm_objective":
                continue
            row: dict[str, object] = {"def": name, "engine": engine}
            for rules in RULES:
                p = PROGRAM_ENGINES[engine] or Plan.default_for(None, d.body)
                r = run(d.body, p.overridden(rules=rules, seconds=args.seconds))
                row[rules] = {"best_cost": round(r.best_cost, 6), "seconds": round(r.seconds, 2)}
            print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
