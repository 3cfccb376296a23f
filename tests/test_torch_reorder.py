"""frontends: views of computed tensors materialised in the tensor's own layout
(frontends.tensor.own_layout_first): a transpose that moves the innermost dimension is read through
(an index swap), not built; a product whose heads a reshape merges is computed as a product, then
copied.  Each case is translated (checked by the interpreter against torch on fresh inputs), then
differentiated and compared with torch.autograd on other inputs."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from autodiff import grad_program  # noqa: E402
from frontends.torch import translate  # noqa: E402
from knossos import expr as E  # noqa: E402
from knossos.expr import Expr  # noqa: E402
from knossos.interpreter import call_def  # noqa: E402
from knossos.ops import Op  # noqa: E402

Shape = tuple[int, ...]


def _examples(shapes: list[Shape], seed: int) -> list[Any]:
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(s, generator=g, dtype=torch.float64) for s in shapes]


def _gradient(fn: Callable[..., Any], shapes: list[Shape]) -> Expr:
    """The body of ``rev$f``, after checking it against torch.autograd on fresh inputs."""
    program = grad_program(translate(fn, *_examples(shapes, 0), name="f"), defs=["f"], mode="rev")
    rev = program.defs["rev$f"]
    args = [a.requires_grad_() for a in _examples(shapes, 3)]
    out = fn(*args)
    dr = torch.randn(out.shape, generator=torch.Generator().manual_seed(4), dtype=torch.float64)
    want = torch.autograd.grad(out, args, dr)
    got = call_def(rev, *(a.detach().numpy() for a in args), dr.numpy())
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(np.asarray(g, dtype=np.float64), w.numpy(), rtol=1e-10, atol=1e-12)
    return rev.body


def _one_hots(body: Expr) -> int:
    return sum(1 for e in E.preorder(body) if e.op is Op.DELTAVEC)


def scores(q: Any, k: Any) -> Any:
    """Attention scores of a computed key: ``q (k + 1)^T``, a 2-d transpose."""
    return q @ (k * 2.0 + 1.0).transpose(0, 1)


def batched_scores(q: Any, k: Any) -> Any:
    """4-d, as Llama's ``q @ k.transpose(2, 3)`` (torch's matmul: expand, clone, view, bmm)."""
    return torch.matmul(q * 1.5, torch.sin(k).transpose(2, 3))


def heads_first(x: Any, w: Any) -> Any:
    """A transpose that keeps the innermost dimension (heads moved first): built as written."""
    return torch.matmul(torch.tanh(x).transpose(0, 1), w)


def merged_heads(p: Any, v: Any, w: Any) -> Any:
    """Attention's weighted sum of values, heads merged then projected (Llama, GPT-2)."""
    return (torch.softmax(p, -1) @ v).transpose(1, 2).reshape(2, 5, -1) @ w


def sliced(x: Any, w: Any) -> Any:
    """A slice of a transposed computed tensor (not every element read)."""
    return torch.exp(x).transpose(0, 1)[1:] @ w


def test_a_product_through_a_transpose_has_no_one_hot_in_its_gradient() -> None:
    assert _one_hots(_gradient(scores, [(3, 4), (5, 4)])) == 0


def test_a_batched_product_through_a_transpose_has_no_one_hot_in_its_gradient() -> None:
    assert _one_hots(_gradient(batched_scores, [(2, 3, 5, 4), (2, 3, 6, 4)])) == 0


@pytest.mark.parametrize("fn", [heads_first, sliced], ids=["heads_first", "sliced"])
def test_other_transposes_of_computed_tensors_keep_their_meaning(fn: Callable[..., Any]) -> None:
    shapes = [(2, 3, 4), (3, 4, 5)] if fn is heads_first else [(4, 3), (4, 5)]
    _gradient(fn, shapes)


def test_the_key_is_computed_once_in_its_own_layout() -> None:
    """``k * 2 + 1`` is one build of k's shape, read by the product at ``[j][d]``."""
    program = translate(scores, *_examples([(3, 4), (5, 4)], 0), name="f")
    lets = [e.args[1] for e in E.preorder(program.defs["f"].body) if e.op is Op.LET]
    (built,) = [b for b in lets if any(x.op is Op.MUL for x in E.preorder(b))]  # (not the arguments' copies)
    assert built.op is Op.BUILD and built.args[0].data == 5  # rows of k, not its 4 columns


def test_a_product_whose_heads_a_reshape_merges_reads_no_quotient() -> None:
    """``(p v)`` is a product of plain reads, then copied into ``(b, t, heads * d)``: no sum reads its
    operands at a quotient or remainder of its index (a one-hot per term in its reverse pass)."""
    shapes: list[Shape] = [(2, 3, 5, 5), (2, 3, 5, 4), (12, 6)]
    _gradient(merged_heads, shapes)
    body = translate(merged_heads, *_examples(shapes, 0), name="f").defs["f"].body
    sums = [e for e in E.preorder(body) if e.op is Op.SUMBUILD]
    assert sums
    assert not any(n.op is Op.DIV for s in sums for n in E.preorder(s.args[2]))
