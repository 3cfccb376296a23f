"""Transformers' MLPs on a batch of sequences (b, t, c), written as Hugging Face writes them (GPT-2's
Conv1D views the batch as rows for ``addmm`` and back; Llama's linear layers read the 3-D input), are
translated with plain row reads: no index is divided, so the backend's products see rows and
reverse mode gathers cotangents instead of scattering them.  Forward (translate's own check) and
gradient (the interpreter on rev$) agree with torch."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

torch = pytest.importorskip("torch")
F = torch.nn.functional

from autodiff import grad_program  # noqa: E402
from frontends.torch import translate  # noqa: E402
from knossos.expr import preorder  # noqa: E402
from knossos.interpreter import call_def  # noqa: E402
from knossos.ops import Op  # noqa: E402
from knossos.types import INTEGER  # noqa: E402


def conv1d(x: Any, weight: Any, bias: Any) -> Any:
    """transformers.pytorch_utils.Conv1D.forward, in the same steps."""
    size_out = (*x.size()[:-1], weight.size(-1))
    x = torch.addmm(bias, x.view(-1, x.size(-1)), weight)
    return x.view(size_out)


def gelu_new(x: Any) -> Any:
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * torch.pow(x, 3.0))))


def gpt2_mlp(w_fc: Any, b_fc: Any, w_proj: Any, b_proj: Any, x: Any) -> Any:
    return conv1d(gelu_new(conv1d(x, w_fc, b_fc)), w_proj, b_proj)


def llama_mlp(gate: Any, up: Any, down: Any, x: Any) -> Any:
    return F.linear(F.silu(F.linear(x, gate)) * F.linear(x, up), down)


CASES = {
    "gpt2_mlp": (gpt2_mlp, [(4, 8), (8,), (8, 4), (4,), (2, 3, 4)]),
    "llama_mlp": (llama_mlp, [(6, 4), (6, 4), (4, 6), (2, 3, 4)]),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_a_batched_mlp_reads_rows_plainly_and_its_gradient_is_torchs(name: str) -> None:
    fn, shapes = CASES[name]
    g = torch.Generator().manual_seed(0)
    args = [torch.randn(s, generator=g, dtype=torch.float64) for s in shapes]
    program = grad_program(translate(fn, *args, name=name), defs=[name], mode="rev")
    divided = [e for d in program.defs.values() for e in preorder(d.body) if e.op is Op.DIV and e.type is INTEGER]
    assert not divided  # rows read in place (before: a flat row index split by / and mod)
    leaves = [a.clone().requires_grad_() for a in args]
    out = fn(*leaves)
    dr = torch.randn(out.shape, generator=g, dtype=torch.float64)
    want = torch.autograd.grad(out, leaves, dr)
    got = call_def(program.defs[f"rev${name}"], *(a.numpy() for a in args), dr.numpy())
    for have, w in zip(got, want, strict=True):
        assert np.allclose(np.asarray(have, dtype=np.float64), w.numpy(), rtol=1e-10, atol=1e-12)


def test_a_searched_gpt2_gradient_keeps_its_products() -> None:
    """optimize.py's default pipeline on the GPT-2 MLP layer's gradient (benchmarks/bench_layers.py)
    substitutes lets (let_substitute, three times, at the let of a read of c_proj_weight, the steps it
    took at the realistic shapes) in the padded copy of the size test of dx = dy w^T (taken where sizes
    differ), then tidies (a row's product no longer let-bound).  The product pass must still give the
    branch taken its blocked product (it went to the padded copy only, which shares the taken
    branch's terms: the optimised gradient ran 3x slower than as written)."""
    from cpp_backend.product_pass import canonical_products
    from knossos.cost_models import get_cost_model
    from knossos.expr import Expr, names_in
    from ksdata.torch_suite import SUITE, available, function
    from rules.actions import Action, apply, sites
    from rules.rule import Site
    from rules.sets import get_rule_set
    from search.tidy import tidy

    if not available(SUITE["GPT-2 MLP"]):
        pytest.skip("transformers is not installed")
    fn, examples = function(SUITE["GPT-2 MLP"], "fast")
    body = grad_program(translate(fn, *examples, name="layer", check=False), defs=["layer"], mode="rev")
    e = body.defs["rev$layer"].body
    substitute = get_rule_set("gradient_rules").rule("let_substitute")

    def weight_read(site: Site) -> bool:  # (let (t (index i c_proj_weight)) ...) where it substitutes
        node = site.node
        rhs = node.args[1] if node.op is Op.LET else None
        return rhs is not None and rhs.op is Op.INDEX and rhs.args[1].data == "c_proj_weight"

    # the last such let in the walk (the padded copy's: its else branch), three times at that node
    number = [k for k, site in enumerate(sites(e)) if weight_read(site)][-1]
    searched = e
    for _ in range(3):
        searched = apply(searched, Action(number, substitute))

    def blocked(x: Expr) -> set[str]:  # the products' copies (ks$...) the product pass makes
        return {n for n in names_in(canonical_products(tidy(x, get_cost_model("alloc"))[0])) if n.startswith("ks$")}

    assert blocked(e) and blocked(searched) >= blocked(e)
