"""The suite's layers from Hugging Face's ``transformers`` (huggingface/transformers, Apache-2.0):
Llama's and GPT-2's blocks, in the suite where the package is installed."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

import torch
from torch import nn

from ksdata.torch_suite.shapes import Layer, module_layer, pick, randn, sized


def _hf(module: str) -> Any:
    """A module of the ``transformers`` package (optional: its layers are in the suite when it is
    installed, :func:`available`)."""
    return importlib.import_module(module)


_HF = "huggingface/transformers"
_APACHE = "Apache-2.0"


def _llama_config(size: str) -> Any:
    return _hf("transformers").LlamaConfig(
        hidden_size=pick(size, 8, 256),
        intermediate_size=pick(size, 16, 688),
        num_attention_heads=2,
        num_key_value_heads=2,
        head_dim=pick(size, 4, 128),
        attn_implementation="eager",
        attention_dropout=0.0,
        max_position_embeddings=pick(size, 16, 256),
    )


def _gpt2_config(size: str) -> Any:
    return _hf("transformers").GPT2Config(
        n_embd=pick(size, 8, 256),
        n_head=2,
        n_positions=pick(size, 16, 256),
        attn_pdrop=0.0,
        resid_pdrop=0.0,
        embd_pdrop=0.0,
        attn_implementation="eager",
    )


def _seq(size: str) -> tuple[int, int]:
    return (2, 5) if size == "fast" else (8, 128)


class _WithRotary(nn.Module):
    """Llama attention or decoder layer as its model calls it: rotary position embeddings of the
    positions 0..T-1 (``LlamaRotaryEmbedding``) and the causal mask of the eager attention."""

    def __init__(self, layer: nn.Module, config: Any) -> None:
        super().__init__()
        self.layer = layer
        self.rotary = _hf("transformers.models.llama.modeling_llama").LlamaRotaryEmbedding(config)

    def forward(self, x: torch.Tensor) -> Any:
        t = x.shape[1]
        positions = torch.arange(t).unsqueeze(0)
        cos, sin = self.rotary(x, positions)
        mask = torch.full((t, t), float("-inf"), dtype=x.dtype).triu(1)[None, None]
        out = self.layer(x, position_embeddings=(cos, sin), attention_mask=mask)
        return out[0] if isinstance(out, tuple) else out


class _Gpt2(nn.Module):
    """A GPT-2 attention or block as its model calls it: the causal mask of the eager attention."""

    def __init__(self, layer: nn.Module) -> None:
        super().__init__()
        self.layer = layer

    def forward(self, x: torch.Tensor) -> Any:
        t = x.shape[1]
        mask = torch.full((t, t), float("-inf"), dtype=x.dtype).triu(1)[None, None]
        out = self.layer(x, attention_mask=mask)
        return out[0] if isinstance(out, tuple) else out


def _hidden(size: str, g: torch.Generator, width: int) -> tuple[torch.Tensor]:
    b, t = _seq(size)
    return (randn(g, b, t, width),)


def transformers_layers() -> list[Layer]:
    llama, gpt2 = "src/transformers/models/llama/modeling_llama.py", "src/transformers/models/gpt2/modeling_gpt2.py"

    def llama_layer(kind: str) -> Callable[[str], nn.Module]:
        def make(size: str) -> nn.Module:
            m = _hf("transformers.models.llama.modeling_llama")
            c = _llama_config(size)
            if kind == "RMSNorm":
                return m.LlamaRMSNorm(c.hidden_size, eps=1e-6)  # type: ignore[no-any-return]
            if kind == "MLP":
                return m.LlamaMLP(c)  # type: ignore[no-any-return]
            layer = m.LlamaAttention(c, 0) if kind == "Attention" else m.LlamaDecoderLayer(c, 0)
            return _WithRotary(layer, c)

        return make

    def gpt2_layer(kind: str) -> Callable[[str], nn.Module]:
        def make(size: str) -> nn.Module:
            m = _hf("transformers.models.gpt2.modeling_gpt2")
            c = _gpt2_config(size)
            if kind == "MLP":
                return m.GPT2MLP(4 * c.n_embd, c)  # type: ignore[no-any-return]
            return _Gpt2(m.GPT2Attention(c, layer_idx=0) if kind == "Attention" else m.GPT2Block(c, layer_idx=0))

        return make

    def width(fn: Callable[[str], Any]) -> Callable[[str, torch.Generator], tuple[torch.Tensor]]:
        return lambda s, g: _hidden(s, g, fn(s))

    llama_width = width(lambda s: pick(s, 8, 256))
    gpt2_width = width(lambda s: pick(s, 8, 256))
    out = [
        Layer(
            "Llama RMSNorm",
            _HF,
            llama,
            "LlamaRMSNorm",
            _APACHE,
            module_layer(llama_layer("RMSNorm"), llama_width),
            "transformers",
        ),
        Layer(
            "Llama MLP (SwiGLU)",
            _HF,
            llama,
            "LlamaMLP",
            _APACHE,
            module_layer(llama_layer("MLP"), llama_width),
            "transformers",
        ),
        Layer(
            "Llama attention",
            _HF,
            llama,
            "LlamaAttention",
            _APACHE,
            module_layer(llama_layer("Attention"), llama_width),
            "transformers",
        ),
        Layer(
            "Llama decoder layer",
            _HF,
            llama,
            "LlamaDecoderLayer",
            _APACHE,
            module_layer(llama_layer("Decoder"), llama_width),
            "transformers",
        ),
        Layer("GPT-2 MLP", _HF, gpt2, "GPT2MLP", _APACHE, module_layer(gpt2_layer("MLP"), gpt2_width), "transformers"),
        Layer(
            "GPT-2 attention",
            _HF,
            gpt2,
            "GPT2Attention",
            _APACHE,
            module_layer(gpt2_layer("Attention"), gpt2_width),
            "transformers",
        ),
        Layer(
            "GPT-2 block",
            _HF,
            gpt2,
            "GPT2Block",
            _APACHE,
            module_layer(gpt2_layer("Block"), gpt2_width),
            "transformers",
        ),
        Layer(
            "NewGELUActivation",
            _HF,
            "src/transformers/activations.py",
            "NewGELUActivation",
            _APACHE,
            module_layer(lambda s: _new_gelu(), lambda s, g: (sized(s, g, (4, 8), (64, 3072)),)),
            "transformers",
        ),
    ]
    return out


def _new_gelu() -> nn.Module:
    return _hf("transformers.activations").NewGELUActivation()  # type: ignore[no-any-return]
