"""Convolutions and their weight gradients reach the blocked nest as products on gathered windows
(cpp_backend.convolutions), and mean what they meant: compiled results agree with the interpreter on
random inputs, with padded edges, dilation, stride and odd sizes; inputs the copies cannot take (a
non-finite value beside a padded read, a ragged row) take the nest as written."""

from __future__ import annotations

import math
import random

import pytest
import torch
from interpreted import interpreted, random_array
from torch import nn

from autodiff import grad_program
from cpp_backend import emit
from cpp_backend.bench import values_agree
from cpp_backend.convolutions import gathered_product
from cpp_backend.driver import compile_program
from cpp_backend.products import canonical_products
from frontends.torch import translate
from knossos.errors import KsError
from knossos.expr import names_in
from knossos.program import Program

#: (layer, input shape): padding, dilation and stride at sizes that are no multiple of the block.
LAYERS = {
    "conv1d_dilated": (lambda: nn.Conv1d(3, 5, 3, padding=2, dilation=2), (2, 3, 11)),
    "conv1d_strided": (lambda: nn.Conv1d(2, 3, 4, padding=1, stride=3), (3, 2, 13)),
    "conv2d_strided": (lambda: nn.Conv2d(2, 3, 3, padding=1, stride=2), (2, 2, 7, 5)),
    "conv2d_plain": (lambda: nn.Conv2d(1, 2, (2, 3)), (1, 1, 4, 6)),
}


def _program(name: str) -> tuple[Program, list[tuple[int, ...]]]:
    make, shape = LAYERS[name]
    torch.manual_seed(0)
    m = make().double()
    params = [p.detach().clone() for p in m.parameters()]

    def fn(w: torch.Tensor, b: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        return torch.func.functional_call(m, {"weight": w, "bias": b}, (x,))

    x = torch.randn(shape, dtype=torch.float64)
    program = translate(fn, *params, x, name=name, check=False)
    program = grad_program(program, defs=[name], mode="rev")
    out = tuple(fn(*params, x).shape)
    return program, [tuple(p.shape) for p in params] + [shape, out]


def _blocked(program: Program, name: str) -> int:
    cpp = emit.emit_program(program, [name], include_runtime=False)
    return cpp.split(f"{emit.def_symbol(name)}(", 2)[-1].count("throw ks::Fallback();")


@pytest.mark.parametrize("name", list(LAYERS))
def test_convolutions_and_weight_gradients_equal_the_interpreter(name: str) -> None:
    program, shapes = _program(name)
    rng = random.Random(45)
    calls: list[tuple[str, list[object]]] = []
    for _ in range(2):
        args = [random_array(s, rng) for s in shapes]
        calls += [(name, args[:3]), ("rev$" + name, args)]
    want = interpreted(program, calls)
    have = compile_program(program, [name, "rev$" + name], threads=1).run(calls)
    for (called, _), w, h in zip(calls, want, have, strict=True):
        assert not isinstance(w, KsError), (called, w)
        assert values_agree(w, h), called
    # The convolution, and the weight's gradient, are products on gathered copies.
    assert _blocked(program, name) == 1
    assert _blocked(program, "rev$" + name) >= 1
    copies = {n[:5] for n in names_in(canonical_products(program.defs[name].body))}
    assert {"ks$ca", "ks$cb", "ks$cc"} <= copies
    # Under exact order the sums keep their order: no gathered product.
    assert _blocked(program, name) != 1 or not _blocked_exact(program, name)


def _blocked_exact(program: Program, name: str) -> bool:
    cpp = emit.emit_program(program, [name], include_runtime=False, exact_order=True)
    return "throw ks::Fallback();" in cpp


def test_non_finite_values_beside_padding_take_the_nest_as_written() -> None:
    """0.0 * inf is NaN where the padded term's 0.0 is not: such inputs compute as written."""
    program, shapes = _program("conv1d_dilated")
    rng = random.Random(3)
    w, b, x, dr = (random_array(s, rng) for s in shapes)
    w[1][2][0] = math.inf  # type: ignore[index]
    x2 = [[list(r) for r in xb] for xb in x]  # type: ignore[union-attr]
    x2[0][1][0] = math.nan
    calls: list[tuple[str, list[object]]] = [
        ("conv1d_dilated", [w, b, x]),
        ("conv1d_dilated", [shapes and random_array(shapes[0], rng), b, x2]),
        ("rev$conv1d_dilated", [w, b, x2, dr]),
    ]
    want = interpreted(program, calls)
    have = compile_program(program, ["conv1d_dilated", "rev$conv1d_dilated"], threads=1).run(calls)
    for w_, h in zip(want, have, strict=True):
        assert values_agree(w_, h)


def test_ragged_and_short_inputs_fail_or_compute_as_the_interpreter() -> None:
    program, shapes = _program("conv1d_strided")
    rng = random.Random(5)
    w, b, x, dr = (random_array(s, rng) for s in shapes)
    short_w = [[list(r) for r in o] for o in w]  # type: ignore[union-attr]
    short_w[1][0] = short_w[1][0][:2]  # a short kernel row: the nest reads past it
    short_x = [[list(r) for r in xb] for xb in x]  # type: ignore[union-attr]
    short_x[2][1] = short_x[2][1][:5]
    calls: list[tuple[str, list[object]]] = [
        ("conv1d_strided", [short_w, b, x]),
        ("conv1d_strided", [w, b, short_x]),
        ("rev$conv1d_strided", [short_w, b, x, dr]),
        ("rev$conv1d_strided", [w, b, short_x, dr]),
        ("rev$conv1d_strided", [w, b, x[:0], dr[:0]]),  # type: ignore[index]
    ]
    want = interpreted(program, calls)
    have = compile_program(program, ["conv1d_strided", "rev$conv1d_strided"], threads=1).run(calls)
    for (called, _), w_, h in zip(calls, want, have, strict=True):
        if isinstance(w_, KsError):
            assert isinstance(h, KsError), (called, h)
        else:
            assert values_agree(w_, h), called


def test_a_product_of_rows_and_columns_is_left_to_the_transposes() -> None:
    """No shifted read: not a convolution (products.py puts it in the blocked nest's shape)."""
    from knossos.parser import parse_program

    program = parse_program(
        "(def mm (Vec (Vec Float)) ((a : Vec (Vec Float)) (b : Vec (Vec Float)))"
        " (build (size a) (lam (i : Integer) (build (size (index 0 b)) (lam (k : Integer)"
        " (sumbuild (size b) (lam (j : Integer) (mul (index j (index i a)) (index k (index j b))))))))))",
        "mm.ks",
    )
    assert gathered_product(program.defs["mm"].body, lambda base: base + "0") is None
