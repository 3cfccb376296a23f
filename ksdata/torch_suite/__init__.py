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

import inspect
import keyword
from collections.abc import Callable
from typing import Any

import torch
from torch import nn

from ksdata.torch_suite.shapes import D, Layer
from ksdata.torch_suite.torch_layers import gmm_negative_log_likelihood, torch_layers
from ksdata.torch_suite.transformers_layers import transformers_layers

__all__ = ["SUITE", "D", "Layer", "available", "function", "gmm_negative_log_likelihood"]

#: The suite, by name.
SUITE: dict[str, Layer] = {layer.name: layer for layer in [*torch_layers(), *transformers_layers()]}


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
