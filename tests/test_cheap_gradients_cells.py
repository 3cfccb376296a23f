"""The cheap-gradient principle on PyTorch's recurrent cells (issue 45, item 1): the reverse-mode
derivative of ``nn.GRUCell`` and ``nn.LSTMCell``, translated by the torch front end, allocates a
constant times the elements that the cell itself does, at every size.

Measured with the reference interpreter's count of allocated vector elements, not with a clock: a
cotangent made full-size in every iteration of a loop (``(add part part)`` of two weight matrices per
batch row and output, as the derivative once did) makes the count grow like batch x width^3, where the
cell's grows like batch x width^2.
"""

from __future__ import annotations

import contextlib
import io

import numpy as np
import pytest
import torch
from torch import nn

from autodiff import grad_program
from cpp_backend.callable import compile_def
from cpp_backend.cpp_text import def_symbol
from cpp_backend.emit import emit_program
from frontends.dispatch import results
from frontends.torch import translate
from knossos.interpreter import Interpreter
from knossos.program import Program
from knossos.values import to_numpy
from ksdata.torch_suite import Layer, function

#: The largest ratio allowed, allocated elements of rev$cell / of the cell (GRU ~8.5, LSTM ~10.7 today;
#: the derivative that made cotangents full-size per iteration: 32 and 42 at batch 4, width 8).
RATIO = 16.0


class _LSTMCell(nn.LSTMCell):
    """``nn.LSTMCell`` with its state as two arguments (its forward takes a tuple)."""

    def forward(self, x: torch.Tensor, h: torch.Tensor, c: torch.Tensor) -> torch.Tensor:  # type: ignore[override]
        return super().forward(x, (h, c))[1]


CELLS = {"GRUCell": (nn.GRUCell, 2), "LSTMCell": (_LSTMCell, 3)}


def _cell(name: str, batch: int, width: int) -> tuple[Program, list[np.ndarray], torch.Tensor, list[torch.Tensor]]:
    kind, states = CELLS[name]

    def build(size: str, g: torch.Generator) -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
        torch.manual_seed(0)
        m = kind(width, width).to(torch.float64)
        return m, tuple(torch.randn(batch, width, generator=g, dtype=torch.float64) for _ in range(states))

    fn, args = function(Layer(name, "pytorch/pytorch", "torch/nn/modules/rnn.py", name, "BSD-3-Clause", build))
    with contextlib.redirect_stdout(io.StringIO()):
        program = grad_program(translate(fn, *args, name="cell", check=False), defs=["cell"], mode="rev")
    leaves = [a.clone().requires_grad_(True) for a in args]
    (out,) = results(fn(*leaves))
    dr = torch.randn(out.shape, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    want = list(torch.autograd.grad(out, leaves, dr))
    return program, [a.numpy() for a in args], dr, want


def _ratio(name: str, batch: int, width: int) -> float:
    program, arrays, dr, want = _cell(name, batch, width)
    run = Interpreter(max_elements=None)
    run.call(program.defs["cell"], arrays)
    forward = run.allocated
    got = run.call(program.defs["rev$cell"], [*arrays, dr.numpy()])
    for g, w in zip(got, want, strict=True):  # type: ignore[arg-type]
        np.testing.assert_allclose(np.asarray(to_numpy(g)), w.numpy(), rtol=1e-9, atol=1e-12)
    return run.allocated / forward


@pytest.mark.parametrize("name", sorted(CELLS))
def test_cell_gradient_allocates_like_the_cell(name: str) -> None:
    """rev$cell is right (torch.autograd) and allocates at most RATIO times the cell's elements, at a
    small and a 4x larger size alike (the ratio does not grow with the width)."""
    small = _ratio(name, 4, 8)  # (at batch 2, width 4 the arguments' copies, O(width^2), weigh less)
    large = _ratio(name, 8, 16)
    assert large <= RATIO, (name, small, large)
    assert large <= 1.1 * small, (name, small, large)


CELL_KINDS = {"RNNCell": (nn.RNNCell, 2), **CELLS}


@pytest.mark.parametrize("name", sorted(CELL_KINDS))
def test_cell_gradient_products_reach_the_blocked_nest(name: str) -> None:
    """rev$ of a cell computes its six products with the blocked nest: the two of the forward pass
    (x w_ih^T and h w_hh^T, all gates at once: a GRU's and an LSTM's are split after the product), and
    dw_ih, dw_hh (outer products over the batch) and dx, dh (sums of scaled rows), whose operand, the
    gates' cotangent (dy * (1 - h^2) for a plain RNN), is computed element by element, once; the
    compiled gradient is torch's."""
    kind, states = CELL_KINDS[name]

    def build(size: str, g: torch.Generator) -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
        torch.manual_seed(0)
        m = kind(5, 7).to(torch.float64)
        x = torch.randn(3, 5, generator=g, dtype=torch.float64)
        return m, (x, *(torch.randn(3, 7, generator=g, dtype=torch.float64) for _ in range(states - 1)))

    fn, args = function(Layer(name, "pytorch/pytorch", "torch/nn/modules/rnn.py", name, "BSD-3-Clause", build))
    with contextlib.redirect_stdout(io.StringIO()):
        program = grad_program(translate(fn, *args, name="cell", check=False), defs=["cell"], mode="rev")
    cpp = emit_program(program, ["rev$cell"], include_runtime=False)
    assert cpp.split(f"{def_symbol('rev$cell')}(", 2)[-1].count("throw ks::Fallback();") == 6
    leaves = [a.clone().requires_grad_(True) for a in args]
    (out,) = results(fn(*leaves))
    dr = torch.randn(out.shape, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    want = torch.autograd.grad(out, leaves, dr)
    got = compile_def(program, "rev$cell", threads=1)(*[a.numpy() for a in args], dr.numpy())
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(np.asarray(g), w.numpy(), rtol=1e-12, atol=1e-13)
