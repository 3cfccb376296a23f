"""The cheap-gradient principle on padded reads (issue 45, item 1): a convolution with padding, a
constant pad and a padded pool, translated by the torch front end, read their input at a clamped
position before the padding's test, never inside its branches: reverse mode makes a read inside a
branch a whole-input cotangent for every term (Conv1d's compiled gradient ran 2,800x PyTorch eager;
78x with the reads outside).  Checked on the translation's structure and against torch.autograd."""

from __future__ import annotations

import contextlib
import io
from collections.abc import Callable

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from autodiff import grad_program
from frontends.torch import translate
from knossos.expr import Expr, preorder
from knossos.interpreter import Interpreter
from knossos.ops import Op
from knossos.values import to_numpy

FUNCTIONS: dict[str, Callable[[torch.Tensor, torch.Tensor], torch.Tensor]] = {
    "conv1d": lambda x, w: F.conv1d(x, w, padding=1),
    "pad": lambda x, w: F.pad(x, (2, 1)) * w[0, 0, 0],
    "avg_pool": lambda x, w: F.avg_pool1d(x, 3, stride=1, padding=1) * w[0, 0, 0],
}


def _reads_in_branches(e: Expr) -> list[Expr]:
    """The ``index`` nodes inside a branch of an ``if`` of ``e``."""
    found = []
    for node in preorder(e):
        if node.op is Op.IF:
            found += [n for branch in node.args[1:] for n in preorder(branch) if n.op is Op.INDEX]
    return found


def _check(name: str, length: int) -> None:
    g = torch.Generator().manual_seed(length)
    x = torch.randn(2, 3, length, generator=g, dtype=torch.float64)
    w = torch.randn(4, 3, 3, generator=g, dtype=torch.float64)
    fn = FUNCTIONS[name]
    with contextlib.redirect_stdout(io.StringIO()):
        program = grad_program(translate(fn, x, w, name="f"), defs=["f"], mode="rev")
    leaves = [x.clone().requires_grad_(True), w.clone().requires_grad_(True)]
    out = fn(*leaves)
    dr = torch.randn(out.shape, generator=g, dtype=torch.float64)
    want = torch.autograd.grad(out, leaves, dr, allow_unused=True)
    assert not _reads_in_branches(program.defs["f"].body), name
    got = Interpreter().call(program.defs["rev$f"], [x.numpy(), w.numpy(), dr.numpy()])
    for have, expect, leaf in zip(got, want, leaves, strict=True):  # type: ignore[arg-type]
        wanted = np.zeros(leaf.shape) if expect is None else expect.numpy()
        np.testing.assert_allclose(np.asarray(to_numpy(have)).reshape(leaf.shape), wanted, rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("name", sorted(FUNCTIONS))
def test_padded_reads_are_outside_the_padding_test(name: str) -> None:
    """No read inside a padding test's branches, and rev$ equals torch.autograd (the clamped reads at
    the border are used only where the test holds)."""
    for length in (1, 2, 9):
        _check(name, length)
