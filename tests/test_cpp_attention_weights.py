"""The projection weights' gradients of attention reach the blocked nest as products over the batch's
rows (cpp_backend.one_hot_rows, cpp_backend.summed_gathers, and the nested sums of
cpp_backend.convolutions), and mean what they meant: the rewritten and compiled gradients agree with
the interpreter on random inputs, at sizes no multiple of the block, one row, rows past the weight's
end, and ragged or non-finite inputs."""

from __future__ import annotations

import dataclasses
import json
import math
import random
from collections.abc import Callable

import pytest
import torch
from interpreted import assert_agree, first_leaf, interpreted, random_array
from torch import nn

from autodiff import grad_program
from cpp_backend import emit
from cpp_backend.convolutions import gathered_product
from cpp_backend.driver import compile_program
from cpp_backend.one_hot_rows import one_hot_rows
from cpp_backend.product_pass import canonical_products
from cpp_backend.summed_gathers import sum_of_gathers
from frontends.torch import translate
from knossos.expr import Expr, distinct_nodes
from knossos.ops import Op
from knossos.parser import parse_program
from knossos.printer import format_program
from knossos.program import Program

#: (embedding, heads, batch, sequence): head sizes 3 and 5 (no multiple of the block), one row.
ATTENTION = {"mha_small": (6, 2, 2, 3), "mha_one_row": (10, 2, 1, 1)}

#: A sum of one-hot rows at row ``1 + 3 h + d`` (two summed variables, an offset) of ``w``: with 8 rows
#: of ``w`` every row is hit, with 5 the rows past the end are dropped.
ROWS = """
(def rows (Vec (Vec Float)) ((w : Vec (Vec Float)) (dy : Vec (Vec (Vec Float))) (x : Vec (Vec Float)))
  (sumbuild (size x) (lam (b : Integer)
    (let (xb (index b x))
      (sumbuild 2 (lam (h : Integer)
        (sumbuild 3 (lam (d : Integer)
          (let (row (build (size (index 0 w)) (lam (j : Integer) (mul (index d (index h (index b dy))) (index j xb)))))
            (deltaVec (size w) (add (add (mul h 3) d) 1) row))))))))))
(def skewed (Vec (Vec Float)) ((w : Vec (Vec Float)) (dy : Vec (Vec (Vec Float))) (x : Vec (Vec Float)))
  (sumbuild (size x) (lam (b : Integer)
    (sumbuild 2 (lam (h : Integer)
      (sumbuild 3 (lam (d : Integer)
        (deltaVec (size w) (add (mul h 2) d)
          (build (size (index b x)) (lam (j : Integer) (mul (index d (index h (index b dy))) (index j (index b x)))))))))))))
(def chunks (Vec (Vec Float)) ((w : Vec (Vec Float)) (dy : Vec (Vec (Vec Float))) (x : Vec (Vec Float)))
  (sumbuild (size x) (lam (b : Integer)
    (let ((xb (index b x))
          (c (build 2 (lam (h : Integer)
               (build 3 (lam (d : Integer)
                 (build (size (index 0 w)) (lam (j : Integer) (mul (mul (index d (index h (index b dy))) 0.5) (index j xb))))))))))
      (build (size w) (lam (i : Integer)
        (if (lt i 6) (index (sub i (mul (div i 3) 3)) (index (div i 3) c)) (build (size (index i w)) (lam (k : Integer) 0.0)))))))))
(def nested (Vec (Vec Float)) ((dy : Vec (Vec (Vec Float))) (x : Vec (Vec (Vec Float))))
  (build (size (index 0 (index 0 dy))) (lam (i : Integer)
    (build (size (index 0 (index 0 x))) (lam (j : Integer)
      (sumbuild (size x) (lam (b : Integer)
        (sumbuild (size (index b x)) (lam (t : Integer)
          (mul (index i (index t (index b dy))) (index j (index t (index b x)))))))))))))
(def padded (Vec Float) ((v : Vec Float) (x : Vec (Vec Float)))
  (sumbuild (size x) (lam (b : Integer)
    (let (c (build 3 (lam (k : Integer) (index k (index b x)))))
      (if (eq 3 (size v)) c (build (size v) (lam (k : Integer) (if (lt k 3) (index k c) 0.0))))))))
"""


def _attention(name: str) -> tuple[Program, list[tuple[int, ...]]]:
    e, heads, batch, seq = ATTENTION[name]
    torch.manual_seed(0)
    m = nn.MultiheadAttention(e, heads, batch_first=True).double()
    names = [n for n, _ in m.named_parameters()]
    params = [p.detach().clone() for p in m.parameters()]

    def fn(*args: torch.Tensor) -> torch.Tensor:
        out, _ = torch.func.functional_call(m, dict(zip(names, args[:4], strict=True)), args[4:])
        return out

    x = torch.randn(batch, seq, e, dtype=torch.float64)
    program = translate(fn, *params, x, x, x, name=name, check=False)
    return grad_program(program, defs=[name], mode="rev"), [tuple(p.shape) for p in params] + [tuple(x.shape)] * 4


@pytest.fixture(scope="module")
def suite() -> tuple[Program, dict[str, list[tuple[int, ...]]]]:
    texts, shapes = [ROWS], {}
    for k, name in enumerate(ATTENTION):
        program, shapes[name] = _attention(name)
        text = format_program(program)
        texts.append(text if not k else text[text.index("(def ") :])  # (the edefs once)
    return parse_program("\n".join(texts), "attention.ks"), shapes


def _rows_cases(rng: random.Random) -> list[tuple[str, list[object]]]:
    """The hand-written sums: every row hit, rows past the end, one example, none, a ragged row."""
    calls: list[tuple[str, list[object]]] = []
    for name in ("rows", "skewed", "chunks"):
        for n_w, batch, width in ((8, 2, 5), (5, 3, 4), (8, 1, 1), (8, 0, 4)):
            w = random_array((n_w, width), rng)
            dy = random_array((max(batch, 1), 2, 3), rng)
            x = random_array((batch, width), rng) if batch else []
            calls.append((name, [w, dy, x]))
        ragged = random_array((2, 5), rng)
        ragged[1].pop()  # type: ignore[index]
        calls.append((name, [random_array((8, 5), rng), random_array((2, 2, 3), rng), ragged]))
    for batch, steps, rows, cols in ((2, 3, 5, 17), (1, 1, 1, 1), (3, 2, 9, 4)):  # (b, t) one reduction
        calls.append(("nested", [random_array((batch, steps, rows), rng), random_array((batch, steps, cols), rng)]))
    short = random_array((2, 3, 4), rng)
    short[1].pop()  # type: ignore[index]  # a ragged batch: fewer steps in the second example
    calls.append(("nested", [random_array((2, 3, 5), rng), short]))
    calls += [("padded", [random_array((n,), rng), random_array((2, 4), rng)]) for n in (3, 5)]
    return calls


def _cases(shapes: dict[str, list[tuple[int, ...]]]) -> list[tuple[str, list[object]]]:
    rng = random.Random(45)
    calls = _rows_cases(rng)
    for name, shape in shapes.items():
        args = [random_array(s, rng) for s in shape]
        calls += [(name, args[:7]), ("rev$" + name, args)]
        for which, edit in (
            (0, lambda r: r.__setitem__(0, math.inf)),  # a weight beside rows the product multiplies
            (6, lambda r: r.__setitem__(0, math.nan)),
            (0, lambda r: r.pop()),  # a short row of in_proj_weight
        ):
            changed = json.loads(json.dumps(args))
            edit(first_leaf(changed[which]))
            calls.append(("rev$" + name, changed))
    return calls


def test_the_rewritten_gradients_mean_what_they_meant(suite: tuple[Program, dict[str, list[tuple[int, ...]]]]) -> None:
    """The pass's output, evaluated by the interpreter, against the defs as written (fast: no g++)."""
    program, shapes = suite
    calls = _cases(shapes)
    rewritten = Program(
        defs={n: dataclasses.replace(d, body=canonical_products(d.body)) for n, d in program.defs.items()}
    )
    assert_agree(calls, interpreted(program, calls), interpreted(rewritten, calls))


def test_compiled_attention_gradients_equal_the_interpreter(
    suite: tuple[Program, dict[str, list[tuple[int, ...]]]],
) -> None:
    program, shapes = suite
    calls = _cases(shapes)
    assert_agree(calls, interpreted(program, calls), compile_program(program, threads=1).run(calls))


def _fired(body: Expr, rewrite: Callable[[Expr], Expr | None]) -> int:
    return sum(1 for x in distinct_nodes(body) if x.op is Op.SUMBUILD and rewrite(x) is not None)


def test_the_weights_sums_are_recognised(suite: tuple[Program, dict[str, list[tuple[int, ...]]]]) -> None:
    """In_proj_weight's key and value rows are one-hot rows at ``offset + h D + d``; its query rows a
    gather of chunks summed over the batch; the hand-written sums likewise, but the skewed index."""
    program = suite[0]
    body = program.defs["rev$mha_small"].body
    assert _fired(body, lambda x: one_hot_rows(x, lambda base: base + "0")) >= 2
    assert _fired(body, sum_of_gathers) >= 1
    assert one_hot_rows(program.defs["rows"].body, lambda base: base + "0") is not None
    assert one_hot_rows(program.defs["skewed"].body, lambda base: base + "0") is None  # (h 2 + d: not one row each)
    assert sum_of_gathers(program.defs["chunks"].body) is not None
    assert sum_of_gathers(program.defs["padded"].body) is None  # (a padding of the same type: left)


def test_a_product_over_a_nested_reduction_is_one_gathered_product(
    suite: tuple[Program, dict[str, list[tuple[int, ...]]]],
) -> None:
    """dW = sum_b sum_t dy[b][t] x[b][t]^T: plain reads, but the (b, t) of a 3-D input as one reduction."""
    assert gathered_product(suite[0].defs["nested"].body, lambda base: base + "0") is not None
    assert _blocked(suite[0], "nested") >= 1


def _blocked(program: Program, name: str) -> int:
    """How many blocked nests the C++ of ``name`` (alone) has."""
    return emit.emit_program(program, [name], include_runtime=False).count("throw ks::Fallback();")


@pytest.mark.parametrize("name", ["rows", "chunks"])
def test_the_weight_gradients_reach_the_blocked_nest(
    name: str, suite: tuple[Program, dict[str, list[tuple[int, ...]]]]
) -> None:
    """Each hand-written sum is one product over the batch (and the other loops); under exact order
    the sums keep their order and no nest is blocked."""
    program = suite[0]
    assert _blocked(program, name) >= 1
    assert "throw ks::Fallback();" not in emit.emit_program(program, [name], include_runtime=False, exact_order=True)
