"""Wall-clock time of rev$conv1d as searches with the gradient rules rewrite it, and how well the cost
model ranks the programs they find.

Run:  python benchmarks/bench_gradients.py [--quick] [--seconds-search S] [--rules SET] [--depth H]
          [--cost alloc|reference] [--search-size NAME=NxM ...] [--model NAME|none]
          [--fig7-sizes | --only-fig7-sizes] [--max-seconds-per-call T] [--seconds T] [--rounds R]
          [--path-points K] [--out FILE]

Program: ``rev$conv1d`` of ksdata/programs/conv1d_rev_test.kso, the gradient of a 1-d
convolution of k kernels of l channels and width kn over an image of l channels and n samples
(kernels k x l x kn, image l x n, d$r k x n).
Variants (the program with the def's body replaced; each compiled with cpp_backend.compile's flags):
  original     the def as written;
  baseline     after the ksc-style baseline simplifier (rules/baseline.py);
  astar        the best plain A* (zero value function) finds in --seconds-search S seconds (60;
               --quick: 5) with the rule set --rules (gradient_rules) at depth --depth (150) and a
               budget of 10**7 evaluations, so that the time limit binds, minimising the cost model
               --cost (alloc; --search-size gives it loop sizes, as optimize.py --size);
  pseudo-beam  the same with pseudo-beam search, commutations and idle inlines pruned;
  pseudo-beam ref  the same minimising the reference cost (unless --cost is reference);
  model NAME   the learned search: --model NAME (gradients; none: no learned search) loaded as
               optimize.py loads it (app/models.py), searched with the rules, search, depth, prunings
               and cost model it was trained with (--rules and --depth where it does not say), for S
               seconds; a model that does not exist is one line and no variant;
  path k/K     --path-points (4) programs evenly spaced along the rewrite path of the contender with
               the lowest reference cost (its steps replayed from the original): after step round(k*L/K) of L,
               K = --path-points + 1;
  numpy        the gradient as matrix products (cpp_backend/numpy_refs.py), on one thread.
Sizes: N = 8, 12, 16 (k = l = kn = n = N; --quick: 4, 6), and with --fig7-sizes (--only-fig7-sizes: only) Figure 7's
(k, l, kn, n) = (8, 8, 5, n) for n = 32, 64, 128, 256, 512 (experiments/fig7_walltime's).
Timing (cpp_backend.bench): min and median per call of calls repeated for at least --seconds (0.2),
the variants of one size timed in turn for --rounds (3) rounds; every variant checked against the
interpreter at size 4 ("verified") and against the first variant timed at that size, the original
unless it was skipped ("agrees"; numpy too).  The original's work grows as N^7: a variant is skipped
at a size where its time at the size it was last timed at, times the ratio of the two sizes to the 7th,
would pass --max-seconds-per-call (2 s); a size is the geometric mean of (k, l, kn, n).
Printed: per size, each variant's reference cost (Expr.cost, every vector 16 long), its cost with the
real sizes (knossos/sized_cost.py), its alloc cost with the real sizes (knossos/alloc_cost.py), min time, speed-up over the original, time over numpy's and the
checks, and Spearman's rank correlation of each cost with the time over the variants timed; then
the growth exponent of every variant's time from the first to the last N, log(t16/t8)/log 2 by default.
Output: one JSON line per variant and size (numpy and skipped variants too) in
experiments/results/gradients/bench.jsonl (--quick: runs/quick/gradients/bench.jsonl; --out to
choose), rewritten atomically after every size, with the code revision, the machine, and the search
settings and result of every contender.  Exit status 1 when a variant (or numpy) fails a check.
"""

from __future__ import annotations

from ksbench.harness import pin_threads

pin_threads()  # before numpy loads: numpy on one thread, as the C++ code runs

import argparse  # noqa: E402
import dataclasses  # noqa: E402
import sys  # noqa: E402
from collections.abc import Sequence  # noqa: E402
from dataclasses import dataclass, field  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

from app.models import load_value_function  # noqa: E402
from cpp_backend.bench import (  # noqa: E402
    Measurement,
    Size,
    Variant,
    bench,
    compile_variant,
    format_seconds,
    time_python,
    values_close,
)
from cpp_backend.numpy_refs import conv1d_rev, to_value  # noqa: E402
from knossos.alloc_cost import AllocCost  # noqa: E402
from knossos.cli import whole_number  # noqa: E402
from knossos.cost_models import COST_MODELS, CostFunction  # noqa: E402
from knossos.errors import KsError  # noqa: E402
from knossos.expr import Expr  # noqa: E402
from knossos.parser import load_program  # noqa: E402
from knossos.program import Def, Program  # noqa: E402
from knossos.rank import spearman  # noqa: E402
from knossos.sized_cost import parse_sizes, sized_def_cost  # noqa: E402
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
from ksdata.loader import DATA  # noqa: E402
from rules.actions import Action, apply  # noqa: E402
from rules.baseline import simplify_def  # noqa: E402
from rules.rule_set import RuleSet  # noqa: E402
from rules.sets import get_rule_set  # noqa: E402
from search.limits import MAX_DEPTH  # noqa: E402
from search.mdp import RewriteStep  # noqa: E402
from search.plan import Plan  # noqa: E402
from search.settings import SearchSettings  # noqa: E402
from search.value import ValueFunction  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent

PROGRAM = DATA / "programs" / "conv1d_rev_test.kso"
DEF_NAME = "rev$conv1d"
RESULTS = ROOT / "experiments" / "results" / "gradients" / "bench.jsonl"
QUICK_RESULTS = ROOT / "runs" / "quick" / "gradients" / "bench.jsonl"
N_SIZES, QUICK_N_SIZES = (8, 12, 16), (4, 6)
#: experiments/fig7_walltime's sizes of rev$conv1d: k = l = 8 and kn = 5, the image width n varies.
FIG7_SIZES = tuple((8, 8, 5, n) for n in (32, 64, 128, 256, 512))
#: The contenders' evaluation budget: more than any of them spends in its seconds.
BUDGET = 10**7
#: The power of the size that a variant's time is taken to grow with, to skip slow ones: the original is
#: O(N^7) (measured from N = 8 to 16: about N^5.9), the rewritten variants grow more slowly.
GROWTH_POWER = 7


# -- sizes ------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class BenchSize:
    """One size of the benchmark: its label, the inputs' shapes and its scale (for the extrapolation)."""

    label: str
    size: Size
    #: The geometric mean of (k, l, kn, n).
    scale: float
    #: N where k = l = kn = n = N.
    n: int | None = None


def conv_size(k: int, channels: int, kn: int, n: int) -> Size:
    return Size({"kernels": (k, channels, kn), "image": (channels, n), "d$r": (k, n)})


def n_size(n: int) -> BenchSize:
    return BenchSize(f"N={n}", conv_size(n, n, n, n), float(n), n)


def fig7_size(k: int, channels: int, kn: int, n: int) -> BenchSize:
    return BenchSize(
        f"k={k} l={channels} kn={kn} n={n}", conv_size(k, channels, kn, n), (k * channels * kn * n) ** 0.25
    )


def sizes_of(quick: bool, fig7: bool, only_fig7: bool = False) -> list[BenchSize]:
    sizes = [] if only_fig7 else [n_size(n) for n in (QUICK_N_SIZES if quick else N_SIZES)]
    return sizes + ([fig7_size(*s) for s in FIG7_SIZES] if fig7 or only_fig7 else [])


# -- the contenders: searches for a cheaper def ----------------------------------------------------------
@dataclass(frozen=True)
class Settings:
    """How one contender searches."""

    search: str
    rules: str
    depth: int
    seconds: float
    prune_commutes: bool = False
    prune_inlines: bool = False
    model: str = "none"
    #: The cost model the search minimises (knossos.cost_models; a model's own where it says).
    cost: str = "alloc"
    budget: int = BUDGET
    #: The alloc model's loop sizes (--search-size), as (parameter, length or lengths) pairs; () for 16 each.
    sizes: tuple[tuple[str, int | tuple[int, ...]], ...] = ()

    def plan(self) -> Plan:
        """These settings as a plan (the alloc model's sizes only where it is the cost model)."""
        search = SearchSettings(
            algorithm=self.search,
            depth=self.depth,
            budget=self.budget,
            prune_commutes=self.prune_commutes,
            prune_inlines=self.prune_inlines,
            cost=self.cost,
        )
        sizes = dict(self.sizes) if self.cost == "alloc" else {}
        return Plan(rules=self.rules, search=search, sizes=sizes, seconds=self.seconds)

    def cost_function(self) -> CostFunction:
        return self.plan().cost()


def run_contender(label: str, start: Expr, settings: Settings, value: ValueFunction | None = None) -> Contender:
    contender = Contender(label, dataclasses.asdict(settings), search(label, start, settings.plan(), value))
    print(f"  {contender.describe()}", flush=True)
    return contender


def plain_contenders(start: Expr, args: argparse.Namespace) -> list[Contender]:
    """Plain A*, and pseudo-beam search with both prunings, both with the zero value function."""
    common = {"cost": args.cost, "sizes": args.search_sizes}
    rules, depth, seconds = args.rules, args.depth, args.seconds_search
    found = [
        run_contender("astar", start, Settings("astar", rules, depth, seconds, **common)),  # type: ignore[arg-type]
        run_contender("pseudo-beam", start, Settings("pseudo-beam", rules, depth, seconds, True, True, **common)),  # type: ignore[arg-type]
    ]
    if args.cost != "reference":  # what the same search finds when it minimises the paper's cost
        reference = Settings("pseudo-beam", rules, depth, seconds, True, True, cost="reference")
        found.append(run_contender("pseudo-beam ref", start, reference))
    return found


def model_contender(start: Expr, args: argparse.Namespace) -> Contender | None:
    """The learned search of ``--model`` (None for ``none``, or, with one line, for a model that cannot
    be loaded): the rules, search, depth, prunings and cost model the model was trained for, as
    optimize.py takes them (``--rules`` and ``--depth`` where it does not say; ``--search-size`` too)."""
    model, rules, depth, seconds = args.model, args.rules, args.depth, args.seconds_search
    if model in ("none", "zero"):
        return None
    try:
        value = load_value_function(model)
    except KsError as err:
        print(f"model '{model}': skipped, it cannot be loaded ({err.message})", flush=True)
        return None
    trained = Plan(rules=rules, search=SearchSettings(depth=depth)).of_model(value)
    s = trained.search
    settings = Settings(
        s.algorithm,
        trained.rules,
        s.depth,
        seconds,
        s.prune_commutes,
        s.prune_inlines,
        model,
        s.cost,
        sizes=args.search_sizes,
    )
    return run_contender(f"model {model}", start, settings, value)


# -- the variants --------------------------------------------------------------------------------------
@dataclass(frozen=True)
class BenchVariant:
    """A variant to time, what kind it is (original, baseline, search, path) and where it comes from."""

    variant: Variant
    kind: str
    info: Row = field(default_factory=dict)

    @property
    def label(self) -> str:
        return self.variant.label

    @property
    def d(self) -> Def:
        return self.variant.program.defs[DEF_NAME]


def with_body(program: Program, d: Def, body: Expr) -> Program:
    return program.with_def(dataclasses.replace(d, body=body))


def base_variants(program: Program, d: Def) -> list[BenchVariant]:
    return [
        BenchVariant(Variant("original", program), "original"),
        BenchVariant(Variant("baseline", program.with_def(simplify_def(d))), "baseline"),
    ]


def contender_variants(program: Program, d: Def, contenders: Sequence[Contender]) -> list[BenchVariant]:
    return [
        BenchVariant(Variant(c.label, with_body(program, d, c.result.best)), "search", {"search": c.to_json()})
        for c in contenders
    ]


def path_points(steps: int, points: int) -> list[tuple[int, int]]:
    """``(k, step)`` for k = 1..points: step round(k * steps / (points + 1)), those strictly inside the
    path only, each step once."""
    out: list[tuple[int, int]] = []
    for k in range(1, points + 1):
        step = round(k * steps / (points + 1))
        if 0 < step < steps and step not in (s for _, s in out):
            out.append((k, step))
    return out


def replay(start: Expr, steps: Sequence[RewriteStep], rules: RuleSet) -> list[Expr]:
    """Every expression along a rewrite path: ``start``, then the one after each step."""
    out = [start]
    for s in steps:
        out.append(apply(out[-1], Action(s.node, rules.rule(s.rule))))
    return out


def path_variants(program: Program, d: Def, best: Contender, points: int) -> list[BenchVariant]:
    """Programs evenly spaced along ``best``'s rewrite path (labelled ``path k/K``, K = points + 1)."""
    states = replay(d.body, best.result.steps, get_rule_set(best.settings["rules"]))
    if states[-1] != best.result.best:
        print(f"note: replaying {best.label}'s steps did not end at its best program", flush=True)
    total = len(best.result.steps)
    return [
        BenchVariant(
            Variant(f"path {k}/{points + 1}", with_body(program, d, states[step])),
            "path",
            {"path": {"of": best.label, "step": step, "steps": total}},
        )
        for k, step in path_points(total, points)
    ]


def compile_all(variants: Sequence[BenchVariant]) -> None:
    """Compile every variant now (into the C++ cache, which the timing then finds), saying so."""
    for v in variants:
        print(f"compiling {v.label}...", flush=True)
        compile_variant(v.variant, DEF_NAME)


# -- timing ----------------------------------------------------------------------------------------------
def sized_cost(d: Def, program: Program, bs: BenchSize) -> float | None:
    """The def's cost with the real sizes (None where the sized model cannot give one)."""
    try:
        return sized_def_cost(program, d.name, bs.size.named)
    except KsError:
        return None


@dataclass
class Timer:
    """Times the variants size after size, skipping those predicted to be too slow."""

    seconds: float
    rounds: int
    max_seconds: float
    #: label -> (scale, min seconds) at the last size the variant was timed at.
    last: dict[str, tuple[float, float]] = field(default_factory=dict)

    def predicted(self, label: str, bs: BenchSize) -> float | None:
        prev = self.last.get(label)
        return None if prev is None else prev[1] * (bs.scale / prev[0]) ** GROWTH_POWER

    def plan(self, variants: Sequence[BenchVariant], bs: BenchSize) -> tuple[list[BenchVariant], dict[str, float]]:
        """The variants to time at ``bs``, and those to skip with their predicted seconds per call."""
        keep: list[BenchVariant] = []
        skip: dict[str, float] = {}
        for v in variants:
            p = self.predicted(v.label, bs)
            if p is not None and p > self.max_seconds:
                skip[v.label] = p
            else:
                keep.append(v)
        return keep, skip

    def time_size(self, variants: Sequence[BenchVariant], bs: BenchSize) -> list[Row]:
        """One row per variant and numpy at ``bs`` (skipped ones marked), in the order given, numpy last."""
        keep, skip = self.plan(variants, bs)
        for label, p in skip.items():
            print(f"  {label} at {bs.label}: skipped (predicted {format_seconds(p)} per call)", flush=True)
        measured, numpy = self.measure(keep, bs) if keep else ({}, None)
        for label, m in measured.items():
            self.last[label] = (bs.scale, m.min_s)
        reference = keep[0].label if keep else None
        rows = [variant_row(v, bs, measured.get(v.label), reference, skip.get(v.label)) for v in variants]
        return [*rows, measurement_row("numpy", "numpy", bs, numpy, reference)]

    def measure(self, keep: Sequence[BenchVariant], bs: BenchSize) -> tuple[dict[str, Measurement], Measurement | None]:
        numpy: list[Measurement] = []

        def on_reference(size: Size, inputs: list[object], output: Any) -> None:
            print(f"timing numpy at {bs.label}...", flush=True)
            lo, med, runs, result = time_python(conv1d_rev(inputs), self.seconds)
            numpy.append(
                Measurement("numpy", size.label(), lo, med, runs, True, values_close(output, to_value(result)))
            )

        labels = ", ".join(v.label for v in keep)
        print(f"timing {labels} at {bs.label} ({self.rounds} rounds)...", flush=True)
        notes: list[str] = []
        found = bench(
            [v.variant for v in keep],
            DEF_NAME,
            [bs.size],
            min_seconds=self.seconds,
            on_reference=on_reference,
            notes=notes,
            rounds=self.rounds,
        )
        for note in notes:
            print(f"  note: {note}", flush=True)
        return {m.variant: m for m in found}, numpy[0] if numpy else None


def measurement_row(label: str, kind: str, bs: BenchSize, m: Measurement | None, reference: str | None) -> Row:
    return {
        "program": PROGRAM.name,
        "def": DEF_NAME,
        "size_label": bs.label,
        "size": bs.size.label(),
        "n": bs.n,
        "variant": label,
        "kind": kind,
        "min_s": None if m is None else m.min_s,
        "median_s": None if m is None else m.median_s,
        "runs": None if m is None else m.runs,
        "verified": None if m is None else m.verified,
        "agrees": None if m is None else m.agrees,
        "reference": reference,
        "skipped": m is None,
    }


def variant_row(
    v: BenchVariant, bs: BenchSize, m: Measurement | None, reference: str | None, predicted: float | None
) -> Row:
    return {
        **measurement_row(v.label, v.kind, bs, m, reference),
        "cost": v.d.body.cost,
        "sized_cost": sized_cost(v.d, v.variant.program, bs),
        "alloc_cost": AllocCost(bs.size.named)(v.d.body),
        "predicted_s": predicted,
        **v.info,
    }


def failed(row: Row) -> bool:
    return not row["skipped"] and not (row["verified"] and row["agrees"])


# -- reporting -------------------------------------------------------------------------------------------
def rank_correlation(rows: Sequence[Row], cost_key: str) -> tuple[float, int] | None:
    """Spearman's rho of ``cost_key`` and the min time over the variants timed (numpy aside), and their count."""
    pairs = [(r[cost_key], r["min_s"]) for r in rows if not r["skipped"] and r.get(cost_key) is not None]
    if len(pairs) < 2:
        return None
    return spearman([p[0] for p in pairs], [p[1] for p in pairs]), len(pairs)


def rank_text(rows: Sequence[Row], cost_key: str) -> str:
    found = rank_correlation(rows, cost_key)
    return "-" if found is None else f"{found[0]:.3f} over {found[1]} variants"


def ratio(num: float | None, den: float | None) -> str:
    return f"{num / den:.2f}x" if num is not None and den is not None and den > 0 else "-"


def check_text(row: Row) -> str:
    if row["skipped"]:
        return ""
    return "yes" if row["verified"] and row["agrees"] else "NO (interpreter)" if not row["verified"] else "NO (differs)"


def cell(value: float | None) -> str:
    return "-" if value is None else f"{value:.4g}"


def print_size(bs: BenchSize, rows: Sequence[Row]) -> None:
    times = {r["variant"]: r["min_s"] for r in rows}
    print(f"\n{DEF_NAME} at {bs.label} ({bs.size.text()}); checks against {rows[0]['reference'] or '-'}")
    print(
        f"  {'variant':<14}{'cost':>12}{'sized cost':>12}{'alloc cost':>12}{'min':>11}{'vs original':>13}{'/ numpy':>11}  verified, agrees"
    )
    for r in rows:
        t = "skipped" if r["skipped"] else format_seconds(r["min_s"])
        print(
            f"  {r['variant']:<14}{cell(r.get('cost')):>12}{cell(r.get('sized_cost')):>12}"
            f"{cell(r.get('alloc_cost')):>12}{t:>11}"
            f"{ratio(times.get('original'), r['min_s']):>13}{ratio(r['min_s'], times.get('numpy')):>11}  {check_text(r)}"
        )
    variants = [r for r in rows if r["kind"] != "numpy"]
    print(f"  Spearman(cost, time): {rank_text(variants, 'cost')}")
    print(f"  Spearman(sized cost, time): {rank_text(variants, 'sized_cost')}")
    print(f"  Spearman(alloc cost at these sizes, time): {rank_text(variants, 'alloc_cost')}")


def print_growth(rows: Sequence[Row], sizes: Sequence[BenchSize]) -> None:
    ns = [bs for bs in sizes if bs.n is not None]
    if len(ns) < 2:
        return
    a, b = ns[0], ns[-1]
    assert a.n is not None and b.n is not None
    print(f"\ngrowth exponent of the time from N={a.n} to N={b.n}, log(t{b.n} / t{a.n}) / log({b.n} / {a.n}):")
    at = {(r["variant"], r["size_label"]): r["min_s"] for r in rows}
    for label in dict.fromkeys(r["variant"] for r in rows):
        g = growth_exponent(at.get((label, a.label)), at.get((label, b.label)), a.n, b.n)
        print(f"  {label:<14}{'-' if g is None else f'{g:.2f}':>8}")


# -- the run -----------------------------------------------------------------------------------------------
def make_variants(args: argparse.Namespace, program: Program, d: Def) -> list[BenchVariant]:
    """Original, baseline, the contenders' bests and points along the best one's path (runs the searches)."""
    get_rule_set(args.rules)  # an unknown set is refused before any search
    contenders = plain_contenders(d.body, args)
    learned = model_contender(d.body, args)
    contenders += [learned] if learned is not None else []
    best = min(contenders, key=lambda c: c.result.best.cost)  # the reference cost: contenders' costs differ
    print(f"best: {best.label} (reference cost {best.result.best.cost:.6g})", flush=True)
    return (
        base_variants(program, d)
        + contender_variants(program, d, contenders)
        + path_variants(program, d, best, args.path_points)
    )


def run(args: argparse.Namespace) -> bool:
    """The whole benchmark; whether every check passed."""
    program = load_program(PROGRAM)
    d = program.defs[DEF_NAME]
    variants = make_variants(args, program, d)
    compile_all(variants)
    sizes = sizes_of(args.quick, args.fig7_sizes, args.only_fig7_sizes)
    timer = Timer(args.seconds, args.rounds, args.max_seconds_per_call)
    common = stamp(args)
    rows: list[Row] = []
    for bs in sizes:
        found = timer.time_size(variants, bs)
        print_size(bs, found)
        rows += [{**r, **common} for r in found]
        write_rows(args.out, rows)
    print_growth(rows, sizes)
    bad = [f"{r['variant']} at {r['size_label']}" for r in rows if failed(r)]
    print(f"\nwrote {len(rows)} rows to {args.out}")
    print("checks: " + ("every variant timed is verified and agrees" if not bad else f"FAILED: {', '.join(bad)}"))
    return not bad


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="N = 4, 6 and 5 s searches: a quick check that it all works")
    ap.add_argument("--rules", default="gradient_rules", metavar="SET", help="the searches' rule set (gradient_rules)")
    ap.add_argument("--depth", type=whole_number(MAX_DEPTH), default=150, metavar="H", help="the searches' depth (150)")
    ap.add_argument("--model", default="gradients", metavar="NAME", help="learned search's model (gradients; none)")
    ap.add_argument(
        "--cost", choices=tuple(COST_MODELS), default="alloc", help="the plain searches' cost model (alloc)"
    )
    ap.add_argument(
        "--search-size",
        action="append",
        default=[],
        metavar="NAME=NxM",
        help="the alloc model's loop sizes in every search (as optimize.py --size); none: 16 each",
    )
    ap.add_argument("--fig7-sizes", action="store_true", help="also Figure 7's sizes (k, l, kn, n)")
    ap.add_argument("--only-fig7-sizes", action="store_true", help="Figure 7's sizes only")
    ap.add_argument(
        "--path-points", type=whole_number(), default=4, metavar="K", help="programs along the best path (4)"
    )
    add_timing_arguments(ap)
    args = ap.parse_args(argv)
    args.search_sizes = tuple(parse_sizes(args.search_size).items())
    if args.seconds_search is None:
        args.seconds_search = 5.0 if args.quick else 60.0
    if args.out is None:
        args.out = QUICK_RESULTS if args.quick else RESULTS
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    return guarded_main(lambda: run(args), "bench_gradients.py")


if __name__ == "__main__":
    sys.exit(main())
