"""Every op of the torch front end on inputs it was not traced on (issue 46, item 3).

Each case is translated on seeded examples, then its def is evaluated by the interpreter on other
inputs: fresh values, and the same with edge values put in (inf, -inf, NaN, -0.0, 0.0), and
compared with torch (:func:`frontends.check.disagreement`: NaNs and infinities where torch's are,
the rest within 1e-6 of the largest magnitude, 1e-4 where torch computes in float32).  Its
reverse derivative (``rev$``, :func:`autodiff.grad_program`) is compared with ``torch.autograd`` on
the fresh values, and on the edge values but NaN where both are finite.  Cases with an empty dimension
are translated and evaluated the same way.  The printed program parses back.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pytest

torch = pytest.importorskip("torch")
F = torch.nn.functional

from autodiff import grad_program  # noqa: E402
from frontends.check import AGREE_TOLERANCE, FLOAT32_TOLERANCE, disagreement  # noqa: E402
from frontends.dispatch import results  # noqa: E402
from frontends.torch import translate  # noqa: E402
from knossos.interpreter import call_def  # noqa: E402
from knossos.parser import parse_program  # noqa: E402
from knossos.printer import format_program  # noqa: E402
from knossos.values import to_numpy  # noqa: E402

D = torch.float64


@dataclass
class Arg:
    """A float argument of this shape (``low``: its smallest value), or an integer one in [0, ``high``)."""

    shape: tuple[int, ...]
    high: int | None = None
    low: float | None = None
    dtype: Any = D

    def make(self, g: Any) -> Any:
        if self.high is not None:
            return torch.randint(0, self.high, self.shape, generator=g)
        x = torch.randn(self.shape, generator=g, dtype=D)
        if self.low is not None:
            x = x.abs() + self.low
        return x.to(self.dtype)


@dataclass
class Case:
    fn: Callable[..., Any]
    args: list[Arg]
    #: Edge values to put into the float arguments (none: the op's torch result is ill-defined there).
    edges: tuple[float, ...] = (np.inf, -np.inf, np.nan, -0.0, 0.0)
    grad: bool = True
    tolerance: float = AGREE_TOLERANCE
    extra: dict[str, Any] = field(default_factory=dict)


def f(*shape: int, low: float | None = None) -> Arg:
    return Arg(tuple(shape), low=low)


def i(*shape: int, high: int) -> Arg:
    return Arg(tuple(shape), high=high)


def causal(x):  # nanoGPT's mask, on scores of shape (T, T)
    mask = torch.tril(torch.ones(x.shape[-1], x.shape[-1]))
    return F.softmax(x.masked_fill(mask == 0, float("-inf")), dim=-1)


CASES: dict[str, Case] = {
    "erf": Case(torch.erf, [f(3, 4)]),
    "gelu": Case(F.gelu, [f(3, 4)]),
    "gelu tanh": Case(lambda x: F.gelu(x, approximate="tanh"), [f(3, 4)]),
    "log1p": Case(torch.log1p, [f(5, low=-0.9)]),
    "expm1": Case(torch.expm1, [f(5)]),
    "softplus": Case(lambda x: F.softplus(x * 8.0), [f(6)]),
    "softplus beta": Case(lambda x: F.softplus(x, beta=2.0, threshold=3.0), [f(6)]),
    "silu": Case(F.silu, [f(6)]),
    "std": Case(lambda x: x.std(dim=1), [f(3, 4)]),
    "std all": Case(lambda x: torch.std(x, correction=0), [f(3, 4)]),
    "var keepdim": Case(lambda x: x.var(-1, keepdim=True), [f(3, 4)]),
    "clamp": Case(lambda x: x.clamp(-0.5, 0.5), [f(8)], grad=False),  # torch's gradient at a bound: 1
    "clamp min": Case(lambda x: torch.clamp(x, min=0.1), [f(8)], grad=False),
    "cat": Case(lambda x, y: torch.cat([x, y], dim=1), [f(3, 4), f(3, 2)]),
    "cat dim 0": Case(lambda x, y: torch.cat((x, y, x)), [f(2, 3), f(1, 3)]),
    "stack": Case(lambda x, y: torch.stack([x, y], dim=-1), [f(3, 4), f(3, 4)]),
    "chunk": Case(lambda x: x.chunk(2, dim=-1)[1] * 2.0, [f(3, 4)]),
    "arange": Case(lambda x: x * torch.arange(4), [f(3, 4)]),
    "arange float": Case(lambda x: x + torch.arange(0.5, 2.5, 0.5, dtype=D), [f(4)]),
    "tril": Case(torch.tril, [f(4, 4)]),
    "triu diagonal": Case(lambda x: torch.triu(x, diagonal=1), [f(3, 4)]),
    "causal mask": Case(causal, [f(4, 4)], edges=(-0.0, 0.0)),
    "masked_fill +inf": Case(lambda x: x.masked_fill(x > 0.5, float("inf")), [f(6)], grad=False),
    "eq ne where": Case(lambda x, y: torch.where(x == y, x, y) + (x != y).float(), [f(4), f(4)]),
    "eq integer": Case(lambda x, t: torch.where(t == 2, x, -x), [f(5), i(5, high=4)]),
    "logical": Case(lambda x: torch.where(~(x > 0) | (x < -1), x, 0.0), [f(6)]),
    "embedding": Case(F.embedding, [i(2, 3, high=5), f(5, 4)]),
    "index_select": Case(lambda x, k: x.index_select(0, k), [f(3, 4), i(5, high=3)]),
    "gather": Case(lambda x, k: x.gather(1, k), [f(3, 4), i(3, 2, high=4)]),
    "x[idx]": Case(lambda x, k: x[k], [f(5, 4), i(2, 3, high=5)]),
    "x[:, idx]": Case(lambda x, k: x[:, k], [f(3, 5), i(4, high=5)]),
    "cross_entropy": Case(lambda x, t: F.cross_entropy(x, t), [f(6, 5), i(6, high=5)]),
    "cross_entropy ignore": Case(
        lambda x, t: F.cross_entropy(x, t - 1, ignore_index=-1), [f(6, 5), i(6, high=6)], edges=(-0.0, 0.0)
    ),
    "nll_loss sum weight": Case(
        lambda x, t: F.nll_loss(x, t, weight=torch.linspace(0.5, 2.0, 5, dtype=D), reduction="sum"),
        [f(6, 5), i(6, high=5)],
    ),
    "nll_loss none": Case(lambda x, t: F.nll_loss(x, t, reduction="none"), [f(6, 5), i(6, high=5)]),
    "bce with logits": Case(
        lambda x, y: F.binary_cross_entropy_with_logits(x, y), [f(6), f(6, low=0.0)], edges=(-0.0, 0.0)
    ),
    "mse": Case(F.mse_loss, [f(6), f(6)]),
    "max dim": Case(lambda x: x.max(dim=1).values, [f(3, 4)]),
    "amax": Case(lambda x: x.amax(dim=-1), [f(3, 4)]),
    "min dim": Case(lambda x: torch.min(x, 0)[0], [f(3, 4)]),
    # no ties in the edges: torch splits the gradient of maximum evenly between equal operands
    "maximum": Case(lambda x: torch.maximum(x, x.flip(0) * 0.5), [f(5)], edges=(np.nan, np.inf)),
    "minimum": Case(lambda x: torch.minimum(x.flip(0) * 0.5, x), [f(5)], edges=(np.nan, -np.inf)),
    "flip": Case(lambda x: x.flip(-1) * x, [f(2, 3)]),
    "diagonal": Case(lambda x: torch.diagonal(x, 1), [f(3, 4)]),
    "einsum bmm": Case(lambda q, k: torch.einsum("bqd,bkd->bqk", q, k), [f(2, 3, 4), f(2, 5, 4)]),
    "einsum trace": Case(lambda a: torch.einsum("ii->", a), [f(3, 3)]),
    "einsum outer": Case(lambda a, b: torch.einsum("i,j->ij", a, b), [f(3), f(4)]),
    "einsum sum": Case(lambda a: torch.einsum("ijk->j", a), [f(2, 3, 4)]),
    # infinite numbers from torch's arguments are Floats of the program too (once an unlocated error)
    "pow infinite exponent": Case(lambda x: (x.abs() + 0.5) ** float("inf"), [f(5)], grad=False),
    "softplus infinite threshold": Case(lambda x: F.softplus(x, threshold=float("inf")), [f(5)]),
    "pad": Case(lambda x: F.pad(x, (1, 2, -1, 1), value=-1.5), [f(2, 3, 4)]),
    "repeat": Case(lambda x: x.repeat(2, 1, 3), [f(3, 2)]),
    "max_pool2d": Case(lambda x: F.max_pool2d(x, 3, 2, padding=1, ceil_mode=True), [f(1, 2, 6, 6)]),
    "max_pool1d": Case(lambda x: F.max_pool1d(x, 2), [f(2, 3, 6)]),
    "avg_pool2d": Case(lambda x: F.avg_pool2d(x, 2, padding=1), [f(1, 2, 5, 5)]),
    "instance_norm": Case(lambda x, w, b: F.instance_norm(x, weight=w, bias=b), [f(2, 3, 5), f(3), f(3)], edges=()),
    "batch_norm training": Case(lambda x: F.batch_norm(x, None, None, training=True), [f(4, 3, 2)], edges=()),
    "clamp tensor bounds": Case(lambda x, lo: torch.clamp(x, min=lo, max=lo + 1.0), [f(5), f(5)], grad=False),
    "transpose_ in place": Case(lambda x: (x * 2.0).t_().exp(), [f(2, 3)]),
    "gru_cell in place": Case(
        lambda x, h, wi, wh: torch.gru_cell(x, h, wi, wh), [f(3, 4), f(3, 5), f(15, 4), f(15, 5)], edges=()
    ),
    "nested results": Case(lambda x: (x.sum(0), (x * 2.0, x.exp())), [f(2, 3)], grad=False),
    # the first index of the extreme (ties: -0.0 and 0.0 among the edges; a NaN's index where there is one)
    "max dim indices": Case(lambda x: torch.max(x, 1), [f(3, 4)], grad=False),
    "argmax": Case(lambda x: x.argmax(-1), [f(3, 4)], grad=False),
    "argmin keepdim": Case(lambda x: x.argmin(0, keepdim=True), [f(3, 4)], edges=(-0.0, 0.0, 1.0), grad=False),
    # integer arithmetic keeps Integers (k - 6: negative values too): //, %, neg, abs, max as torch's
    "integer floor division": Case(lambda x, k: x * ((k - 6) // 4) + x * ((k - 6) // -3), [f(8), i(8, high=12)]),
    "integer remainder": Case(lambda x, k: x * ((k - 6) % 5) + x * ((k - 6) % -4), [f(8), i(8, high=12)]),
    "integer trunc division": Case(lambda x, k: x * torch.div(k - 6, 4, rounding_mode="trunc"), [f(8), i(8, high=12)]),
    "integer neg abs max": Case(
        lambda x, k: x * (-(k - 6)).abs() + x * k.max() + x * k.view(2, 4).amin(1).sum(), [f(8), i(8, high=12)]
    ),
    "float ** integer": Case(lambda x, k: x ** (k - 2), [f(6, low=0.5), i(6, high=5)]),
    # topk: values and indices (no ties among the edges: torch's order of equal values is its kernel's)
    "topk": Case(lambda x: torch.topk(x, 3), [f(3, 5)], edges=(np.inf, np.nan, -np.inf), grad=False),
    "topk smallest values": Case(lambda x: torch.topk(x, 2, dim=0, largest=False).values, [f(3, 5)]),
    "sort": Case(
        lambda x: torch.sort(x, dim=0, descending=True), [f(4, 3)], edges=(np.inf, np.nan, -np.inf), grad=False
    ),
    "sort stable values": Case(lambda x: torch.sort(x, stable=True).values, [f(3, 5)]),
    "tuple result": Case(lambda x: (x.sum(), x * 2.0), [f(3)], grad=False),
    "float32 argument": Case(lambda x: torch.tanh(x).sum(1), [Arg((3, 4), dtype=torch.float32)], grad=False),
    "float32 cast": Case(lambda x: (x.float() * 2).softmax(-1).type_as(x), [f(3, 4)], tolerance=FLOAT32_TOLERANCE),
    "layer_norm": Case(lambda x, w, b: F.layer_norm(x, (4,), w, b), [f(3, 4), f(4), f(4)], edges=(-0.0, 0.0)),
    # rev$ of a sum over an empty dimension: autodiff's zero vector of no known size (a KsEvalError)
    "empty sum": Case(lambda x: x.sum(0), [f(0, 3)], grad=False),
    "empty cat": Case(lambda x, y: torch.cat([x, y]), [f(0, 3), f(2, 3)]),
    "empty mean": Case(lambda x: x.mean(1), [f(3, 0)], grad=False),  # NaN: 0 / 0
}


def _inputs(case: Case, seed: int) -> list[Any]:
    g = torch.Generator().manual_seed(seed)
    return [a.make(g) for a in case.args]


def _with_edges(case: Case, xs: list[Any], nan: bool = True) -> list[Any]:
    """The inputs with edge values in their first elements (each float argument); without NaN for
    derivatives (which gradient a NaN gets is a convention of each op in torch)."""
    edges = [e for e in case.edges if nan or not np.isnan(e)]
    out = []
    for x in xs:
        y = x.clone()
        if y.dtype.is_floating_point and y.numel() and edges:
            flat = y.view(-1)
            for k, v in enumerate(edges[: flat.numel()]):
                flat[k] = v
        out.append(y)
    return out


def _numpy(x: Any) -> Any:
    return x.numpy() if x.dim() else x.item()


def _forward_agrees(d: Any, fn: Callable[..., Any], xs: list[Any], tolerance: float) -> None:
    want = fn(*(x.clone() for x in xs))
    wants = results(want)  # a nested tuple's tensors, flattened as the translation returns them
    got = call_def(d, *(_numpy(x) for x in xs))
    gots = list(got) if isinstance(want, tuple) else [got]
    for g, w in zip(gots, wants, strict=True):
        problem = disagreement(np.asarray(to_numpy(g), dtype=np.float64), w.detach().double().numpy(), tolerance)
        assert not problem, problem


def _reverse_agrees(program: Any, name: str, fn: Callable[..., Any], xs: list[Any], finite_only: bool) -> None:
    rev = grad_program(program, defs=[name], mode="rev").defs[f"rev${name}"]
    leaves = [x.clone().requires_grad_() if x.dtype.is_floating_point else x.clone() for x in xs]
    out = fn(*leaves)
    g = torch.Generator().manual_seed(7)
    dr = torch.randn(out.shape, generator=g, dtype=out.dtype)
    floats = [x for x in leaves if x.requires_grad]
    wants = torch.autograd.grad(out, floats, dr, allow_unused=True)
    got = call_def(rev, *(_numpy(x.detach()) for x in leaves), _numpy(dr))
    gots = list(got) if len(leaves) > 1 else [got]
    gots = [gx for gx, x in zip(gots, leaves, strict=True) if x.requires_grad]
    for gx, w in zip(gots, wants, strict=True):
        want = np.zeros(gx.shape if hasattr(gx, "shape") else ()) if w is None else w.numpy()
        have = np.asarray(to_numpy(gx), dtype=np.float64)
        if want.size == 0:  # an empty vector of vectors has no inner sizes
            assert have.size == 0
            continue
        if finite_only:
            keep = np.isfinite(want) & np.isfinite(have)
            have, want = np.where(keep, have, 0.0), np.where(keep, want, 0.0)
        problem = disagreement(have, want, 1e-6)
        assert not problem, problem


@pytest.mark.parametrize("name", list(CASES))
def test_an_op_agrees_with_torch_on_fresh_and_edge_inputs(name: str) -> None:
    case = CASES[name]
    program = translate(case.fn, *_inputs(case, 0), name="op")
    again = parse_program(format_program(program), "op.ks")
    d = again.defs["op"]
    fresh = _inputs(case, 1)
    _forward_agrees(d, case.fn, fresh, case.tolerance)
    _forward_agrees(d, case.fn, _with_edges(case, fresh), case.tolerance)
    if case.grad and any(x.dtype == D for x in fresh):
        _reverse_agrees(program, "op", case.fn, fresh, finite_only=False)
        _reverse_agrees(program, "op", case.fn, _with_edges(case, _inputs(case, 2), nan=False), finite_only=True)
