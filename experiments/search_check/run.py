"""A* with the zero value function against the best-known costs, checked by exhaustive search.

Run:  python experiments/search_check/run.py [--seconds 60] [--out experiments/results/search_check/results.jsonl]

For every expression of bindgen_test (binding_rules) and binding_simplify_8 (binding_simplify_rules):
A* (zero value function, depth 10, budget 5000) and exhaustive breadth-first search (depth 10, at
most --seconds each and 3,000,000 states).  One JSON line per expression; a rerun skips the lines
already written, so an interrupted run resumes.  Prints the table at the end.  ``--astar-only``
searches again with A* only and rewrites its columns (after a change to A*), keeping the exhaustive
searches' columns, which do not depend on it.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from knossos.parser import parse_expr
from knossos.perf import fewer_gc_pauses
from ksbench.harness import write_rows
from ksdata.loader import DATA
from search.plan import Plan, run

ROOT = Path(__file__).resolve().parents[2]

SETS = ("bindgen_test", "binding_simplify_8")
DEPTH, BUDGET, STATE_LIMIT = 10, 5000, 3_000_000


def astar_plan(rules: str) -> Plan:
    return Plan(rules=rules).overridden(algorithm="astar", depth=DEPTH, budget=BUDGET)


def redo_astar(path: Path) -> None:
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    data = json.loads((DATA / "arithmetic_sets.json").read_text())["sets"]
    with fewer_gc_pauses():
        for row in rows:
            e, _ = parse_expr(row["expr"])
            a = run(e, astar_plan(data[row["set"]]["rule_set"]))
            row["astar"], row["astar_seconds"] = round(a.best_cost, 6), round(a.seconds, 3)
    write_rows(path, rows)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=60.0)
    ap.add_argument("--out", type=Path, default=ROOT / "experiments" / "results" / "search_check" / "results.jsonl")
    ap.add_argument("--astar-only", action="store_true", help="redo the A* columns of every line")
    args = ap.parse_args()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    if args.astar_only:
        redo_astar(args.out)
    done = {}
    if args.out.exists():
        for line in args.out.read_text().splitlines():
            row = json.loads(line)
            done[(row["set"], row["index"])] = row
    data = json.loads((DATA / "arithmetic_sets.json").read_text())["sets"]
    with fewer_gc_pauses():
        for set_name in SETS:
            rules = data[set_name]["rule_set"]
            for i, item in enumerate(data[set_name]["expressions"]):
                if (set_name, i) in done:
                    continue
                e, _ = parse_expr(item["expr"])
                a = run(e, astar_plan(rules))
                x = run(
                    e,
                    Plan(rules=rules, seconds=args.seconds).overridden(
                        algorithm="exhaustive", depth=DEPTH, budget=STATE_LIMIT
                    ),
                )
                row = {
                    "set": set_name,
                    "index": i,
                    "expr": item["expr"],
                    "start_cost": a.start_cost,
                    "best_known": item["best_known_cost"],
                    "astar": round(a.best_cost, 6),
                    "astar_seconds": round(a.seconds, 3),
                    "exhaustive": round(x.best_cost, 6),
                    "exhaustive_complete": x.complete,
                    "exhaustive_states": len(x.graph.states),
                    "exhaustive_seconds": round(x.seconds, 1),
                    "note": x.notes[0] if x.notes else "",
                }
                with args.out.open("a") as f:
                    f.write(json.dumps(row) + "\n")
                done[(set_name, i)] = row
                print(
                    f"{set_name} {i}: A* {row['astar']} exhaustive {row['exhaustive']} ({row['note'] or 'complete'})",
                    file=sys.stderr,
                )
    print(f"{'set':<19} {'#':>2} {'start':>6} {'best-known':>10} {'A*':>6} {'exhaustive':>10}  exhaustive run")
    for set_name in SETS:
        rows = [done[k] for k in sorted(done) if k[0] == set_name]
        for r in rows:
            how = "complete" if r["exhaustive_complete"] else f"stopped: {r['note']}"
            print(
                f"{set_name:<19} {r['index']:>2} {r['start_cost']:>6g} {r['best_known']:>10g} {r['astar']:>6g}"
                f" {r['exhaustive']:>10g}  {how}, {r['exhaustive_states']} states, {r['exhaustive_seconds']} s"
            )
        reached = sum(r["astar"] <= r["best_known"] + 1e-9 for r in rows)
        print(f"{set_name}: A* reaches the best-known cost on {reached}/{len(rows)}")


if __name__ == "__main__":
    main()
