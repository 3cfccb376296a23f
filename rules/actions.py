"""Actions: every (node, rule) rewrite site of an expression, and applying one.

Sites are numbered in pre-order (:func:`knossos.expr.preorder`), the same numbering as everywhere
else.  Enumeration visits each node once and asks only the rules whose head op is the node's (the
rule set keeps them by op), so its cost is the expression size times the few rules per op.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

from knossos.errors import KsUsageError
from knossos.expr import Expr, path_to, replace_on_path
from knossos.ops import BINDERS
from rules.rule import Rewrite, Rule, Site
from rules.rule_set import RuleSet


@dataclass(frozen=True)
class Action:
    """Rewrite with ``rule`` at the node numbered ``node``."""

    node: int
    rule: Rule

    def __str__(self) -> str:
        return f"{self.node}:{self.rule.name}"


def sites(root: Expr) -> Iterator[Site]:
    """Every node of ``root`` as a :class:`Site`, in pre-order (iterative).

    The yielded site's ``ancestors`` list and ``scope`` dict are shared and change as the walk goes
    on: copy them to keep them.  (A scope is changed in place and put back, not copied per binder,
    which for a chain of ``d`` lets would be ``d**2 / 2`` entries.)
    """
    ancestors: list[tuple[Expr, int, int]] = []
    scope: dict[str, tuple[Expr, int]] = {}
    # the bindings in force, each with the depth of the node it was made for (undone when the walk
    # leaves that node's subtree) and what it shadows
    made: list[tuple[int, str, tuple[Expr, int] | None]] = []
    # frames: (node, number, depth, what the parent binds over the node, entry for the parent in `ancestors`)
    Binding = tuple[str, tuple[Expr, int]]
    stack: list[tuple[Expr, int, int, Binding | None, tuple[Expr, int, int] | None]] = [(root, 0, 0, None, None)]
    while stack:
        node, number, depth, binding, parent_entry = stack.pop()
        if parent_entry is not None:
            del ancestors[depth - 1 :]
            ancestors.append(parent_entry)
        while made and made[-1][0] >= depth:
            _, name, outer = made.pop()
            if outer is None:
                del scope[name]
            else:
                scope[name] = outer
        shadowed = None
        if binding is not None:
            name, entry = binding
            outer = scope.get(name)
            made.append((depth, name, outer))
            scope[name] = entry
            shadowed = (name, outer)
        yield Site(root, node, number, ancestors, scope, shadowed)
        if not node.args:
            continue
        binder = BINDERS.get(node.op)
        frames = []
        child_number = number + 1
        for i, child in enumerate(node.args):
            bound = None
            if binder is not None and i == binder[1]:
                bound = (node.args[binder[0]].data, (node, number))
            frames.append((child, child_number, depth + 1, bound, (node, number, i)))
            child_number += child.size
        stack.extend(reversed(frames))


def actions(root: Expr, rule_set: RuleSet) -> list[Action]:
    """Every action of ``rule_set`` on ``root``, ordered by node number, then by the rule set's order."""
    out: list[Action] = []
    by_op = rule_set.by_op
    for site in sites(root):
        for r in by_op.get(site.node.op, ()):
            if r.match(site) is not None:
                out.append(Action(site.number, r))
    return out


#: Asked after each child is built, with the child: True stops the enumeration.
StopCheck = Callable[[Expr], bool]


def children(root: Expr, rule_set: RuleSet, stop: StopCheck | None = None) -> list[tuple[Action, Expr]]:
    """Every action of ``rule_set`` on ``root`` (as :func:`actions` orders them) with its result.

    The same as ``apply`` on each of ``actions(root, rule_set)``, but it rewrites at the site the
    enumeration is standing on with what the match found: no second walk to the node, no second
    match (what search needs).  Each child rebuilds the ancestors of its site, so the children of
    a program ``d`` deep cost up to ``d**2`` nodes in all: ``stop``, asked after every child, lets a
    search's limits hold within one enumeration (the list is then a prefix of the full one).
    """
    out: list[tuple[Action, Expr]] = []
    by_op = rule_set.by_op
    for site in sites(root):
        for r in by_op.get(site.node.op, ()):
            found = r.match(site)
            if found is not None:
                child = _rebuild(root, site, r, r.rewrite(site, found))
                out.append((Action(site.number, r), child))
                if stop is not None and stop(child):
                    return out
    return out


def _rebuild(root: Expr, site: Site, rule: Rule, rewrite: Rewrite) -> Expr:
    """``root`` after ``rule``'s ``rewrite`` at ``site``."""
    target, replacement = rewrite
    ancestors = site.ancestors
    if target == site.number:
        old, depth = site.node, len(ancestors)
    else:  # a rule that rewrites an ancestor of its site (lift_bind, lift_if, inline_let)
        depth = next((k for k, (_, number, _) in enumerate(ancestors) if number == target), -1)
        if depth < 0:  # not on the site's path (no rule does this): walk to it
            ancestors, old = path_to(root, target)
            depth = len(ancestors)
        else:
            old = ancestors[depth][0]
    check_type(rule, old, replacement)
    return replace_on_path([(node, i) for node, _, i in ancestors[:depth]], old, replacement)


def check_type(rule: Rule, old: Expr, replacement: Expr) -> None:
    if replacement.type is not old.type:
        raise AssertionError(f"rule {rule.name} changed the type from {old.type} to {replacement.type}")


def site_at(root: Expr, number: int) -> Site:
    """The site of node ``number`` (with its ancestors and scope)."""
    if not 0 <= number < root.size:
        raise KsUsageError(f"node {number} is out of range: the expression has nodes 0 to {root.size - 1}")
    ancestors, node = path_to(root, number)
    scope: dict[str, tuple[Expr, int]] = {}
    shadowed = None
    for ancestor, ancestor_number, i in ancestors:
        binder = BINDERS.get(ancestor.op)
        shadowed = None
        if binder is not None and i == binder[1]:  # one path: inner binders overwrite outer ones
            name = ancestor.args[binder[0]].data
            shadowed = (name, scope.get(name))
            scope[name] = (ancestor, ancestor_number)
    return Site(root, node, number, ancestors, scope, shadowed)


def apply(root: Expr, action: Action) -> Expr:
    """The expression after ``action``; a KsUsageError if the rule does not apply there."""
    site = site_at(root, action.node)
    heads = action.rule.heads
    rewrite = None if heads is not None and site.node.op not in heads else action.rule.apply(site)
    if rewrite is None:
        raise KsUsageError(
            f"rule {action.rule.name} does not apply at node {action.node} ({site.node.op.name.lower()})"
        )
    return _rebuild(root, site, action.rule, rewrite)
