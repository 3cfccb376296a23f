"""rules.actions.children (what search uses) gives exactly apply(root, a) for every enumerated action.

children() rewrites at the site the enumeration stands on instead of walking to it again, so its
results must be the very same interned nodes as apply's, in the same order.
"""

from __future__ import annotations

import pytest
from exprgen import sample

from knossos.expr import Expr, preorder
from knossos.parser import load_program
from rules.actions import actions, apply, children
from rules.sets import get_rule_set

from conftest import PROGRAMS


def same_as_apply(root: Expr, rule_set_name: str) -> int:
    rule_set = get_rule_set(rule_set_name)
    fused = children(root, rule_set)
    assert [a for a, _ in fused] == actions(root, rule_set)
    for action, child in fused:
        assert child is apply(root, action), str(action)
    return len(fused)


@pytest.mark.parametrize("seed", range(60))
def test_children_of_generated_expressions(seed: int) -> None:
    body = sample(seed, max_depth=5).body
    # and one step deeper, where binders from new_bind and lifted lets appear
    same_as_apply(body, "ml_rules")
    for _, child in children(body, get_rule_set("ml_rules"))[:5]:
        same_as_apply(child, "ml_rules")


@pytest.mark.parametrize(
    ("file", "name"),
    [("blas_test.kso", "gemm"), ("conv1d_rev_test.kso", "rev$conv1d"), ("gelu.kso", None)],
)
def test_children_of_program_defs(file: str, name: str | None) -> None:
    defs = load_program(PROGRAMS / file).defs
    total = sum(same_as_apply(d.body, "ml_rules") for d in ([defs[name]] if name else list(defs.values())))
    assert total > 0


def test_children_include_rewrites_of_an_ancestor_of_the_site() -> None:
    # lift_bind matches at a let and rewrites its parent
    from knossos.parser import parse_expr

    e = parse_expr("(add 1.0 (let (a (mul x y)) (add a a)))")[0]
    rule_set = get_rule_set("binding_rules")
    fused = children(e, rule_set)
    lifted = [(a, c) for a, c in fused if a.rule.name == "lift_bind"]
    assert lifted
    for action, child in lifted:
        assert child is apply(e, action)
        assert child.op.name == "LET" and next(iter(preorder(child))) is child


def test_each_child_matches_its_rule_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """A rule hands what its match found to its rewrite: generating a child never matches again."""
    from rules.rule import Rule

    calls = {"match": 0, "rewrite": 0}
    rule_set = get_rule_set("all_rules")
    classes = {type(r) for r in rule_set}

    def counting(cls: type[Rule], method: str) -> None:
        original = cls.__dict__[method]

        def counted(self: Rule, *args: object) -> object:
            calls[method] += 1
            return original(self, *args)

        monkeypatch.setattr(cls, method, counted)

    patched = set()
    for cls in classes:
        for method in ("match", "rewrite"):
            owner = next(c for c in cls.__mro__ if method in c.__dict__)  # where the rule's method is defined
            if (owner, method) not in patched:
                patched.add((owner, method))
                counting(owner, method)
    roots = [load_program(PROGRAMS / "gmm_test.kso").defs["rev$gmm_knossos_gmm_objective"].body]
    roots += [sample(seed).body for seed in range(40)]
    tried = sum(len(rule_set.by_op[node.op]) for root in roots for node in preorder(root))
    found = [a for root in roots for a, _ in children(root, rule_set)]
    assert calls == {"match": tried, "rewrite": len(found)}
    assert {"TableRule", "FoldValueOp", "InlineLet"} <= {type(a.rule).__name__ for a in found}  # each kind
