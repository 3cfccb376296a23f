"""Fitting the value network to search targets (section 3.2 and Table 2).

A sample is a visited state: an expression, the steps left ``t_s`` it was reached with, and its
target ``V_target(s)``, the largest cost drop found from it within ``t_s`` steps.  The loss is the
Huber loss between the network's per-step output for ``t_s`` and ``V_target(s) / t_s``; Adam with
learning rate 1e-4, minibatches of 16.  A sample may also carry the targets for fewer steps
(``shorter``), which are fitted the same way from the same forward pass: the network gives every
column at once.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F

from gnn.networks import Network
from gnn.sample import Sample
from training.ranking import SiblingGroup, ranking_loss


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
            for t, v in s.fitted(depth, self.network.config.cost_normalization, self.network.config.cost_model):
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
        return float(np.mean([self._pass(usable, rng) for _ in range(epochs)]))

    def fit_to_plateau(
        self, samples: Sequence[Sample], max_passes: int, patience: int, rng: np.random.Generator
    ) -> FitReport:
        """Passes over most of ``samples`` until the loss on the rest (a tenth, at least one sample,
        drawn by ``rng``) has not improved for ``patience`` passes, or ``max_passes``; the network
        keeps the weights of its best pass.  As the reference fits each generation's dataset."""
        usable = [s for s in samples if s.steps_left > 0]
        if len(usable) < 2:
            return FitReport(self.fit(usable, 1, rng) if usable else 0.0, float("nan"), len(usable), 0)
        order = rng.permutation(len(usable))
        held = max(1, len(usable) // 10)
        check = [usable[i] for i in order[:held]]
        train = [usable[i] for i in order[held:]]
        best_loss, best_pass, best_state = self.held_out_loss(check), 0, copy.deepcopy(self.network.state_dict())
        losses: list[float] = []
        for n in range(1, max_passes + 1):
            losses.append(self._pass(train, rng))
            loss = self.held_out_loss(check)
            if loss < best_loss:
                best_loss, best_pass, best_state = loss, n, copy.deepcopy(self.network.state_dict())
            elif n - best_pass >= patience:
                break
        self.network.load_state_dict(best_state)
        return FitReport(float(np.mean(losses)), best_loss, len(losses), best_pass)

    def held_out_loss(self, samples: Sequence[Sample]) -> float:
        """The loss on ``samples`` in eval mode (no dropout), without fitting them."""
        self.network.eval()
        with torch.no_grad():
            total = sum(
                float(self.loss(samples[i : i + self.batch_size])) * len(samples[i : i + self.batch_size])
                for i in range(0, len(samples), self.batch_size)
            )
        return total / len(samples)

    def fit_ranked(
        self,
        samples: Sequence[Sample],
        groups: Sequence[SiblingGroup],
        rng: np.random.Generator,
        weight: float,
        temperature: float = 1.0,
        groups_per_step: int = 4,
    ) -> tuple[float, float]:
        """One pass over ``groups`` in a random order, ``groups_per_step`` at a time, each step with a
        minibatch of ``samples`` drawn at random: the loss is the regression loss plus ``weight``
        times :func:`training.ranking.ranking_loss`.  The mean regression and ranking losses."""
        usable = [s for s in samples if s.steps_left > 0]
        if not usable or not groups:
            raise ValueError("ranked fitting needs samples and sibling groups")
        self.network.train()
        fitted, ranked = [], []
        order = rng.permutation(len(groups))
        for start in range(0, len(order), groups_per_step):
            batch = [usable[i] for i in rng.integers(len(usable), size=self.batch_size)]
            chosen = [groups[i] for i in order[start : start + groups_per_step]]
            self.optimizer.zero_grad()
            regression = self.loss(batch)
            ranking = ranking_loss(self.network, chosen, temperature)
            (regression + weight * ranking).backward()  # type: ignore[no-untyped-call]
            self.optimizer.step()
            fitted.append(float(regression.detach()))
            ranked.append(float(ranking.detach()))
        return float(np.mean(fitted)), float(np.mean(ranked))

    def _pass(self, usable: Sequence[Sample], rng: np.random.Generator) -> float:
        """One pass over ``usable`` in minibatches of a random order; the mean loss."""
        self.network.train()
        losses = []
        order = rng.permutation(len(usable))
        for start in range(0, len(order), self.batch_size):
            batch = [usable[i] for i in order[start : start + self.batch_size]]
            self.optimizer.zero_grad()
            loss = self.loss(batch)
            loss.backward()  # type: ignore[no-untyped-call]
            self.optimizer.step()
            losses.append(float(loss.detach()))
        return float(np.mean(losses))


@dataclass(frozen=True)
class FitReport:
    """What :meth:`Fitter.fit_to_plateau` did."""

    #: Mean training loss over the passes made, and the best held-out loss (kept).
    loss: float
    held_out_loss: float
    passes: int
    #: The pass whose weights were kept (0: none improved on the weights it started with).
    best_pass: int
