"""egglog against the project's Python e-graph, on the rewrites that search/egraph/translate.py makes of
``simplify_rules``.

Run:  python benchmarks/bench_egglog.py [--sets NAME,...] [--nodes N] [--iterations N]

Needs ``pip install egglog`` (not a dependency of the project).  Every expression of the sets (default:
the public arithmetic sets of ksdata/arithmetic_sets.json) is saturated by both engines with
the same rules and the same backoff scheduler (egg's: match limit 1000, ban length 5), at most
``--iterations`` iterations; the Python engine also stops at ``--nodes`` e-nodes (egglog's Python API has
no node limit, so it never stops early on size).  egglog's rewrites are made from the rules' own
patterns (the translated :class:`search.egraph.translate.ERewrite` rows, :func:`egglog_rewrites`): the
rule tables are written once, and a row with a condition that has no egglog form stops the script:

* the ``float`` and ``scalar`` conditions are dropped: every node of these sets is a Float (checked);
* ``not_zero_literal`` of ``div_by_self`` becomes "the e-class has a non-literal member" (egglog has no
  negation of a match); literals are left to constant folding (which folds ``c / c`` to 1 for c != 0).
  It differs only for an e-class holding both the literal 0 and another member;
* the four folds become rules on ``Num`` children (division only by a non-zero literal).

Per expression and engine: e-nodes at the end, seconds (adding the expression and saturating;
extraction is timed apart), and the reference cost of the tree each extracts (egglog with per-op costs
equal to the reference's, times 10; its extraction is turned back into a project ``Expr`` and costed
by the project).  The Python engine's row also has the cost ``optimize.py --search egraph`` would report
(the cheaper of its tree and DAG extractions).  Rows go to experiments/results/engines/egglog.jsonl
(overwritten); a table per set and engine is printed.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import egglog
from egglog import (
    EGraph,
    Expr,
    StringLike,
    back_off,
    eq,
    f64,
    f64Like,
    function,
    ne,
    rewrite,
    rule,
    ruleset,
    union,
    vars_,
)

from knossos import expr as E
from knossos.ops import Op
from knossos.printer import format_expr
from knossos.types import FLOAT
from ksbench.harness import cpu_name, machine, write_rows
from ksbench.results import revision
from ksdata.loader import DataSource, load_targets
from rules.pattern import Hole, Lit, Pattern
from rules.sets import get_rule_set
from search.egraph.extract import dag_choice, tree_choice, write_out
from search.egraph.graph import EGraph as PyEGraph
from search.egraph.saturate import BAN_LENGTH, MATCH_LIMIT, SaturationLimits, saturate
from search.egraph.translate import ERewrite, translate_rules

ROOT = Path(__file__).resolve().parent.parent

RULES = "simplify_rules"
SETS = ("simplify_expressions", "binding_simplify_8", "bindgen_test", "bindgen_36")
OUT = ROOT / "experiments" / "results" / "engines" / "egglog.jsonl"
#: egglog's costs are integers: the reference's per-op costs, times 10.
SCALE = 10


class Term(Expr):
    """A Float expression of the arithmetic sets."""


@function(cost=0)
def Num(v: f64Like) -> Term: ...


@function(cost=0)
def Var(name: StringLike) -> Term: ...


@function(cost=10)
def Add(a: Term, b: Term) -> Term: ...


@function(cost=10)
def Sub(a: Term, b: Term) -> Term: ...


@function(cost=20)
def Mul(a: Term, b: Term) -> Term: ...


@function(cost=20)
def Div(a: Term, b: Term) -> Term: ...


@function(cost=10)
def Neg(a: Term) -> Term: ...


@function(cost=40)
def Log(a: Term) -> Term: ...


BINARY: dict[Op, Callable[[Term, Term], Term]] = {Op.ADD: Add, Op.SUB: Sub, Op.MUL: Mul, Op.DIV: Div}
UNARY: dict[Op, Callable[[Term], Term]] = {Op.NEG: Neg, Op.LOG: Log}
CONSTRUCTORS = (Num, Var, Add, Sub, Mul, Div, Neg, Log)

t, m1, m2 = vars_("t member_1 member_2", Term)
x, y = vars_("x y", f64)
s = egglog.var("s", egglog.String)
ZERO, ONE = Num(0.0), Num(1.0)

#: Conditions every node of these sets satisfies (all are Floats: checked by :func:`to_term`).
ALWAYS_HOLD = ("float(", "scalar(")


def pattern_term(p: Pattern, holes: dict[str, Term]) -> Term:
    """A rule row's pattern as an egglog term: holes are egglog variables, literals ``Num``s."""
    if isinstance(p, Hole):
        if p.name not in holes:
            holes[p.name] = egglog.var(p.name, Term)
        return holes[p.name]
    if isinstance(p, Lit):
        return Num(float(p.value))
    if p.op in BINARY:
        return BINARY[p.op](pattern_term(p.args[0], holes), pattern_term(p.args[1], holes))
    return UNARY[p.op](pattern_term(p.args[0], holes))


def egglog_rewrites(row: ERewrite) -> list[Any]:
    """The row as egglog rewrites, made from the rule's own patterns (the tables are written once).
    ``not_zero_literal(?a)`` becomes "the e-class of ?a has a non-literal member", one rewrite per
    kind of member (egglog has no negation of a match): literals are left to constant folding."""
    holes: dict[str, Term] = {}
    lhs, rhs = pattern_term(row.rule.lhs, holes), pattern_term(row.rule.rhs, holes)
    others = [c.text for c in row.rule.conditions if not c.text.startswith(ALWAYS_HOLD)]
    if not others:
        return [rewrite(lhs).to(rhs)]
    if len(others) == 1 and len(row.rule.conditions) == 1 and others[0].startswith("not_zero_literal(?"):
        (hole,) = row.rule.conditions[0].names
        members = [Var(s), *(f(m1, m2) for f in BINARY.values()), *(f(m1) for f in UNARY.values())]
        return [rewrite(lhs).to(rhs, eq(holes[hole]).to(m)) for m in members]
    raise SystemExit(f"bench_egglog.py: no egglog form of {row.name}'s conditions {others}")


FOLDS: list[Any] = [
    rule(eq(t).to(Add(Num(x), Num(y)))).then(union(t).with_(Num(x + y))),
    rule(eq(t).to(Sub(Num(x), Num(y)))).then(union(t).with_(Num(x - y))),
    rule(eq(t).to(Mul(Num(x), Num(y)))).then(union(t).with_(Num(x * y))),
    rule(eq(t).to(Div(Num(x), Num(y))), ne(y).to(f64(0.0))).then(union(t).with_(Num(x / y))),
]


def egglog_rules() -> egglog.Ruleset:
    translated = translate_rules(get_rule_set(RULES))
    if translated.left_out:
        raise SystemExit(f"bench_egglog.py: rows that do not translate: {translated.left_out}")
    return ruleset(*[r for row in translated.rewrites for r in egglog_rewrites(row)], *FOLDS, name="simplify")


def to_term(e: E.Expr) -> Term:
    """``e`` (lets inlined, Floats only) as an egglog term."""
    if e.type is not FLOAT:
        raise SystemExit(f"bench_egglog.py: not a Float: {format_expr(e)}")
    if e.op is Op.CONST:
        return Num(float(e.data))
    if e.op is Op.VAR:
        return Var(e.data)
    if e.op in BINARY:
        return BINARY[e.op](to_term(e.args[0]), to_term(e.args[1]))
    if e.op in UNARY:
        return UNARY[e.op](to_term(e.args[0]))
    raise SystemExit(f"bench_egglog.py: no egglog op for {e.op.name}")


OPS = {Add: Op.ADD, Sub: Op.SUB, Mul: Op.MUL, Div: Op.DIV, Neg: Op.NEG, Log: Op.LOG}


def from_term(term: Term) -> E.Expr:
    """An extracted egglog term back as a project expression."""
    num = egglog.get_callable_args(term, Num)
    if num is not None:
        return E.const(float(egglog.get_literal_value(num[0])))  # type: ignore[arg-type]
    var = egglog.get_callable_args(term, Var)
    if var is not None:
        return E.var(str(egglog.get_literal_value(var[0])), FLOAT)  # type: ignore[arg-type]
    for f, op in OPS.items():
        args = egglog.get_callable_args(term, f)  # type: ignore[arg-type, call-overload]
        if args is not None:
            return E.make(op, tuple(from_term(k) for k in args))
    raise ValueError(f"unknown egglog term {term}")


def inlined(e: E.Expr, env: dict[str, E.Expr] | None = None) -> E.Expr:
    """``e`` with its lets inlined, as the Python e-graph adds it (a let-bound variable is its value)."""
    env = env or {}
    if e.op is Op.LET:
        bound, value, body = e.args
        return inlined(body, {**env, bound.data: inlined(value, env)})
    if e.op is Op.VAR:
        return env.get(e.data, e)
    if not e.args:
        return e
    return E.make(e.op, tuple(inlined(k, env) for k in e.args), e.data)


def run_python(e: E.Expr, rules: Any, nodes: int, iterations: int) -> dict[str, Any]:
    t0 = time.perf_counter()
    g = PyEGraph(folds=rules.folds)
    root = g.add_expr(e)
    g.rebuild()
    done = saturate(g, rules.rewrites, SaturationLimits(nodes, iterations, lambda: None))
    seconds = time.perf_counter() - t0
    t1 = time.perf_counter()
    tree, trees = tree_choice(g)
    root = g.find(root)
    best_tree = trees[root]  # the cheapest tree, no lets: what egglog's extraction is compared with
    extract = time.perf_counter() - t1
    written = [write_out(root, choice, e.free, lambda q: q.cost) for choice in (tree, dag_choice(g, trees))]
    search_cost = min(q.cost for q in (e, *written) if q is not None)
    return {
        "enodes": g.size,
        "eclasses": len(g.classes),
        "iterations": done.iterations,
        "saturated": done.saturated,
        "stopped": done.stopped,
        "seconds": seconds,
        "extract_seconds": extract,
        "cost": best_tree.cost,
        "search_cost": search_cost,
        "best": format_expr(best_tree),
    }


def run_egglog(e: E.Expr, rules: egglog.Ruleset, iterations: int) -> dict[str, Any]:
    t0 = time.perf_counter()
    g = EGraph()
    root = g.let("root", to_term(e))
    schedule = egglog.run(rules, scheduler=back_off(match_limit=MATCH_LIMIT, ban_length=BAN_LENGTH))
    g.run(schedule * iterations)
    seconds = time.perf_counter() - t0
    sizes = dict(g.all_function_sizes())
    enodes = sum(sizes.get(f, 0) for f in CONSTRUCTORS)  # type: ignore[call-overload]
    t1 = time.perf_counter()
    out, cost = g.extract(root, include_cost=True)
    extract = time.perf_counter() - t1
    saturated = not g.run(schedule).updated  # one more iteration changes nothing (untimed)
    best = from_term(out)
    return {
        "enodes": enodes,
        "saturated": saturated,
        "seconds": seconds,
        "extract_seconds": extract,
        "cost": best.cost,
        "egglog_cost": cost / SCALE,
        "best": format_expr(best),
    }


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--sets", default=",".join(SETS), help="sets, comma-separated")
    ap.add_argument("--nodes", type=int, default=10_000, help="e-node limit of the Python engine (10000)")
    ap.add_argument("--iterations", type=int, default=30, help="iteration limit of both engines (30)")
    ap.add_argument("--out", type=Path, default=OUT, help="rows (JSON lines, overwritten)")
    args = ap.parse_args(argv)
    py_rules = translate_rules(get_rule_set(RULES))
    eg_rules = egglog_rules()
    rows: list[dict[str, Any]] = []
    for set_name in args.sets.split(","):
        for i, target in enumerate(load_targets(DataSource(set=set_name), "--sets")):
            e = inlined(target.expr)
            to_term(e)  # every node a Float, before anything is timed
            py = run_python(e, py_rules, args.nodes, args.iterations)
            eg = run_egglog(e, eg_rules, args.iterations)
            for engine, r in (("python", py), ("egglog", eg)):
                rows.append({"set": set_name, "index": i, "engine": engine, "start_cost": e.cost, **r})
            print(
                f"{set_name}[{i}] python {py['enodes']} n {py['seconds']:.3f} s cost {py['cost']:g} | "
                f"egglog {eg['enodes']} n {eg['seconds']:.3f} s cost {eg['cost']:g}",
                file=sys.stderr,
            )
    provenance = {"revision": revision(), "machine": machine(), "cpu": cpu_name()}
    write_rows(args.out, [{**r, **provenance} for r in rows])
    print(
        f"{'set':<22} {'engine':<7} {'exprs':>5} {'e-nodes':>8} {'seconds':>8} {'nodes/s':>9} {'cost':>7} {'equal':>6} saturated"
    )
    for set_name in dict.fromkeys(r["set"] for r in rows):
        mine = [r for r in rows if r["set"] == set_name]
        py_costs = {r["index"]: r["cost"] for r in mine if r["engine"] == "python"}
        for engine in ("python", "egglog"):
            rs = [r for r in mine if r["engine"] == engine]
            n, sec = sum(r["enodes"] for r in rs), sum(r["seconds"] for r in rs)
            equal = sum(abs(r["cost"] - py_costs[r["index"]]) < 1e-9 for r in rs)
            print(
                f"{set_name:<22} {engine:<7} {len(rs):>5} {n:>8} {sec:>8.3f} {n / sec:>9.0f} "
                f"{sum(r['cost'] for r in rs):>7.1f} {f'{equal}/{len(rs)}':>6} {sum(r['saturated'] for r in rs)}/{len(rs)}"
            )


if __name__ == "__main__":
    main()
