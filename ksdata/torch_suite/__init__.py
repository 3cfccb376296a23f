"""Layers and losses from public code, run unchanged, for the torch front end (issue 46) and the
layer benchmark (issue 45).

Each :class:`Layer` names a class or function of an installed package — PyTorch's own modules,
losses and distributions (pytorch/pytorch, BSD-3-Clause) and, where the ``transformers`` package is
installed, Hugging Face's Llama and GPT-2 blocks (huggingface/transformers, Apache-2.0) — by
repository and path, and builds it with the shapes of a size (``"fast"`` for tests, ``"realistic"``
for the benchmark).  Nothing of their code is copied here: it runs from the installed package, as a
user's model would; only what cannot run here is set, through the constructor (dropout 0, the eager
attention of ``transformers`` instead of its kernels).

:func:`function` makes a layer a plain function of its parameters and inputs (float64), with the
parameters' names, which ``frontends.torch.translate`` takes: ``torch.func.functional_call`` of the
module.  Buffers (batch norm's running statistics) stay the module's: constants of the translation.
"""

from __future__ import annotations

import importlib
import inspect
import keyword
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn
from torch.nn import functional as F

D = torch.float64
Built = tuple[Any, tuple[torch.Tensor, ...]]


@dataclass(frozen=True)
class Layer:
    """A public layer or loss: where its code is, and how to build it with a size's shapes."""

    name: str
    repo: str
    path: str
    symbol: str
    license: str
    #: ``build(size, generator) -> (module or function, inputs)``; ``size`` is "fast" or "realistic".
    build: Callable[[str, torch.Generator], Built]
    #: The package the code is in, where it is not torch.
    package: str = "torch"


def _randn(g: torch.Generator, *shape: int) -> torch.Tensor:
    return torch.randn(shape, generator=g, dtype=D)


def _pick(size: str, fast: Any, realistic: Any) -> Any:
    return fast if size == "fast" else realistic


def _module(make: Callable[[str], nn.Module], inputs: Callable[[str, torch.Generator], tuple[torch.Tensor, ...]]):  # type: ignore[no-untyped-def]
    def build(size: str, g: torch.Generator) -> Built:
        torch.manual_seed(0)
        m = make(size).to(D)
        with torch.no_grad():  # parameters of a trained model's scale, not all zeros and ones
            for p in m.parameters():
                p.copy_(torch.randn(p.shape, generator=g, dtype=D) * (1.0 / math.sqrt(max(1, p.shape[-1]))))
        return m, inputs(size, g)

    return build


def _loss(make: Callable[[], nn.Module], inputs: Callable[[str, torch.Generator], tuple[torch.Tensor, ...]]):  # type: ignore[no-untyped-def]
    return lambda size, g: (make(), inputs(size, g))


def _x(size: str, g: torch.Generator, fast: tuple[int, ...], real: tuple[int, ...]) -> torch.Tensor:
    return _randn(g, *_pick(size, fast, real))


def _targets(size: str, g: torch.Generator, n: int, classes: int, ignore: int | None = None) -> torch.Tensor:
    t = torch.randint(0, classes, (n,), generator=g)
    if ignore is not None:
        t[::3] = ignore
    return t


def _prob(g: torch.Generator, *shape: int) -> torch.Tensor:
    return torch.rand(shape, generator=g, dtype=D) * 0.98 + 0.01


def _sign(g: torch.Generator, n: int) -> torch.Tensor:
    return torch.randint(0, 2, (n,), generator=g).to(D) * 2 - 1


_NN = "pytorch/pytorch"
_BSD = "BSD-3-Clause"
_LOSS = "torch/nn/modules/loss.py"


def _torch_layers() -> list[Layer]:
    T, C = 16, 8  # fast sequence length and channels
    out = [
        Layer(
            "Linear",
            _NN,
            "torch/nn/modules/linear.py",
            "Linear",
            _BSD,
            _module(
                lambda s: nn.Linear(_pick(s, 8, 768), _pick(s, 6, 768)), lambda s, g: (_x(s, g, (4, 8), (64, 768)),)
            ),
        ),
        Layer(
            "LayerNorm",
            _NN,
            "torch/nn/modules/normalization.py",
            "LayerNorm",
            _BSD,
            _module(lambda s: nn.LayerNorm(_pick(s, 8, 768)), lambda s, g: (_x(s, g, (4, 8), (64, 768)),)),
        ),
        Layer(
            "RMSNorm",
            _NN,
            "torch/nn/modules/normalization.py",
            "RMSNorm",
            _BSD,
            _module(lambda s: nn.RMSNorm(_pick(s, 8, 768), eps=1e-6), lambda s, g: (_x(s, g, (4, 8), (64, 768)),)),
        ),
        Layer(
            "GroupNorm",
            _NN,
            "torch/nn/modules/normalization.py",
            "GroupNorm",
            _BSD,
            _module(lambda s: nn.GroupNorm(2, _pick(s, 4, 64)), lambda s, g: (_x(s, g, (2, 4, 5), (16, 64, 128)),)),
        ),
        Layer(
            "BatchNorm1d (eval)",
            _NN,
            "torch/nn/modules/batchnorm.py",
            "BatchNorm1d",
            _BSD,
            _module(lambda s: nn.BatchNorm1d(_pick(s, 4, 256)).eval(), lambda s, g: (_x(s, g, (3, 4), (64, 256)),)),
        ),
        Layer(
            "RNNCell",
            _NN,
            "torch/nn/modules/rnn.py",
            "RNNCell",
            _BSD,
            _module(
                lambda s: nn.RNNCell(_pick(s, 5, 256), _pick(s, 6, 256)),
                lambda s, g: (_x(s, g, (3, 5), (64, 256)), _x(s, g, (3, 6), (64, 256))),
            ),
        ),
        Layer(
            "GRUCell",
            _NN,
            "torch/nn/modules/rnn.py",
            "GRUCell",
            _BSD,
            _module(
                lambda s: nn.GRUCell(_pick(s, 5, 256), _pick(s, 6, 256)),
                lambda s, g: (_x(s, g, (3, 5), (64, 256)), _x(s, g, (3, 6), (64, 256))),
            ),
        ),
        Layer(
            "LSTMCell",
            _NN,
            "torch/nn/modules/rnn.py",
            "LSTMCell",
            _BSD,
            _module(
                lambda s: _LSTMCell(_pick(s, 5, 256), _pick(s, 6, 256)),
                lambda s, g: (_x(s, g, (3, 5), (64, 256)), _x(s, g, (3, 6), (64, 256)), _x(s, g, (3, 6), (64, 256))),
            ),
        ),
        Layer(
            "MultiheadAttention",
            _NN,
            "torch/nn/modules/activation.py",
            "MultiheadAttention",
            _BSD,
            _module(
                lambda s: nn.MultiheadAttention(_pick(s, C, 256), 2, batch_first=True),
                lambda s, g: (_x(s, g, (2, 5, C), (16, 64, 256)),) * 3,
            ),
        ),
        Layer(
            "TransformerEncoderLayer",
            _NN,
            "torch/nn/modules/transformer.py",
            "TransformerEncoderLayer",
            _BSD,
            _module(
                lambda s: nn.TransformerEncoderLayer(
                    _pick(s, C, 256), 2, _pick(s, 16, 1024), dropout=0.0, activation="gelu", batch_first=True
                ),
                lambda s, g: (_x(s, g, (2, 5, C), (16, 64, 256)),),
            ),
        ),
        Layer(
            "Conv1d",
            _NN,
            "torch/nn/modules/conv.py",
            "Conv1d",
            _BSD,
            _module(
                lambda s: nn.Conv1d(_pick(s, 3, 64), _pick(s, 4, 64), 3, padding=2, dilation=2),
                lambda s, g: (_x(s, g, (2, 3, T), (16, 64, 256)),),
            ),
        ),
        Layer(
            "Conv2d",
            _NN,
            "torch/nn/modules/conv.py",
            "Conv2d",
            _BSD,
            _module(
                lambda s: nn.Conv2d(_pick(s, 2, 32), _pick(s, 3, 64), 3, padding=1, stride=2),
                lambda s, g: (_x(s, g, (2, 2, 6, 6), (8, 32, 32, 32)),),
            ),
        ),
        Layer(
            "Mish",
            _NN,
            "torch/nn/modules/activation.py",
            "Mish",
            _BSD,
            _module(lambda s: nn.Mish(), lambda s, g: (_x(s, g, (4, 8), (64, 1024)),)),
        ),
        Layer(
            "ELU",
            _NN,
            "torch/nn/modules/activation.py",
            "ELU",
            _BSD,
            _module(lambda s: nn.ELU(), lambda s, g: (_x(s, g, (4, 8), (64, 1024)),)),
        ),
        Layer(
            "CrossEntropyLoss (ignore_index)",
            _NN,
            _LOSS,
            "CrossEntropyLoss",
            _BSD,
            _loss(
                lambda: nn.CrossEntropyLoss(ignore_index=-1),
                lambda s, g: (_x(s, g, (6, 5), (512, 1000)), _targets(s, g, _pick(s, 6, 512), _pick(s, 5, 1000), -1)),
            ),
        ),
        Layer(
            "CrossEntropyLoss (label_smoothing)",
            _NN,
            _LOSS,
            "CrossEntropyLoss",
            _BSD,
            _loss(
                lambda: nn.CrossEntropyLoss(label_smoothing=0.1),
                lambda s, g: (_x(s, g, (6, 5), (512, 1000)), _targets(s, g, _pick(s, 6, 512), _pick(s, 5, 1000))),
            ),
        ),
        Layer(
            "NLLLoss",
            _NN,
            _LOSS,
            "NLLLoss",
            _BSD,
            _loss(
                nn.NLLLoss,
                lambda s, g: (_x(s, g, (6, 5), (512, 1000)), _targets(s, g, _pick(s, 6, 512), _pick(s, 5, 1000))),
            ),
        ),
        Layer("MSELoss", _NN, _LOSS, "MSELoss", _BSD, _loss(nn.MSELoss, lambda s, g: _pair(s, g))),
        Layer("L1Loss", _NN, _LOSS, "L1Loss", _BSD, _loss(nn.L1Loss, lambda s, g: _pair(s, g))),
        Layer("SmoothL1Loss", _NN, _LOSS, "SmoothL1Loss", _BSD, _loss(nn.SmoothL1Loss, lambda s, g: _pair(s, g))),
        Layer("HuberLoss", _NN, _LOSS, "HuberLoss", _BSD, _loss(lambda: nn.HuberLoss(delta=0.5), _pair)),
        Layer(
            "BCEWithLogitsLoss",
            _NN,
            _LOSS,
            "BCEWithLogitsLoss",
            _BSD,
            _loss(
                nn.BCEWithLogitsLoss,
                lambda s, g: (_x(s, g, (4, 6), (64, 1024)), _prob(g, *_pick(s, (4, 6), (64, 1024)))),
            ),
        ),
        Layer(
            "BCELoss",
            _NN,
            _LOSS,
            "BCELoss",
            _BSD,
            _loss(
                nn.BCELoss,
                lambda s, g: (_prob(g, *_pick(s, (4, 6), (64, 1024))), _prob(g, *_pick(s, (4, 6), (64, 1024)))),
            ),
        ),
        Layer(
            "KLDivLoss",
            _NN,
            _LOSS,
            "KLDivLoss",
            _BSD,
            _loss(
                lambda: nn.KLDivLoss(reduction="batchmean"),
                lambda s, g: (
                    F.log_softmax(_x(s, g, (4, 6), (64, 1024)), -1),
                    F.softmax(_x(s, g, (4, 6), (64, 1024)), -1),
                ),
            ),
        ),
        Layer(
            "GaussianNLLLoss",
            _NN,
            _LOSS,
            "GaussianNLLLoss",
            _BSD,
            _loss(nn.GaussianNLLLoss, lambda s, g: (*_pair(s, g), _prob(g, *_pick(s, (4, 6), (64, 1024))))),
        ),
        Layer(
            "PoissonNLLLoss",
            _NN,
            _LOSS,
            "PoissonNLLLoss",
            _BSD,
            _loss(
                nn.PoissonNLLLoss,
                lambda s, g: (_x(s, g, (4, 6), (64, 1024)), _prob(g, *_pick(s, (4, 6), (64, 1024))) * 5),
            ),
        ),
        Layer(
            "CosineEmbeddingLoss",
            _NN,
            _LOSS,
            "CosineEmbeddingLoss",
            _BSD,
            _loss(
                lambda: nn.CosineEmbeddingLoss(margin=0.1),
                lambda s, g: (*_pair(s, g), _sign(g, _pick(s, 4, 64))),
            ),
        ),
        Layer(
            "MarginRankingLoss",
            _NN,
            _LOSS,
            "MarginRankingLoss",
            _BSD,
            _loss(
                lambda: nn.MarginRankingLoss(margin=0.2),
                lambda s, g: (_x(s, g, (6,), (4096,)), _x(s, g, (6,), (4096,)), _sign(g, _pick(s, 6, 4096))),
            ),
        ),
        Layer(
            "TripletMarginLoss",
            _NN,
            _LOSS,
            "TripletMarginLoss",
            _BSD,
            _loss(nn.TripletMarginLoss, lambda s, g: (*_pair(s, g), _x(s, g, (4, 6), (64, 1024)))),
        ),
        Layer(
            "SoftMarginLoss",
            _NN,
            _LOSS,
            "SoftMarginLoss",
            _BSD,
            _loss(
                nn.SoftMarginLoss, lambda s, g: (_x(s, g, (4, 6), (64, 1024)), torch.sign(_x(s, g, (4, 6), (64, 1024))))
            ),
        ),
        Layer(
            "MultiLabelSoftMarginLoss",
            _NN,
            _LOSS,
            "MultiLabelSoftMarginLoss",
            _BSD,
            _loss(
                nn.MultiLabelSoftMarginLoss,
                lambda s, g: (_x(s, g, (4, 6), (64, 1024)), (_x(s, g, (4, 6), (64, 1024)) > 0).to(D)),
            ),
        ),
        Layer("LSTM", _NN, "torch/nn/modules/rnn.py", "LSTM", _BSD, _module(_rnn(nn.LSTM), _sequence)),
        Layer("GRU", _NN, "torch/nn/modules/rnn.py", "GRU", _BSD, _module(_rnn(nn.GRU), _sequence)),
        Layer("RNN", _NN, "torch/nn/modules/rnn.py", "RNN", _BSD, _module(_rnn(nn.RNN), _sequence)),
        Layer(
            "TransformerDecoderLayer",
            _NN,
            "torch/nn/modules/transformer.py",
            "TransformerDecoderLayer",
            _BSD,
            _module(
                lambda s: nn.TransformerDecoderLayer(
                    _pick(s, C, 256), 2, _pick(s, 16, 1024), dropout=0.0, batch_first=True
                ),
                lambda s, g: (_x(s, g, (2, 3, C), (16, 64, 256)), _x(s, g, (2, 4, C), (16, 64, 256))),
            ),
        ),
        Layer(
            "Embedding",
            _NN,
            "torch/nn/modules/sparse.py",
            "Embedding",
            _BSD,
            _module(
                lambda s: nn.Embedding(_pick(s, 10, 50304), _pick(s, 4, 256)),
                lambda s, g: (torch.randint(0, _pick(s, 10, 50304), _pick(s, (2, 3), (8, 256)), generator=g),),
            ),
        ),
        Layer(
            "InstanceNorm1d",
            _NN,
            "torch/nn/modules/instancenorm.py",
            "InstanceNorm1d",
            _BSD,
            _module(
                lambda s: nn.InstanceNorm1d(_pick(s, 3, 64), affine=True),
                lambda s, g: (_x(s, g, (2, 3, 6), (16, 64, 256)),),
            ),
        ),
        Layer(
            "LocalResponseNorm",
            _NN,
            "torch/nn/modules/normalization.py",
            "LocalResponseNorm",
            _BSD,
            _module(lambda s: nn.LocalResponseNorm(2), lambda s, g: (_x(s, g, (2, 3, 6), (16, 64, 256)),)),
        ),
        Layer(
            "MaxPool2d",
            _NN,
            "torch/nn/modules/pooling.py",
            "MaxPool2d",
            _BSD,
            _module(lambda s: nn.MaxPool2d(3, 2, padding=1), lambda s, g: (_x(s, g, (2, 2, 7, 7), (8, 64, 56, 56)),)),
        ),
        Layer(
            "AvgPool2d",
            _NN,
            "torch/nn/modules/pooling.py",
            "AvgPool2d",
            _BSD,
            _module(lambda s: nn.AvgPool2d(2), lambda s, g: (_x(s, g, (2, 2, 6, 6), (8, 64, 56, 56)),)),
        ),
        Layer(
            "GLU",
            _NN,
            "torch/nn/modules/activation.py",
            "GLU",
            _BSD,
            _module(lambda s: nn.GLU(), lambda s, g: (_x(s, g, (4, 8), (64, 2048)),)),
        ),
        Layer(
            "CosineSimilarity",
            _NN,
            "torch/nn/modules/distance.py",
            "CosineSimilarity",
            _BSD,
            _module(lambda s: nn.CosineSimilarity(), lambda s, g: _pair(s, g)),
        ),
        Layer(
            "MultiMarginLoss",
            _NN,
            _LOSS,
            "MultiMarginLoss",
            _BSD,
            _loss(
                nn.MultiMarginLoss,
                lambda s, g: (_x(s, g, (6, 5), (512, 1000)), _targets(s, g, _pick(s, 6, 512), _pick(s, 5, 1000))),
            ),
        ),
        # refused: a transposed convolution, torch's CTC and bilinear kernels, nearest upsampling's
        # float-to-integer index (no lowering; see docs/torch_suite.md)
        Layer(
            "ConvTranspose1d",
            _NN,
            "torch/nn/modules/conv.py",
            "ConvTranspose1d",
            _BSD,
            _module(
                lambda s: nn.ConvTranspose1d(_pick(s, 2, 64), _pick(s, 3, 64), 3),
                lambda s, g: (_x(s, g, (2, 2, 5), (16, 64, 256)),),
            ),
        ),
        Layer(
            "CTCLoss",
            _NN,
            _LOSS,
            "CTCLoss",
            _BSD,
            _loss(
                nn.CTCLoss,
                lambda s, g: (
                    F.log_softmax(_x(s, g, (6, 2, 5), (50, 16, 20)), -1),
                    torch.randint(1, _pick(s, 5, 20), (_pick(s, 2, 16), _pick(s, 3, 30)), generator=g),
                    torch.full((_pick(s, 2, 16),), _pick(s, 6, 50)),
                    torch.full((_pick(s, 2, 16),), _pick(s, 3, 30)),
                ),
            ),
        ),
        Layer(
            "Bilinear",
            _NN,
            "torch/nn/modules/linear.py",
            "Bilinear",
            _BSD,
            _module(
                lambda s: nn.Bilinear(_pick(s, 3, 64), _pick(s, 4, 64), _pick(s, 5, 64)),
                lambda s, g: (_x(s, g, (2, 3), (64, 64)), _x(s, g, (2, 4), (64, 64))),
            ),
        ),
        Layer(
            "Upsample (nearest)",
            _NN,
            "torch/nn/modules/upsampling.py",
            "Upsample",
            _BSD,
            _module(lambda s: nn.Upsample(scale_factor=2), lambda s, g: (_x(s, g, (1, 2, 3), (16, 64, 256)),)),
        ),
        Layer(
            "GMM log-likelihood (MixtureSameFamily)",
            _NN,
            "torch/distributions/mixture_same_family.py",
            "MixtureSameFamily.log_prob",
            _BSD,
            lambda s, g: (
                gmm_negative_log_likelihood,
                (
                    _x(s, g, (3,), (64,)),
                    _x(s, g, (3, 2), (64, 32)),
                    _x(s, g, (3, 2), (64, 32)),
                    _x(s, g, (5, 2), (1024, 32)),
                ),
            ),
        ),
    ]
    return out


def _rnn(kind: type[nn.Module]) -> Callable[[str], nn.Module]:
    return lambda s: kind(_pick(s, 4, 256), _pick(s, 5, 256), batch_first=True)


def _sequence(size: str, g: torch.Generator) -> tuple[torch.Tensor]:
    return (_x(size, g, (2, 3, 4), (16, 32, 256)),)


class _LSTMCell(nn.LSTMCell):
    """``nn.LSTMCell`` called with the state as two arguments (its forward takes a tuple)."""

    def forward(self, x: torch.Tensor, h: torch.Tensor, c: torch.Tensor) -> Any:  # type: ignore[override]
        return super().forward(x, (h, c))


def gmm_negative_log_likelihood(logits: torch.Tensor, means: torch.Tensor, log_scales: torch.Tensor, x: torch.Tensor):  # type: ignore[no-untyped-def]
    """The objective of a Gaussian mixture with diagonal covariances, as torch.distributions
    computes it (``MixtureSameFamily.log_prob`` of ``Independent(Normal)`` components)."""
    mixture = torch.distributions.Categorical(logits=logits, validate_args=False)
    components = torch.distributions.Independent(
        torch.distributions.Normal(means, log_scales.exp(), validate_args=False), 1, validate_args=False
    )
    gmm = torch.distributions.MixtureSameFamily(mixture, components, validate_args=False)
    return -gmm.log_prob(x).sum()  # type: ignore[no-untyped-call]


def _pair(size: str, g: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    return _x(size, g, (4, 6), (64, 1024)), _x(size, g, (4, 6), (64, 1024))


def _hf(module: str) -> Any:
    """A module of the ``transformers`` package (optional: its layers are in the suite when it is
    installed, :func:`available`)."""
    return importlib.import_module(module)


_HF = "huggingface/transformers"
_APACHE = "Apache-2.0"


def _llama_config(size: str) -> Any:
    return _hf("transformers").LlamaConfig(
        hidden_size=_pick(size, 8, 256),
        intermediate_size=_pick(size, 16, 688),
        num_attention_heads=2,
        num_key_value_heads=2,
        head_dim=_pick(size, 4, 128),
        attn_implementation="eager",
        attention_dropout=0.0,
        max_position_embeddings=_pick(size, 16, 256),
    )


def _gpt2_config(size: str) -> Any:
    return _hf("transformers").GPT2Config(
        n_embd=_pick(size, 8, 256),
        n_head=2,
        n_positions=_pick(size, 16, 256),
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
    return (_randn(g, b, t, width),)


def _transformers_layers() -> list[Layer]:
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

    llama_width = width(lambda s: _pick(s, 8, 256))
    gpt2_width = width(lambda s: _pick(s, 8, 256))
    out = [
        Layer(
            "Llama RMSNorm",
            _HF,
            llama,
            "LlamaRMSNorm",
            _APACHE,
            _module(llama_layer("RMSNorm"), llama_width),
            "transformers",
        ),
        Layer(
            "Llama MLP (SwiGLU)",
            _HF,
            llama,
            "LlamaMLP",
            _APACHE,
            _module(llama_layer("MLP"), llama_width),
            "transformers",
        ),
        Layer(
            "Llama attention",
            _HF,
            llama,
            "LlamaAttention",
            _APACHE,
            _module(llama_layer("Attention"), llama_width),
            "transformers",
        ),
        Layer(
            "Llama decoder layer",
            _HF,
            llama,
            "LlamaDecoderLayer",
            _APACHE,
            _module(llama_layer("Decoder"), llama_width),
            "transformers",
        ),
        Layer("GPT-2 MLP", _HF, gpt2, "GPT2MLP", _APACHE, _module(gpt2_layer("MLP"), gpt2_width), "transformers"),
        Layer(
            "GPT-2 attention",
            _HF,
            gpt2,
            "GPT2Attention",
            _APACHE,
            _module(gpt2_layer("Attention"), gpt2_width),
            "transformers",
        ),
        Layer("GPT-2 block", _HF, gpt2, "GPT2Block", _APACHE, _module(gpt2_layer("Block"), gpt2_width), "transformers"),
        Layer(
            "NewGELUActivation",
            _HF,
            "src/transformers/activations.py",
            "NewGELUActivation",
            _APACHE,
            _module(lambda s: _new_gelu(), lambda s, g: (_x(s, g, (4, 8), (64, 3072)),)),
            "transformers",
        ),
    ]
    return out


def _new_gelu() -> nn.Module:
    return _hf("transformers.activations").NewGELUActivation()  # type: ignore[no-any-return]


#: The suite, by name.
SUITE: dict[str, Layer] = {layer.name: layer for layer in [*_torch_layers(), *_transformers_layers()]}


def available(layer: Layer) -> bool:
    """Whether the package of ``layer`` is installed."""
    if layer.package == "torch":
        return True
    try:
        __import__(layer.package)
    except ImportError:
        return False
    return True


def _identifier(name: str) -> str:
    """A parameter's name as a Python identifier: ``0.weight`` is ``p0_weight``."""
    out = name.replace(".", "_")
    return out if out.isidentifier() and not keyword.iskeyword(out) else f"p{out}"


def function(layer: Layer, size: str = "fast", seed: int = 0) -> tuple[Callable[..., Any], tuple[torch.Tensor, ...]]:
    """``layer`` built at ``size`` as a plain function of its parameters then its inputs, and
    arguments for it: ``fn(*args)`` is what the module computes."""
    g = torch.Generator().manual_seed(seed)
    built, inputs = layer.build(size, g)
    if not isinstance(built, nn.Module):
        return built, inputs
    module = built
    names = [n for n, _ in module.named_parameters()]
    values = tuple(p.detach().clone() for _, p in module.named_parameters())
    arg_names = [_identifier(n) for n in names] + [f"input{k}" for k in range(len(inputs))]

    def fn(*args: torch.Tensor) -> Any:
        params = dict(zip(names, args[: len(names)], strict=True))
        return torch.func.functional_call(module, params, tuple(args[len(names) :]))

    fn.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
        [inspect.Parameter(n, inspect.Parameter.POSITIONAL_OR_KEYWORD) for n in arg_names]
    )
    fn.__name__ = "".join(ch if ch.isalnum() else "_" for ch in layer.symbol)
    return fn, values + tuple(inputs)
