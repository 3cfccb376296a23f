"""The wall-time cases of GEMM and rev$conv1d compiled to C++, shared by benchmarks/bench_walltime.py
and experiments/fig7_walltime: the defs, the searches that make their optimised variants, the
hand-written GEMM loops and numpy references, and the timing of every variant at a list of sizes.

Whoever imports this calls :func:`ksbench.harness.pin_threads` first (numpy on one thread, as the C++ code runs).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from cpp_backend.bench import Measurement, Size, Variant, bench, time_python, values_close
from cpp_backend.numpy_refs import conv1d_rev, to_value
from knossos.expr import Expr
from knossos.parser import load_program
from knossos.program import Def, Program
from ksdata.loader import DATA
from rules.baseline import simplify_def
from search.plan import Plan, run
from search.result import SearchResult

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


#: The gradient as matrix products (cpp_backend/numpy_refs.py).
numpy_conv1d_rev = conv1d_rev


BoundSearch = Callable[[Expr], SearchResult]


class Case:
    """A def, the search that makes its optimised variant, and ``more`` labelled searches whose bests
    are variants too (each run once, here, and timed)."""

    def __init__(
        self,
        title: str,
        file: str,
        def_name: str,
        search: BoundSearch,
        how: str,
        more: dict[str, BoundSearch] | None = None,
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


#: The rule sets of the optimised variants' searches.
GEMM_RULES = "ml_rules_no_bind"
CONV1D_RULES = "ml_rules_no_bind+zero_tensor_rules"


def gemm_case(depth: int = 99, budget: int = 5000) -> Case:
    """GEMM with its optimised variant found by pseudo-beam search with both prunings (zero value
    function, GEMM_RULES): the fused program; runs the search."""
    plan = Plan(rules=GEMM_RULES).overridden(
        algorithm="pseudo-beam", depth=depth, budget=budget, prune_commutes=True, prune_inlines=True
    )
    return Case(
        "GEMM",
        "blas_test.kso",
        "gemm",
        lambda e: run(e, plan),
        f"pseudo-beam, commutations and idle inlines pruned, zero value function, {GEMM_RULES}, "
        f"depth {depth}, budget {budget}",
    )


def conv1d_case(depth: int = 40, budget: int = 5000, more: dict[str, BoundSearch] | None = None) -> Case:
    """rev$conv1d with its optimised variant found by two-phase A* (phase1, then CONV1D_RULES), and the
    variants of ``more``'s searches; runs the searches."""
    plan = Plan(rules=CONV1D_RULES).overridden(algorithm="two-phase", depth=depth, budget=budget)
    return Case(
        "rev$conv1d",
        "conv1d_rev_test.kso",
        "rev$conv1d",
        lambda e: run(e, plan),
        f"two-phase A*, zero value function, {plan.first_phase_rules} then {CONV1D_RULES}, depth {depth}, budget {budget}",
        more,
    )
