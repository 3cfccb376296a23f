"""A convolution's input gradient sums over the output channels first, as one product, then gathers
(cpp_backend.col2im), at any stride, padding and dilation, in 1-d and 2-d; the rewritten gradient
means what the gradient as written meant: the interpreter's values (or failures) on random inputs with
odd sizes, non-finite values and short rows."""

from __future__ import annotations

import dataclasses
import json
import math
import random
from collections.abc import Callable

import pytest
import torch
from interpreted import interpreted, random_array
from torch import nn

from autodiff import grad_program
from cpp_backend.bench import values_agree
from cpp_backend.driver import compile_program
from cpp_backend.product_pass import canonical_products
from frontends.torch import translate
from knossos.errors import KsError
from knossos.expr import names_in
from knossos.parser import parse_program
from knossos.program import Program

#: (layer, input shape): strides 1 and 2, padding 0 and 1, odd sizes.  A kernel as wide as its stride
#: reads its input in chunks, which reverse mode gathers (autodiff/chunks.py), not col2im: not here.
LAYERS: dict[str, tuple[Callable[[], nn.Module], tuple[int, ...]]] = {
    "c1_s1_p0": (lambda: nn.Conv1d(3, 4, 3), (2, 3, 9)),
    "c1_s2_p1": (lambda: nn.Conv1d(2, 3, 3, padding=1, stride=2), (3, 2, 11)),
    "c1_s2_p1_d2": (lambda: nn.Conv1d(2, 3, 3, padding=1, stride=2, dilation=2), (1, 2, 13)),
    "c2_s1_p1": (lambda: nn.Conv2d(2, 3, 3, padding=1), (1, 2, 5, 7)),
    "c2_s2_p0": (lambda: nn.Conv2d(3, 2, (3, 4), stride=2), (1, 3, 7, 9)),
    "c2_s2_p1": (lambda: nn.Conv2d(2, 3, 3, padding=1, stride=2), (2, 2, 7, 5)),
}


def _program(name: str) -> tuple[Program, list[tuple[int, ...]]]:
    make, shape = LAYERS[name]
    torch.manual_seed(0)
    m = make().double()
    params = [p.detach().clone() for p in m.parameters()]

    def fn(w: torch.Tensor, b: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        return torch.func.functional_call(m, {"weight": w, "bias": b}, (x,))

    x = torch.randn(shape, dtype=torch.float64)
    program = grad_program(translate(fn, *params, x, name=name, check=False), defs=[name], mode="rev")
    return program, [tuple(p.shape) for p in params] + [shape, tuple(fn(*params, x).shape)]


def _leaf(x: object) -> list[object]:
    while isinstance(x, list) and isinstance(x[0], list):
        x = x[0]
    assert isinstance(x, list)
    return x


def _calls(name: str, shapes: list[tuple[int, ...]]) -> list[tuple[str, list[object]]]:
    """Random inputs; an infinity and a NaN in the output's cotangent and in the weight; a short
    weight row and a short input row (the nest as written fails: so must the rewrite); no batch."""
    rng = random.Random(7)
    args = [random_array(s, rng) for s in shapes]
    calls: list[tuple[str, list[object]]] = [("rev$" + name, args)]
    for which, edit in (
        (3, lambda r: r.__setitem__(-1, math.inf)),
        (3, lambda r: r.__setitem__(0, math.nan)),
        (0, lambda r: r.__setitem__(0, -math.inf)),
        (0, lambda r: r.pop()),
        (2, lambda r: r.pop()),
    ):
        changed = json.loads(json.dumps(args))
        edit(_leaf(changed[which]))
        calls.append(("rev$" + name, changed))
    calls.append(("rev$" + name, [args[0], args[1], [], []]))  # no batch: the loops run no term
    return calls


@pytest.mark.parametrize("name", list(LAYERS))
def test_the_input_gradient_is_a_product_then_a_gather_and_means_the_same(name: str) -> None:
    program, shapes = _program(name)
    d = program.defs["rev$" + name]
    body = canonical_products(d.body)
    made = {n[:5] for n in names_in(body)}
    assert {"ks$qa", "ks$qb", "ks$qc"} <= made  # dx: (b t) x o times o x (c k), then gathered
    rewritten = Program(defs={**program.defs, d.name: dataclasses.replace(d, body=body)})
    calls = _calls(name, shapes)
    want, have = interpreted(program, calls), interpreted(rewritten, calls)
    assert any(isinstance(w, KsError) for w in want)  # (the short rows)
    for w, h in zip(want, have, strict=True):
        assert isinstance(h, KsError) if isinstance(w, KsError) else values_agree(w, h)  # type: ignore[arg-type]


@pytest.mark.slow
def test_a_compiled_strided_gradient_equals_the_interpreter() -> None:
    program, shapes = _program("c2_s2_p1")
    calls = _calls("c2_s2_p1", shapes)
    want = interpreted(program, calls)
    have = compile_program(program, threads=1).run(calls)
    for w, h in zip(want, have, strict=True):
        assert isinstance(h, KsError) if isinstance(w, KsError) else values_agree(w, h)  # type: ignore[arg-type]


def test_exact_order_keeps_the_gradient_as_written() -> None:
    """The sums over the output channels change order: not under exact order."""
    program, _ = _program("c1_s2_p1")
    body = canonical_products(program.defs["rev$c1_s2_p1"].body, exact_order=True)
    assert not {n for n in names_in(body) if n.startswith("ks$q")}


#: ksc's conv1d (ksdata/programs/conv1d_rev_template.kso): the padded read's test gives 0.0 first,
#: ``(if (or (lt noi 0) (gte noi n)) 0.0 (index noi ...))``.
KSC_CONV1D = """
(def conv1d (Vec (Vec Float)) ((kernels : Vec (Vec (Vec Float))) (image : Vec (Vec Float)))
  (let ((kn (size (index 0 (index 0 kernels)))) (l_6 (size image)) (n (size (index 0 image))))
    (build (size kernels) (lam (ki : Integer) (build n (lam (ni : Integer)
      (sumbuild kn (lam (kni : Integer) (sumbuild l_6 (lam (li : Integer)
        (let (noi (sub (add ni (div kn 2)) kni))
          (mul (if (or (lt noi 0) (gte noi n)) 0.0 (index noi (index li image)))
               (index kni (index li (index ki kernels)))))))))))))))
"""


def test_a_padded_read_tested_zero_first_is_a_product_then_a_gather() -> None:
    program = grad_program(parse_program(KSC_CONV1D), defs=["conv1d"], mode="rev")
    d = program.defs["rev$conv1d"]
    body = canonical_products(d.body)
    assert {"ks$qa", "ks$qb", "ks$qc"} <= {n[:5] for n in names_in(body)}
    rewritten = Program(defs={**program.defs, d.name: dataclasses.replace(d, body=body)})
    rng = random.Random(5)
    args = [random_array((3, 2, 3), rng), random_array((2, 7), rng), random_array((3, 7), rng)]
    calls: list[tuple[str, list[object]]] = [("rev$conv1d", args)]
    for edit in (
        lambda a: a[2][0].__setitem__(1, math.nan),
        lambda a: a[0][0][0].__setitem__(0, math.inf),
        lambda a: a[0][0][0].pop(),  # a short first kernel row: the others are read to its length
        lambda a: a[0][2][1].pop(),  # a short later kernel row: the nest's read fails
        lambda a: a[1][1].pop(),  # a short image row
    ):
        changed = json.loads(json.dumps(args))
        edit(changed)
        calls.append(("rev$conv1d", changed))
    want = interpreted(program, calls)
    assert any(isinstance(w, KsError) for w in want)
    for have in (interpreted(rewritten, calls), compile_program(program, ["rev$conv1d"], threads=1).run(calls)):
        for w, h in zip(want, have, strict=True):
            assert isinstance(h, KsError) if isinstance(w, KsError) else values_agree(w, h)  # type: ignore[arg-type]
