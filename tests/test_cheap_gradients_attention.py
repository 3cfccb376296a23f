"""The cheap-gradient principle on attention (issue 45, item 1): the size and the meaning of the
reverse pass of loop nests, and of Llama's attention as the torch front end translates it.

Two causes of a slow, huge ``rev$`` are checked here through the public entry points:

* a gather whose loop may not cover its vector (a loop over a literal reading a parameter) was guarded
  by a second copy of the loop's whole reverse pass, and every loop around it copied that again: 2^depth
  copies (Llama attention's ``rev$`` had 26,468 nodes for a 1,385-node function; its C++ 2.4 MB);
* a branch inside a loop whose other branch reads another tensor gave that tensor a zero cotangent
  written as loops over its shape, made element by element in every iteration (46 s per call).
"""

from __future__ import annotations

import contextlib
import io
import itertools

import numpy as np
import pytest
import torch

from autodiff import grad_program
from cpp_backend.callable import compile_def
from cpp_backend.entry import library_source
from frontends.dispatch import results
from frontends.torch import translate
from knossos.expr import preorder
from knossos.interpreter import Interpreter
from knossos.ops import Op
from knossos.parser import parse_program
from knossos.program import Program
from knossos.values import to_numpy
from ksdata.torch_suite import SUITE, available, function


def _nest(depth: int) -> str:
    """``exp`` of a parameter's elements, read by ``depth`` nested loops over the literal 2."""
    vec = "Float"
    for _ in range(depth):
        vec = f"(Vec {vec})"
    idx = [f"i{k}" for k in range(depth)]
    read = "x"
    for i in idx:
        read = f"(index {i} {read})"
    body = f"(exp {read})"
    for i in reversed(idx):
        body = f"(build 2 (lam ({i} : Integer) {body}))"
    return f"(def f {vec} ((x : {vec})) {body})"


def _rev(text: str, name: str = "f") -> Program:
    return grad_program(parse_program(text), defs=[name], mode="rev")


def test_guarded_gathers_do_not_copy_the_reverse_pass() -> None:
    """rev$f of a nest reading a parameter (whose size the loops may not cover) grows by a constant
    per level, not twice per level; and its value is exp(x) where the loops read x, zero elsewhere."""
    sizes = [_rev(_nest(d)).defs["rev$f"].body.size for d in (3, 4, 5, 6)]
    steps = [b - a for a, b in itertools.pairwise(sizes)]
    assert max(steps) <= 1.5 * min(steps), sizes  # 2^depth copies made each step double
    program = _rev(_nest(3))
    x = np.random.default_rng(0).normal(size=(3, 2, 4))  # longer than the loops in two dimensions
    dr = np.random.default_rng(1).normal(size=(2, 2, 2))
    got = np.asarray(to_numpy(Interpreter().call(program.defs["rev$f"], [x, dr])))
    want = np.zeros_like(x)
    want[:2, :2, :2] = np.exp(x[:2, :2, :2]) * dr
    np.testing.assert_allclose(got, want, rtol=1e-13)


def test_loops_over_known_sizes_gather_plainly() -> None:
    """A loop over the literal size of a vector that a build of that size made gives that vector's
    cotangent as a plain gather: no test of its size (the guard is for vectors of unknown size)."""
    text = """
    (def f (Vec (Vec Float)) ((x : Vec (Vec Float)))
      (let (y (build 3 (lam (i : Integer) (build 4 (lam (j : Integer) (mul 2.0 (index j (index i x))))))))
        (build 3 (lam (a : Integer) (build 4 (lam (b : Integer) (exp (index b (index a y)))))))))
    """
    program = _rev(text)
    body = program.defs["rev$f"].body
    sized = {n.args[0].data for n in preorder(body) if n.op is Op.SIZE and n.args[0].op is Op.VAR}
    assert "y" not in sized and len(sized) == 2, sized  # only x and its rows, whose sizes are unknown
    x = np.random.default_rng(2).normal(size=(4, 5))
    dr = np.random.default_rng(3).normal(size=(3, 4))
    got = np.asarray(to_numpy(Interpreter().call(program.defs["rev$f"], [x, dr])))
    want = np.zeros_like(x)
    want[:3, :4] = 2.0 * np.exp(2.0 * x[:3, :4]) * dr
    np.testing.assert_allclose(got, want, rtol=1e-13)


#: A loop whose branch reads one of two matrices per element (torch's ``cat`` of two halves, as
#: rotary embeddings' ``rotate_half`` is translated): each branch's reverse pass gives the matrix the
#: other reads a zero cotangent.
_HALVES = """
(def f (Vec (Vec Float)) ((a : Vec (Vec Float)) (b : Vec (Vec Float)))
  (build 3 (lam (i : Integer) (build 6 (lam (j : Integer)
    (if (lt j 3) (mul 2.0 (index j (index i a))) (exp (index (sub j 3) (index i b)))))))))
"""


def test_zero_cotangents_are_lazy_in_cpp() -> None:
    """The C++ of rev$f makes the zero cotangents with ``ks::zero_like`` (O(1)), not with loops over
    the matrices' shape in every iteration; and the compiled gradient equals the interpreter's."""
    program = _rev(_HALVES)
    source = library_source(program, program.defs["rev$f"])
    assert "ks::zero_like(" in source
    rng = np.random.default_rng(4)
    a, b, dr = rng.normal(size=(3, 3)), rng.normal(size=(3, 3)), rng.normal(size=(3, 6))
    want = Interpreter().call(program.defs["rev$f"], [a, b, dr])
    got = compile_def(program, "rev$f", threads=1)(a, b, dr)
    for have, expect in zip(got, want, strict=True):  # type: ignore[call-overload]
        np.testing.assert_allclose(np.asarray(to_numpy(have)), np.asarray(to_numpy(expect)), rtol=1e-13)


@pytest.mark.skipif(not available(SUITE["Llama attention"]), reason="transformers is not installed")
def test_llama_attention_gradient_is_small_and_right() -> None:
    """Llama attention's rev$layer (fast shapes) has at most 8 times its function's nodes (19 times
    when gathers copied the reverse pass), and the interpreter's gradient equals torch.autograd's
    (within float32 rounding: transformers computes the rotary embedding's cos/sin in float32)."""
    fn, examples = function(SUITE["Llama attention"], "fast")
    with contextlib.redirect_stdout(io.StringIO()):
        program = grad_program(translate(fn, *examples, name="layer", check=False), defs=["layer"], mode="rev")
    ratio = program.defs["rev$layer"].body.size / program.defs["layer"].body.size
    assert ratio <= 8.0, ratio
    _, xs = function(SUITE["Llama attention"], "fast", seed=1)
    leaves = [x.clone().requires_grad_(True) for x in xs]
    (out,) = results(fn(*leaves))
    dr = torch.randn(out.shape, generator=torch.Generator().manual_seed(5), dtype=torch.float64)
    want = torch.autograd.grad(out, leaves, dr)
    got = Interpreter().call(program.defs["rev$layer"], [*(x.numpy() for x in xs), dr.numpy()])
    for have, expect in zip(got, want, strict=True):  # type: ignore[call-overload]
        scale = float(expect.abs().max())
        np.testing.assert_allclose(np.asarray(to_numpy(have)), expect.numpy(), atol=1e-5 * scale)


#: The halves of ``_HALVES`` computed in the def (their sizes known), as rotary embeddings' are: the
#: reads of their rows move out of the branch, so each half's cotangent is gathered.
_COMPUTED_HALVES = """
(def f (Vec (Vec Float)) ((x : Vec (Vec Float)))
  (let ((a (build 3 (lam (i : Integer) (build 3 (lam (j : Integer) (mul 3.0 (index j (index i x))))))))
        (b (build 3 (lam (i : Integer) (build 3 (lam (j : Integer) (neg (index j (index i x)))))))))
    (build 3 (lam (i : Integer) (build 6 (lam (j : Integer)
      (if (lt j 3) (mul 2.0 (index j (index i a))) (exp (index (sub j 3) (index i b))))))))))
"""


def test_concatenation_of_computed_halves_gathers_each_half() -> None:
    """rev$f of a concatenation of two computed matrices makes no zero row of either half (the one
    ``build`` of a literal pads ``x``'s cotangent, should ``x`` have more rows) and no one-hot of ``a``: the rows' reads leave the branch, whose reverse
    pass gives Float zeros, and ``a``'s cotangent is a gather; the compiled gradient and the
    interpreter's equal the closed form 6 dr[:, :3] - exp(-x) dr[:, 3:]."""
    program = _rev(_COMPUTED_HALVES)
    nodes = list(preorder(program.defs["rev$f"].body))
    zeros = [node for node in nodes if node.op is Op.BUILD and node.args[2].op is Op.CONST]
    assert all("x" in node.args[0].free for node in zeros), zeros
    deltas = [node for node in nodes if node.op is Op.DELTAVEC]
    assert len(deltas) == 1 and deltas[0].args[1].op is Op.VAR, deltas  # b's, at (sub j 3)
    rng = np.random.default_rng(6)
    x, dr = rng.normal(size=(3, 3)), rng.normal(size=(3, 6))
    want = 6.0 * dr[:, :3] - np.exp(-x) * dr[:, 3:]
    got = Interpreter().call(program.defs["rev$f"], [x, dr])
    np.testing.assert_allclose(np.asarray(to_numpy(got)), want, rtol=1e-12)
    compiled = compile_def(program, "rev$f", threads=1)(x, dr)
    np.testing.assert_allclose(np.asarray(compiled), want, rtol=1e-12)
