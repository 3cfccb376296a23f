"""cpp_backend.convolutions.guarded: a rewritten product runs under its checks, with the nest as
written as the fallback only where a check can be false at run time: checks that literal sizes make
true are dropped, and probes (which hold or fail with their read's error) become an assert, so the
product's loop nest is not emitted twice (g++'s time on a layer's gradient)."""

from __future__ import annotations

import contextlib
import io

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from autodiff import grad_program  # noqa: E402
from cpp_backend.callable import compile_def  # noqa: E402
from cpp_backend.convolutions import guarded  # noqa: E402
from cpp_backend.product_pass import canonical_products  # noqa: E402
from frontends.torch import translate  # noqa: E402
from knossos import expr as E  # noqa: E402
from knossos.expr import Expr  # noqa: E402
from knossos.ops import Op  # noqa: E402
from knossos.types import FLOAT, INTEGER, Kind, vec  # noqa: E402

_V = E.var("v", vec(FLOAT))
_FAST = E.op(Op.INDEX, E.const(0), _V)
_ORIGINAL = E.op(Op.INDEX, E.const(1), _V)


def _probe() -> Expr:
    """A probe's check: a read of ``v`` in a loop, counted as ``(if (gt x x) 1 0)``, never 1."""
    i, x = E.var("i", INTEGER), E.var("x", FLOAT)
    seen = E.let(x, E.op(Op.INDEX, i, _V), E.op(Op.IF, E.op(Op.GT, x, x), E.const(1), E.const(0)))
    return E.op(Op.EQ, E.sumbuild(E.const(3), i, seen), E.const(0))


def test_checks_of_literal_sizes_leave_the_product_alone() -> None:
    checks = [E.op(Op.GT, E.const(8), E.const(0)), E.op(Op.AND, E.op(Op.GT, E.const(2), E.const(0)), E.const(True))]
    assert guarded(checks[:1], _FAST, _ORIGINAL) is _FAST
    assert guarded(checks, _FAST, _ORIGINAL).op is Op.IF  # (a Bool literal is no comparison: kept)


def test_probes_become_an_assert_with_no_fallback() -> None:
    out = guarded([E.op(Op.GT, E.const(8), E.const(0)), _probe()], _FAST, _ORIGINAL)
    assert out.op is Op.ASSERT and out.args[1] is _FAST


def test_a_check_that_can_be_false_keeps_the_fallback() -> None:
    size_test = E.op(Op.EQ, E.op(Op.SIZE, _V), E.const(3))
    out = guarded([_probe(), size_test], _FAST, _ORIGINAL)
    assert out.op is Op.IF and out.args[2] is _ORIGINAL
    empty = E.op(Op.GT, E.const(0), E.const(0))
    assert guarded([empty], _FAST, _ORIGINAL).op is Op.IF


def _literal(c: Expr) -> bool:
    """Whether ``c`` compares literals only (a test whose outcome the sizes decide)."""
    if c.op is Op.AND:
        return all(_literal(a) for a in c.args)
    return c.op in (Op.GT, Op.GTE, Op.LT, Op.LTE, Op.EQ) and all(a.op is Op.CONST for a in c.args)


def heads(x: torch.Tensor, wq: torch.Tensor, wk: torch.Tensor) -> torch.Tensor:
    """Two projections of a batch and their scores: the weights' gradients sum outer products."""
    q, k = (x @ wq.T).view(2, 3, 2, 2).transpose(1, 2), (x @ wk.T).view(2, 3, 2, 2).transpose(1, 2)
    return torch.tanh(q @ k.transpose(2, 3))


def test_a_translated_layer_s_products_have_no_fallback_and_mean_the_same() -> None:
    shapes = [(2, 3, 4), (4, 4), (4, 4)]
    g = torch.Generator().manual_seed(0)
    examples = [torch.randn(s, generator=g, dtype=torch.float64) for s in shapes]
    with contextlib.redirect_stdout(io.StringIO()):
        program = grad_program(translate(heads, *examples, name="f"), defs=["f"], mode="rev")
    body = canonical_products(program.defs["rev$f"].body)
    assert not [e for e in E.preorder(body) if e.op is Op.IF and e.type.kind is Kind.VEC and _literal(e.args[0])]
    args = [torch.randn(s, generator=g, dtype=torch.float64).requires_grad_() for s in shapes]
    out = heads(*args)
    dr = torch.randn(out.shape, generator=g, dtype=torch.float64)
    want = torch.autograd.grad(out, args, dr)
    got = compile_def(program, "rev$f", threads=1)(*(a.detach().numpy() for a in args), dr.numpy())
    for a, w in zip(got, want, strict=True):
        np.testing.assert_allclose(np.asarray(a), w.numpy(), rtol=1e-10, atol=1e-12)


def _size_tests_in_sums(e: Expr, depth: int = 0) -> int:
    """The tests of a vector's size in a sum (a product's reverse pass, not a copy's gather):
    ``(if (eq n s) X Y)``, ``X`` a vector."""
    here = int(depth > 0 and e.op is Op.IF and e.args[0].op is Op.EQ and e.type.kind is Kind.VEC)
    inner = depth + (e.op is Op.SUMBUILD)
    return here + sum(_size_tests_in_sums(a, inner) for a in e.args)


def test_arguments_read_by_products_are_copied_so_reverse_mode_knows_their_rows() -> None:
    """frontends.torch copies an argument that a product reads into a build of its shape: the weights'
    gradients are plain gathers, with no test of each row's size inside the products' sums."""
    g = torch.Generator().manual_seed(0)
    examples = [torch.randn(s, generator=g, dtype=torch.float64) for s in [(2, 3, 4), (4, 4), (4, 4)]]
    with contextlib.redirect_stdout(io.StringIO()):
        program = grad_program(translate(heads, *examples, name="f"), defs=["f"], mode="rev")
    assert _size_tests_in_sums(program.defs["rev$f"].body) == 0
