"""Wall-clock time of GEMM and rev$conv1d compiled to C++: as written, baseline, optimised, by hand, numpy.

Run:  python benchmarks/bench_walltime.py [--quick] [--seconds S]

Cases:
  GEMM: the ``gemm`` def of blas_test.kso (alpha*A*B + beta*C), square n x n matrices,
        n = 256, 512, 1024 (--quick: 64, 128);
  rev$conv1d (conv1d_rev_test.kso): the gradient of a 1-d convolution of k kernels of l channels and
        width kn over an image of l channels and n samples (kernels k x l x kn, image l x n, d$r k x n);
        (k, l, kn, n) = (8, 8, 3, 64), (8, 8, 5, 128), (16, 16, 5, 128) (--quick: (4, 4, 3, 32)).
Variants, each compiled with g++ -O3 -std=c++17 -march=native -ffp-contract=off (cpp_backend.compile):
  original   the def as written;
  baseline   after the ksc-style baseline simplifier (rules/baseline.py; the def only, as for the others);
  optimised  the best the current search finds with the zero value function:
             GEMM: pseudo-beam search with commutations and idle inlines pruned, ml_rules_no_bind,
             depth 99, budget 5000 (it fuses the three temporaries, docs/programs.md);
             rev$conv1d: two-phase search (phase1 rules, then ml_rules_no_bind+zero_tensor_rules: the
             paper's rules and two that drop zero vectors, rules/zeros.py), depth 40, budget 5000;
             the search runs every time (nothing is cached on disk; the C++ compilation cache is a
             temporary folder removed at the end);
  hand       GEMM only: hand-written C++ loops on the same runtime, compiled with the same flags, called
             by the same driver: i-k-j (row i of A*B accumulates a[i][k] times row k of B; the
             practical limit) and the naive i-j-k;
  numpy      for context: alpha * (A @ B) + beta * C (BLAS on one thread, as the C++ code: the
             *_NUM_THREADS variables are set to 1 unless already set), and the same gradient written
             with matrix products, one per kernel tap.
Times are per call, min and median of calls repeated for at least 0.2 s (--seconds), the variants
timed in turn in 3 rounds (--rounds; min over all rounds, median of the rounds' medians), after one
check of every variant against the interpreter at size 4 (all sizes capped at 4) and of every
variant's and numpy's output against the original's at every size (relative tolerance 1e-9).
Inputs are pseudo-random Floats in [0.5, 2] (seed 0).  Ratios use the min times.
Targets: optimised >= 1.1x faster than baseline for GEMM at n = 1024 and >= 1.3x for
rev$conv1d, and within 1.5x of the hand-written loop.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

from ksbench.harness import compiler_version, cpu_name, fresh_cpp_cache, pin_threads

pin_threads()  # numpy on one thread, as the C++ code runs

from cpp_backend import compile as cpp_compile  # noqa: E402
from cpp_backend.bench import Measurement, Size, format_seconds  # noqa: E402
from ksbench.walltime import (  # noqa: E402
    HAND_GEMM,
    Case,
    conv1d_case,
    gemm_case,
    numpy_conv1d_rev,
    numpy_gemm,
    run_case,
)


def print_table(case: Case, labels: list[str], table: dict[str, list[Measurement | None]], hand: str | None) -> bool:
    width = max(22, *(len(x) + 2 for x in labels))
    print(f"  {'min (median) per call':<24}" + "".join(f"{x:>{width}}" for x in labels))
    ok = True
    for variant, row in table.items():
        cells = []
        for m in row:
            if m is None:
                cells.append("-")
                continue
            mark = "" if m.verified and m.agrees else " !"
            ok = ok and m.verified and m.agrees
            cells.append(f"{format_seconds(m.min_s)} ({format_seconds(m.median_s)}){mark}")
        print(f"  {variant:<24}" + "".join(f"{c:>{width}}" for c in cells))

    def ratio(num: str, den: str) -> list[str]:
        out = []
        for a, b in zip(table[num], table[den]):
            out.append(f"{a.min_s / b.min_s:.2f}x" if a is not None and b is not None and b.min_s > 0 else "-")
        return out

    print(f"  {'baseline / optimised':<24}" + "".join(f"{c:>{width}}" for c in ratio("baseline", "optimised")))
    print(f"  {'original / optimised':<24}" + "".join(f"{c:>{width}}" for c in ratio("original", "optimised")))
    if hand is not None:
        print(f"  {'optimised / ' + hand:<24}" + "".join(f"{c:>{width}}" for c in ratio("optimised", hand)))
    print(f"  {'optimised / numpy':<24}" + "".join(f"{c:>{width}}" for c in ratio("optimised", "numpy")))
    print(
        "  checks: every variant equal to the interpreter at size 4 and to the original at every size: "
        + ("yes" if ok else "NO (rows marked !)")
    )
    return ok


def machine_line() -> str:
    """The CPU, its load, the compiler and its flags, as the run's first line says them."""
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    return (
        f"{cpu_name()}, {os.cpu_count()} CPUs, load average {load}; {compiler_version()}; "
        f"flags {' '.join(cpp_compile.compile_flags())}"
    )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="small sizes only (a quick check that it all works)")
    ap.add_argument("--seconds", type=float, default=0.2, help="repeat each timed call for at least this long (0.2)")
    ap.add_argument("--rounds", type=int, default=3, help="time the variants in turn this many times (3)")
    args = ap.parse_args()
    started = time.perf_counter()
    gemm_n = [64, 128] if args.quick else [256, 512, 1024]
    conv = [(4, 4, 3, 32)] if args.quick else [(8, 8, 3, 64), (8, 8, 5, 128), (16, 16, 5, 128)]
    ok = True
    with fresh_cpp_cache():
        print(f"machine: {machine_line()}")

        gemm = gemm_case()
        print(f"\nGEMM: 'gemm' of blas_test.kso, n x n matrices ({gemm.d.name}: alpha*A*B + beta*C)")
        print(gemm.describe())
        labels = [f"n={n}" for n in gemm_n]
        sizes = [Size({}, n, "n") for n in gemm_n]
        table = run_case(gemm, sizes, labels, HAND_GEMM, numpy_gemm, args.seconds, args.rounds)
        hand = min(HAND_GEMM, key=lambda h: min(m.min_s for m in table[h] if m is not None))
        ok = print_table(gemm, labels, table, hand) and ok
        last = table["optimised"][-1], table["baseline"][-1], table[hand][-1]
        if all(m is not None for m in last):
            o, b, h = last
            assert o is not None and b is not None and h is not None
            print(
                f"  at {labels[-1]}: optimised is {b.min_s / o.min_s:.2f}x the baseline's speed (target >= 1.1x) and "
                f"takes {o.min_s / h.min_s:.2f}x the time of the fastest hand loop, {hand} (target <= 1.5x)"
            )

        conv1d = conv1d_case()
        print("\nrev$conv1d (conv1d_rev_test.kso): kernels k x l x kn, image l x n, d$r k x n")
        print(conv1d.describe())
        labels = [f"k={k} l={c} kn={kn} n={n}" for k, c, kn, n in conv]
        sizes = [Size({"kernels": (k, c, kn), "image": (c, n), "d$r": (k, n)}) for k, c, kn, n in conv]
        table = run_case(conv1d, sizes, labels, {}, numpy_conv1d_rev, args.seconds, args.rounds)
        ok = print_table(conv1d, labels, table, None) and ok
        o, b = table["optimised"][-1], table["baseline"][-1]
        if o is not None and b is not None:
            print(f"  at {labels[-1]}: optimised is {b.min_s / o.min_s:.2f}x the baseline's speed (target >= 1.3x)")
    print(f"\ntotal {time.perf_counter() - started:.0f} s (searches, compilations, checks and timing)")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
