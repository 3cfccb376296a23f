"""Reductions with no sum (max, min, argmax, topk, softmax's max, cross-entropy) are loops: the
translated def and its ``rev$`` do not grow with the reduced dimension, and over dimensions that take
several levels of :func:`frontends.folds.tree_reduce` (sizes that are not a multiple of its fan-in,
NaNs, infinities and ties in the later groups) they still agree with torch and torch.autograd."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

torch = pytest.importorskip("torch")
F = torch.nn.functional

from autodiff import grad_program  # noqa: E402
from frontends.check import AGREE_TOLERANCE, disagreement  # noqa: E402
from frontends.dispatch import results  # noqa: E402
from frontends.torch import translate  # noqa: E402
from knossos.interpreter import call_def  # noqa: E402
from knossos.values import to_numpy  # noqa: E402

D = torch.float64
_SMOOTHED = torch.nn.CrossEntropyLoss(label_smoothing=0.1)

#: One float argument of shape (rows, classes), reduced over the classes (or over everything).
REDUCTIONS: dict[str, Callable[..., Any]] = {
    "amax": lambda x: x.amax(dim=-1),
    "max of all": lambda x: x.max(),
    "amin over both": lambda x: x.amin(dim=(0, 1)),
    "max dim values": lambda x: x.max(dim=1).values,
    "min dim keepdim": lambda x: x.min(dim=1, keepdim=True).values,
    "log_softmax": lambda x: F.log_softmax(x, dim=-1),
    "softmax dim 0": lambda x: F.softmax(x.t(), dim=0),
    "norm inf": lambda x: torch.linalg.vector_norm(x, ord=float("inf"), dim=1),
}
#: Integer results (no gradient).
INDICES: dict[str, Callable[..., Any]] = {
    "argmax": lambda x: x.argmax(dim=-1),
    "argmin keepdim": lambda x: x.argmin(dim=1, keepdim=True),
    "max dim indices": lambda x: x.max(dim=1).indices,
    "topk": lambda x: torch.topk(x, 3, dim=-1).indices,
}


def _nodes(fn: Callable[..., Any], rows: int, classes: int, *extra: Any) -> tuple[int, int]:
    x = torch.randn(rows, classes, generator=torch.Generator().manual_seed(0), dtype=D)
    program = translate(fn, x, *extra, name="op", check=False)
    rev = grad_program(program, defs=["op"], mode="rev").defs["rev$op"]
    return program.defs["op"].body.size, rev.body.size


@pytest.mark.parametrize("name", list(REDUCTIONS))
def test_a_reduction_and_its_gradient_do_not_grow_with_the_dimension(name: str) -> None:
    small, big = _nodes(REDUCTIONS[name], 2, 500), _nodes(REDUCTIONS[name], 2, 4000)
    # 8x the elements: unrolled, the sizes grew ~8x; as loops, by one level of a few nodes
    assert big[0] < 1.5 * small[0], (small, big)
    assert big[1] < 1.5 * small[1], (small, big)


def test_cross_entropy_at_1000_classes_is_small() -> None:
    """The layer of issue 45 that compiled for 122 s: its gradient was 215,523 nodes at 1,000 classes."""

    def loss(x: Any, t: Any) -> Any:
        return _SMOOTHED(x, t)

    t500, t4000 = torch.randint(0, 500, (2,)), torch.randint(0, 4000, (2,))
    small, big = _nodes(loss, 2, 500, t500), _nodes(loss, 2, 4000, t4000)
    assert big[0] < 1.5 * small[0], (small, big)
    assert big[1] < 1.5 * small[1], (small, big)
    assert big[1] < 10_000


def _inputs(seed: int, shape: tuple[int, ...]) -> Any:
    return torch.randn(shape, generator=torch.Generator().manual_seed(seed), dtype=D)


def _with_specials(x: Any, ties: bool, nan: bool = True) -> Any:
    """NaN, +-inf in later groups of some rows (without NaNs, finite values there: torch splits the
    gradient between equal infinities, the translation gives it to one); ties of the rows' and the
    whole tensor's largest and smallest elements in others."""
    y = x.clone()
    y[0, -1] = float("nan") if nan else 9.0
    y[1, 9] = float("inf") if nan else 8.0
    y[1, 30] = float("-inf") if nan else -5.0
    y[2, 22] = float("nan") if nan else -9.0
    y[2, 35] = float("inf") if nan else 7.0
    if ties:
        y[3, 5] = y[3, 33] = y[0, 2] = 9.5
        y[4, 2] = y[4, 17] = y[1, 3] = -9.5
    return y


def _agrees(d: Any, fn: Callable[..., Any], x: Any) -> None:
    want = results(fn(x.clone()))[0].detach()
    got = np.asarray(to_numpy(call_def(d, x.numpy())), dtype=np.float64)
    problem = disagreement(got, want.double().numpy(), AGREE_TOLERANCE)
    assert not problem, problem


@pytest.mark.parametrize("name", list(REDUCTIONS) + list(INDICES))
def test_a_reduction_over_several_levels_agrees_with_torch(name: str) -> None:
    fn = REDUCTIONS.get(name) or INDICES[name]
    shape = (5, 37)  # 37 -> 10 -> 3 -> 1: three levels, short last groups
    d = translate(fn, _inputs(0, shape), name="op").defs["op"]  # checked on fresh inputs too
    _agrees(d, fn, _inputs(1, shape))
    # torch's order of equal values in topk is its kernel's (docs/torch.md): ties only elsewhere
    _agrees(d, fn, _with_specials(_inputs(2, shape), ties=name != "topk"))


@pytest.mark.parametrize("name", list(REDUCTIONS))
def test_the_gradient_of_a_reduction_over_several_levels_equals_torch_autograd(name: str) -> None:
    fn = REDUCTIONS[name]
    shape = (5, 37)
    program = translate(fn, _inputs(0, shape), name="op", check=False)
    rev = grad_program(program, defs=["op"], mode="rev").defs["rev$op"]
    for x in (_inputs(1, shape), _with_specials(_inputs(2, shape), ties=True, nan=False)):
        leaf = x.clone().requires_grad_()
        out = fn(leaf)
        dr = torch.randn(out.shape, generator=torch.Generator().manual_seed(7), dtype=D)
        (want,) = torch.autograd.grad(out, leaf, dr)
        have = np.asarray(to_numpy(call_def(rev, x.numpy(), dr.numpy() if dr.dim() else dr.item())))
        keep = np.isfinite(want.numpy()) & np.isfinite(have)  # torch and the translation differ on NaN paths
        problem = disagreement(np.where(keep, have, 0.0), np.where(keep, want.numpy(), 0.0), 1e-6)
        assert not problem, problem
