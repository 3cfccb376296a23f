"""The C++ backend against numpy (issue 33): dense kernels written as Knossos loops, compiled, timed.

Run:  python benchmarks/bench_backend.py [--quick] [--seconds S] [--out FILE] [--cases gemm,call]

Cases (benchmarks/programs/backend.ks, and blas_test.kso's ``gemm``):
  matvec      y = M v, M n x n                                  numpy: M @ v
  dense_relu  relu(W x + b), W n x n                            numpy: np.maximum(W @ x + b, 0)
  rowsums     the sum of each row of an n x n matrix            numpy: M.sum(axis=1)
  gemm        alpha A B + beta C, n x n, fused: the best that pseudo-beam search finds (zero value
              function, ml_rules_no_bind, depth 99, budget 5000, commutations and idle inlines
              pruned; as benchmarks/bench_walltime.py)          numpy: alpha * (A @ B) + beta * C
  sumsq       sum of x_i^2 over 2^20 elements, fused            numpy: x @ x (BLAS ddot) and np.sum(x * x)
  axpby       a x + b y over 2^20 elements, fused               numpy: a * x + b * y
  call        a compiled call with small arguments through cpp_backend.compile_def (sumsq of 4 elements):
              microseconds per call from Python, overhead included
n = 1024 (--quick: 64, and 2^12 elements).  Configurations of the compiled code:
  before      --exact-order, 1 thread: Float sums in index order, bit-identical to the interpreter (the
              code of before issue 33 had the same loops, but neither raw-pointer versions nor OpenMP)
  after-1t    the default (sums vectorised), 1 thread
  after       the default, the machine's cores (``--threads`` default)
numpy runs on one thread (OPENBLAS_NUM_THREADS=1 and friends, unless set), in the same process run.
Every compiled figure is checked against the interpreter at size 4 (``verified``: to the bit under
exact order, within the documented tolerance otherwise) and against numpy's output at the timed size.
Times are per call, min (and median) over calls repeated for at least --seconds (0.3); ratios are
compiled min / numpy min (below 1: faster than numpy).  Rows go to experiments/results/backend/results.jsonl;
``--table`` prints that file as the table in docs/cpp.md.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import json
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ksbench.harness import machine, pin_threads
from ksbench.results import revision

pin_threads()  # numpy on one thread

import numpy as np  # noqa: E402

from cpp_backend import compile as cpp_compile  # noqa: E402
from cpp_backend.bench import Size, Variant, bench, format_seconds, time_python, values_agree  # noqa: E402
from cpp_backend.callable import compile_def  # noqa: E402
from cpp_backend.driver import default_threads  # noqa: E402
from knossos.parser import load_program  # noqa: E402
from knossos.program import Program  # noqa: E402
from ksdata.loader import DATA  # noqa: E402
from search.plan import Plan, run  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent

BACKEND = ROOT / "benchmarks" / "programs" / "backend.ks"
BLAS = DATA / "programs" / "blas_test.kso"
OUT = ROOT / "experiments" / "results" / "backend" / "results.jsonl"

#: The issue's targets: compiled min / numpy min at most this.
TARGETS = {"matvec": 2.0, "dense_relu": 2.0, "rowsums": 2.0, "gemm": 1.5, "sumsq": 1.0, "axpby": 1.0}
CALL_TARGET_S = 20e-6

Numpy = Callable[[list[Any]], Callable[[], Any]]


def _arrays(args: list[Any]) -> list[Any]:
    return [np.array(a) if isinstance(a, list) else a for a in args]


def np_matvec(args: list[Any]) -> Callable[[], Any]:
    m, v = _arrays(args)
    return lambda: m @ v


def np_dense(args: list[Any]) -> Callable[[], Any]:
    w, x, b = _arrays(args)
    return lambda: np.maximum(w @ x + b, 0.0)


def np_rowsums(args: list[Any]) -> Callable[[], Any]:
    (m,) = _arrays(args)
    return lambda: m.sum(axis=1)


def np_gemm(args: list[Any]) -> Callable[[], Any]:
    alpha, a, b, beta, c = _arrays(args)
    return lambda: alpha * (a @ b) + beta * c


def np_sumsq(args: list[Any]) -> Callable[[], Any]:
    (x,) = _arrays(args)
    return lambda: float(x @ x)


def np_sumsq_sum(args: list[Any]) -> Callable[[], Any]:
    (x,) = _arrays(args)
    return lambda: float(np.sum(x * x))


def np_axpby(args: list[Any]) -> Callable[[], Any]:
    a, x, b, y = _arrays(args)
    return lambda: a * x + b * y


def fused_gemm() -> tuple[Program, str]:
    program = load_program(BLAS)
    d = program.defs["gemm"]
    plan = Plan(rules="ml_rules_no_bind").overridden(
        algorithm="pseudo-beam", depth=99, budget=5000, prune_commutes=True, prune_inlines=True
    )
    t0 = time.perf_counter()
    result = run(d.body, plan)
    how = (
        f"pseudo-beam, ml_rules_no_bind, depth 99, budget 5000: cost {result.start_cost:g} -> {result.best_cost:g} "
        f"in {len(result.steps)} rewrites, {time.perf_counter() - t0:.1f} s"
    )
    return program.with_def(dataclasses.replace(d, body=result.best)), how


CONFIGS = [("before", True, 1), ("after-1t", False, 1), ("after", False, None)]


def markdown_table(rows: list[dict[str, Any]]) -> str:
    """The rows of a results file as the table of docs/cpp.md (``--table``)."""
    lines = [
        "| case | numpy | before (exact order, 1 thread) | after, 1 thread | after, all cores | target |",
        "|---|---|---|---|---|---|",
    ]
    cells: dict[tuple[str, str], dict[str, dict[str, Any]]] = {}
    for r in rows:
        cells.setdefault((r["case"], r.get("numpy", "")), {})[r["config"]] = r
    for (case, label), by in cells.items():
        if case == "call":
            text = [format_seconds(by[c]["min_s"]) if c in by else "-" for c, _, _ in CONFIGS]
            lines.append(f"| compiled call, 4 elements, from Python | - | {' | '.join(text)} | < 20 us |")
            continue
        first = next(iter(by.values()))
        text = [f"{format_seconds(by[c]['min_s'])} ({by[c]['ratio']:.2f}x)" if c in by else "-" for c, _, _ in CONFIGS]
        lines.append(
            f"| {case} | `{label}` {format_seconds(first['numpy_min_s'])} | {' | '.join(text)} | "
            f"<= {first['target_ratio']:g}x |"
        )
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="small sizes (a check that it all works)")
    ap.add_argument("--seconds", type=float, default=0.3, help="repeat each timed call for at least this long")
    ap.add_argument(
        "--out", type=Path, default=None, help=f"JSONL output (default {OUT.relative_to(ROOT)}; --quick: none)"
    )
    ap.add_argument("--cases", default="", help="comma-separated cases to run (default all; with it, no results file)")
    ap.add_argument("--table", action="store_true", help="print the results file as docs/cpp.md's table; run nothing")
    args = ap.parse_args()
    if args.table:
        path = args.out or OUT
        print(markdown_table([json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]))
        return 0
    n, big = (64, 1 << 12) if args.quick else (1024, 1 << 20)
    backend = load_program(BACKEND)
    gemm_program, gemm_how = fused_gemm()
    cases: list[tuple[str, Program, str, int, list[tuple[str, Numpy]]]] = [
        ("matvec", backend, "matvec", n, [("M @ v", np_matvec)]),
        ("dense_relu", backend, "dense_relu", n, [("maximum(W @ x + b, 0)", np_dense)]),
        ("rowsums", backend, "rowsums", n, [("M.sum(axis=1)", np_rowsums)]),
        ("gemm", gemm_program, "gemm", n, [("alpha * (A @ B) + beta * C", np_gemm)]),
        ("sumsq", backend, "sumsq", big, [("x @ x", np_sumsq), ("np.sum(x * x)", np_sumsq_sum)]),
        ("axpby", backend, "axpby", big, [("a * x + b * y", np_axpby)]),
    ]
    if args.cases:
        wanted = set(args.cases.split(","))
        unknown = wanted - {c[0] for c in cases} - {"call"}
        if unknown:
            ap.error(f"unknown cases: {', '.join(sorted(unknown))}")
        cases = [c for c in cases if c[0] in wanted]
    threads = default_threads()
    meta = {
        "revision": revision(),
        "machine": machine(),
        "cores": threads,
        "load": os.getloadavg()[0],
        "flags": cpp_compile.compile_flags(),
        "numpy_threads": os.environ.get("OPENBLAS_NUM_THREADS"),
    }
    rows: list[dict[str, Any]] = []
    print(f"backend benchmark: n = {n}, {big} elements for sumsq/axpby; {threads} cores; gemm: {gemm_how}")
    print(f"{'case':<11} {'config':<9} {'compiled':>10} {'numpy':>10} {'ratio':>7} {'target':>7}  numpy form / checks")
    for case, program, name, size_n, refs in cases:
        numpy_times: dict[str, float] = {}
        outputs: dict[str, Any] = {}

        def on_reference(
            size: Size,
            inputs: list[object],
            output: Any,
            refs: Any = refs,
            numpy_times: dict[str, float] = numpy_times,
            outputs: dict[str, Any] = outputs,
        ) -> None:
            for label, make in refs:
                if label not in numpy_times:
                    fn = make(list(inputs))
                    t_min, _, _, result = time_python(fn, args.seconds)
                    numpy_times[label] = t_min
                    outputs[label] = result
            outputs["compiled"] = output

        for config, exact, nthreads in CONFIGS:
            outputs.pop("compiled", None)
            (m,) = bench(
                [Variant(config, program)],
                name,
                [Size({}, size_n)],
                min_seconds=args.seconds,
                on_reference=on_reference,
                exact_order=exact,
                threads=nthreads,
            )
            got = outputs.get("compiled")
            first_label = refs[0][0]
            want = outputs[first_label]
            want_value = want.tolist() if isinstance(want, np.ndarray) else want
            agrees_numpy = got is not None and values_agree(want_value, got)
            for label, _ in refs:
                ratio = m.min_s / numpy_times[label]
                target = TARGETS[case]
                ok = "yes" if m.verified and agrees_numpy else "NO"
                print(
                    f"{case:<11} {config:<9} {format_seconds(m.min_s):>10} {format_seconds(numpy_times[label]):>10} "
                    f"{ratio:>6.2f}x {target:>6.1f}x  {label}; verified {ok}"
                )
                rows.append(
                    {
                        "case": case,
                        "config": config,
                        "exact_order": exact,
                        "threads": nthreads or threads,
                        "size": m.size,
                        "min_s": m.min_s,
                        "median_s": m.median_s,
                        "runs": m.runs,
                        "numpy": label,
                        "numpy_min_s": numpy_times[label],
                        "ratio": ratio,
                        "target_ratio": target,
                        "meets_target": ratio <= target,
                        "verified": m.verified,
                        "agrees_with_numpy": agrees_numpy,
                        **meta,
                    }
                )
    # the overhead of a compiled call with small arguments, from Python
    call_configs: list[tuple[str, bool, int | None]] = (
        CONFIGS if not args.cases or "call" in args.cases.split(",") else []
    )
    for config, exact, nthreads in call_configs:
        f = compile_def(BACKEND, "sumsq", exact_order=exact, threads=nthreads)
        x = np.array([0.5, 1.0, 1.5, 2.0])
        t_min, t_med, calls, value = time_python(functools.partial(f, x), args.seconds)
        assert value == 7.5
        print(
            f"{'call':<11} {config:<9} {format_seconds(t_min):>10} {'-':>10} {'-':>7} {'20 us':>7}  sumsq of 4 elements from Python"
        )
        rows.append(
            {
                "case": "call",
                "config": config,
                "exact_order": exact,
                "threads": nthreads or threads,
                "size": {"n": 4},
                "min_s": t_min,
                "median_s": t_med,
                "runs": calls,
                "target_s": CALL_TARGET_S,
                "meets_target": t_min <= CALL_TARGET_S,
                **meta,
            }
        )
    out = args.out if args.out is not None else (None if args.quick or args.cases else OUT)
    if out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
        with open(out, "w", encoding="utf-8") as fh:
            for r in rows:
                fh.write(json.dumps(r) + "\n")
        print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
