"""Do the cost models rank like the clock?  Spearman's rho of cost against measured time over the
variants of layers' reverse-mode gradients that searches visit (issue 45, item 2).

Run:  python benchmarks/bench_cost_rank.py [--quick] [--layers NAME ...] [--variants K] [--out FILE]
      python benchmarks/bench_cost_rank.py --rescore      # rho of the current cost models, no timing

For each layer (public code from ``ksdata.torch_suite``, built as benchmarks/bench_layers.py's Problem
builds it), ``frontends.torch.translate`` then ``autodiff.grad_program(mode="rev")`` gives
``rev$layer``.  :data:`SEARCHES` run on it (each bounded by its budget and :data:`SEARCH_SECONDS`);
the variants are the def as written, each search's result, the states on the path to each search's
best, and states spread over the costs of every state the searches reached, at most ``--variants``
distinct ones.  Each is compiled with ``cpp_backend.compile_def`` (one thread) and timed on the same
inputs: the min seconds per call over :data:`ROUNDS` interleaved rounds of at least
:data:`ROUND_SECONDS`, in the calling thread's CPU time (:func:`time_call`; the wall time is kept too);
a variant whose results differ from the written def's (relative 1e-9) is reported and left out.

Per layer, for each cost model of :func:`cost_models`: Spearman's rho of the variants' costs against
their times (1: ranks as the clock), and the fastest variant against the def as written.  One JSON row
per layer (with every variant's def, time and costs) is appended to
experiments/results/cost_rank/results.jsonl as it finishes (--quick: runs/quick/cost_rank/); a rerun
skips the layers there.  ``--rescore`` recomputes each row's rho with the cost models of the code as
it is now, from the stored defs and times (a cost model's change, before and after, on the same
measurements).
"""

from __future__ import annotations

from ksbench.harness import pin_threads

pin_threads()  # before numpy and torch load: everything on one thread

import argparse  # noqa: E402
import contextlib  # noqa: E402
import datetime  # noqa: E402
import functools  # noqa: E402
import io  # noqa: E402
import math  # noqa: E402
import os  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from collections.abc import Callable, Sequence  # noqa: E402
from dataclasses import dataclass  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

import numpy as np  # noqa: E402
import torch  # noqa: E402
from tqdm import tqdm  # noqa: E402

from autodiff import grad_program  # noqa: E402
from benchmarks.bench_layers import Problem  # noqa: E402
from cpp_backend.callable import compile_def  # noqa: E402
from frontends.torch import translate  # noqa: E402
from knossos.alloc_cost import AllocCost  # noqa: E402
from knossos.cost_models import get_cost_model  # noqa: E402
from knossos.expr import Expr  # noqa: E402
from knossos.parser import parse_program  # noqa: E402
from knossos.printer import format_def, format_program  # noqa: E402
from knossos.program import Def, Program  # noqa: E402
from knossos.rank import spearman  # noqa: E402
from knossos.sized_cost import sized_def_cost  # noqa: E402
from knossos.values import to_numpy  # noqa: E402
from ksbench.results import QUICK, RESULTS, ResultsFile  # noqa: E402
from ksdata.torch_suite import SUITE, available  # noqa: E402
from search.graph import SearchGraph  # noqa: E402
from search.plan import Plan, run  # noqa: E402
from search.result import SearchResult  # noqa: E402
from search.settings import SearchSettings  # noqa: E402
from search.state import State, expr_of  # noqa: E402

NAME = "rev$layer"
#: Layers whose gradients compile and run in milliseconds today.
LAYERS = (
    "LayerNorm",
    "RMSNorm",
    "MSELoss",
    "BCEWithLogitsLoss",
    "Mish",
    "RNNCell",
    "L1Loss",
    "SmoothL1Loss",
    "ELU",
    "BCELoss",
)
#: Each search's time limit (seconds).
SEARCH_SECONDS = 30.0
#: Rounds of calls per variant, interleaved, and the seconds of calls per variant and round.
ROUNDS, ROUND_SECONDS = 5, 0.15


def time_call(fn: Callable[[], object], seconds: float) -> tuple[float, float]:
    """Min seconds per call of ``fn`` over calls for at least ``seconds`` (at least three): the thread's
    CPU time and the wall time.  The CPU time leaves out the time the thread waits for a core, which on
    a loaded machine is most of the difference between calls of a few milliseconds (each is likely to
    be preempted once); alone on a core the two are the same."""
    cpu = wall = float("inf")
    start, calls = time.perf_counter(), 0
    while calls < 3 or time.perf_counter() - start < seconds:
        w0, c0 = time.perf_counter(), time.thread_time()
        fn()
        c1, w1 = time.thread_time(), time.perf_counter()
        cpu, wall, calls = min(cpu, c1 - c0), min(wall, w1 - w0), calls + 1
    return cpu, wall


@dataclass(frozen=True)
class Searched:
    """A search run on every layer: the default plan (``None``: :meth:`search.plan.Plan.default_for`) or this one."""

    label: str
    plan: Plan | None


#: The searches whose visited states are the variants: optimize.py with no flags (for reverse-mode code:
#: pseudo-beam, gradient_rules, the alloc cost model; search/plan.py REVERSE); the default before
#: reverse-mode code had its own (saturation and pseudo-beam, ml_rules, the reference cost model); and
#: saturation and pseudo-beam under the alloc cost model with ml_rules or gradient_rules.
SEARCHES = (
    Searched("default", None),
    Searched(
        "saturate/ml_rules/reference",
        Plan(
            rules="ml_rules",
            search=SearchSettings(
                algorithm="saturate-pseudo-beam", depth=99, budget=5000, prune_commutes=True, prune_inlines=True
            ),
        ),
    ),
    Searched(
        "saturate/ml_rules/alloc",
        Plan(
            rules="ml_rules",
            search=SearchSettings(
                algorithm="saturate-pseudo-beam",
                depth=99,
                budget=2000,
                prune_commutes=True,
                prune_inlines=True,
                cost="alloc",
            ),
        ),
    ),
    Searched(
        "saturate/gradient_rules/alloc",
        Plan(
            rules="gradient_rules",
            search=SearchSettings(
                algorithm="saturate-pseudo-beam", depth=99, budget=2000, prune_commutes=True, cost="alloc"
            ),
        ),
    ),
)

#: Two variants whose times differ by less than this factor are left out of :func:`agreement` (noise).
CLEAR = 1.05


def spearman_rho(x: Sequence[float], y: Sequence[float]) -> float | None:
    """Spearman's rank correlation of ``x`` and ``y`` (:func:`knossos.rank.spearman`: ties get their
    mean rank); None when either is constant or there are fewer than three pairs."""
    if len(x) < 3:
        return None
    rho = spearman(x, y)
    return None if math.isnan(rho) else rho


def agreement(costs: Sequence[float], times: Sequence[float]) -> float | None:
    """Of the pairs of variants whose times differ by at least :data:`CLEAR`, the share whose costs
    order them as the clock does (a tie in cost counts half); None without such pairs.  Spearman's rho
    over variants that run equally fast ranks noise; this looks only at the differences that are real."""
    right = total = 0.0
    for a in range(len(times)):
        for b in range(len(times)):
            if times[b] >= CLEAR * times[a]:  # a is clearly faster
                total += 1
                right += 1.0 if costs[a] < costs[b] else 0.5 if costs[a] == costs[b] else 0.0
    return right / total if total else None


def shapes_of(d: Def, arrays: Sequence[Any]) -> dict[str, tuple[int, ...]]:
    """The lengths of each vector parameter of ``d`` at each level, from the arrays it is called with."""
    sizes: dict[str, tuple[int, ...]] = {}
    for param, value in zip(d.params, arrays, strict=False):
        shape = np.shape(value)
        if param.type.vec_rank and len(shape) == param.type.vec_rank:
            sizes[param.name] = tuple(int(n) for n in shape)
    return sizes


def cost_models(program: Program, d: Def, sizes: dict[str, tuple[int, ...]]) -> dict[str, Callable[[Expr], float]]:
    """The cost models compared, by name: the reference, alloc without and with the real sizes, and the
    sized model (the reference's op costs at the real sizes)."""
    alloc_sized = AllocCost(sizes)

    def sized(e: Expr) -> float:
        return sized_def_cost(program.with_def(Def(d.name, d.ret_type, d.params, e, d.ret_sizes)), d.name, sizes)

    return {
        "reference": get_cost_model("reference"),
        "alloc": get_cost_model("alloc"),
        "alloc_sized": alloc_sized,
        "sized": sized,
    }


def _path(graph: SearchGraph) -> list[Expr]:
    """The states from the search's start to its best, in order."""
    out: list[Expr] = []
    state: State | None = graph.best
    while state is not None:
        out.append(expr_of(state))
        reached = graph.states.get(state)
        state = reached.parent if reached is not None else None
    return out[::-1]


def run_searches(start: Expr, budget_scale: float) -> tuple[dict[str, SearchResult], list[Expr]]:
    """Each of :data:`SEARCHES` from ``start``: their results by label, and every state they reached."""
    results: dict[str, SearchResult] = {}
    reached: list[Expr] = []
    for s in SEARCHES:
        base = Plan.default_for(NAME, start) if s.plan is None else s.plan  # None: optimize.py's with no flags
        budget = max(1, int(base.search.budget * budget_scale))
        result = run(start, base.overridden(budget=budget, seconds=SEARCH_SECONDS))
        results[s.label] = result
        reached.extend(_path(result.graph))
        reached.extend(expr_of(st) for st in result.graph.states)
    return results, reached


def pick_variants(
    start: Expr, results: dict[str, SearchResult], reached: list[Expr], most: int
) -> list[tuple[str, Expr]]:
    """At most ``most`` distinct variants, labelled: the start, each search's result, the states on the
    path to each search's best (spread along it), then reached states spread over the reference costs."""
    chosen: dict[Expr, str] = {start: "written"}

    def take(label: str, e: Expr) -> None:
        if len(chosen) < most and e not in chosen:
            chosen[e] = label

    for label, r in results.items():
        take(f"{label}: best", r.best)
    for label, r in results.items():
        path = _path(r.graph)
        for k in np.linspace(0, len(path) - 1, num=min(len(path), 4)).astype(int)[1:]:
            take(f"{label}: step {k} of {len(path) - 1}", path[k])
    pool = sorted(set(reached) - set(chosen), key=lambda e: e.cost)
    left = most - len(chosen)
    if pool and left > 0:
        for k in np.linspace(0, len(pool) - 1, num=min(left, len(pool))).astype(int):
            take(f"reached, cost {pool[k].cost:.4g}", pool[k])
    return [(label, e) for e, label in chosen.items()]


def _flat(value: Any) -> list[np.ndarray]:
    if isinstance(value, tuple | list):
        return [a for v in value for a in _flat(v)]
    return [np.asarray(to_numpy(value), dtype=np.float64)]


def _same(a: Any, b: Any) -> bool:
    fa, fb = _flat(a), _flat(b)
    if len(fa) != len(fb):
        return False
    for x, y in zip(fa, fb, strict=True):
        if x.shape != y.shape:
            return False
        scale = max(float(np.max(np.abs(y))) if y.size else 0.0, 1e-300)
        if y.size and float(np.max(np.abs(x - y))) / scale > 1e-9:
            return False
    return True


def measure_layer(name: str, size: str, most: int, budget_scale: float, cache: Path) -> dict[str, Any]:
    """One layer's row: its variants with their defs, times, costs, and the rho of each cost model."""
    p = Problem(name, size)
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        program = translate(p.fn, *p.examples, name="layer", check=False)
        program = grad_program(program, defs=["layer"], mode="rev")
    program = parse_program(format_program(program))  # as optimize.py reads it
    d = program.defs[NAME]
    began = time.perf_counter()
    results, reached = run_searches(d.body, budget_scale)
    search_s = time.perf_counter() - began
    variants = pick_variants(d.body, results, reached, most)
    args = [*p.arrays, p.dr]
    cache.mkdir(parents=True, exist_ok=True)
    os.environ["KNOSSOS_CPP_CACHE"] = str(cache)
    compiled: list[Callable[..., Any]] = []
    wrong: list[str] = []
    want: Any = None
    kept: list[tuple[str, Expr]] = []
    for label, e in tqdm(variants, desc=f"{name}: compile", unit="variant", leave=False, file=sys.stderr):
        fn = compile_def(program.with_def(Def(d.name, d.ret_type, d.params, e, d.ret_sizes)), NAME, threads=1)
        got = fn(*args)
        if want is None:
            want = got
        elif not _same(got, want):
            wrong.append(label)
            continue
        kept.append((label, e))
        compiled.append(fn)
    sizes = shapes_of(d, p.arrays)
    best = [(float("inf"), float("inf"))] * len(compiled)
    for _ in range(ROUNDS):  # interleaved rounds, so that every variant sees the machine's load alike
        for k, compiled_fn in enumerate(compiled):
            cpu, wall = time_call(functools.partial(compiled_fn, *args), ROUND_SECONDS)
            best[k] = (min(best[k][0], cpu), min(best[k][1], wall))
    models = cost_models(program, d, sizes)
    rows = [
        {
            "label": label,
            "def": format_def(Def(d.name, d.ret_type, d.params, e, d.ret_sizes)),
            "seconds": t[0],
            "wall_seconds": t[1],
            "costs": {m: fn(e) for m, fn in models.items()},
        }
        for (label, e), t in zip(kept, best, strict=True)
    ]
    return {
        "layer": name,
        "size": size,
        "variants_most": most,
        "sizes": sizes,
        "program": format_program(program),
        "search_s": search_s,
        "search_costs": {label: [r.start_cost, r.best_cost] for label, r in results.items()},
        "wrong": wrong,
        "variants": rows,
        **score(rows),
    }


def score(variants: list[dict[str, Any]]) -> dict[str, Any]:
    """Each cost model's rho, the fastest variant and the one each cost model picks, against as written."""
    times = [v["seconds"] for v in variants]
    written = times[0]
    fastest = int(np.argmin(times))
    models = list(variants[0]["costs"]) if variants else []
    rho = {m: spearman_rho([v["costs"][m] for v in variants], times) for m in models}
    agree = {m: agreement([v["costs"][m] for v in variants], times) for m in models}
    picked = {m: times[int(np.argmin([v["costs"][m] for v in variants]))] / written for m in models}
    return {
        "rho": rho,
        "agreement": agree,
        "fastest": variants[fastest]["label"] if variants else None,
        "fastest_vs_written": times[fastest] / written if variants else None,
        "cheapest_vs_written": picked,
    }


def rescore(row: dict[str, Any]) -> dict[str, Any]:
    """``row``'s scores with the cost models of the code as it is now, from its stored defs."""
    program = parse_program(row["program"])
    d = program.defs[NAME]
    written = format_def(d)
    p_sizes = row.get("sizes")
    sizes = (
        {k: tuple(v) for k, v in p_sizes.items()}
        if p_sizes
        else shapes_of(d, Problem(row["layer"], row["size"]).arrays)
    )
    models = cost_models(program, d, sizes)
    variants = []
    for v in row["variants"]:
        e = parse_program(row["program"].replace(written, v["def"])).defs[NAME].body
        variants.append({**v, "costs": {m: fn(e) for m, fn in models.items()}})
    return score(variants)


def _fmt(rho: dict[str, float | None]) -> str:
    return ", ".join(f"{m} {'-' if r is None else f'{r:+.2f}'}" for m, r in rho.items())


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="the suite's tiny shapes, small budgets (a smoke test)")
    parser.add_argument("--layers", nargs="+", default=None, metavar="NAME", help="only these layers")
    parser.add_argument("--variants", type=int, default=12, metavar="K", help="most variants per layer (12)")
    parser.add_argument("--out", default=None, help="the results file (default: by --quick)")
    parser.add_argument("--rescore", action="store_true", help="print rho of the current cost models; time nothing")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    size = "fast" if args.quick else "realistic"
    out = Path(args.out) if args.out else (QUICK if args.quick else RESULTS) / "cost_rank" / "results.jsonl"
    rows = ResultsFile(out, ("layer", "size", "variants_most"))
    names = args.layers or list(LAYERS)
    unknown = [n for n in names if n not in SUITE]
    if unknown:
        print(f"error: no layer named {', '.join(map(repr, unknown))} (ksdata.torch_suite.SUITE)", file=sys.stderr)
        return 2
    if args.rescore:
        for row in rows:
            if row["layer"] in names:
                now = rescore(row)
                print(f"{row['layer']}: rho then {_fmt(row['rho'])}; now {_fmt(now['rho'])}")
                print(f"  clear pairs ordered as the clock now: {_fmt(now['agreement'])}")
                print(
                    f"  cheapest / written now: {', '.join(f'{m} {r:.2f}x' for m, r in now['cheapest_vs_written'].items())}"
                )
        return 0
    todo = [n for n in names if available(SUITE[n]) and not rows.has(layer=n, size=size, variants_most=args.variants)]
    with tempfile.TemporaryDirectory(prefix="bench_cost_rank") as tmp:
        for name in tqdm(todo, desc="layers", unit="layer", file=sys.stderr):
            row = measure_layer(name, size, args.variants, 0.05 if args.quick else 1.0, Path(tmp) / "cache")
            row["load_average"] = os.getloadavg()[0]
            row["date"] = datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")
            rows.add(row)
            tqdm.write(
                f"{name}: {len(row['variants'])} variants, rho {_fmt(row['rho'])}; clear pairs ordered as the clock: "
                f"{_fmt(row['agreement'])}; fastest {row['fastest']} "
                f"{row['fastest_vs_written']:.2f}x written; cheapest by each model: "
                + ", ".join(f"{m} {r:.2f}x" for m, r in row["cheapest_vs_written"].items())
                + (f"; WRONG: {row['wrong']}" if row["wrong"] else ""),
                file=sys.stderr,
            )
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
