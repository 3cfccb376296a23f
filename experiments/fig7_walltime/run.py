"""Figure 7: wall-clock time per call of GEMM and rev$conv1d as written, baseline, optimised, across sizes.

Run:  python experiments/fig7_walltime/run.py [--quick] [--force] [--out FILE] [--seconds S] [--rounds R]

Programs and sizes:
  GEMM        the ``gemm`` def of blas_test.kso (alpha*A*B + beta*C), n x n matrices,
              n = 64, 128, 256, 512, 1024 (--quick: 8, 16);
  rev$conv1d  conv1d_rev_test.kso: the gradient of a 1-d convolution of k = 8 kernels of l = 8 channels
              and width kn = 5 over an image of l channels and n samples (kernels k x l x kn, image l x n,
              d$r k x n), n = 32, 64, 128, 256, 512 (--quick: 8, 16); only n varies, so the work
              grows linearly with it.
Variants (the harness of ksbench/walltime.py and cpp_backend/bench.py: every C++ variant
compiled with cpp_backend.compile's flags, checked against the interpreter at size 4 and against the
original at every size):
  original   the def as written;
  baseline   after the ksc-style baseline simplifier (rules/baseline.py);
  optimised  the best found by the zero-value-function search of ksbench/walltime.py: GEMM:
             pseudo-beam with commutations and idle inlines pruned, ml_rules_no_bind, depth 99,
             budget 5000 (the fused program); rev$conv1d: two-phase A* (phase1 rules, then
             ml_rules_no_bind+zero_tensor_rules), depth 40, budget 5000 (the searches run once per program per run,
             only when a size of it is still to measure);
  gradient_rules plain, gradient_rules model
             rev$conv1d only: pseudo-beam over gradient_rules with the sized alloc cost, and
             --model gradients as optimize.py runs it, 60 s each (GRADIENT_SECONDS);
  hand i-k-j GEMM only: the hand-written i-k-j loop (ksbench.walltime.HAND_GEMM);
  numpy      for context, on one thread: alpha*(A@B) + beta*C, and the gradient as matrix products
             (timed in the first round only).
Timing: per call, each variant repeated for at least --seconds (0.2) per round, the variants of one
size timed in turn for --rounds (3) rounds: min over all calls, median of the rounds' medians.
--quick: the sizes above, 0.01 s, 1 round; writes runs/quick/fig7_walltime/results.jsonl.

Output: one JSON line per (program, size, variant) in experiments/results/fig7_walltime/results.jsonl
(--out to choose), with min and median seconds, the calls timed, the code revision, CPU, compiler,
flags and the search settings and result.  A rerun measures only the sizes whose rows are missing
(all variants of a size are measured together, so each size's ratios come from one run); --force
measures everything again.  The C++ compilation cache ($KNOSSOS_CPP_CACHE, default
~/.cache/knossos-cpp) is reused across runs.

The committed results come from a 2-core machine shared with two training jobs (load average 3-4):
absolute times drift with the load, so the ratios between variants measured in one run, at one size,
are what count, not absolute times or sizes compared across runs.
"""

from __future__ import annotations

from ksbench.harness import compiler_version, cpu_name, pin_threads, write_rows

pin_threads()  # before numpy loads: numpy on one thread, as the C++ code runs

import argparse  # noqa: E402
import datetime  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from collections.abc import Callable, Sequence  # noqa: E402
from dataclasses import dataclass  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

from tqdm import tqdm  # noqa: E402

from app.models import load_value_function  # noqa: E402
from cpp_backend import compile as cpp_compile  # noqa: E402
from cpp_backend.bench import Measurement, Size, format_seconds  # noqa: E402
from knossos.errors import KsError  # noqa: E402
from knossos.perf import fewer_gc_pauses  # noqa: E402
from ksbench.results import revision  # noqa: E402
from ksbench.walltime import (  # noqa: E402
    CONV1D_RULES,
    GEMM_RULES,
    HAND_GEMM,
    Case,
    conv1d_case,
    gemm_case,
    numpy_conv1d_rev,
    numpy_gemm,
    run_case,
)
from rules.baseline import simplify_def  # noqa: E402
from search.plan import Plan  # noqa: E402
from search.plan import run as run_plan  # noqa: E402
from search.settings import SearchSettings  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]

RESULTS = ROOT / "experiments" / "results" / "fig7_walltime" / "results.jsonl"
QUICK_RESULTS = ROOT / "runs" / "quick" / "fig7_walltime" / "results.jsonl"
#: rev$conv1d's fixed dimensions: kernels, channels, kernel width (only the image width n varies).
CONV_K, CONV_L, CONV_KN = 8, 8, 5

Row = dict[str, Any]
Key = tuple[str, str, str]  # program, size text, variant


@dataclass(frozen=True)
class Experiment:
    """One program of the figure: how to make its variants and which sizes to time."""

    program: str
    make_case: Callable[[int, int, bool], Case]  # (depth, budget, quick) -> the case, with its searches run
    search: dict[str, object]  # how the optimised variant is searched for (with depth and budget)
    depth: int
    budget: int
    sizes: list[int]
    quick_sizes: list[int]
    size_of: Callable[[int], Size]
    hand: dict[str, str]  # hand-written C++ variants
    numpy_fn: Callable[[Sequence[Any]], Callable[[], Any]]
    #: The labels of the case's further searches (Case.more), in order.
    more: tuple[str, ...] = ()

    def variants(self) -> list[str]:
        return ["original", "baseline", "optimised", *self.more, *self.hand, "numpy"]

    def case(self, quick: bool = False) -> Case:
        """The program's variants (runs the search)."""
        return self.make_case(self.depth, self.budget, quick)


def conv_size(n: int) -> Size:
    return Size({"kernels": (CONV_K, CONV_L, CONV_KN), "image": (CONV_L, n), "d$r": (CONV_K, n)})


#: The gradient rules' searches of rev$conv1d (docs/programs.md), each for GRADIENT_SECONDS: plain
#: pseudo-beam search with both prunings under the allocation-aware cost told the figure's middle size
#: (n = 128, so that the image's gradient loops over the kernel taps), and the shipped `gradients`
#: model's learned search as optimize.py runs it (its own cost, every vector 16 long: its values are
#: in that cost's units, and under the sized cost it got no further than 5e8 in 60 s).
GRADIENT_SECONDS = 60.0
GRADIENT_QUICK_SECONDS = 2.0
GRADIENT_SIZES = {"kernels": (CONV_K, CONV_L, CONV_KN), "image": (CONV_L, 128), "d$r": (CONV_K, 128)}
GRADIENT_VARIANTS = ("gradient_rules plain", "gradient_rules model")
GRADIENT_DEPTH, GRADIENT_BUDGET = 150, 10**7
#: How each is searched, for the results rows (the budget binds never: the seconds do).
GRADIENT_SEARCHES: dict[str, dict[str, object]] = {
    GRADIENT_VARIANTS[0]: {
        "algorithm": "pseudo-beam",
        "prune_commutes": True,
        "prune_inlines": True,
        "value_function": "zero",
        "rules": "gradient_rules",
        "cost": f"alloc, sizes {GRADIENT_SIZES}",
        "depth": GRADIENT_DEPTH,
        "budget": GRADIENT_BUDGET,
    },
    GRADIENT_VARIANTS[1]: {
        "algorithm": "pseudo-beam",
        "value_function": "gradients",
        "rules": "gradient_rules",
        "cost": "alloc",
        "depth": GRADIENT_DEPTH,
        "budget": GRADIENT_BUDGET,
    },
}


def conv1d_with_gradients(depth: int, budget: int, quick: bool = False) -> Case:
    """rev$conv1d as ksbench.walltime makes it, and the two gradient-rule searches of GRADIENT_VARIANTS
    (GRADIENT_QUICK_SECONDS each with ``quick``)."""
    seconds = GRADIENT_QUICK_SECONDS if quick else GRADIENT_SECONDS
    plain = Plan(
        rules="gradient_rules",
        search=SearchSettings(
            algorithm="pseudo-beam",
            depth=GRADIENT_DEPTH,
            budget=GRADIENT_BUDGET,
            prune_commutes=True,
            prune_inlines=True,
            cost="alloc",
        ),
        sizes=GRADIENT_SIZES,
        seconds=seconds,
    )
    model = load_value_function("gradients")
    learned = Plan().of_model(model).overridden(budget=GRADIENT_BUDGET, seconds=seconds)
    return conv1d_case(
        depth,
        budget,
        more={
            GRADIENT_VARIANTS[0]: lambda e: run_plan(e, plain),
            GRADIENT_VARIANTS[1]: lambda e: run_plan(e, learned, model),
        },
    )


EXPERIMENTS = [
    Experiment(
        "gemm",
        lambda depth, budget, quick: gemm_case(depth, budget),
        {
            "algorithm": "pseudo-beam",
            "prune_commutes": True,
            "prune_inlines": True,
            "value_function": "zero",
            "rules": GEMM_RULES,
        },
        99,
        5000,
        [64, 128, 256, 512, 1024],
        [8, 16],
        lambda n: Size({}, n, "n"),
        {"hand i-k-j": HAND_GEMM["hand i-k-j"]},
        numpy_gemm,
    ),
    Experiment(
        "rev$conv1d",
        conv1d_with_gradients,
        {"algorithm": "two_phase", "value_function": "zero", "rules": f"phase1 then {CONV1D_RULES}"},
        40,
        5000,
        [32, 64, 128, 256, 512],
        [8, 16],
        conv_size,
        {},
        numpy_conv1d_rev,
        GRADIENT_VARIANTS,
    ),
]


# -- provenance -----------------------------------------------------------------------------------------
def provenance() -> dict[str, object]:
    """What the times depend on, for every row: CPU, compiler and flags."""
    return {
        "revision": revision(),
        "cpu": cpu_name(),
        "cpus": os.cpu_count(),
        "compiler": compiler_version(),
        "flags": cpp_compile.compile_flags(),
    }


# -- results file -----------------------------------------------------------------------------------------
def key_of(row: Row) -> Key:
    return row["program"], Size(row["size"]).text(), row["variant"]


def load_rows(path: Path) -> dict[Key, Row]:
    """The rows already written, by key (later lines win)."""
    rows: dict[Key, Row] = {}
    if not path.exists():
        return rows
    for i, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
            rows[key_of(row)] = row
        except (json.JSONDecodeError, KeyError, TypeError) as err:
            raise SystemExit(f"run.py: error: {path}:{i}: not a result row ({err}); fix or remove the file") from None
    return rows


def row_order(row: Row) -> tuple[int, float, int]:
    """Programs, then sizes, then variants in the order of EXPERIMENTS (unknown ones last)."""
    names = [e.program for e in EXPERIMENTS]
    p = names.index(row["program"]) if row["program"] in names else len(names)
    variants = EXPERIMENTS[p].variants() if p < len(names) else []
    v = variants.index(row["variant"]) if row["variant"] in variants else len(variants)
    return p, float(row.get("x", 0)), v


def save_rows(path: Path, rows: dict[Key, Row]) -> None:
    """Rewrite the file atomically: an interrupted run leaves whole rows only."""
    write_rows(path, sorted(rows.values(), key=row_order))


# -- measuring --------------------------------------------------------------------------------------------
def search_summary(exp: Experiment, case: Case) -> dict[str, object]:
    """The search's settings and what it found (costs are the def body's, as the search sees them)."""
    r = case.result
    return {
        **exp.search,
        "depth": exp.depth,
        "budget": exp.budget,
        "description": case.how,
        "start_cost": r.start_cost,
        "best_cost": r.best_cost,
        "baseline_cost": simplify_def(case.d).body.cost,
        "steps": len(r.steps),
        "rules_applied": list(dict.fromkeys(s.rule for s in r.steps)),
        "evaluations": r.evaluations,
        "seconds": round(case.search_seconds, 3),
    }


def more_summary(case: Case, label: str) -> dict[str, object] | None:
    """What one of the case's further searches found (None for the other variants)."""
    if label not in case.more:
        return None
    r, seconds = case.more[label]
    spec = GRADIENT_SEARCHES.get(label, {})
    return {
        **spec,
        "description": label,
        "start_cost": r.start_cost,
        "best_cost": r.best_cost,
        "steps": len(r.steps),
        "rules_applied": list(dict.fromkeys(s.rule for s in r.steps)),
        "evaluations": r.evaluations,
        "seconds": round(seconds, 3),
    }


def measure(exp: Experiment, case: Case, n: int, seconds: float, rounds: int) -> tuple[list[Measurement], list[str]]:
    """Every variant at size n, timed together; and the variants that failed a check."""
    table = run_case(case, [exp.size_of(n)], [], exp.hand, exp.numpy_fn, seconds, rounds)
    got = [row[0] for row in table.values() if row and row[0] is not None]
    bad = [m.variant for m in got if not (m.verified and m.agrees)]
    return got, bad


def make_row(
    exp: Experiment, case: Case, n: int, m: Measurement, context: dict[str, object], search: dict[str, object]
) -> Row:
    return {
        "program": exp.program,
        "file": case.file,
        "def": case.d.name,
        "x_name": "n",
        "x": n,
        "size": m.size,
        "variant": m.variant,
        "min_s": round(m.min_s, 9),  # the C++ driver's resolution; numpy's perf_counter gives noise digits
        "median_s": round(m.median_s, 9),
        "calls": m.runs,
        "verified": m.verified,
        "agrees": m.agrees,
        **context,
        "load_average": [round(x, 2) for x in os.getloadavg()],  # just after the size was measured
        "measured_at": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "search": search,
    }


def todo(rows: dict[Key, Row], quick: bool, force: bool) -> list[tuple[Experiment, int]]:
    """The (program, size) pairs to measure: those with a variant's row missing (all of them with force)."""
    out = []
    for exp in EXPERIMENTS:
        for n in exp.quick_sizes if quick else exp.sizes:
            size = exp.size_of(n).text()
            if force or any((exp.program, size, v) not in rows for v in exp.variants()):
                out.append((exp, n))
    return out


def run(args: argparse.Namespace) -> bool:
    """Measure what is missing, writing each size's rows as soon as they are measured; False if a check failed."""
    rows = load_rows(args.out)
    work = todo(rows, args.quick, args.force)
    context = {**provenance(), "min_seconds": args.seconds, "rounds": args.rounds}
    cases: dict[str, tuple[Case, dict[str, object]]] = {}
    ok = True
    bar = tqdm(work, desc="fig7", unit="size", file=sys.stderr)
    for exp, n in bar:
        bar.set_postfix_str(f"{exp.program} n={n}")
        if exp.program not in cases:  # the search runs only for a program with something left to measure
            case = exp.case(args.quick)
            cases[exp.program] = case, search_summary(exp, case)
        case, search = cases[exp.program]
        got, bad = measure(exp, case, n, args.seconds, args.rounds)
        if bad:
            ok = False
            tqdm.write(f"run.py: warning: {exp.program} n={n}: {', '.join(bad)} failed a check", file=sys.stderr)
        for m in got:
            row = make_row(exp, case, n, m, context, more_summary(case, m.variant) or search)
            rows[key_of(row)] = row
        save_rows(args.out, rows)
    bar.close()
    print_table(rows, args.quick)
    return ok


def print_table(rows: dict[Key, Row], quick: bool) -> None:
    """min (median) per call, one line per variant, and the baseline/optimised ratio (min times)."""
    for exp in EXPERIMENTS:
        sizes = exp.quick_sizes if quick else exp.sizes
        cells = {(r["variant"], r["x"]): r for r in rows.values() if r["program"] == exp.program}
        print(f"\n{exp.program}: min (median) per call")
        print(f"  {'n':<22}" + "".join(f"{n:>22}" for n in sizes))
        for v in exp.variants():
            line = [cells.get((v, n)) for n in sizes]
            text = [f"{format_seconds(r['min_s'])} ({format_seconds(r['median_s'])})" if r else "-" for r in line]
            print(f"  {v:<22}" + "".join(f"{t:>22}" for t in text))
        ratio = []
        for n in sizes:
            b, o = cells.get(("baseline", n)), cells.get(("optimised", n))
            ratio.append(f"{b['min_s'] / o['min_s']:.2f}x" if b and o else "-")
        print(f"  {'baseline / optimised':<22}" + "".join(f"{t:>22}" for t in ratio))


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="tiny sizes, short timing, results under runs/quick/")
    ap.add_argument("--force", action="store_true", help="measure every size again, even those already written")
    ap.add_argument("--out", type=Path, help=f"results file (default {RESULTS.relative_to(ROOT)})")
    ap.add_argument("--seconds", type=float, help="time each call for at least this long per round (0.2; quick 0.01)")
    ap.add_argument("--rounds", type=int, help="time the variants of a size in turn this many times (3; quick 1)")
    args = ap.parse_args(argv)
    args.out = args.out or (QUICK_RESULTS if args.quick else RESULTS)
    args.seconds = args.seconds if args.seconds is not None else (0.01 if args.quick else 0.2)
    args.rounds = args.rounds if args.rounds is not None else (1 if args.quick else 3)
    if args.seconds < 0 or args.rounds < 1:
        ap.error("--seconds must be >= 0 and --rounds >= 1")
    started = time.perf_counter()
    try:
        with fewer_gc_pauses():
            ok = run(args)
    except KsError as err:
        print(f"run.py: error: {err.message}", file=sys.stderr)
        return 1
    except OSError as err:
        print(f"run.py: error: {err.filename or ''}: {err.strerror}", file=sys.stderr)
        return 1
    print(f"\nresults in {args.out}; {time.perf_counter() - started:.0f} s")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
