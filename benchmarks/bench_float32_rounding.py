"""Would rounding to float32 after each float32 op make Llama attention's gradient agree with torch's?

Run:  python benchmarks/bench_float32_rounding.py

transformers' Llama attention computes its rotary cos and sin in float32 (``inv_freq`` and the
positions ``.float()``, autocast off) and its softmax in float32 (``dtype=torch.float32``); the
translation computes both in double (docs/torch.md), and its gradient differs from torch.autograd's
by about 1e-6 (relative, as benchmarks/bench_layers.py measures it).  This script computes the
layer's gradient in float64 with torch, on the benchmark's inputs, with each float32 region computed
three ways: in double (what the translation does), in double rounded to float32 after each op (what
a rounding op in the language would do; its derivative the identity, or the cotangent rounded too
for the softmax, as torch's float32 backward is), and with torch's own float32 ops (which must give
0: a check of the reimplementation).  It prints each variant's largest relative difference from
torch.autograd, and how many of torch's float32 cos and sin values differ from the correctly rounded
ones.
"""

from __future__ import annotations

from ksbench.harness import pin_threads

pin_threads()

from collections.abc import Callable  # noqa: E402
from typing import Any  # noqa: E402

import torch  # noqa: E402

from ksdata.torch_suite import SUITE, available, function  # noqa: E402

LAYER = "Llama attention"
Tensor = torch.Tensor


class _Round(torch.autograd.Function):
    """Double rounded to float32, and its cotangent too (torch's float32 backward rounds it)."""

    @staticmethod
    def forward(ctx: Any, t: Tensor) -> Tensor:
        return t.float().double()

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> Tensor:
        return g.float().double()


def _round(t: Tensor) -> Tensor:
    out = _Round.apply(t)  # type: ignore[no-untyped-call]
    assert isinstance(out, Tensor)
    return out


def _rotary(kind: str, inv_freq: Tensor, t: int) -> tuple[Tensor, Tensor]:
    freqs = torch.arange(t).double()[:, None] * inv_freq[None, :]  # (exact: a float32 product rounded)
    if kind != "double":
        freqs = freqs.float().double()
    emb = torch.cat([freqs, freqs], -1)
    if kind == "torch32":
        return emb.float().cos().double(), emb.float().sin().double()
    if kind == "round":
        return emb.cos().float().double(), emb.sin().float().double()
    return emb.cos(), emb.sin()


def _softmax(kind: str, a: Tensor) -> Tensor:
    if kind == "torch32":
        return torch.softmax(a, -1, dtype=torch.float32).double()
    if kind == "round":
        a = _round(a)
        e = _round(torch.exp(a - a.max(-1, keepdim=True).values.detach()))
        return _round(e / _round(e.sum(-1, keepdim=True)))
    return torch.softmax(a, -1)


def _attention(rotary: str, softmax: str, inv_freq: Tensor, heads: int) -> Callable[..., Tensor]:
    """LlamaAttention's eager forward (modeling_llama.py), its float32 regions computed as asked."""

    def forward(wq: Tensor, wk: Tensor, wv: Tensor, wo: Tensor, x: Tensor) -> Tensor:
        b, t, _ = x.shape
        d = wq.shape[0] // heads
        cos, sin = _rotary(rotary, inv_freq, t)

        def project(w: Tensor) -> Tensor:
            return (x @ w.T).view(b, t, heads, d).transpose(1, 2)

        def half(u: Tensor) -> Tensor:
            return torch.cat([-u[..., d // 2 :], u[..., : d // 2]], -1)

        q, k, v = project(wq), project(wk), project(wv)
        q, k = q * cos + half(q) * sin, k * cos + half(k) * sin
        scores = q @ k.transpose(2, 3) * d**-0.5 + torch.full((t, t), float("-inf"), dtype=x.dtype).triu(1)
        out = (_softmax(softmax, scores) @ v).transpose(1, 2).reshape(b, t, heads * d)
        return out @ wo.T

    return forward


def main() -> None:
    layer = SUITE[LAYER]
    if not available(layer):
        raise SystemExit(f"{layer.package} is not installed")
    fn, _ = function(layer, "realistic")
    _, xs = function(layer, "realistic", seed=1)  # the inputs bench_layers compares on
    module: Any = next(c.cell_contents for c in fn.__closure__ or () if isinstance(c.cell_contents, torch.nn.Module))
    inv_freq: Tensor = module.rotary.inv_freq.detach()  # float32 values (the buffer, moved to float64)
    heads = int(module.layer.config.num_attention_heads)
    leaves = [x.clone().requires_grad_() for x in xs]
    out = fn(*leaves)
    dr = torch.randn(out.shape, generator=torch.Generator().manual_seed(7), dtype=out.dtype)
    want = torch.autograd.grad(out, leaves, dr)
    print(f"{LAYER}: gradient's largest relative difference from torch.autograd (bench_layers' measure)")
    for rotary in ("double", "round", "torch32"):
        for softmax in ("double", "round", "torch32"):
            got = torch.autograd.grad(_attention(rotary, softmax, inv_freq, heads)(*leaves), leaves, dr)
            err = max(float((g - w).abs().max() / w.abs().max()) for g, w in zip(got, want, strict=True))
            print(f"  rotary {rotary:7s}  softmax {softmax:7s}  {err:.2e}")
    t = out.shape[1]
    emb = (torch.arange(t).double()[:, None] * inv_freq[None, :]).float()
    for name, f in (("cos", torch.cos), ("sin", torch.sin)):
        wrong = int((f(emb) != f(emb.double()).float()).sum())
        print(f"torch's float32 {name}: {wrong} of {emb.numel()} values not correctly rounded")


if __name__ == "__main__":
    main()
