"""Convolutions and their weight gradients reach the blocked nest as products on gathered windows
(cpp_backend.convolutions), and mean what they meant: compiled results agree with the interpreter on
random inputs, with padded edges, dilation, stride and odd sizes; inputs the copies cannot take (a
non-finite value beside a padded read, a ragged row) take the nest as written."""

from __future__ import annotations

import dataclasses
import json
import math
import random

import pytest
import torch
from interpreted import assert_agree, first_leaf, interpreted, random_array
from torch import nn

from autodiff import grad_program
from cpp_backend import cpp_text, emit
from cpp_backend.convolutions import gathered_product
from cpp_backend.driver import compile_program
from cpp_backend.product_pass import canonical_products
from frontends.torch import translate
from knossos.expr import names_in
from knossos.parser import parse_program
from knossos.printer import format_program
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
    return cpp.split(f"{cpp_text.def_symbol(name)}(", 2)[-1].count("throw ks::Fallback();")


Suite = tuple[Program, dict[str, list[tuple[int, ...]]]]


@pytest.fixture(scope="module")
def suite() -> Suite:
    """Every layer and its rev$ in one program."""
    texts, shapes = [], {}
    for name in LAYERS:
        program, shapes[name] = _program(name)
        texts.append(format_program(program))
    return parse_program("\n".join(texts), "convolutions.ks"), shapes


def _cases(shapes: dict[str, list[tuple[int, ...]]]) -> list[tuple[str, list[object]]]:
    """Random inputs; non-finite values beside the padding; short, long and empty rows (ragged)."""
    rng = random.Random(45)
    calls: list[tuple[str, list[object]]] = []
    for name, shape in shapes.items():
        w, b, x, dr = (random_array(s, rng) for s in shape)
        calls += [(name, [w, b, x]), ("rev$" + name, [w, b, x, dr])]
        changed = {}
        for label, which, edit in (
            ("inf", 0, lambda r: r.__setitem__(0, math.inf)),
            ("nan", 2, lambda r: r.__setitem__(0, math.nan)),
            ("short_w", 0, lambda r: r.pop()),  # a short kernel row: the nest reads past it
            ("short_x", 2, lambda r: r.pop()),
            ("long_x", 2, lambda r: r.append(1.0)),  # ragged rows: one-hots of two lengths
        ):
            args = json.loads(json.dumps([w, b, x, dr]))
            edit(first_leaf(args[which]))
            changed[label] = args
        for args in changed.values():
            calls += [(name, args[:3]), ("rev$" + name, args)]
        calls.append(("rev$" + name, [w, b, x[:0], dr[:0]]))  # type: ignore[index]
    return calls


def test_the_rewritten_nests_mean_what_they_meant(suite: Suite) -> None:
    """The pass's output, evaluated by the interpreter, against the def as written: the same values or
    the same failures (fast: no g++)."""
    program, shapes = suite
    calls = _cases(shapes)
    rewritten = Program(
        defs={n: dataclasses.replace(d, body=canonical_products(d.body)) for n, d in program.defs.items()}
    )
    assert_agree(calls, interpreted(program, calls), interpreted(rewritten, calls))


@pytest.mark.slow
def test_compiled_convolutions_and_their_gradients_equal_the_interpreter(suite: Suite) -> None:
    program, shapes = suite
    calls = _cases(shapes)
    assert_agree(calls, interpreted(program, calls), compile_program(program, threads=1).run(calls))


def test_a_compiled_convolution_and_its_gradient_equal_the_interpreter() -> None:
    program, shape = _program("conv1d_dilated")
    calls = _cases({"conv1d_dilated": shape})
    assert_agree(calls, interpreted(program, calls), compile_program(program, threads=1).run(calls))


@pytest.mark.parametrize("name", list(LAYERS))
def test_each_convolution_and_its_gradients_reach_the_blocked_nest(name: str, suite: Suite) -> None:
    """The convolution; the weight's and the input's gradients (rev$: dw, db, dx): gathered products."""
    program = suite[0]
    assert _blocked(program, name) == 1
    assert _blocked(program, "rev$" + name) >= 2  # dw and dx (and db where its sum of rows is one)
    copies = {n[:5] for n in names_in(canonical_products(program.defs[name].body))}
    assert {"ks$ca", "ks$cb", "ks$cc"} <= copies
    assert not _blocked_exact(program, name)  # under exact order the sums keep their order


def _blocked_exact(program: Program, name: str) -> bool:
    cpp = emit.emit_program(program, [name], include_runtime=False, exact_order=True)
    return "throw ks::Fallback();" in cpp


def test_a_product_of_rows_and_columns_is_left_to_the_transposes() -> None:
    """No shifted read: not a convolution (products.py puts it in the blocked nest's shape)."""
    program = parse_program(
        "(def mm (Vec (Vec Float)) ((a : Vec (Vec Float)) (b : Vec (Vec Float)))"
        " (build (size a) (lam (i : Integer) (build (size (index 0 b)) (lam (k : Integer)"
        " (sumbuild (size b) (lam (j : Integer) (mul (index j (index i a)) (index k (index j b))))))))))",
        "mm.ks",
    )
    assert gathered_product(program.defs["mm"].body, lambda base: base + "0") is None
