"""Time and memory of optimize.py on deep programs, against the limits it was given.

Run:  python benchmarks/bench_deep_programs.py [--depths 1000,5000,20000] [--full-depths 500,1000,2000] [--out FILE]

Programs, ``depth`` deep:
  chain  ``(def f Float ((x : Float)) (add 1.0 (add 1.0 ... x)))`` (issue 31's), with simplify_rules;
  lets   ``(let (a1 (mul 2.0 x)) (let (a2 (mul 2.0 a1)) ... a_n))``, as reverse mode writes, with
         ml_rules and both prunings (the default program pipeline's search settings).
Searches from them use lazy states (search/state.py): each child is named, costed and pruned without
being built, so one expansion costs work linear in the depth.  Built, each child rebuilds the spine
above its site: ``depth**2 / 2`` nodes.
Cases, each a fresh ``optimize.py FILE --model none --budget 50 --json`` process (the program's rules):
  limits   (chain) ``--seconds 2 --max-memory 1000``: the search must stop by its budget or near 2 s
           and 1000 MiB;
  pipeline (chain) ``optimize.py FILE --json --seconds 2 --max-memory 1000``, no model, rules or budget
           named: the default pipeline (saturation, search, saturation again: search/saturated.py),
           which must stop near 2 s and 1000 MiB too (before its e-graph extraction looked at no limit:
           at 20,000 deep, 29 s and 7.2 GiB);
  states   (chain) ``--max-states 5``: the search must hold at most 5 states;
  full     (both, at --full-depths) ``--budget 1``, no limits: the time of one whole expansion, lazy;
  built    (both, at --full-depths) the same search through the Python API with ``lazy_states=False``
           (this script's ``--expand-once``): every child built, as before lazy states.
Printed: per case, wall seconds of the process (start-up and parsing included), the search's own
seconds, peak resident MiB of the process, states expanded and the note.  Output: one JSON line per
case in experiments/results/robustness/deep_programs.jsonl (--out to choose), rewritten atomically
after every case, with the code revision and the machine.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from ksbench.harness import machine, write_rows
from ksbench.results import revision

ROOT = Path(__file__).resolve().parents[1]

#: Runs optimize.py as __main__ and prints the process's peak resident memory (MiB) on stderr's last line:
#: VmHWM, since Linux carries ru_maxrss over from the forking process through exec.
PEAK = (
    "import runpy, sys\nsys.argv = sys.argv[1:]\n"
    "try: runpy.run_path(sys.argv[0], run_name='__main__')\n"
    "finally: print(int(next(l for l in open('/proc/self/status') if l.startswith('VmHWM')).split()[1]) // 1024,"
    " file=sys.stderr)"
)
COMMON = ["--model", "none", "--json", "--quiet"]
CASES = {
    "limits": ["--budget", "50", "--seconds", "2", "--max-memory", "1000"],
    "states": ["--budget", "50", "--max-states", "5"],
    "full": ["--budget", "1"],
    "built": ["--expand-once"],
}
#: Cases run as a user would, naming no model, rule set or budget: the default pipeline.
DEFAULT_PIPELINE = {"pipeline": ["--seconds", "2", "--max-memory", "1000"]}
#: Each program's rule set, and whether both prunings are on.
SETTINGS = {"chain": ("simplify_rules", False), "lets": ("ml_rules", True)}


def flags(shape: str) -> list[str]:
    """The program's settings as optimize.py's options."""
    rules, pruned = SETTINGS[shape]
    return ["--rules", rules, *(["--prune-commutes", "--prune-inlines"] if pruned else [])]


def write_program(shape: str, depth: int, folder: Path) -> Path:
    if shape == "chain":
        body = "x"
        for _ in range(depth):
            body = f"(add 1.0 {body})"
    else:
        body = f"a{depth}"
        for k in range(depth, 0, -1):
            body = f"(let (a{k} (mul 2.0 {'x' if k == 1 else f'a{k - 1}'})) {body})"
    path = folder / f"{shape}{depth}.ks"
    path.write_text(f"(def f Float ((x : Float)) {body})\n")
    return path


def measure(shape: str, program: Path, case: str) -> dict[str, object]:
    settings = flags(shape) + CASES[case] if case in CASES else DEFAULT_PIPELINE[case]
    if case == "built":
        argv = [sys.executable, "-c", PEAK, __file__, "--expand-once", str(program), "--shape", shape]
    elif case in DEFAULT_PIPELINE:
        argv = [sys.executable, "-c", PEAK, str(ROOT / "optimize.py"), str(program), "--json", "--quiet", *settings]
    else:
        argv = [sys.executable, "-c", PEAK, str(ROOT / "optimize.py"), str(program), *COMMON, *flags(shape)]
        argv += CASES[case]
    began = time.perf_counter()
    done = subprocess.run(argv, capture_output=True, text=True)
    wall = time.perf_counter() - began
    if done.returncode != 0:
        raise SystemExit(f"{program.name} {case}: optimize.py failed: {done.stderr.strip().splitlines()[-2:]}")
    report = json.loads(done.stdout)
    return {
        "program": shape,
        "case": case,
        "flags": " ".join(settings),
        "wall_s": round(wall, 2),
        "search_s": report["seconds"],
        "peak_mib": int(done.stderr.split()[-1]),
        "expanded": report["expanded"],
        "notes": report["notes"],
    }


def expand_once(program: Path, shape: str) -> None:
    """A* with budget 1 (one expansion) of the program's def with every child built; optimize.py's JSON fields."""
    from knossos.parser import load_program
    from search.plan import Plan, run
    from search.settings import SearchSettings

    (d,) = load_program(program).defs.values()
    rules, pruned = SETTINGS[shape]
    search = SearchSettings(algorithm="astar", depth=10, budget=1, prune_commutes=pruned, prune_inlines=pruned)
    result = run(d.body, Plan(rules=rules, search=search, lazy_states=False))
    print(json.dumps({"seconds": round(result.seconds, 4), "expanded": result.expanded, "notes": result.notes}))


def depths(text: str) -> list[int]:
    return [int(d) for d in text.split(",") if d]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--depths", type=depths, default=[1000, 5000, 20000])
    ap.add_argument("--full-depths", type=depths, default=[500, 1000, 2000])
    ap.add_argument("--out", type=Path, default=ROOT / "experiments/results/robustness/deep_programs.jsonl")
    ap.add_argument(
        "--expand-once", type=Path, metavar="FILE", help="(for the built case) expand FILE's def once, children built"
    )
    ap.add_argument("--shape", choices=SETTINGS, default="chain", help="(with --expand-once) the program's settings")
    args = ap.parse_args()
    if args.expand_once is not None:
        return expand_once(args.expand_once, args.shape)
    plan = [("chain", d, c) for d in args.depths for c in ("limits", "states", "pipeline")]
    plan += [(shape, d, c) for shape in SETTINGS for d in args.full_depths for c in ("full", "built")]
    stamp = {"revision": revision(), "machine": machine()}
    rows: list[dict[str, object]] = []
    head = (
        f"{'program':<7} {'depth':>6} {'case':<7} {'wall s':>7} {'search s':>8} {'peak MiB':>8} {'expanded':>8}  note"
    )
    print(head, flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        for shape, depth, case in plan:
            row = {"depth": depth, **measure(shape, write_program(shape, depth, Path(tmp)), case), **stamp}
            rows.append(row)
            note = "; ".join(row["notes"]) or "-"  # type: ignore[arg-type]
            print(
                f"{shape:<7} {depth:>6} {case:<7} {row['wall_s']:>7} {row['search_s']:>8} {row['peak_mib']:>8}"
                f" {row['expanded']:>8}  {note}",
                flush=True,
            )
            write_rows(args.out, rows)


if __name__ == "__main__":
    main()
