"""Lazy states (search/state.py): sketched children are the built ones, searches on them find what
searches on built children find, and expanding a deep program costs nodes linear in its depth."""

from __future__ import annotations

import json
import random
import subprocess
import sys
import tracemalloc
from dataclasses import replace
from itertools import pairwise
from pathlib import Path

import pytest

from knossos.alloc_cost import alloc_cost
from knossos.expr import Expr, live_nodes, preorder, replace_at
from knossos.fingerprint import Fingerprints
from knossos.ops import Op
from knossos.parser import load_program, parse_expr
from rules.actions import Action, apply, children, site_at, sites
from rules.lazy_children import sketch_children
from rules.rule_set import RuleSet
from rules.sets import RULE_SETS, get_rule_set
from search.mdp import Transitions
from search.registry import SEARCHES, get_search
from search.result import SearchResult
from search.spec import SearchRun, SearchSpec
from search.state import LAZY_DEPTH, LazyState, expr_of, reaches_depth

from conftest import DATA, PROGRAMS

ROOT = Path(__file__).resolve().parents[1]
SEQUENCE_SEARCHES = [name for name in SEARCHES if name != "egraph" and not name.startswith("saturate-")]
BINDERS = {Op.LET, Op.LAM, Op.BUILD, Op.SUMBUILD}


def program_bodies() -> list[Expr]:
    bodies: list[Expr] = []
    for name in ("blas_test", "gmm_test", "conv1d_rev_test", "gelu"):
        bodies += [d.body for d in load_program(PROGRAMS / f"{name}.kso").defs.values()]
    bodies += [d.body for d in load_program(DATA / "gradients" / "rev_blas_test.kso").defs.values()]
    return bodies


def if_chain(depth: int) -> Expr:
    """Nested ifs whose branches tie, flip and differ as rewrites change them."""
    body = "x"
    for k in range(depth):
        other = ["x", "(mul x 1.0)", "(add x 0.0)"][k % 3]
        body = (
            f"(if (gt x {float(k)}) (add 0.0 {body}) {other})" if k % 2 else f"(if (gt x 0.0) {other} (mul 1.0 {body}))"
        )
    return parse_expr(f"(let (x 1.5) {body})")[0]


def chain(depth: int) -> Expr:
    body = "x"
    for _ in range(depth):
        body = f"(add 1.0 {body})"
    return parse_expr(f"(let (x 2.0) {body})")[0]


def walk(start: Expr, rules: RuleSet, steps: int, rng: random.Random) -> list[Expr]:
    out = [start]
    for _ in range(steps):
        made = children(out[-1], rules)
        if not made:
            break
        out.append(rng.choice(made)[1])
    return out


def check_sketches(root: Expr, rules: RuleSet, fingerprints: Fingerprints, keys: dict[tuple[int, int], Expr]) -> int:
    """Each sketch of ``root`` is its child: same action, built to the same node, the same cost,
    and a key that no other expression has (the same as the child's fingerprint where no binder
    can make interning return an alpha-variant)."""
    made = children(root, rules)
    sketches = sketch_children(root, rules, fingerprints)
    assert [a for a, _ in made] == [s.action for s in sketches]
    for (_, child), s in zip(made, sketches, strict=True):
        assert replace_at(root, s.target, s.replacement) is child
        assert s.cost == pytest.approx(child.cost, rel=1e-12, abs=1e-12)
        if not any(n.op in BINDERS for n in (*preorder(root), *preorder(s.replacement))):
            assert s.key == fingerprints(child)
        assert keys.setdefault(s.key, child) is child
    return len(made)


@pytest.mark.parametrize("rules", sorted(RULE_SETS))
def test_sketches_are_the_children_they_name(rules: str) -> None:
    rng = random.Random(7)
    fingerprints = Fingerprints()
    keys: dict[tuple[int, int], Expr] = {}
    checked = 0
    logs = parse_expr("(let (x 1.5) (let (y 2.5) (mul (log (exp (mul x y))) (exp (add (log x) (log y))))))")[0]
    starts = [*program_bodies(), if_chain(40), chain(30), logs]
    for start in starts:
        for e in walk(start, get_rule_set(rules), 2, rng):
            checked += check_sketches(e, get_rule_set(rules), fingerprints, keys)
    assert checked > 0  # every set rewrites something here (all_rules: thousands of children)


def test_costs_carried_through_every_if_above_a_rewrite() -> None:
    rules = get_rule_set("ml_rules")
    e = if_chain(60)
    assert check_sketches(e, rules, Fingerprints(), {}) > 100
    # flips: a rewrite that makes a cheaper branch the dearer one
    flip = parse_expr("(let (x 1.5) (if (gt x 0.0) (mul (add x 0.0) 1.0) (add x x)))")[0]
    assert check_sketches(flip, rules, Fingerprints(), {}) > 2


def test_fingerprints_tell_apart_what_interning_tells_apart() -> None:
    fp = Fingerprints()
    assert fp(parse_expr("(add x 0.0)")[0]) != fp(parse_expr("(add x -0.0)")[0])
    assert fp(parse_expr("(add x 1.0)")[0]) != fp(parse_expr("(add 1.0 x)")[0])
    assert fp(parse_expr("(let (x 1) (add x 1))")[0]) != fp(parse_expr("(let (x 1.0) (add x 1.0))")[0])
    same = parse_expr("(mul (add x 1.0) y)")[0]
    assert fp(same) == Fingerprints()(same)  # the same in a fresh table: no state but the multipliers


def test_deep_starts_get_lazy_states_under_the_reference_cost() -> None:
    deep, shallow = chain(LAZY_DEPTH), chain(LAZY_DEPTH - 10)
    assert reaches_depth(deep, LAZY_DEPTH) and not reaches_depth(shallow, LAZY_DEPTH)
    spec = SearchSpec(rules=get_rule_set("simplify_rules"), depth=3, budget=10)
    assert isinstance(SearchRun(deep, spec).start, LazyState)
    assert isinstance(SearchRun(deep, replace(spec, prune_commutes=True, prune_inlines=True)).start, LazyState)
    assert SearchRun(shallow, spec).start is shallow
    assert SearchRun(deep, replace(spec, cost=alloc_cost)).start is deep  # it costs built expressions
    assert isinstance(SearchRun(shallow, replace(spec, lazy_states=True)).start, LazyState)
    with pytest.raises(ValueError, match="lazy states need the reference cost model"):
        SearchRun(deep, replace(spec, cost=alloc_cost, lazy_states=True))


def test_pruning_filters_decide_on_sketches_as_on_built_children() -> None:
    """The commutation and idle-inline filters keep exactly the same children of every state of the
    public programs and gradients (and of random walks from them), from the enumeration's site.

    Left out: states with a child that interning returns as an alpha-variant with other bound names
    (its fingerprint is not its sketch's), since the filters compare rewrites by name, and which
    variant is alive depends on what else the process built."""
    rng = random.Random(3)
    states = renamed = 0
    pruned = 0
    fingerprints = Fingerprints()
    bodies = [d.body for f in sorted(PROGRAMS.glob("*.kso")) for d in load_program(f).defs.values()]
    bodies += [d.body for f in sorted((DATA / "gradients").glob("*.kso")) for d in load_program(f).defs.values()]
    for rules in ("ml_rules", "all_rules", "binding_simplify_rules"):
        rule_set = get_rule_set(rules)
        for start in bodies:
            for e in walk(start, rule_set, 2, rng):
                every = zip(children(e, rule_set), sketch_children(e, rule_set, fingerprints), strict=True)
                if any(fingerprints(child) != sketch.key for (_, child), sketch in every):
                    renamed += 1
                    continue
                built = Transitions(rule_set, prune_commutes=True, prune_inlines=True)
                lazy = Transitions(rule_set, prune_commutes=True, prune_inlines=True)
                kept = [a for a, _ in built.successors(e)]
                assert [a for a, _ in lazy.successors(lazy.start(e, lazy=True))] == kept
                assert [f.pruned for f in lazy.filters] == [f.pruned for f in built.filters]
                states += 1
                pruned += sum(f.pruned for f in built.filters)
    assert states > 500 and pruned > 1000 and renamed < states / 10  # about 5%


def test_one_expansion_of_a_deep_program_builds_nodes_linear_in_its_depth() -> None:
    depth = 5000
    e = chain(depth)
    transitions = Transitions(get_rule_set("simplify_rules"))
    start = transitions.start(e, lazy=True)
    before = live_nodes()
    found = transitions.successors(start)
    assert len(found) > depth  # a commutation and more at each add
    assert live_nodes() - before < 10 * depth  # built, one child per site: depth**2 / 2 = 12.5 million
    assert not any(isinstance(c, LazyState) and c.built for _, c in found)
    action, child = found[-1]
    assert expr_of(child) is apply(e, action)


def let_chain(lets: int) -> Expr:
    """``(let (a1 (mul 2.0 x)) (let (a2 (mul 2.0 a1)) ... a_n))``: a reverse-mode-like chain of lets."""
    body = f"a{lets}"
    for k in range(lets, 0, -1):
        body = f"(let (a{k} (mul 2.0 {'x' if k == 1 else f'a{k - 1}'})) {body})"
    return parse_expr(f"(let (x 1.5) {body})")[0]


def test_the_walk_keeps_one_scope_and_puts_it_back() -> None:
    """Every site of the walk has the scope, and the parent's scope, that walking to it finds."""
    roots = [let_chain(30), if_chain(20), *program_bodies()[:40]]
    for root in roots:
        for site in sites(root):
            direct = site_at(root, site.number)
            assert dict(site.scope) == direct.scope and site.shadowed == direct.shadowed
            if site.parent is not None:
                assert dict(site.parent_scope) == site_at(root, site.parent[1]).scope


def test_one_expansion_of_a_long_let_chain_is_linear() -> None:
    """A scope copied per binder would hold ``lets**2 / 2`` entries; the walk's one dict holds ``lets``."""
    lets = 4000
    e = let_chain(lets)
    transitions = Transitions(get_rule_set("ml_rules"), prune_commutes=True, prune_inlines=True)
    start = transitions.start(e, lazy=True)
    tracemalloc.start()
    try:
        found = transitions.successors(start)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert len(found) > lets
    assert peak < 4000 * len(found)  # bytes per child, its sketch and state included (a few hundred)


def replays(result: SearchResult, rules: RuleSet) -> None:
    """As tests/test_search.py's replay and replay_graph, through lazy states."""
    e = result.start
    for step in result.steps:
        e = apply(e, Action(step.node, rules.rule(step.rule)))
        assert e.cost == pytest.approx(step.cost, rel=1e-12)
    assert e is result.best and result.best_cost == result.best.cost <= result.start_cost
    g = result.graph
    for state in random.Random(0).sample(list(g.states), min(100, len(g.states))):
        path = g.path(state)
        lefts = [g.steps_left(parent) for parent, _ in path] + [g.steps_left(state)]
        assert all(a > b for a, b in pairwise(lefts))
        x = expr_of(g.start)
        for parent, action in path:
            assert x is expr_of(parent)
            x = apply(x, action)
        assert x is expr_of(state)


def starts() -> list[tuple[str, Expr]]:
    sets = json.loads((DATA / "arithmetic_sets.json").read_text())["sets"]
    out = [(s["rule_set"], parse_expr(x["expr"])[0]) for s in sets.values() for x in s["expressions"][:3]]
    out += [("ml_rules", d.body) for d in list(load_program(PROGRAMS / "blas_test.kso").defs.values())[:4]]
    return out


@pytest.mark.parametrize("pruned", [False, True], ids=["plain", "pruned"])
@pytest.mark.parametrize("name", SEQUENCE_SEARCHES)
def test_searches_on_lazy_states_find_what_they_find_on_built_ones(name: str, pruned: bool) -> None:
    for rules, start in starts():
        spec = SearchSpec(rules=get_rule_set(rules), depth=5, budget=40, prune_commutes=pruned, prune_inlines=pruned)
        built = get_search(name)(start, replace(spec, lazy_states=False))
        lazy = get_search(name)(start, replace(spec, lazy_states=True))
        assert isinstance(lazy.graph.start, LazyState)
        assert lazy.best_cost == pytest.approx(built.best_cost, rel=1e-12), (name, rules, start)
        replays(lazy, get_rule_set(rules))


def test_optimize_a_program_20000_deep(tmp_path: Path) -> None:
    """optimize.py on the issue's chain: the search ends by its budget, and the program it writes reads back."""
    body = "x"
    for _ in range(20000):
        body = f"(add 1.0 {body})"
    program = tmp_path / "deep.ks"
    program.write_text(f"(def f Float ((x : Float)) {body})\n")
    out = tmp_path / "out.ks"
    argv = [sys.executable, str(ROOT / "optimize.py"), str(program), "--rules", "simplify_rules", "--model", "none"]
    done = subprocess.run(
        [*argv, "--budget", "200", "--json", "--quiet", "-o", str(out)], capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["notes"] == [] and report["evaluations"] == 200 and report["expanded"] >= 1
    (written,) = load_program(out).defs.values()
    assert written.body.cost == report["best_cost"] <= report["start_cost"] == 20000
