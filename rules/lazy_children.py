"""The children of an expression as sketches: each rewrite named, fingerprinted and costed, none built.

:func:`rules.actions.children` builds every child, and each child rebuilds the ancestors of its
site, so the children of a program ``d`` deep cost ``d**2`` nodes.  Here the walk carries, per depth
of the current path, what the root's fingerprint and cost do when the node there changes:

* the product of the fingerprint's edge matrices (:mod:`knossos.fingerprint`), so a child's
  fingerprint is the root's plus that product times the change at the rewrite;
* the cost's slope up to the nearest ``if`` branch above (:data:`knossos.cost.CHILD_WEIGHT`), and
  that branch's depth, so a child's cost is the root's plus the change carried up through the
  ``if`` s on the path, each exactly (:func:`knossos.cost.if_cost` is not linear).

A sketch costs the rule's match and replacement plus constant work per ``if`` above it, and
:func:`knossos.expr.replace_at` makes the child when a search needs it, with one walk down the path.  Costs are the
reference cost model's (``Expr.cost``), summed in another order than bottom-up: they may differ
from the built child's in the last bits.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from knossos.cost import CHILD_WEIGHT, IF_EPSILON
from knossos.expr import Expr, replace_at
from knossos.fingerprint import IDENTITY, Fingerprints, Matrix, Vector, compose, edge_matrix, moved
from knossos.ops import Op
from rules.actions import Action, check_type, sites
from rules.rule import Scope, Site
from rules.rule_set import RuleSet


@dataclass(frozen=True, slots=True)
class Sketch:
    """A child not built: ``action``'s result, which replaces node ``target`` with ``replacement``."""

    action: Action
    target: int
    replacement: Expr
    #: Fingerprint of the child.
    key: Vector
    #: Reference cost of the child.
    cost: float


#: Asked after each sketch with the sketch: True stops the enumeration.
SketchStop = Callable[[Sketch], bool]
#: Asked about each sketch before it is kept, with the site it was made at (its ancestors list is the
#: walk's, valid during the call only) and the scope of the site's parent (None at the root): False
#: drops the sketch (a search's pruning filters).
SketchFilter = Callable[[Site, Scope | None, Sketch], bool]


def _branch_part(mine: float, other: float) -> float:
    """The part of an ``if``'s cost that depends on its branches (see knossos.cost.if_cost)."""
    return max(mine, other) + IF_EPSILON * min(mine, other)


def sketch_children(
    root: Expr,
    rule_set: RuleSet,
    fingerprints: Fingerprints,
    stop: SketchStop | None = None,
    keep: SketchFilter | None = None,
) -> list[Sketch]:
    """Every action of ``rule_set`` on ``root``, in the order of :func:`rules.actions.children`, as
    sketches (those ``keep`` keeps)."""
    root_key = fingerprints(root)
    root_cost = root.cost
    out: list[Sketch] = []
    by_op = rule_set.by_op
    # per depth d of the path to the current site: the fingerprint multiplier from there to the
    # root, the cost slope up to the nearest if branch above, and that if's depth (-1: none)
    scale: list[Matrix] = [IDENTITY]
    slope: list[float] = [1.0]
    branch_if: list[int] = [-1]
    for site in sites(root):
        ancestors = site.ancestors
        depth = len(ancestors)
        if depth:
            parent, _, i = ancestors[-1]
            del scale[depth:], slope[depth:], branch_if[depth:]
            scale.append(compose(scale[-1], edge_matrix(parent.op, i)))
            if parent.op is Op.IF and i:
                slope.append(1.0)
                branch_if.append(depth - 1)
            else:
                slope.append(CHILD_WEIGHT.get((parent.op, i), 1.0) * slope[-1])
                branch_if.append(branch_if[-1])
        for r in by_op.get(site.node.op, ()):
            found = r.match(site)
            if found is None:
                continue
            target, replacement = r.rewrite(site, found)
            at = depth if target == site.number else next((k for k, a in enumerate(ancestors) if a[1] == target), -1)
            if at < 0:  # off the site's path (no rule does this): build the child to name it
                child = replace_at(root, target, replacement)
                sketch = Sketch(Action(site.number, r), target, replacement, fingerprints(child), child.cost)
            else:
                old = site.node if at == depth else ancestors[at][0]
                check_type(r, old, replacement)
                key = moved(root_key, scale[at], fingerprints(old), fingerprints(replacement))
                change = (replacement.cost - old.cost) * slope[at]
                above = branch_if[at]
                while above >= 0 and change:
                    node, _, branch = ancestors[above]
                    mine, other = node.args[branch].cost, node.args[3 - branch].cost
                    change = (_branch_part(mine + change, other) - _branch_part(mine, other)) * slope[above]
                    above = branch_if[above]
                sketch = Sketch(Action(site.number, r), target, replacement, key, root_cost + change)
            if keep is not None and not keep(site, site.parent_scope if depth else None, sketch):
                continue
            out.append(sketch)
            if stop is not None and stop(sketch):
                return out
    return out
