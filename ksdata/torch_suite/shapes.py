"""What a layer of the suite is, and the shapes and values it is built with."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

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


def randn(g: torch.Generator, *shape: int) -> torch.Tensor:
    return torch.randn(shape, generator=g, dtype=D)


def pick(size: str, fast: Any, realistic: Any) -> Any:
    return fast if size == "fast" else realistic


def module_layer(make: Callable[[str], nn.Module], inputs: Callable[[str, torch.Generator], tuple[torch.Tensor, ...]]):  # type: ignore[no-untyped-def]
    def build(size: str, g: torch.Generator) -> Built:
        torch.manual_seed(0)
        m = make(size).to(D)
        with torch.no_grad():  # parameters of a trained model's scale, not all zeros and ones
            for p in m.parameters():
                p.copy_(torch.randn(p.shape, generator=g, dtype=D) * (1.0 / math.sqrt(max(1, p.shape[-1]))))
        return m, inputs(size, g)

    return build


def loss_layer(make: Callable[[], nn.Module], inputs: Callable[[str, torch.Generator], tuple[torch.Tensor, ...]]):  # type: ignore[no-untyped-def]
    return lambda size, g: (make(), inputs(size, g))


def sized(size: str, g: torch.Generator, fast: tuple[int, ...], real: tuple[int, ...]) -> torch.Tensor:
    return randn(g, *pick(size, fast, real))


def targets(size: str, g: torch.Generator, n: int, classes: int, ignore: int | None = None) -> torch.Tensor:
    t = torch.randint(0, classes, (n,), generator=g)
    if ignore is not None:
        t[::3] = ignore
    return t


def probabilities(g: torch.Generator, *shape: int) -> torch.Tensor:
    return torch.rand(shape, generator=g, dtype=D) * 0.98 + 0.01


def signs(g: torch.Generator, n: int) -> torch.Tensor:
    return torch.randint(0, 2, (n,), generator=g).to(D) * 2 - 1
