"""Generated gradients of GEMM-like defs, optimised, against numpy's hand-written gradients (issue 32's target).

Run:  python benchmarks/bench_grad_gemm.py [--quick] [--seconds-search S] [--model NAME] [--defs NAME,...]
          [--sizes N,N,...] [--seconds T] [--rounds R] [--max-seconds-per-call T] [--out FILE]

Defs: ``matvec`` (y = M v) and ``dense_relu`` (relu(W x + b)) of benchmarks/programs/backend.ks.  Their
``rev$`` is made by autodiff (``grad_program(..., mode="rev")``, as ``knossos grad --mode rev``).
Searches (each --seconds-search S seconds, 60; --quick: 5; a budget of 10**7 evaluations, so the time
binds), all with the model's rules, depth and prunings and the alloc cost with every vector N long at
the largest size (as ``optimize.py --size``):
  model NAME      --model NAME (gradients) loaded as optimize.py loads it (app/models.py), its search;
  plain           the same search with the zero value function;
  saturate-astar  optimize.py's default search (a saturation pass, A*, a saturation pass), zero value.
Variants timed: ``original`` (the rev$ as generated), each search's best, and ``numpy``: the hand-written
gradient (dM = outer(dr, v), dv = M.T @ dr; for relu(W x + b): g = dr where W x + b > 0, dW = outer(g, x),
dx = W.T @ g, db = g; numpy recomputes W x + b for the mask, as the rev$ does).
Sizes: N = 32, 64, 128, 256 (--quick: 16, 32), every vector N long; dense_relu's b is set so that half of
W x + b is negative (the mask is exercised): b = s u - W x, s = +-1 and u in [0.5, 2] at random.
Timing: the C++ code (cpp_backend, its default flags: vectorised sums) and numpy both on ONE thread
(OMP/OpenBLAS/MKL_NUM_THREADS=1 before numpy loads; the compiled loops with threads=1); min and median per
call over calls repeated for at least --seconds (0.2), the variants of one size timed in turn for
--rounds (3) rounds.  Checks: every compiled variant equals the interpreter's original rev$ at N = 4
("verified") and numpy's gradient at every size ("agrees"; within cpp_backend.bench's tolerance).  A variant
is skipped at a size where its time at the last size, times the ratio of sizes to the 4th power, would
pass --max-seconds-per-call (2 s).
Printed: per def a table of min times, the growth exponent log(t_b / t_a) / log(b / a) between the two
largest sizes, the time over numpy's at the largest size, whether the target is met (exponent at most
TARGET_EXPONENT, time at most TARGET_RATIO x numpy's at N = 256), then each optimised rev$ as text.
Output: one JSON line per def, variant and size, and one summary line per def and variant, in
experiments/results/gradients/grad_gemm.jsonl (--quick: runs/quick/gradients/grad_gemm.jsonl; --out),
written atomically after every def, with the code revision and the machine.  Exit status 1 when a check fails.
"""

from __future__ import annotations

from ksbench.harness import pin_threads

pin_threads()  # before numpy loads: numpy on one thread, as the C++ code runs

import argparse  # noqa: E402
import dataclasses  # noqa: E402
import os  # noqa: E402
import sys  # noqa: E402
from collections.abc import Callable, Sequence  # noqa: E402
from dataclasses import dataclass  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

import numpy as np  # noqa: E402

from app.models import load_value_function  # noqa: E402
from autodiff import grad_program  # noqa: E402
from cpp_backend.bench import (  # noqa: E402
    Size,
    Variant,
    compile_variant,
    format_seconds,
    make_inputs,
    time_python,
    values_agree,
)
from cpp_backend.driver import CompiledProgram, Timing  # noqa: E402
from cpp_backend.numpy_refs import to_value  # noqa: E402
from knossos.alloc_cost import AllocCost  # noqa: E402
from knossos.errors import KsError  # noqa: E402
from knossos.interpreter import Interpreter  # noqa: E402
from knossos.parser import load_program  # noqa: E402
from knossos.printer import format_def  # noqa: E402
from knossos.program import Def, Program  # noqa: E402
from knossos.types import Kind  # noqa: E402
from ksbench.harness import (  # noqa: E402
    Contender,
    Row,
    add_timing_arguments,
    growth_exponent,
    guarded_main,
    search,
    stamp,
    write_rows,
)
from search.plan import Plan  # noqa: E402
from search.value import ValueFunction, ZeroValue  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent

PROGRAM = ROOT / "benchmarks" / "programs" / "backend.ks"
DEFS = ("matvec", "dense_relu")
RESULTS = ROOT / "experiments" / "results" / "gradients" / "grad_gemm.jsonl"
QUICK_RESULTS = ROOT / "runs" / "quick" / "gradients" / "grad_gemm.jsonl"
SIZES, QUICK_SIZES = (32, 64, 128, 256), (16, 32)
#: Every compiled loop and numpy run on one thread.
THREADS = 1
#: The searches' evaluation budget: more than any of them spends in its seconds.
BUDGET = 10**7
#: The power of N a variant's time is taken to grow with, to skip slow ones (the generated rev$ of
#: dense_relu makes a dense deltaVec of the whole matrix per (i, j) pair at worst: N^4).
GROWTH_POWER = 4
#: Issue 32's target: time growing as N^2 (an exponent at most this, measured between the two largest
#: sizes: a little above 2 for timing noise and caches) and within this factor of numpy's at N = 256.
TARGET_EXPONENT = 2.25
TARGET_RATIO = 3.0
#: The checks against the interpreter run at this N.
CHECK_N = 4
SEED = 0

NumpyRef = Callable[[Sequence[Any]], Callable[[], tuple[Any, ...]]]


# -- numpy's hand-written gradients ------------------------------------------------------------------------
def matvec_rev(args: Sequence[Any]) -> Callable[[], tuple[Any, ...]]:
    """rev$matvec (m, v, d$r) -> (d m, d v) for y = m v."""
    m, v, dr = (np.array(a, dtype=float) for a in args)

    def run() -> tuple[Any, ...]:
        return np.outer(dr, v), m.T @ dr

    return run


def dense_relu_rev(args: Sequence[Any]) -> Callable[[], tuple[Any, ...]]:
    """rev$dense_relu (w, x, b, d$r) -> (d w, d x, d b) for y = relu(w x + b)."""
    w, x, b, dr = (np.array(a, dtype=float) for a in args)

    def run() -> tuple[Any, ...]:
        g = np.where(w @ x + b > 0.0, dr, 0.0)
        return np.outer(g, x), w.T @ g, g

    return run


NUMPY_REFS: dict[str, NumpyRef] = {"matvec": matvec_rev, "dense_relu": dense_relu_rev}


# -- inputs ------------------------------------------------------------------------------------------------
def inputs(primal: str, d: Def, n: int, seed: int = SEED) -> list[Any]:
    """rev$'s arguments at N = n (cpp_backend.bench.make_inputs: Floats in [0.5, 2]); for dense_relu,
    b is remade so that W x + b = s u with s = +-1 and u in [0.5, 2] at random (both sides of the ReLU)."""
    args = make_inputs(d, Size({}, n), seed)
    if primal == "dense_relu":
        w, x = np.array(args[0]), np.array(args[1])
        rng = np.random.default_rng(seed + 1)
        z = rng.choice((-1.0, 1.0), size=n) * rng.uniform(0.5, 2.0, size=n)
        args[2] = (z - w @ x).tolist()
    return args


# -- the searches ------------------------------------------------------------------------------------------
def alloc_sizes(d: Def, n: int) -> dict[str, int | tuple[int, ...]]:
    """Every vector parameter of ``d`` n long at every level (optimize.py's --size p=NxN...)."""
    out: dict[str, int | tuple[int, ...]] = {}
    for p in d.params:
        if p.type.kind is Kind.VEC:
            rank = p.type.vec_rank
            out[p.name] = n if rank == 1 else (n,) * rank
    return out


def run_searches(d: Def, model: str, seconds: float, n: int) -> list[Contender]:
    """The model's search, the same with the zero value function, and saturate-astar, each ``seconds``."""
    value = load_value_function(model)
    trained = Plan().of_model(value).overridden(budget=BUDGET, seconds=seconds, cost="alloc", sizes=alloc_sizes(d, n))
    s = trained.search
    settings: Row = {
        "model": model,
        "rules": trained.rules,
        "depth": s.depth,
        "prune_commutes": s.prune_commutes,
        "prune_inlines": s.prune_inlines,
        "cost": f"alloc, every vector {n} long",
        "budget": BUDGET,
        "seconds": seconds,
    }
    searches: list[tuple[str, str, ValueFunction]] = [
        (f"model {model}", s.algorithm, value),
        ("plain", s.algorithm, ZeroValue()),
        ("saturate-astar", "saturate-astar", ZeroValue()),
    ]
    out = []
    for label, algorithm, v in searches:
        result = search(label, d.body, trained.overridden(algorithm=algorithm), v, indent="  ")
        c = Contender(label, {**settings, "search": algorithm, "value": label.split()[0]}, result)
        print(f"    {c.describe('alloc cost')}", flush=True)
        out.append(c)
    return out


# -- timing --------------------------------------------------------------------------------------------------
@dataclass
class Timed:
    label: str
    kind: str
    program: Program
    compiled: CompiledProgram | None = None
    contender: Contender | None = None
    verified: bool | None = None
    #: The last size timed and its min time (for skipping).
    last: tuple[int, float] | None = None


def run_one(compiled: CompiledProgram, name: str, args: Sequence[Any], timing: float | None) -> Any:
    got = compiled.run([(name, args)], timing=timing)[0]
    if isinstance(got, KsError):
        raise got
    return got


def verify(primal: str, d: Def, variants: Sequence[Timed]) -> None:
    """Each compiled variant against the interpreter's original rev$ at N = CHECK_N."""
    args = inputs(primal, d, CHECK_N)
    want = Interpreter().call(d, args)
    for v in variants:
        assert v.compiled is not None
        try:
            have = run_one(v.compiled, d.name, args, None)
            v.verified = values_agree(want, have)
        except KsError as err:
            print(f"  {v.label}: failed at N={CHECK_N}: {err.message}", flush=True)
            v.verified = False


def time_size(primal: str, d: Def, variants: Sequence[Timed], n: int, args: argparse.Namespace) -> list[Row]:
    """Every variant (and numpy) at N = n, in turn for --rounds rounds; rows of the results."""
    values = inputs(primal, d, n)
    ref = NUMPY_REFS[primal](values)
    want = to_value(ref())
    keep: list[Timed] = []
    rows: list[Row] = []
    for v in variants:
        predicted = None if v.last is None else v.last[1] * (n / v.last[0]) ** GROWTH_POWER
        if predicted is not None and predicted > args.max_seconds_per_call:
            rows.append({"variant": v.label, "kind": v.kind, "n": n, "skipped": True, "predicted_s": predicted})
        else:
            keep.append(v)
    timings: dict[str, list[Timing]] = {v.label: [] for v in keep}
    numpy_times: list[tuple[float, float, int]] = []
    agrees = {v.label: True for v in keep}
    numpy_agrees = True
    for _ in range(args.rounds):
        for v in keep:
            assert v.compiled is not None
            got = run_one(v.compiled, d.name, values, args.seconds)
            assert isinstance(got, Timing)
            agrees[v.label] = agrees[v.label] and values_agree(want, got.value)
            timings[v.label].append(dataclasses.replace(got, value=None))
        lo, med, runs, result = time_python(ref, args.seconds)
        numpy_agrees = numpy_agrees and values_agree(want, to_value(result))
        numpy_times.append((lo, med, runs))
    numpy_min = min(t[0] for t in numpy_times)
    for v in keep:
        ts = timings[v.label]
        lo = min(t.min_s for t in ts)
        v.last = (n, lo)
        rows.append(
            {
                "variant": v.label,
                "kind": v.kind,
                "n": n,
                "skipped": False,
                "min_s": lo,
                "median_s": sorted(t.median_s for t in ts)[len(ts) // 2],
                "runs": sum(t.runs for t in ts),
                "verified": v.verified,
                "agrees": agrees[v.label],
                "over_numpy": lo / numpy_min,
                "alloc_cost": AllocCost(alloc_sizes(d, n))(v.program.defs[d.name].body),
                "reference_cost": v.program.defs[d.name].body.cost,
            }
        )
    rows.append(
        {
            "variant": "numpy",
            "kind": "numpy",
            "n": n,
            "skipped": False,
            "min_s": numpy_min,
            "median_s": sorted(t[1] for t in numpy_times)[len(numpy_times) // 2],
            "runs": sum(t[2] for t in numpy_times),
            "verified": None,
            "agrees": numpy_agrees,
            "over_numpy": 1.0,
        }
    )
    order = [v.label for v in variants] + ["numpy"]
    return sorted(rows, key=lambda r: order.index(r["variant"]))


# -- reporting -------------------------------------------------------------------------------------------
def summaries(rows: Sequence[Row], sizes: Sequence[int]) -> list[Row]:
    """Per variant: the growth exponent between the two largest sizes and the time over numpy's at the
    largest, and whether the target is met."""
    a, b = sizes[-2], sizes[-1]
    at = {(r["variant"], r["n"]): r for r in rows}
    out = []
    for label in dict.fromkeys(r["variant"] for r in rows):
        ra, rb = at.get((label, a)), at.get((label, b))
        t_a = None if ra is None or ra["skipped"] else ra["min_s"]
        t_b = None if rb is None or rb["skipped"] else rb["min_s"]
        g = growth_exponent(t_a, t_b, a, b)
        over = None if rb is None or rb["skipped"] else rb["over_numpy"]
        met = g is not None and over is not None and g <= TARGET_EXPONENT and over <= TARGET_RATIO
        out.append(
            {
                "variant": label,
                "kind": "summary",
                "growth_from": a,
                "growth_to": b,
                "growth_exponent": g,
                "over_numpy_at_largest": over,
                "largest_n": b,
                "target_met": met if b == 256 else None,
            }
        )
    return out


def checks_text(r: Row) -> str:
    if r["skipped"]:
        return ""
    if r["kind"] == "numpy":
        return "-"
    return "yes" if r["verified"] and r["agrees"] else "NO (interpreter)" if not r["verified"] else "NO (numpy)"


def print_table(rev: str, rows: Sequence[Row], summary: Sequence[Row], sizes: Sequence[int]) -> None:
    at = {(r["variant"], r["n"]): r for r in rows}
    a, b = sizes[-2], sizes[-1]
    head = "".join(f"{'N=' + str(n):>11}" for n in sizes)
    print(f"\n{rev}: min seconds per call, one thread")
    print(f"  {'variant':<17}{head}{'growth ' + str(a) + '->' + str(b):>17}{'/ numpy @' + str(b):>14}  checks  target")
    for s in summary:
        label = s["variant"]
        cells = ""
        checks = []
        for n in sizes:
            r = at.get((label, n))
            cells += f"{'-' if r is None else 'skipped' if r['skipped'] else format_seconds(r['min_s']):>11}"
            if r is not None and not r["skipped"]:
                checks.append(checks_text(r))
        g, over = s["growth_exponent"], s["over_numpy_at_largest"]
        check = "-" if not checks or set(checks) == {"-"} else "yes" if set(checks) == {"yes"} else "NO"
        target = "-" if label == "numpy" or s["target_met"] is None else "met" if s["target_met"] else "not met"
        print(
            f"  {label:<17}{cells}{'-' if g is None else f'{g:.2f}':>17}"
            f"{'-' if over is None else f'{over:.2f}x':>14}  {check:<6}  {target}"
        )


# -- the run -----------------------------------------------------------------------------------------------
def bench_def(primal: str, args: argparse.Namespace, common: Row) -> tuple[list[Row], bool]:
    program = grad_program(load_program(PROGRAM), defs=[primal], mode="rev")
    rev = f"rev${primal}"
    d = program.defs[rev]
    sizes: list[int] = args.sizes
    print(f"\n== {rev} (generated from {PROGRAM.relative_to(ROOT)}) ==", flush=True)
    contenders = run_searches(d, args.model, args.seconds_search, sizes[-1])
    variants = [Timed("original", "original", program)] + [
        Timed(c.label, "search", program.with_def(dataclasses.replace(d, body=c.result.best)), contender=c)
        for c in contenders
    ]
    print("  compiling...", flush=True)
    for v in variants:
        v.compiled = compile_variant(Variant(v.label, v.program), rev, threads=THREADS)
    verify(primal, d, variants)
    rows: list[Row] = []
    for n in sizes:
        print(f"  timing N={n} ({args.rounds} rounds)...", flush=True)
        rows += time_size(primal, d, variants, n, args)
    summary = summaries(rows, sizes)
    print_table(rev, rows, summary, sizes)
    by_label = {v.label: v for v in variants}
    base = {"program": str(PROGRAM.relative_to(ROOT)), "primal": primal, "def": rev, **common}
    out: list[Row] = []
    for r in rows + summary:
        timed = by_label.get(r["variant"])
        extra: Row = {}
        if timed is not None and timed.contender is not None:
            extra = {"search": timed.contender.to_json()}
            if r["kind"] == "summary":
                extra["best"] = format_def(timed.program.defs[rev])
        out.append({**base, **r, **extra})
    for c, v in zip(contenders, variants[1:]):
        print(f"\n{c.label}'s {rev} ({c.describe()}):\n{format_def(v.program.defs[rev])}")
    ok = all(r["skipped"] or r["kind"] == "summary" or checks_text(r) in ("yes", "-") for r in rows)
    ok = ok and all(r["agrees"] for r in rows if r["kind"] == "numpy" and not r["skipped"])
    return out, ok


def sizes_arg(text: str) -> list[int]:
    try:
        sizes = [int(s) for s in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{text}' is not a list of whole numbers") from None
    if len(sizes) < 2 or any(s < 1 for s in sizes) or sizes != sorted(set(sizes)):
        raise argparse.ArgumentTypeError(f"'{text}': give two or more increasing whole numbers")
    return sizes


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="N = 16, 32 and 5 s searches: a quick check that it all works")
    ap.add_argument("--model", default="gradients", metavar="NAME", help="the learned search's model (gradients)")
    ap.add_argument("--defs", default=",".join(DEFS), metavar="NAME,...", help=f"the primal defs ({','.join(DEFS)})")
    ap.add_argument("--sizes", type=sizes_arg, default=None, metavar="N,N,...", help="sizes (32,64,128,256)")
    add_timing_arguments(ap)
    args = ap.parse_args(argv)
    args.defs = [s for s in args.defs.split(",") if s]
    unknown = [s for s in args.defs if s not in NUMPY_REFS]
    if unknown or not args.defs:
        ap.error(f"--defs: choose from {', '.join(DEFS)}")
    if args.sizes is None:
        args.sizes = list(QUICK_SIZES if args.quick else SIZES)
    if args.seconds_search is None:
        args.seconds_search = 5.0 if args.quick else 60.0
    if args.out is None:
        args.out = QUICK_RESULTS if args.quick else RESULTS
    return args


def run(args: argparse.Namespace) -> bool:
    common = {**stamp(args), "threads": THREADS, "numpy_threads": os.environ.get("OPENBLAS_NUM_THREADS")}
    rows: list[Row] = []
    ok = True
    for primal in args.defs:
        found, good = bench_def(primal, args, common)
        rows += found
        ok = ok and good
        write_rows(args.out, rows)
    print(f"\nthreads: {THREADS} (compiled loops and numpy); machine: {os.cpu_count()} cores")
    print(f"target: growth exponent <= {TARGET_EXPONENT} and <= {TARGET_RATIO}x numpy at N=256")
    for r in rows:
        if r["kind"] == "summary" and r["variant"] != "numpy":
            met = r["target_met"]
            print(f"  {r['def']:<16}{r['variant']:<18}{'-' if met is None else 'met' if met else 'not met'}")
    print(f"wrote {len(rows)} rows to {args.out}")
    print("checks: " + ("every variant timed agrees with the interpreter and numpy" if ok else "FAILED"))
    return ok


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    return guarded_main(lambda: run(args), "bench_grad_gemm.py")


if __name__ == "__main__":
    sys.exit(main())
