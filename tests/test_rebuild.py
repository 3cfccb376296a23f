"""The incremental path rebuild of ``replace_at`` gives exactly the node a full rebuild gives.

``replace_at`` reuses the old ancestors' types, free names, weights and bound-variable positions
(plus a change).  A mistake there would give a node a wrong hash, and then an alpha-variant of an
existing node would not be that node.  Here every rewrite of every rule on seeded random expressions
and on the shared programs is rebuilt a second time, ancestor by ancestor with :func:`E.make` (which
finds positions by walking the new scopes), and the two must be the same object with the same facts.
"""

from __future__ import annotations

import pytest
from exprgen import sample

from knossos import expr as E
from knossos import interning, rebuild
from knossos.expr import Expr
from knossos.parser import load_program
from rules.actions import actions, site_at
from rules.sets import all_rules

from conftest import PROGRAMS


def full_rebuild(root: Expr, number: int, new: Expr) -> Expr:
    site = site_at(root, number)
    result = new
    for parent, _, i in reversed(site.ancestors):
        args = parent.args
        result = E.make(parent.op, (*args[:i], result, *args[i + 1 :]), parent.data)
    return result


def check_every_rewrite(root: Expr) -> int:
    count = 0
    for action in actions(root, all_rules):
        rewrite = action.rule.apply(site_at(root, action.node))
        assert rewrite is not None
        target, replacement = rewrite
        fast = E.replace_at(root, target, replacement)
        slow = full_rebuild(root, target, replacement)
        assert fast is slow, f"{action}: {fast} is not {slow}"
        assert (
            fast.alpha_hash,
            fast.shape_hash,
            fast.free_weight,
            fast.occurrence_weight,
            fast.cost,
            fast.free,
            fast.type,
            fast.size,
        ) == (
            slow.alpha_hash,
            slow.shape_hash,
            slow.free_weight,
            slow.occurrence_weight,
            slow.cost,
            slow.free,
            slow.type,
            slow.size,
        )
        count += 1
    return count


def test_rebuild_matches_full_rebuild_on_random_expressions() -> None:
    count = sum(check_every_rewrite(sample(seed, max_depth=6).body) for seed in range(300))
    assert count > 1000


@pytest.mark.parametrize("file", ["blas_test.kso", "conv1d_rev_test.kso", "gelu.kso"])
def test_rebuild_matches_full_rebuild_on_programs(file: str) -> None:
    program = load_program(PROGRAMS / file)
    assert sum(check_every_rewrite(d.body) for d in program.defs.values()) > 50


def test_rebuild_matches_full_rebuild_where_free_sets_are_large() -> None:
    """Nodes of more than freeset.LARGE free names keep them in a FreeSet (shared with the child's):
    rewrites below binders that drop, shadow and add names must give the nodes a full rebuild gives."""
    from knossos.freeset import LARGE, FreeSet
    from knossos.parser import parse_expr

    n = LARGE + 40
    body = "(mul y0 (add v1 1.0))"
    for k in range(n):
        body = f"(add v{k} {body})"
    text = f"(let (y0 (mul v3 2.0)) (let (v5 (add y0 v{n + 1})) (tuple (let (v7 (mul v5 v5)) {body}) v9)))"
    root, _ = parse_expr(text)
    assert isinstance(root.free, FreeSet) and "v5" not in root.free and "v105" in root.free
    assert check_every_rewrite(root) > n


def test_rebuild_of_an_alpha_variant_finds_the_existing_node() -> None:
    from knossos.parser import parse_expr

    root, _ = parse_expr("(let (x (add a b)) (let (y (mul x a)) (add y (mul x 2.0))))")
    variant, _ = parse_expr("(let (p (add a b)) (let (q (mul p a)) (add q (mul 2.0 p))))")
    # commute the inner mul of root: the result is the alpha-variant built above
    number = next(i for i, n in enumerate(E.preorder(root)) if n.op.name == "MUL" and n.args[1].op.name == "CONST")
    node = E.node_at(root, number)
    assert E.replace_at(root, number, E.make(node.op, (node.args[1], node.args[0]))) is variant


@pytest.mark.parametrize("file", ["conv1d_rev_test.kso", "gmm_test.kso"])
def test_bound_between_reads_the_same_names_as_binders_on_path(file: str) -> None:
    """inline_let's capture check reads the binders off the site's walk; a second walk must agree."""
    from knossos.substitution import binders_on_path

    checked = 0
    for d in load_program(PROGRAMS / file).defs.values():
        root = d.body
        for number in range(root.size):
            site = site_at(root, number)
            for start in {0, *(n for _, n, _ in site.ancestors)}:
                assert site.bound_between(start) == binders_on_path(root, number, start)
                checked += 1
    assert checked > 1000


def test_the_compiled_loop_is_used_where_a_compiler_built_it() -> None:
    """pip install builds knossos/_climb.c where there is a C compiler; tests must then exercise it."""
    import os
    import shutil

    if os.environ.get("KNOSSOS_PURE_PYTHON", "") not in ("", "0"):
        assert not E.compiled_rebuild()
    elif shutil.which("cc") or shutil.which("gcc"):
        assert E.compiled_rebuild(), "knossos._climb was not built: pip install -e . builds it"
    else:
        pytest.skip("no C compiler: the package runs on the Python loop")


def test_the_python_loop_builds_the_same_nodes() -> None:
    """The tests of this file again, in a process where the Python loop rebuilds the ancestors."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    env = {**os.environ, "KNOSSOS_PURE_PYTHON": "1"}
    here = Path(__file__)
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(here), "-k", "not python_loop_builds"],
        env=env,
        cwd=here.parent.parent,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert " passed" in done.stdout


def test_the_compiled_loop_refuses_a_malformed_path() -> None:
    """The C loop reads slots by offset, so it checks what it is given (Python would just raise)."""
    if not E.compiled_rebuild():
        pytest.skip("the Python loop is in use")
    root = sample(1, max_depth=4).body
    leaf = E.node_at(root, root.size - 1)
    with pytest.raises((TypeError, IndexError)):
        rebuild._climb([(root, 99)], leaf, leaf, {})
    with pytest.raises((TypeError, AttributeError)):
        rebuild._climb([("not an expression", 0)], leaf, leaf, {})  # type: ignore[list-item]


def test_rebuilt_nodes_hash_as_a_fresh_process_builds_them() -> None:
    """Rebuilt ancestors found in the exact table by their children are not recomputed by a second
    build in this process, so their facts are compared with a process that builds each result from
    scratch (unpickling builds bottom-up with make; hashes are the same in every process)."""
    import pickle
    import subprocess
    import sys

    results = []
    roots = [sample(seed, max_depth=6).body for seed in range(120)]
    roots += [d.body for d in load_program(PROGRAMS / "conv1d_rev_test.kso").defs.values()]
    for root in roots:
        for action in actions(root, all_rules):
            rewrite = action.rule.apply(site_at(root, action.node))
            assert rewrite is not None
            target, replacement = rewrite
            results.append(E.replace_at(root, target, replacement))
    assert len(results) > 1000
    facts = [(e.alpha_hash, e.shape_hash, e.free_weight, e.occurrence_weight, e.cost, e.size) for e in results]
    script = (
        "import pickle, sys\n"
        "exprs = pickle.loads(sys.stdin.buffer.read())\n"
        "sys.stdout.buffer.write(pickle.dumps([(e.alpha_hash, e.shape_hash, e.free_weight, e.occurrence_weight, e.cost, e.size) for e in exprs]))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], input=pickle.dumps(results), capture_output=True, timeout=600, check=True
    )
    fresh = pickle.loads(done.stdout)
    mismatched = [i for i, (a, b) in enumerate(zip(facts, fresh, strict=True)) if a != b]
    assert not mismatched, f"{len(mismatched)} differ, the first: {results[mismatched[0]]}"


def test_rebuilding_keeps_no_node_alive() -> None:
    """Children that are dropped take their new ancestors with them (the C loop counts references)."""
    import gc

    from rules.actions import children
    from rules.sets import get_rule_set

    rules = get_rule_set("ml_rules")
    roots = [d.body for d in load_program(PROGRAMS / "conv1d_rev_test.kso").defs.values()]
    gc.collect()
    before = E.live_nodes()
    for root in roots:
        assert children(root, rules)
    gc.collect()
    assert E.live_nodes() == before


def test_every_node_is_interned_under_its_one_key() -> None:
    """make, the rebuilds (Python or C) and the leaves all file a node that binds nothing under
    exact_key, and a binder under its alpha hash: node identity is written once."""
    from rules.actions import children
    from rules.sets import get_rule_set

    roots = [d.body for d in load_program(PROGRAMS / "conv1d_rev_test.kso").defs.values()]
    results = [e for root in roots for _, e in children(root, get_rule_set("ml_rules"))]
    checked = 0
    for e in results[:200]:
        for node in E.preorder(e):
            if node.is_binder:
                ref = interning.alpha_table.get((node.alpha_hash, 0))
                assert ref is not None and ref() is not None and E.alpha_equal(ref(), node)
            else:
                data = interning._data_key(node.op, node.data, node.type) if not node.args else node.data
                ref = interning.intern_table.get(interning.exact_key(node.op, data, node.args))
                assert ref is not None and ref() is node
            checked += 1
    assert checked > 10000
