"""Fitting the value network to search targets (section 3.2 and Table 2).

A sample is a visited state: an expression, the steps left ``t_s`` it was reached with, and its
target ``V_target(s)``, the largest cost drop found from it within ``t_s`` steps.  The loss is the
Huber loss between the network's per-step output for ``t_s`` and ``V_target(s) / t_s``; Adam with
learning rate 1e-4, minibatches of 16.  A sample may also carry the targets for fewer steps
(``shorter``), which are fitted the same way from the same forward pass: the network gives every
column at once.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F

from gnn.networks import Network
from knossos.expr import Expr


@dataclass(frozen=True)
class Sample:
    expr: Expr
    steps_left: int
    target: float
    #: Targets for 1 .. steps_left - 1 steps, fitted too (empty: only ``steps_left``'s is).
    shorter: tuple[float, ...] = ()

    def fitted(self, depth: int) -> list[tuple[int, float]]:
        """(steps, normalised target) of every column this sample fits, for a network of ``depth``."""
        top = min(self.steps_left, depth)
        return [(t, v / t) for t, v in enumerate(self.shorter[: top - 1], start=1)] + [
            (top, normalised_target(self, depth))
        ]


def normalised_target(sample: Sample, depth: int | None = None) -> float:
    """What the per-step output for ``t_s`` is fitted to: ``V_target(s) / t_s``.

    A network of ``depth`` outputs reports ``depth`` times its last output for more steps left
    than that (see :mod:`gnn.value`), so there the target is divided by ``depth``.
    """
    t = sample.steps_left if depth is None else min(sample.steps_left, depth)
    return sample.target / t


class Fitter:
    def __init__(self, network: Network, lr: float = 1e-4, batch_size: int = 16, huber_delta: float = 1.0) -> None:
        self.network = network
        self.batch_size = batch_size
        self.huber_delta = huber_delta
        self.optimizer = torch.optim.Adam(network.parameters(), lr=lr)

    def loss(self, batch: Sequence[Sample]) -> torch.Tensor:
        depth = self.network.config.depth
        out = self.network.predict([s.expr for s in batch])
        rows, columns, targets = [], [], []
        for i, s in enumerate(batch):
            for t, v in s.fitted(depth):
                rows.append(i)
                columns.append(t - 1)
                targets.append(v)
        predicted = out[torch.tensor(rows), torch.tensor(columns)]
        wanted = torch.tensor(targets, dtype=predicted.dtype)
        return F.huber_loss(predicted, wanted, delta=self.huber_delta)

    def fit(self, samples: Sequence[Sample], epochs: int, rng: np.random.Generator) -> float:
        """``epochs`` passes over ``samples`` (states with no steps left are skipped); the mean loss."""
        usable = [s for s in samples if s.steps_left > 0]
        if not usable:
            return 0.0
        self.network.train()
        losses = []
        for _ in range(epochs):
            order = rng.permutation(len(usable))
            for start in range(0, len(order), self.batch_size):
                batch = [usable[i] for i in order[start : start + self.batch_size]]
                self.optimizer.zero_grad()
                loss = self.loss(batch)
                loss.backward()  # type: ignore[no-untyped-call]
                self.optimizer.step()
                losses.append(float(loss.detach()))
        return float(np.mean(losses))
