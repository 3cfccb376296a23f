"""Wall-clock time of GEMM and rev$conv1d compiled to C++: as written, baseline, optimised, by hand, numpy.

Run:  python benchmarks/bench_walltime.py [--quick] [--seconds S]

Cases:
  GEMM: the ``gemm`` def of blas_test.kso (alpha*A*B + beta*C), square n x n matrices,
        n = 256, 512, 1024 (--quick: 64, 128);
  rev$conv1d (conv1d_rev_test.kso): the gradient of a 1-d convolution of k kernels of l channels and
        width kn over an image of l channels and n samples (kernels k x l x kn, image l x n, d$r k x n);
        (k, l, kn, n) = (8, 8, 3, 64), (8, 8, 5, 128), (16, 16, 5, 128) (--quick: (4, 4, 3, 32)).
Variants, each compiled with g++ -O3 -std=c++17 -march=native -ffp-contract=off (knossos.cpp.compile):
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
import platform
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from typing import Any

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")  # numpy on one thread, as the C++ code runs

import numpy as np  # noqa: E402

from knossos.cpp import compile as cpp_compile  # noqa: E402
from knossos.cpp.bench import Measurement, Size, Variant, bench, format_seconds, time_python, values_close  # noqa: E402
from knossos.cpp.numpy_refs import conv1d_rev, to_value  # noqa: E402
from knossos.expr import Expr  # noqa: E402
from knossos.parser import load_program  # noqa: E402
from knossos.perf import fewer_gc_pauses  # noqa: E402
from knossos.program import Def, Program  # noqa: E402
from ksdata.loader import DATA  # noqa: E402
from rules.baseline import simplify_def  # noqa: E402
from rules.sets import get_rule_set  # noqa: E402
from search.pseudo_beam import pseudo_beam  # noqa: E402
from search.result import SearchResult  # noqa: E402
from search.spec import SearchSpec  # noqa: E402
from search.two_phase import two_phase  # noqa: E402

PROGRAMS = DATA / "programs"

HAND_GEMM = {
    # rows of the result accumulate a[i][k] * (row k of b): unit-stride inner loop, vectorised
    "hand i-k-j": r"""
ks::Vec<ks::Vec<double>> ks_gemm(double alpha, const ks::Vec<ks::Vec<double>>& a, const ks::Vec<ks::Vec<double>>& b,
                                 double beta, const ks::Vec<ks::Vec<double>>& c) {
    // the driver's inputs are dense vectors: .data is their elements
    const std::int64_t l = a.n, m = b.n, n = m > 0 ? b.data[0].n : 0;
    ks::Vec<ks::Vec<double>> r = ks::make_vec<ks::Vec<double>>(l);
    for (std::int64_t i = 0; i < l; ++i) {
        ks::Vec<double> row = ks::make_vec<double>(n);
        double* __restrict acc = row.data;
        for (std::int64_t j = 0; j < n; ++j) acc[j] = 0.0;
        const double* ai = a.data[i].data;
        for (std::int64_t k = 0; k < m; ++k) {
            const double aik = ai[k];
            const double* __restrict bk = b.data[k].data;
            for (std::int64_t j = 0; j < n; ++j) acc[j] += aik * bk[j];
        }
        const double* __restrict ci = c.data[i].data;
        for (std::int64_t j = 0; j < n; ++j) acc[j] = alpha * acc[j] + beta * ci[j];
        r.data[i] = row;
    }
    return r;
}
""",
    # the textbook order: a dot product per element, walking down a column of b
    "hand i-j-k": r"""
ks::Vec<ks::Vec<double>> ks_gemm(double alpha, const ks::Vec<ks::Vec<double>>& a, const ks::Vec<ks::Vec<double>>& b,
                                 double beta, const ks::Vec<ks::Vec<double>>& c) {
    const std::int64_t l = a.n, m = b.n, n = m > 0 ? b.data[0].n : 0;
    ks::Vec<ks::Vec<double>> r = ks::make_vec<ks::Vec<double>>(l);
    for (std::int64_t i = 0; i < l; ++i) {
        ks::Vec<double> row = ks::make_vec<double>(n);
        const double* ai = a.data[i].data;
        for (std::int64_t j = 0; j < n; ++j) {
            double acc = 0.0;
            for (std::int64_t k = 0; k < m; ++k) acc += ai[k] * b.data[k].data[j];
            row.data[j] = alpha * acc + beta * c.data[i].data[j];
        }
        r.data[i] = row;
    }
    return r;
}
""",
}


def numpy_gemm(args: Sequence[Any]) -> Callable[[], Any]:
    alpha, a, b, beta, c = args
    A, B, C = np.array(a), np.array(b), np.array(c)
    return lambda: alpha * (A @ B) + beta * C


#: The gradient as matrix products (knossos/cpp/numpy_refs.py; experiments/fig7_walltime imports it by this name).
numpy_conv1d_rev = conv1d_rev


Search = Callable[[Expr], SearchResult]


class Case:
    """A def, the search that makes its optimised variant, and ``more`` labelled searches whose bests
    are variants too (each run once, here, and timed)."""

    def __init__(
        self, title: str, file: str, def_name: str, search: Search, how: str, more: dict[str, Search] | None = None
    ) -> None:
        self.title = title
        self.program: Program = load_program(PROGRAMS / file)
        self.d: Def = self.program.defs[def_name]
        self.file = file
        t0 = time.perf_counter()
        self.result = search(self.d.body)
        self.search_seconds = time.perf_counter() - t0
        self.how = how
        self.more: dict[str, tuple[SearchResult, float]] = {}
        for label, more_search in (more or {}).items():
            t0 = time.perf_counter()
            found = more_search(self.d.body)
            self.more[label] = found, time.perf_counter() - t0

    def with_body(self, body: Expr) -> Program:
        return self.program.with_def(Def(self.d.name, self.d.ret_type, self.d.params, body, self.d.ret_sizes))

    def variants(self) -> list[Variant]:
        return [
            Variant("original", self.program),
            Variant("baseline", self.program.with_def(simplify_def(self.d))),
            Variant("optimised", self.with_body(self.result.best)),
            *(Variant(label, self.with_body(r.best)) for label, (r, _) in self.more.items()),
        ]

    def describe(self) -> str:
        r = self.result
        base = simplify_def(self.d).body.cost
        return (
            f"  search ({self.how}): cost {r.start_cost:.6g} -> {r.best_cost:.6g} in {len(r.steps)} steps "
            f"({', '.join(dict.fromkeys(s.rule for s in r.steps)) or 'none'}); {r.evaluations} evaluations, "
            f"{self.search_seconds:.1f} s; baseline cost {base:.6g}"
        )


def run_case(
    case: Case,
    sizes: list[Size],
    labels: list[str],
    extra: dict[str, str],
    numpy_fn: Callable[[Sequence[Any]], Callable[[], Any]],
    seconds: float,
    rounds: int,
) -> dict[str, list[Measurement | None]]:
    numpy_rows: dict[str, Measurement] = {}

    def on_reference(size: Size, args: list[object], output: Any) -> None:
        fn = numpy_fn(args)
        lo, med, runs, result = time_python(fn, seconds)
        agrees = values_close(output, to_value(result))
        numpy_rows[size.text()] = Measurement("numpy", size.label(), lo, med, runs, True, agrees)

    variants = case.variants() + [Variant(label, case.program, cpp) for label, cpp in extra.items()]
    notes: list[str] = []
    rows = bench(
        variants, case.d.name, sizes, min_seconds=seconds, on_reference=on_reference, notes=notes, rounds=rounds
    )
    table: dict[str, list[Measurement | None]] = {v.label: [] for v in variants}
    for m in rows:
        table[m.variant].append(m)
    table["numpy"] = [numpy_rows.get(s.text()) for s in sizes]
    for note in notes:
        print(f"  note: {note}")
    return table


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


def cpu_name() -> str:
    """The host CPU's model name (from /proc/cpuinfo where there is one)."""
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            cpu = next((line.split(":", 1)[1].strip() for line in f if line.startswith("model name")), cpu)
    except OSError:
        pass
    return cpu


def compiler_version() -> str:
    """The first line of ``$CXX --version`` ("not found" when it cannot run)."""
    try:
        gxx = subprocess.run([cpp_compile.compiler(), "--version"], capture_output=True, text=True, check=False)
    except OSError:
        return "not found"
    return gxx.stdout.splitlines()[0] if gxx.stdout else "?"


def machine() -> str:
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    return (
        f"{cpu_name()}, {os.cpu_count()} CPUs, load average {load}; {compiler_version()}; "
        f"flags {' '.join(cpp_compile.compile_flags())}"
    )


#: The rule sets of the optimised variants' searches.
GEMM_RULES = "ml_rules_no_bind"
CONV1D_RULES = "ml_rules_no_bind+zero_tensor_rules"


def gemm_case(depth: int = 99, budget: int = 5000) -> Case:
    """GEMM with its optimised variant found by pseudo-beam search with both prunings (zero value
    function, GEMM_RULES): the fused program; runs the search."""
    rules = get_rule_set(GEMM_RULES)
    return Case(
        "GEMM",
        "blas_test.kso",
        "gemm",
        lambda e: pseudo_beam(e, SearchSpec(rules, depth, budget, prune_commutes=True, prune_inlines=True)),
        f"pseudo-beam, commutations and idle inlines pruned, zero value function, {rules.name}, "
        f"depth {depth}, budget {budget}",
    )


def conv1d_case(depth: int = 40, budget: int = 5000, more: dict[str, Search] | None = None) -> Case:
    """rev$conv1d with its optimised variant found by two-phase A* (phase1, then CONV1D_RULES), and the
    variants of ``more``'s searches; runs the searches."""
    rules = get_rule_set(CONV1D_RULES)
    return Case(
        "rev$conv1d",
        "conv1d_rev_test.kso",
        "rev$conv1d",
        lambda e: two_phase(e, SearchSpec(rules, depth, budget)),
        f"two-phase A*, zero value function, phase1 then {rules.name}, depth {depth}, budget {budget}",
        more,
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
    with tempfile.TemporaryDirectory(prefix="knossos-bench-") as cache, fewer_gc_pauses():
        os.environ["KNOSSOS_CPP_CACHE"] = cache
        print(f"machine: {machine()}")

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
