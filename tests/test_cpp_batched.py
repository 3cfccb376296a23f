"""Batched products in attention's loop orders (cpp_backend.batched): ``attn V`` written ``[t][b][h*D+d]``,
``dV = P^T dO`` and ``dP = dO V^T`` accumulated as one-hots, and a projection laid out per head
``[b][h][t][d]`` (with a bias around its sum) reach the blocked nest (a linear layer's product is left as it is); the rewritten
code means what the code as written meant (the interpreter's values, or its failure) on random
inputs, with one head, a batch of one, sizes that are no multiple of the block, one-hots longer than
their loops (the nest as written runs) and ragged rows; compiled, it equals the interpreter."""

from __future__ import annotations

import dataclasses
import random

import pytest
import torch
from interpreted import interpreted, random_array
from torch import nn

from autodiff import grad_program
from cpp_backend import emit
from cpp_backend.bench import values_agree
from cpp_backend.driver import compile_program
from cpp_backend.product_pass import canonical_products
from frontends.torch import translate
from knossos.errors import KsError
from knossos.expr import names_in
from knossos.parser import parse_program
from knossos.program import Program

#: p: [B][H][T][S] (attention), v: [B][H][S][D], g: [T][B][H*D] (the output's cotangent); D = 3, H*D = 6.
PROGRAM = """
(def av (Vec (Vec (Vec Float))) ((p : Vec (Vec (Vec (Vec Float)))) (v : Vec (Vec (Vec (Vec Float)))))
  (build (size (index 0 (index 0 p))) (lam (t : Integer)
    (build (size p) (lam (b : Integer)
      (build 6 (lam (k : Integer)
        (let ((h (div k 3)) (vh (index h (index b v))))
          (sumbuild (size vh) (lam (s : Integer)
            (mul (index s (index t (index h (index b p))))
                 (index (sub k (mul (div k 3) 3)) (index s vh)))))))))))))

(def dv (Vec (Vec (Vec (Vec Float)))) ((p : Vec (Vec (Vec (Vec Float)))) (g : Vec (Vec (Vec Float))))
  (sumbuild (size g) (lam (t : Integer)
    (build (size p) (lam (b : Integer)
      (sumbuild 6 (lam (k : Integer)
        (let ((ph (index (div k 3) (index b p)))
              (row (build (size (index t ph)) (lam (s : Integer)
                     (deltaVec 3 (sub k (mul (div k 3) 3))
                       (mul (index k (index b (index t g))) (index s (index t ph))))))))
          (deltaVec (size (index b p)) (div k 3) row)))))))))

(def dp (Vec (Vec (Vec (Vec Float)))) ((v : Vec (Vec (Vec (Vec Float)))) (g : Vec (Vec (Vec Float))))
  (sumbuild (size g) (lam (t : Integer)
    (build (size v) (lam (b : Integer)
      (sumbuild 6 (lam (k : Integer)
        (let ((vh (index (div k 3) (index b v))))
          (deltaVec 2 (div k 3)
            (deltaVec (size g) t
              (build (size vh) (lam (s : Integer)
                (mul (index k (index b (index t g))) (index (sub k (mul (div k 3) 3)) (index s vh)))))))))))))))

; a projection to heads: x [B][T][I] times w [H*D][I], laid out [B][H][T][D] (no batch: rows b t, columns h d)
(def heads (Vec (Vec (Vec (Vec Float)))) ((x : Vec (Vec (Vec Float))) (w : Vec (Vec Float)))
  (build (size x) (lam (b : Integer)
    (build 2 (lam (h : Integer)
      (build (size (index b x)) (lam (t : Integer)
        (build 3 (lam (d : Integer)
          (sumbuild (size (index t (index b x))) (lam (i : Integer)
            (mul (index i (index t (index b x))) (index i (index (add (mul h 3) d) w))))))))))))))

; the same with a bias and a scale around the sum (MultiheadAttention's query): the element of the product
(def heads_bias (Vec (Vec (Vec (Vec Float)))) ((x : Vec (Vec (Vec Float))) (w : Vec (Vec Float)) (c : Vec Float))
  (build (size x) (lam (b : Integer)
    (build 2 (lam (h : Integer)
      (build (size (index b x)) (lam (t : Integer)
        (build 3 (lam (d : Integer)
          (mul (add (sumbuild (size (index t (index b x))) (lam (i : Integer)
                      (mul (index i (index t (index b x))) (index i (index (add (mul h 3) d) w)))))
                    (index (add (mul h 3) d) c))
               0.5))))))))))

; the same product laid out [B][T][H*D], as a linear layer's: the blocked nest per b as it stands
(def linear (Vec (Vec (Vec Float))) ((x : Vec (Vec (Vec Float))) (w : Vec (Vec Float)))
  (build (size x) (lam (b : Integer)
    (build (size (index b x)) (lam (t : Integer)
      (build 6 (lam (o : Integer)
        (sumbuild (size (index t (index b x))) (lam (i : Integer)
          (mul (index i (index t (index b x))) (index i (index o w))))))))))))
"""

#: Each def's arguments as shapes, from (B, H, T, S).
SHAPES = {
    "av": lambda b, h, t, s: [(b, h, t, s), (b, h, s, 3)],
    "dv": lambda b, h, t, s: [(b, h, t, s), (t, b, 6)],
    "dp": lambda b, h, t, s: [(b, h, s, 3), (t, b, 6)],
    "heads": lambda b, h, t, s: [(b, t, s), (6, s)],
    "heads_bias": lambda b, h, t, s: [(b, t, s), (6, s), (6,)],
}
#: (B, H, T, S): one batch, the block's sizes and none of its multiples; H = 3 > 6 / 3: the one-hots of
#: dv over the heads are longer than the loop that writes them (the nest as written runs, padded).
SIZES = [(1, 2, 1, 1), (2, 2, 5, 7), (1, 2, 17, 33), (3, 2, 9, 16), (2, 3, 4, 5)]


def _calls() -> list[tuple[str, list[object]]]:
    rng = random.Random(45)
    return [(name, [random_array(s, rng) for s in make(*size)]) for size in SIZES for name, make in SHAPES.items()]


def test_attention_products_reach_the_blocked_nest() -> None:
    program = parse_program(PROGRAM, "batched.ks")
    for name in SHAPES:
        cpp = emit.emit_program(program, [name], include_runtime=False)
        assert cpp.count("throw ks::Fallback();") == 1, name
        assert any(n.startswith("ks$b") for n in names_in(canonical_products(program.defs[name].body)))
        exact = emit.emit_program(program, [name], include_runtime=False, exact_order=True)
        assert "ks$bmm" not in exact  # the sums change order: not under exact order
    assert not any(n.startswith("ks$b") for n in names_in(canonical_products(program.defs["linear"].body)))


def test_rewritten_products_equal_the_interpreter() -> None:
    program = parse_program(PROGRAM, "batched.ks")
    rewritten = Program(
        defs={n: dataclasses.replace(d, body=canonical_products(d.body)) for n, d in program.defs.items()}
    )
    calls = _calls()
    want, have = interpreted(program, calls), interpreted(rewritten, calls)
    for (name, _), w, h in zip(calls, want, have, strict=True):
        assert not isinstance(w, KsError), (name, w)
        assert values_agree(w, h), name  # type: ignore[arg-type]


def test_compiled_products_equal_the_interpreter() -> None:
    program = parse_program(PROGRAM, "batched.ks")
    calls = _calls()
    rng = random.Random(3)
    p, v, g = (random_array(s, rng) for s in [(2, 2, 9, 16), (2, 2, 16, 3), (9, 2, 6)])
    short = [[[list(r) for r in m] for m in x] for x in p]  # type: ignore[union-attr]
    short[1][0][3] = short[1][0][3][:-1]  # a short row of the attention: a read out of range
    narrow = [list(r) for r in g]  # type: ignore[union-attr]
    narrow[4] = [list(r) for r in narrow[4]]
    narrow[4][1] = narrow[4][1][:5]  # a cotangent row shorter than H*D
    x, w = random_array((2, 9, 17), rng), random_array((6, 17), rng)
    few = [list(r) for r in w[:4]]  # type: ignore[index]
    calls += [("av", [short, v]), ("dv", [short, g]), ("dv", [p, narrow]), ("dp", [v, narrow]), ("heads", [x, few])]
    want = interpreted(program, calls)
    assert sum(isinstance(w, KsError) for w in want) >= 4
    have = compile_program(program, list(SHAPES), threads=1).run(calls)
    for (name, _), w_, h in zip(calls, want, have, strict=True):
        if isinstance(w_, KsError):
            assert isinstance(h, KsError), (name, h)
        else:
            assert values_agree(w_, h), name  # type: ignore[arg-type]


def _attention(e: int, heads: int, batch: int, t: int) -> tuple[Program, list[tuple[int, ...]]]:
    torch.manual_seed(0)
    m = nn.MultiheadAttention(e, heads, batch_first=True).double()
    names = [n for n, _ in m.named_parameters()]
    params = [p.detach().clone() for p in m.parameters()]

    def fn(*a: torch.Tensor) -> torch.Tensor:
        ps, (q, k, v) = a[: len(names)], a[len(names) :]
        return torch.func.functional_call(m, dict(zip(names, ps, strict=True)), (q, k, v))[0]

    xs = [torch.randn(batch, t, e, dtype=torch.float64) for _ in range(3)]
    program = grad_program(translate(fn, *params, *xs, name="mha", check=False), defs=["mha"], mode="rev")
    return program, [tuple(x.shape) for x in (*params, *xs)] + [(batch, t, e)]


@pytest.mark.parametrize(("e", "heads", "batch", "t"), [(8, 2, 2, 5), (6, 1, 1, 3), (6, 3, 1, 7)])
def test_multihead_attention_gradient_means_the_same(e: int, heads: int, batch: int, t: int) -> None:
    """torch's MultiheadAttention ([t][b][h*d] inside): its products become batched ones, and the
    gradient rewritten has the interpreter's values; a ragged input fails as it did."""
    program, shapes = _attention(e, heads, batch, t)
    d = program.defs["rev$mha"]
    body = canonical_products(d.body)
    # (one head of one example has no batch: its products are plain ones, read in their own layout)
    batched = "ks$bmm" if heads > 1 or batch > 1 else "ks$"
    assert any(n.startswith(batched) for n in names_in(body))
    rewritten = Program(defs={**program.defs, d.name: dataclasses.replace(d, body=body)})
    args = [random_array(s, random.Random(e + heads)) for s in shapes]
    ragged = list(args)
    ragged[-2] = [list(x) for x in args[-2]]  # type: ignore[union-attr]
    ragged[-2][0] = [list(r) for r in ragged[-2][0]]  # type: ignore[index]
    ragged[-2][0][-1] = ragged[-2][0][-1][:-1]  # type: ignore[index]
    calls = [("rev$mha", args), ("rev$mha", ragged)]
    want, have = interpreted(program, calls), interpreted(rewritten, calls)
    assert not isinstance(want[0], KsError) and values_agree(want[0], have[0])  # type: ignore[arg-type]
    assert isinstance(want[1], KsError) == isinstance(have[1], KsError)
    if not isinstance(want[1], KsError):
        assert values_agree(want[1], have[1])  # type: ignore[arg-type]


@pytest.mark.slow
def test_compiled_multihead_attention_gradient_equals_the_interpreter() -> None:
    program, shapes = _attention(20, 2, 3, 17)
    calls = [("rev$mha", [random_array(s, random.Random(5)) for s in shapes])]
    want = interpreted(program, calls)
    have = compile_program(program, ["rev$mha"], threads=1).run(calls)
    assert values_agree(want[0], have[0])  # type: ignore[arg-type]
