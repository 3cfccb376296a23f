"""A row length a nest's loops choose (reverse mode of a convolution: ``(size (index c (index o w)))``)
is taken as the first row's under a run-time check (cpp_backend.uniform_rows), so that the gradient
reaches the product passes; the rewritten gradient means what it meant: the interpreter's values (or
failures) on random inputs and on ragged ones, where the check fails and the nest runs as written."""

from __future__ import annotations

import dataclasses
import json
import random

from interpreted import assert_agree, interpreted, random_array

from autodiff import grad_program
from cpp_backend.driver import compile_program
from cpp_backend.product_pass import canonical_products
from cpp_backend.products import has_product
from knossos.parser import parse_program
from knossos.program import Program

#: benchmarks/programs/layers.ks's conv1d: each kernel row's length read at its own row.
CONV1D = """
(def conv1d (Vec (Vec Float)) ((w : Vec (Vec (Vec Float))) (x : Vec (Vec Float)))
  (build (size w) (lam (o : Integer)
    (build (add (sub (size (index 0 x)) (size (index 0 (index o w)))) 1) (lam (t : Integer)
      (sumbuild (size x) (lam (c : Integer)
        (sumbuild (size (index c (index o w))) (lam (j : Integer)
          (mul (index j (index c (index o w))) (index (add t j) (index c x))))))))))))
"""


def _program() -> Program:
    return grad_program(parse_program(CONV1D), defs=["conv1d"], mode="rev")


def _calls() -> list[tuple[str, list[object]]]:
    """Random inputs (3 outputs, 2 channels, kernel 3, length 9), then ragged ones: a short kernel
    row, a long one, a weight with fewer channels than the input (out of range: fails), a short input
    row, and no output channel."""
    rng = random.Random(3)
    w, x = random_array((3, 2, 3), rng), random_array((2, 9), rng)
    dr = random_array((3, 7), rng)
    calls: list[tuple[str, list[object]]] = [("rev$conv1d", [w, x, dr])]

    def edited(edit: object) -> list[object]:
        args = json.loads(json.dumps([w, x, dr]))
        assert callable(edit)
        edit(args)
        return args

    for edit in (
        lambda a: a[0][1][1].pop(),  # a short kernel row (not the first): the nest runs as written
        lambda a: a[0][2][0].append(0.5),  # a long first row of a later output channel
        lambda a: a[0][0][0].pop(),  # a short first row
        lambda a: a[0][1].pop(),  # one channel fewer in the weight: the nest's read fails
        lambda a: a[1][1].pop(),  # a short input row
    ):
        calls.append(("rev$conv1d", edited(edit)))
    calls.append(("rev$conv1d", [[], x, []]))
    return calls


def test_a_row_length_the_loops_choose_reaches_a_product_and_means_the_same() -> None:
    program = _program()
    d = program.defs["rev$conv1d"]
    assert not has_product(canonical_products(d.body, rows=False))  # (as written: one-hots, row by row)
    body = canonical_products(d.body)
    assert has_product(body)
    rewritten = Program(defs={**program.defs, d.name: dataclasses.replace(d, body=body)})
    calls = _calls()
    want, have = interpreted(program, calls), interpreted(rewritten, calls)
    assert_agree(calls, want, have)


def test_exact_order_keeps_the_lengths_as_written() -> None:
    body = canonical_products(_program().defs["rev$conv1d"].body, exact_order=True)
    assert not has_product(body)


def test_the_compiled_gradient_equals_the_interpreter_on_ragged_rows() -> None:
    program = _program()
    calls = _calls()
    want = interpreted(program, calls)
    assert any(isinstance(w, Exception) for w in want)  # (the weight with a channel fewer)
    have = compile_program(program, ["rev$conv1d"], threads=1).run(calls)
    assert_agree(calls, want, have)
