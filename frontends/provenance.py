"""The second line of defence against constants that depend on the inputs: the function traced
twice, on its examples and on fresh inputs of the same shapes, must give the same graph and the
same constants.

The dispatch tracer sees every tensor that torch's ops make; a tensor made outside them reaches it
as a tensor "read from elsewhere", like a global weight, and becomes a constant.  The first line
(:mod:`frontends.dispatch`) refuses a tensor computed from the arguments leaving torch (``.numpy()``,
``.tolist()``, ``np.asarray``), which is how values usually get out; what escapes it (a random
constant, memory read through ``data_ptr``, a global changed by the function) still changes its
value between two traces, and is refused here where it is first read.  A global weight or a
``torch.tensor([...])`` literal is the same both times.  This is a test on one other input: a Python
branch on values that left torch unseen is caught only when the fresh inputs take the other branch.
"""

from __future__ import annotations

from typing import Any

import torch

Trace = tuple[torch.fx.Graph, list[str], dict[str, torch.Tensor]]


def first_difference(a: Trace, b: Trace) -> tuple[torch.fx.Node, str] | None:
    """The first node of ``a`` whose op, arguments or constant value differ in ``b``, and what
    differs; None when the two traces are the same."""
    (graph_a, _, consts_a), (graph_b, _, consts_b) = a, b
    nodes_a, nodes_b = list(graph_a.nodes), list(graph_b.nodes)
    position = {n: k for k, n in enumerate(nodes_a)} | {n: k for k, n in enumerate(nodes_b)}
    for x, y in zip(nodes_a, nodes_b, strict=False):
        if x.op != y.op or x.target != y.target:
            return (
                x,
                f"the traced ops change with the inputs' values ({_name(x)} on the examples, {_name(y)} on others)",
            )
        if x.op == "placeholder" and x.name in consts_a:
            if not _same_tensor(consts_a[x.name], consts_b.get(y.name)):
                return x, (
                    "a constant tensor changes when the function is traced again on other inputs (it is random, "
                    "or made from them out of torch's sight): it would be baked into the program"
                )
        elif not _same_args((x.args, x.kwargs), (y.args, y.kwargs), position):
            return x, f"an argument of {_name(x)} changes when the function is traced again on other inputs"
    if len(nodes_a) != len(nodes_b):
        node = nodes_a[min(len(nodes_a), len(nodes_b)) - 1]
        return node, "the traced ops change with the inputs' values"
    return None


def _name(node: torch.fx.Node) -> str:
    return str(node.target)


def _same_tensor(x: torch.Tensor, y: torch.Tensor | None) -> bool:
    if y is None or x.dtype != y.dtype or x.shape != y.shape:
        return False
    if x.dtype.is_floating_point or x.dtype.is_complex:
        return bool(torch.equal(x.isnan(), y.isnan()) and torch.equal(x.nan_to_num(0.0), y.nan_to_num(0.0)))
    return bool(torch.equal(x, y))


def _same_args(x: Any, y: Any, position: dict[torch.fx.Node, int]) -> bool:
    if isinstance(x, torch.fx.Node) or isinstance(y, torch.fx.Node):
        return isinstance(x, torch.fx.Node) and isinstance(y, torch.fx.Node) and position[x] == position[y]
    if isinstance(x, list | tuple) and isinstance(y, list | tuple):
        return len(x) == len(y) and all(_same_args(p, q, position) for p, q in zip(x, y, strict=True))
    if isinstance(x, dict) and isinstance(y, dict):
        return x.keys() == y.keys() and all(_same_args(x[k], y[k], position) for k in x)
    if isinstance(x, float) and isinstance(y, float) and x != x and y != y:
        return True  # both NaN
    return type(x) is type(y) and bool(x == y)
