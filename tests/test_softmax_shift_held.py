"""A softmax's shift by its row's maximum is held (``stop_gradient``, frontends.aten.held): the result
does not depend on the shift, so the derivative through it is zero, as torch's backward formula has it,
and the reverse pass never enters the maximum's loops (cross-entropy's gradient at 512x1000 took most
of its time there, and added rounding errors of ~1e-14 where torch's has none)."""

from __future__ import annotations

import contextlib
import io

import numpy as np
import pytest
import torch
from torch.nn import functional as F

from autodiff import grad_program
from frontends.torch import translate
from knossos.expr import names_in
from knossos.interpreter import Interpreter
from knossos.values import to_numpy


def _logits() -> torch.Tensor:
    x = torch.randn(5, 9, generator=torch.Generator().manual_seed(3), dtype=torch.float64)
    x[1, 2] = x[1, 6] = x[1].max() + 1.0  # a tie at the maximum
    x[2, 4] = -torch.inf  # a class that can never be
    return x


CASES = {
    "cross_entropy": (lambda x, t: F.cross_entropy(x, t, label_smoothing=0.1), True),
    "log_softmax": (lambda x: F.log_softmax(x, dim=1), False),
    "softmax": (lambda x: F.softmax(x, dim=-1), False),
}


@pytest.mark.parametrize("name", list(CASES))
def test_softmax_gradient_holds_the_shift(name: str) -> None:
    fn, targets = CASES[name]
    x = _logits()
    args = (x, torch.tensor([0, 6, 3, 8, 1])) if targets else (x,)
    with contextlib.redirect_stdout(io.StringIO()):
        program = grad_program(translate(fn, *args, name="f"), defs=["f"], mode="rev")
    rev = program.defs["rev$f"]
    assert not [n for n in names_in(rev.body) if n.startswith("d$max")]  # no cotangent of the maximum
    leaf = x.clone().requires_grad_(True)
    out = fn(leaf, *args[1:])
    dr = torch.randn(out.shape, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    (want,) = torch.autograd.grad(out, leaf, dr)
    d_r = float(dr) if out.dim() == 0 else dr.numpy()
    got = Interpreter().call(rev, [a.numpy() for a in args] + [d_r])
    dx = got[0] if targets else got
    np.testing.assert_allclose(np.asarray(to_numpy(dx)), want.numpy(), rtol=1e-12, atol=1e-15)
