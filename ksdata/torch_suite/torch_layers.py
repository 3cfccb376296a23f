"""The suite's layers from PyTorch itself (pytorch/pytorch, BSD-3-Clause): modules, losses and
distributions, run from the installed package."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch import nn
from torch.nn import functional as F

from ksdata.torch_suite.shapes import (
    D,
    Layer,
    loss_layer,
    module_layer,
    pick,
    probabilities,
    signs,
    sized,
    targets,
)

_NN = "pytorch/pytorch"
_BSD = "BSD-3-Clause"
_LOSS = "torch/nn/modules/loss.py"


def torch_layers() -> list[Layer]:
    T, C = 16, 8  # fast sequence length and channels
    out = [
        Layer(
            "Linear",
            _NN,
            "torch/nn/modules/linear.py",
            "Linear",
            _BSD,
            module_layer(
                lambda s: nn.Linear(pick(s, 8, 768), pick(s, 6, 768)), lambda s, g: (sized(s, g, (4, 8), (64, 768)),)
            ),
        ),
        Layer(
            "LayerNorm",
            _NN,
            "torch/nn/modules/normalization.py",
            "LayerNorm",
            _BSD,
            module_layer(lambda s: nn.LayerNorm(pick(s, 8, 768)), lambda s, g: (sized(s, g, (4, 8), (64, 768)),)),
        ),
        Layer(
            "RMSNorm",
            _NN,
            "torch/nn/modules/normalization.py",
            "RMSNorm",
            _BSD,
            module_layer(
                lambda s: nn.RMSNorm(pick(s, 8, 768), eps=1e-6), lambda s, g: (sized(s, g, (4, 8), (64, 768)),)
            ),
        ),
        Layer(
            "GroupNorm",
            _NN,
            "torch/nn/modules/normalization.py",
            "GroupNorm",
            _BSD,
            module_layer(
                lambda s: nn.GroupNorm(2, pick(s, 4, 64)), lambda s, g: (sized(s, g, (2, 4, 5), (16, 64, 128)),)
            ),
        ),
        Layer(
            "BatchNorm1d (eval)",
            _NN,
            "torch/nn/modules/batchnorm.py",
            "BatchNorm1d",
            _BSD,
            module_layer(
                lambda s: nn.BatchNorm1d(pick(s, 4, 256)).eval(), lambda s, g: (sized(s, g, (3, 4), (64, 256)),)
            ),
        ),
        Layer(
            "RNNCell",
            _NN,
            "torch/nn/modules/rnn.py",
            "RNNCell",
            _BSD,
            module_layer(
                lambda s: nn.RNNCell(pick(s, 5, 256), pick(s, 6, 256)),
                lambda s, g: (sized(s, g, (3, 5), (64, 256)), sized(s, g, (3, 6), (64, 256))),
            ),
        ),
        Layer(
            "GRUCell",
            _NN,
            "torch/nn/modules/rnn.py",
            "GRUCell",
            _BSD,
            module_layer(
                lambda s: nn.GRUCell(pick(s, 5, 256), pick(s, 6, 256)),
                lambda s, g: (sized(s, g, (3, 5), (64, 256)), sized(s, g, (3, 6), (64, 256))),
            ),
        ),
        Layer(
            "LSTMCell",
            _NN,
            "torch/nn/modules/rnn.py",
            "LSTMCell",
            _BSD,
            module_layer(
                lambda s: _LSTMCell(pick(s, 5, 256), pick(s, 6, 256)),
                lambda s, g: (
                    sized(s, g, (3, 5), (64, 256)),
                    sized(s, g, (3, 6), (64, 256)),
                    sized(s, g, (3, 6), (64, 256)),
                ),
            ),
        ),
        Layer(
            "MultiheadAttention",
            _NN,
            "torch/nn/modules/activation.py",
            "MultiheadAttention",
            _BSD,
            module_layer(
                lambda s: nn.MultiheadAttention(pick(s, C, 256), 2, batch_first=True),
                lambda s, g: (sized(s, g, (2, 5, C), (16, 64, 256)),) * 3,
            ),
        ),
        Layer(
            "TransformerEncoderLayer",
            _NN,
            "torch/nn/modules/transformer.py",
            "TransformerEncoderLayer",
            _BSD,
            module_layer(
                lambda s: nn.TransformerEncoderLayer(
                    pick(s, C, 256), 2, pick(s, 16, 1024), dropout=0.0, activation="gelu", batch_first=True
                ),
                lambda s, g: (sized(s, g, (2, 5, C), (16, 64, 256)),),
            ),
        ),
        Layer(
            "Conv1d",
            _NN,
            "torch/nn/modules/conv.py",
            "Conv1d",
            _BSD,
            module_layer(
                lambda s: nn.Conv1d(pick(s, 3, 64), pick(s, 4, 64), 3, padding=2, dilation=2),
                lambda s, g: (sized(s, g, (2, 3, T), (16, 64, 256)),),
            ),
        ),
        Layer(
            "Conv2d",
            _NN,
            "torch/nn/modules/conv.py",
            "Conv2d",
            _BSD,
            module_layer(
                lambda s: nn.Conv2d(pick(s, 2, 32), pick(s, 3, 64), 3, padding=1, stride=2),
                lambda s, g: (sized(s, g, (2, 2, 6, 6), (8, 32, 32, 32)),),
            ),
        ),
        Layer(
            "Mish",
            _NN,
            "torch/nn/modules/activation.py",
            "Mish",
            _BSD,
            module_layer(lambda s: nn.Mish(), lambda s, g: (sized(s, g, (4, 8), (64, 1024)),)),
        ),
        Layer(
            "ELU",
            _NN,
            "torch/nn/modules/activation.py",
            "ELU",
            _BSD,
            module_layer(lambda s: nn.ELU(), lambda s, g: (sized(s, g, (4, 8), (64, 1024)),)),
        ),
        Layer(
            "CrossEntropyLoss (ignore_index)",
            _NN,
            _LOSS,
            "CrossEntropyLoss",
            _BSD,
            loss_layer(
                lambda: nn.CrossEntropyLoss(ignore_index=-1),
                lambda s, g: (sized(s, g, (6, 5), (512, 1000)), targets(s, g, pick(s, 6, 512), pick(s, 5, 1000), -1)),
            ),
        ),
        Layer(
            "CrossEntropyLoss (label_smoothing)",
            _NN,
            _LOSS,
            "CrossEntropyLoss",
            _BSD,
            loss_layer(
                lambda: nn.CrossEntropyLoss(label_smoothing=0.1),
                lambda s, g: (sized(s, g, (6, 5), (512, 1000)), targets(s, g, pick(s, 6, 512), pick(s, 5, 1000))),
            ),
        ),
        Layer(
            "NLLLoss",
            _NN,
            _LOSS,
            "NLLLoss",
            _BSD,
            loss_layer(
                nn.NLLLoss,
                lambda s, g: (sized(s, g, (6, 5), (512, 1000)), targets(s, g, pick(s, 6, 512), pick(s, 5, 1000))),
            ),
        ),
        Layer("MSELoss", _NN, _LOSS, "MSELoss", _BSD, loss_layer(nn.MSELoss, lambda s, g: _pair(s, g))),
        Layer("L1Loss", _NN, _LOSS, "L1Loss", _BSD, loss_layer(nn.L1Loss, lambda s, g: _pair(s, g))),
        Layer("SmoothL1Loss", _NN, _LOSS, "SmoothL1Loss", _BSD, loss_layer(nn.SmoothL1Loss, lambda s, g: _pair(s, g))),
        Layer("HuberLoss", _NN, _LOSS, "HuberLoss", _BSD, loss_layer(lambda: nn.HuberLoss(delta=0.5), _pair)),
        Layer(
            "BCEWithLogitsLoss",
            _NN,
            _LOSS,
            "BCEWithLogitsLoss",
            _BSD,
            loss_layer(
                nn.BCEWithLogitsLoss,
                lambda s, g: (sized(s, g, (4, 6), (64, 1024)), probabilities(g, *pick(s, (4, 6), (64, 1024)))),
            ),
        ),
        Layer(
            "BCELoss",
            _NN,
            _LOSS,
            "BCELoss",
            _BSD,
            loss_layer(
                nn.BCELoss,
                lambda s, g: (
                    probabilities(g, *pick(s, (4, 6), (64, 1024))),
                    probabilities(g, *pick(s, (4, 6), (64, 1024))),
                ),
            ),
        ),
        Layer(
            "KLDivLoss",
            _NN,
            _LOSS,
            "KLDivLoss",
            _BSD,
            loss_layer(
                lambda: nn.KLDivLoss(reduction="batchmean"),
                lambda s, g: (
                    F.log_softmax(sized(s, g, (4, 6), (64, 1024)), -1),
                    F.softmax(sized(s, g, (4, 6), (64, 1024)), -1),
                ),
            ),
        ),
        Layer(
            "GaussianNLLLoss",
            _NN,
            _LOSS,
            "GaussianNLLLoss",
            _BSD,
            loss_layer(nn.GaussianNLLLoss, lambda s, g: (*_pair(s, g), probabilities(g, *pick(s, (4, 6), (64, 1024))))),
        ),
        Layer(
            "PoissonNLLLoss",
            _NN,
            _LOSS,
            "PoissonNLLLoss",
            _BSD,
            loss_layer(
                nn.PoissonNLLLoss,
                lambda s, g: (sized(s, g, (4, 6), (64, 1024)), probabilities(g, *pick(s, (4, 6), (64, 1024))) * 5),
            ),
        ),
        Layer(
            "CosineEmbeddingLoss",
            _NN,
            _LOSS,
            "CosineEmbeddingLoss",
            _BSD,
            loss_layer(
                lambda: nn.CosineEmbeddingLoss(margin=0.1),
                lambda s, g: (*_pair(s, g), signs(g, pick(s, 4, 64))),
            ),
        ),
        Layer(
            "MarginRankingLoss",
            _NN,
            _LOSS,
            "MarginRankingLoss",
            _BSD,
            loss_layer(
                lambda: nn.MarginRankingLoss(margin=0.2),
                lambda s, g: (sized(s, g, (6,), (4096,)), sized(s, g, (6,), (4096,)), signs(g, pick(s, 6, 4096))),
            ),
        ),
        Layer(
            "TripletMarginLoss",
            _NN,
            _LOSS,
            "TripletMarginLoss",
            _BSD,
            loss_layer(nn.TripletMarginLoss, lambda s, g: (*_pair(s, g), sized(s, g, (4, 6), (64, 1024)))),
        ),
        Layer(
            "SoftMarginLoss",
            _NN,
            _LOSS,
            "SoftMarginLoss",
            _BSD,
            loss_layer(
                nn.SoftMarginLoss,
                lambda s, g: (sized(s, g, (4, 6), (64, 1024)), torch.sign(sized(s, g, (4, 6), (64, 1024)))),
            ),
        ),
        Layer(
            "MultiLabelSoftMarginLoss",
            _NN,
            _LOSS,
            "MultiLabelSoftMarginLoss",
            _BSD,
            loss_layer(
                nn.MultiLabelSoftMarginLoss,
                lambda s, g: (sized(s, g, (4, 6), (64, 1024)), (sized(s, g, (4, 6), (64, 1024)) > 0).to(D)),
            ),
        ),
        Layer("LSTM", _NN, "torch/nn/modules/rnn.py", "LSTM", _BSD, module_layer(_rnn(nn.LSTM), _sequence)),
        Layer("GRU", _NN, "torch/nn/modules/rnn.py", "GRU", _BSD, module_layer(_rnn(nn.GRU), _sequence)),
        Layer("RNN", _NN, "torch/nn/modules/rnn.py", "RNN", _BSD, module_layer(_rnn(nn.RNN), _sequence)),
        Layer(
            "TransformerDecoderLayer",
            _NN,
            "torch/nn/modules/transformer.py",
            "TransformerDecoderLayer",
            _BSD,
            module_layer(
                lambda s: nn.TransformerDecoderLayer(
                    pick(s, C, 256), 2, pick(s, 16, 1024), dropout=0.0, batch_first=True
                ),
                lambda s, g: (sized(s, g, (2, 3, C), (16, 64, 256)), sized(s, g, (2, 4, C), (16, 64, 256))),
            ),
        ),
        Layer(
            "Embedding",
            _NN,
            "torch/nn/modules/sparse.py",
            "Embedding",
            _BSD,
            module_layer(
                lambda s: nn.Embedding(pick(s, 10, 50304), pick(s, 4, 256)),
                lambda s, g: (torch.randint(0, pick(s, 10, 50304), pick(s, (2, 3), (8, 256)), generator=g),),
            ),
        ),
        Layer(
            "InstanceNorm1d",
            _NN,
            "torch/nn/modules/instancenorm.py",
            "InstanceNorm1d",
            _BSD,
            module_layer(
                lambda s: nn.InstanceNorm1d(pick(s, 3, 64), affine=True),
                lambda s, g: (sized(s, g, (2, 3, 6), (16, 64, 256)),),
            ),
        ),
        Layer(
            "LocalResponseNorm",
            _NN,
            "torch/nn/modules/normalization.py",
            "LocalResponseNorm",
            _BSD,
            module_layer(lambda s: nn.LocalResponseNorm(2), lambda s, g: (sized(s, g, (2, 3, 6), (16, 64, 256)),)),
        ),
        Layer(
            "MaxPool2d",
            _NN,
            "torch/nn/modules/pooling.py",
            "MaxPool2d",
            _BSD,
            module_layer(
                lambda s: nn.MaxPool2d(3, 2, padding=1), lambda s, g: (sized(s, g, (2, 2, 7, 7), (8, 64, 56, 56)),)
            ),
        ),
        Layer(
            "AvgPool2d",
            _NN,
            "torch/nn/modules/pooling.py",
            "AvgPool2d",
            _BSD,
            module_layer(lambda s: nn.AvgPool2d(2), lambda s, g: (sized(s, g, (2, 2, 6, 6), (8, 64, 56, 56)),)),
        ),
        Layer(
            "GLU",
            _NN,
            "torch/nn/modules/activation.py",
            "GLU",
            _BSD,
            module_layer(lambda s: nn.GLU(), lambda s, g: (sized(s, g, (4, 8), (64, 2048)),)),
        ),
        Layer(
            "CosineSimilarity",
            _NN,
            "torch/nn/modules/distance.py",
            "CosineSimilarity",
            _BSD,
            module_layer(lambda s: nn.CosineSimilarity(), lambda s, g: _pair(s, g)),
        ),
        Layer(
            "MultiMarginLoss",
            _NN,
            _LOSS,
            "MultiMarginLoss",
            _BSD,
            loss_layer(
                nn.MultiMarginLoss,
                lambda s, g: (sized(s, g, (6, 5), (512, 1000)), targets(s, g, pick(s, 6, 512), pick(s, 5, 1000))),
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
            module_layer(
                lambda s: nn.ConvTranspose1d(pick(s, 2, 64), pick(s, 3, 64), 3),
                lambda s, g: (sized(s, g, (2, 2, 5), (16, 64, 256)),),
            ),
        ),
        Layer(
            "CTCLoss",
            _NN,
            _LOSS,
            "CTCLoss",
            _BSD,
            loss_layer(
                nn.CTCLoss,
                lambda s, g: (
                    F.log_softmax(sized(s, g, (6, 2, 5), (50, 16, 20)), -1),
                    torch.randint(1, pick(s, 5, 20), (pick(s, 2, 16), pick(s, 3, 30)), generator=g),
                    torch.full((pick(s, 2, 16),), pick(s, 6, 50)),
                    torch.full((pick(s, 2, 16),), pick(s, 3, 30)),
                ),
            ),
        ),
        Layer(
            "Bilinear",
            _NN,
            "torch/nn/modules/linear.py",
            "Bilinear",
            _BSD,
            module_layer(
                lambda s: nn.Bilinear(pick(s, 3, 64), pick(s, 4, 64), pick(s, 5, 64)),
                lambda s, g: (sized(s, g, (2, 3), (64, 64)), sized(s, g, (2, 4), (64, 64))),
            ),
        ),
        Layer(
            "Upsample (nearest)",
            _NN,
            "torch/nn/modules/upsampling.py",
            "Upsample",
            _BSD,
            module_layer(lambda s: nn.Upsample(scale_factor=2), lambda s, g: (sized(s, g, (1, 2, 3), (16, 64, 256)),)),
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
                    sized(s, g, (3,), (64,)),
                    sized(s, g, (3, 2), (64, 32)),
                    sized(s, g, (3, 2), (64, 32)),
                    sized(s, g, (5, 2), (1024, 32)),
                ),
            ),
        ),
    ]
    return out


def _rnn(kind: type[nn.Module]) -> Callable[[str], nn.Module]:
    return lambda s: kind(pick(s, 4, 256), pick(s, 5, 256), batch_first=True)


def _sequence(size: str, g: torch.Generator) -> tuple[torch.Tensor]:
    return (sized(size, g, (2, 3, 4), (16, 32, 256)),)


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
    return sized(size, g, (4, 6), (64, 1024)), sized(size, g, (4, 6), (64, 1024))
