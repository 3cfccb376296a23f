"""Speed and memory of deep A* with the zero value function.

Run:  python benchmarks/bench_search.py [--repeat N]

Cases (each in a fresh process, so that peak memory is the search's own):
  gemm (blas_test.kso), ml_rules_no_bind, depth 30, budget 5000 evaluations;
  rev$gmm_knossos_gmm_objective (gmm_test.kso), ml_rules_no_bind, depth 10, budget 2000;
  the 12 bindgen_test expressions, binding_rules, depth 10, budget 5000 (time per expression).
Prints wall time, states per second (value-function evaluations per second), peak resident memory,
and the ratio to the reference implementation's times on this kind of machine (gemm 3.9 s;
1.2-2.3 s per bindgen_test expression).  Targets: >= 10x faster, gmm under 1 GiB.
"""

from __future__ import annotations

from ksbench.harness import announce, pin_threads

pin_threads()  # before numpy loads: one thread, as every benchmark

import argparse  # noqa: E402
import json  # noqa: E402
import resource  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

from ksdata.loader import DATA  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent

PROGRAMS = DATA / "programs"
CASES = {
    "gemm": ("blas_test.kso", "gemm", 30, 5000),
    "rev$gmm_knossos_gmm_objective": ("gmm_test.kso", "rev$gmm_knossos_gmm_objective", 10, 2000),
}
REFERENCE_SECONDS = {"gemm": 3.9}
REFERENCE_BINDGEN = (1.2, 2.3)


def run_case(name: str) -> dict[str, float]:
    """Run one search in this process and report its figures."""
    from knossos.parser import load_program
    from knossos.perf import fewer_gc_pauses
    from search.plan import Plan, run

    with fewer_gc_pauses():
        if name == "bindgen_test":
            from knossos.parser import parse_expr

            data = json.loads((DATA / "arithmetic_sets.json").read_text())["sets"][name]
            plan = Plan(rules=data["rule_set"]).overridden(algorithm="astar", depth=10, budget=5000)
            times, reached = [], 0
            for item in data["expressions"]:
                e, _ = parse_expr(item["expr"])
                t0 = time.perf_counter()
                r = run(e, plan)
                times.append(time.perf_counter() - t0)
                reached += r.best_cost <= item["best_known_cost"] + 1e-9
            return {"median_s": statistics.median(times), "max_s": max(times), "reached": reached, **_rss()}
        file, def_name, depth, budget = CASES[name]
        body = load_program(PROGRAMS / file).defs[def_name].body
        t0 = time.perf_counter()
        r = run(body, Plan(rules="ml_rules_no_bind").overridden(algorithm="astar", depth=depth, budget=budget))
        seconds = time.perf_counter() - t0
        return {
            "seconds": seconds,
            "evaluations": r.evaluations,
            "expanded": r.expanded,
            "states": len(r.graph.states),
            "start_cost": r.start_cost,
            "best_cost": r.best_cost,
            **_rss(),
        }


def _rss() -> dict[str, float]:
    return {"peak_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}


def in_child(name: str) -> dict[str, float]:
    done = subprocess.run(
        [sys.executable, __file__, "--case", name], capture_output=True, text=True, check=True, cwd=ROOT
    )
    result: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3, help="runs per case; the median is reported")
    ap.add_argument("--case", help=argparse.SUPPRESS)
    args = ap.parse_args()
    announce("bench_search")
    if args.case:
        print(json.dumps(run_case(args.case)))
        return
    print(f"{'case':<31} {'wall':>8} {'evals/s':>9} {'expanded':>8} {'peak MiB':>9} {'cost':>24}  vs reference")
    for name in CASES:
        runs = [in_child(name) for _ in range(args.repeat)]
        r = sorted(runs, key=lambda x: x["seconds"])[len(runs) // 2]
        ref = REFERENCE_SECONDS.get(name)
        ratio = f"{ref / r['seconds']:.1f}x faster" if ref else "(no reference time)"
        cost = f"{r['start_cost']:g} -> {r['best_cost']:g}"
        print(
            f"{name:<31} {r['seconds']:>7.2f}s {r['evaluations'] / r['seconds']:>9.0f} {int(r['expanded']):>8}"
            f" {max(x['peak_mib'] for x in runs):>9.0f} {cost:>24}  {ratio}"
        )
    b = in_child("bindgen_test")
    lo, hi = REFERENCE_BINDGEN
    print(
        f"bindgen_test (12 expressions): median {b['median_s']:.2f} s, slowest {b['max_s']:.2f} s per expression; "
        f"best-known cost reached on {int(b['reached'])}/12; reference {lo}-{hi} s: "
        f"{lo / b['median_s']:.1f}-{hi / b['median_s']:.1f}x faster (median)"
    )
    print("targets: >= 10x the reference's time; under 1024 MiB peak for the gmm search")


if __name__ == "__main__":
    main()
