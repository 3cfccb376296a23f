"""A ranking loss among siblings: fit the network to order a state's children as search should.

At a small budget A* expands a few states and must take the right child at each: what matters
is the order of a state's children by ``f``, not how close each value is to its target.  A sibling
group is a state ``p`` with ``t`` steps left and the children a search evaluated there, each with
the best cost reduction found from it within ``t - 1`` steps.  A child's worth is

.. math::
    Q(c) = c(p) - c(c) + V_{target}(c, t - 1)

and the network's is the same with its own value, :math:`\\hat Q(c) = c(p) - c(c) + \\hat V(c, t - 1)`.
The loss is the cross-entropy between :math:`\\mathrm{softmax}(\\hat Q / \\tau)` over the children
and the uniform distribution over the best children (those within ``1e-6`` of the largest ``Q``):
a listwise loss, as learning-to-rank fits a query's documents.  It is added to the regression loss,
which keeps the values in cost units for A*'s comparisons across the frontier.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor

from gnn.networks import Network
from knossos.expr import Expr

#: Children whose Q is this close to the best count as best too.
TIE = 1e-6


@dataclass(frozen=True)
class SiblingGroup:
    parent: Expr
    #: The parent's steps left; its children have one fewer.
    steps_left: int
    children: tuple[Expr, ...]
    #: Best cost reduction found from each child within ``steps_left - 1`` steps.
    targets: tuple[float, ...]

    def worth(self) -> list[float]:
        """``Q`` of each child: the drop to it plus what is reachable below it."""
        c = self.parent.cost
        return [c - child.cost + v for child, v in zip(self.children, self.targets, strict=True)]

    def informative(self) -> bool:
        """Whether some child is worse than the best (else there is nothing to rank)."""
        q = self.worth()
        return len(q) >= 2 and min(q) < max(q) - TIE


def reductions(network: Network, exprs: Sequence[Expr], steps: Tensor) -> Tensor:
    """The network's cost reduction for each of ``exprs`` within its ``steps`` (>= 0), as search reads it."""
    out = network.predict(exprs)
    depth = out.shape[1]
    column = steps.clamp(min=1, max=depth) - 1
    per_step = out[torch.arange(len(exprs)), column]
    value = per_step * steps.clamp(max=depth).to(out.dtype)
    if network.config.cost_normalization == "log":
        cost = torch.tensor([max(e.cost, 0.0) for e in exprs], dtype=out.dtype)
        value = (1.0 + cost) * -torch.expm1(-value)
    return torch.where(steps > 0, value, torch.zeros_like(value))


def ranking_loss(network: Network, groups: Sequence[SiblingGroup], temperature: float = 1.0) -> Tensor:
    """Mean over ``groups`` of the listwise cross-entropy (see the module docstring)."""
    children = [c for g in groups for c in g.children]
    steps = torch.tensor([g.steps_left - 1 for g in groups for _ in g.children])
    predicted = reductions(network, children, steps)
    losses = []
    start = 0
    for g in groups:
        n = len(g.children)
        drop = torch.tensor([g.parent.cost - c.cost for c in g.children], dtype=predicted.dtype)
        logits = (drop + predicted[start : start + n]) / temperature
        q = torch.tensor(g.worth(), dtype=predicted.dtype)
        best = (q >= q.max() - TIE).to(predicted.dtype)
        losses.append(-(best / best.sum() * F.log_softmax(logits, 0)).sum())
        start += n
    return torch.stack(losses).mean()
