"""Algorithm 1: search the training expressions with the current value function, fit it to the
targets the searches found, evaluate; epoch after epoch, checkpointed so that a run resumes.

Everything random comes from the config's seed (numpy for choosing expressions and shuffling,
torch for initialisation and dropout), and both generators' states are in each checkpoint, so a
run killed at any point and resumed ends with the same numbers as an uninterrupted one.  The
searches run where ``training.executor`` says (training/executors.py); the generator draws their seeds
before them and their samples after them, in order, so the numbers are the same wherever they ran.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from contextlib import closing
from pathlib import Path
from typing import Any

import numpy as np
import torch

from gnn.model_file import load_weights, save_model_file
from gnn.networks import build_network, value_function
from gnn.sample import Sample
from knossos.errors import KsUsageError
from knossos.expr import Expr
from knossos.perf import fewer_gc_pauses
from ksdata.loader import Target, load_targets
from search.settings import SearchName
from search.value import ValueFunction
from training.checkpoint import load_checkpoint
from training.config import TrainConfig, config_dict, flatten_keys
from training.executors import make_executor
from training.fit import Fitter
from training.metrics import EpochMetrics, Evaluation, write_metrics
from training.samples import limit_samples
from training.samples import samples_of as samples_of
from training.search_jobs import SearchJob

CHECKPOINT = "checkpoint.pt"
WEIGHTS = "weights"
#: The config keys a resumed run may change: more epochs, and where the searches run (which
#: changes no number).
MAY_CHANGE = ("training.epochs", "training.executor", "training.workers", "training.ray_address")

#: Reports progress: (what, done, total).
TrainingProgress = Callable[[str, int, int], None]


def weights_path(run: Path, epoch: int) -> Path:
    """Where a run with ``training.keep_weights`` keeps the model of ``epoch`` (1-based)."""
    return run / WEIGHTS / f"epoch_{epoch:03d}.pt"


def _defaults() -> dict[str, Any]:
    """The default of every config field that has one, as flat dotted keys."""
    out: dict[str, Any] = {}
    for section in dataclasses.fields(TrainConfig):
        if isinstance(section.default_factory, type):  # search, model, training (not data)
            out.update(flatten_keys({section.name: config_dict(section.default_factory())}))
    return out


class BestTargets:
    """The best value target any search has found for each expression and number of steps left.

    A target is a cost reduction some search reached, so it is a lower bound of the optimal value:
    the largest one seen is the tightest.  Fitting to it keeps what an earlier epoch's search found
    when a later search of the same expression misses that path (without it, the network unlearns
    a discovery as soon as the replay buffer has moved on).  Values are monotone in the steps left
    (one more step can do nothing), so the best for ``t`` is also the best over every ``t' <= t``.
    """

    def __init__(self, depth: int) -> None:
        self.depth = depth
        #: expression -> best target for t = 0..depth (0 where none was seen)
        self.table: dict[Expr, np.ndarray] = {}
        #: expression -> the most steps any of its samples was fitted for (its row beyond that
        #: is only carried over from fewer steps, never looked at)
        self.horizon: dict[Expr, int] = {}

    def merge(self, samples: list[Sample]) -> list[Sample]:
        """Record ``samples``' targets; the samples again, each with the best targets known for it."""
        for s in samples:
            row = self.table.get(s.expr)
            if row is None:
                row = self.table[s.expr] = np.zeros(self.depth + 1)
            for t, target in (*enumerate(s.shorter, start=1), (s.steps_left, s.target)):
                t = min(t, self.depth)
                if target > row[t]:
                    row[t:] = np.maximum(row[t:], target)
            self.horizon[s.expr] = max(self.horizon.get(s.expr, 0), min(s.steps_left, self.depth))
        return [self._best(s.expr, s.steps_left, len(s.shorter)) for s in samples]

    def underestimated(self, value: ValueFunction, exclude: set[Expr], limit: int) -> list[Sample]:
        """Up to ``limit`` remembered states, not in ``exclude``, whose best known targets ``value``
        falls furthest below, as samples of every column up to their horizon.

        A target is a cost reduction a search reached, so a value below it is wrong for sure; a
        state that later searches no longer visit is never fitted again otherwise, and the network
        forgets the way to it (prioritised replay, with the value gap as the priority).
        """
        exprs = [e for e in self.table if e not in exclude]
        if not exprs or limit <= 0:
            return []
        rows = np.stack([self.table[e] for e in exprs])
        horizons = np.array([self.horizon.get(e, self.depth) for e in exprs])
        looked = np.arange(self.depth + 1)[None, :] <= horizons[:, None]
        looked[:, 0] = False
        gaps = np.where(looked, rows - value.values(exprs, self.depth), -np.inf).max(axis=1)
        order = np.argsort(-gaps, kind="stable")[:limit]
        horizon = [self.horizon.get(exprs[i], self.depth) for i in order]
        return [self._best(exprs[i], h, h - 1) for i, h in zip(order, horizon, strict=True) if gaps[i] > 0]

    def _best(self, e: Expr, steps_left: int, shorter: int) -> Sample:
        """A sample of ``e``'s best known targets for ``steps_left`` and for 1 .. ``shorter`` steps."""
        row = self.table[e]
        return Sample(
            e,
            steps_left,
            float(row[min(steps_left, self.depth)]),
            tuple(float(row[min(t, self.depth)]) for t in range(1, shorter + 1)),
        )


#: What a checkpoint needs to be resumed, and of which type (load_checkpoint checked the rest).
RESUMABLE: dict[str, type] = {
    "config": dict,
    "optimizer": dict,
    "numpy_rng": dict,
    "torch_rng": torch.Tensor,
    "epoch": int,
    "history": list,
    "replay": list,
}


def check_resumable(state: dict[str, Any], label: str) -> None:
    """Refuse, in one line, a checkpoint that lacks the training state train.py --resume needs (an
    exported model has none) or holds it in other types."""
    for key, kind in RESUMABLE.items():
        if key not in state:
            raise KsUsageError(
                f"not a training checkpoint: it has no {key} to resume from (an exported model?)", None, label
            )
        if not isinstance(state[key], kind) or isinstance(state[key], bool):
            raise KsUsageError(
                f"the checkpoint's training state is not usable: {key}: expected {kind.__name__}, "
                f"not {type(state[key]).__name__}",
                None,
                label,
            )
    for key in ("best_targets", "best_horizons"):  # absent from checkpoints written before them
        if not isinstance(state.get(key, {}), dict):
            raise KsUsageError(f"the checkpoint's training state is not usable: {key}: expected dict", None, label)
    if state["epoch"] < 0:
        raise KsUsageError(f"the checkpoint's training state is not usable: epoch {state['epoch']} < 0", None, label)


class Trainer:
    def __init__(self, config: TrainConfig, out: Path, progress: TrainingProgress | None = None) -> None:
        self.config = config
        self.out = out
        self.progress = progress
        self.train_set = load_targets(config.data.train, "data.train")
        self.test_set = load_targets(config.data.test, "data.test")
        names = {t.name for t in self.train_set}
        for name in config.training.later_defs:
            if name not in names:
                raise KsUsageError(f"training.later_defs: '{name}' is not one of the training expressions (data.train)")
        if config.training.later_from_epoch > 1 and names <= set(config.training.later_defs):
            raise KsUsageError(
                "training.later_defs: names every training expression; nothing is left for the first epochs"
            )
        config.plan.rule_set()  # an unknown rule set is refused before any search
        torch.manual_seed(config.training.seed)
        self.rng = np.random.default_rng(config.training.seed)
        self.network = build_network(config.model)
        self.fitter = Fitter(self.network, lr=config.training.lr, batch_size=config.training.batch_size)
        self.epoch = 0  # epochs completed
        self.history: list[EpochMetrics] = []
        self.replay: list[list[Sample]] = []
        self.best = BestTargets(config.search.depth)
        self.executor = make_executor(config)

    # -- checkpoints -------------------------------------------------------------------------
    def state(self) -> dict[str, Any]:
        return {
            "config": self.config.to_dict(),
            "model_config": dataclasses.asdict(self.network.config),
            "model": self.network.state_dict(),
            "optimizer": self.fitter.optimizer.state_dict(),
            "numpy_rng": self.rng.bit_generator.state,
            "torch_rng": torch.get_rng_state(),
            "epoch": self.epoch,
            "history": [m.to_json() for m in self.history],
            "replay": self.replay,
            "best_targets": self.best.table,
            "best_horizons": self.best.horizon,
            "data": {
                "train": [t.name for t in self.train_set],
                "test": [t.name for t in self.test_set],
            },
        }

    def restore(self, state: dict[str, Any]) -> None:
        label = str(self.out / CHECKPOINT)
        check_resumable(state, label)
        # a run may be continued for more epochs; anything else must be as it was
        mine, theirs = flatten_keys(self.config.to_dict()), flatten_keys(state["config"])
        # a key added to the config after the checkpoint was written reads as its default there
        theirs = {**_defaults(), **theirs}
        changed = sorted(k for k in mine.keys() | theirs.keys() if k not in MAY_CHANGE and mine.get(k) != theirs.get(k))
        if changed:
            raise KsUsageError(
                f"the checkpoint was written with a different config ({', '.join(changed)}); "
                "resume with the same one (only training.epochs may grow)",
                None,
                label,
            )
        load_weights(self.network, state["model"], label)
        try:
            self.fitter.optimizer.load_state_dict(state["optimizer"])
        except (ValueError, KeyError, TypeError, RuntimeError) as err:
            raise KsUsageError(f"the checkpoint's optimiser state does not fit: {err}", None, label) from None
        try:
            self.rng.bit_generator.state = state["numpy_rng"]
            torch.set_rng_state(state["torch_rng"])
            self.history = [EpochMetrics.from_json(m) for m in state["history"]]
        except (TypeError, ValueError, KeyError, RuntimeError) as err:
            raise KsUsageError(
                f"the checkpoint's training state is not usable ({type(err).__name__}: {err})", None, label
            ) from None
        self.epoch = state["epoch"]
        self.replay = state["replay"]
        self.best.table = state.get("best_targets", {})
        self.best.horizon = state.get("best_horizons", {})

    def resume(self) -> bool:
        path = self.out / CHECKPOINT
        if not path.exists():
            return False
        self.restore(load_checkpoint(path))
        return True

    def save(self) -> None:
        save_model_file(self.out / CHECKPOINT, self.state())

    def save_weights(self) -> None:
        """The model of the epoch just finished, alone (as ``python -m training.export`` writes it)."""
        state = self.state()
        kept = {key: state[key] for key in ("model", "model_config", "config", "epoch")}
        save_model_file(weights_path(self.out, self.epoch), kept)

    # -- the loop ------------------------------------------------------------------------------
    def value_function(self, scaled: bool = True) -> ValueFunction:
        """The network as search uses it (``scaled``: times search.value_scale) or as it is fitted."""
        # a search does not change the network, so a bfloat16 copy per search is exact enough
        s = self.config.search
        scale = s.value_scale if scaled else 1.0
        return value_function(self.network, precision=s.precision, scale=scale)

    def seeds(self, algorithm: SearchName, n: int) -> list[int]:
        """The seeds of ``n`` searches by ``algorithm``, drawn before they run (only MCTS's are
        drawn: the other searches use none)."""
        return [int(self.rng.integers(2**31)) if algorithm == "mcts" else 0 for _ in range(n)]

    def drawn_from(self) -> list[int]:
        """The training expressions (indices) this epoch may search: all but ``training.later_defs``
        before epoch ``training.later_from_epoch``, all from then on."""
        t = self.config.training
        everything = list(range(len(self.train_set)))
        if self.epoch + 1 >= t.later_from_epoch or not t.later_defs:
            return everything
        later = set(t.later_defs)
        return [i for i in everything if self.train_set[i].name not in later]

    def run_epoch(self) -> EpochMetrics:
        cfg = self.config
        started = time.perf_counter()
        pool = self.drawn_from()
        k = min(cfg.training.exprs_per_epoch, len(pool))
        chosen = sorted(pool[int(i)] for i in self.rng.choice(len(pool), size=k, replace=False))
        samples: list[Sample] = []
        evaluations = 0
        guided = self.epoch >= cfg.training.warmup_epochs
        budget = cfg.search.budget if guided or not cfg.training.warmup_budget else cfg.training.warmup_budget
        # every seed first, then each search's samples drawn in order: the same draws wherever the
        # searches run (as before executors, but for MCTS with samples_per_search, whose seeds and
        # draws alternated)
        seeds = self.seeds(cfg.search.algorithm, len(chosen))
        plan = cfg.plan.overridden(budget=budget)
        jobs = [
            SearchJob(self.train_set[i].expr, plan.overridden(seed=seed), cfg.training.targets)
            for i, seed in zip(chosen, seeds, strict=True)
        ]
        for n, found in enumerate(self.executor.map(self.network if guided else None, jobs)):
            self._report("search", n, len(jobs))
            samples.extend(limit_samples(found.expanded, found.passed_over, cfg.training.samples_per_search, self.rng))
            evaluations += found.evaluations
        if cfg.training.best_targets:
            samples = self.best.merge(samples)
        self.replay = [*self.replay, samples][-cfg.training.replay_epochs :]
        fit_set = [s for epoch in self.replay for s in epoch]
        replayed: list[Sample] = []
        if cfg.training.replay_best:
            self._report("replay", 0, 1)
            fitted = {s.expr for s in fit_set}
            replayed = self.best.underestimated(self.value_function(scaled=False), fitted, cfg.training.replay_best)
        self._report("fit", 0, 1)
        plateau = None
        if cfg.training.fit_patience:
            plateau = self.fitter.fit_to_plateau(
                fit_set + replayed, cfg.training.fit_passes, cfg.training.fit_patience, self.rng
            )
            loss = plateau.loss
        else:
            loss = self.fitter.fit(fit_set + replayed, cfg.training.fit_passes, self.rng)
        on_train = on_test = None
        last = self.epoch + 1 == cfg.training.epochs
        if (self.epoch + 1) % cfg.training.eval_every == 0 or last:
            if cfg.training.eval_train:
                on_train = self.evaluate(self.train_set, "train")
            on_test = self.evaluate(self.test_set, "test")
        return EpochMetrics(
            epoch=self.epoch + 1,
            loss=loss,
            samples=len(samples),
            train_exprs=tuple(self.train_set[i].name for i in chosen),
            train_evaluations=evaluations,
            fit_passes=None if plateau is None else plateau.passes,
            fit_best_pass=None if plateau is None else plateau.best_pass,
            held_out_loss=None if plateau is None else plateau.held_out_loss,
            replayed=len(replayed) if cfg.training.replay_best else None,
            train=on_train,
            test=on_test,
            seconds=time.perf_counter() - started,
        )

    def evaluate(self, targets: list[Target], label: str) -> Evaluation:
        costs, evaluations = [], 0
        s = self.config.search
        seeds = self.seeds(s.test_algorithm, len(targets))
        plan = self.config.plan.overridden(algorithm=s.test_algorithm, budget=s.test_budget)
        jobs = [SearchJob(t.expr, plan.overridden(seed=seed)) for t, seed in zip(targets, seeds, strict=True)]
        for n, r in enumerate(self.executor.map(self.network, jobs)):
            self._report(f"eval {label}", n, len(targets))
            costs.append(r.best_cost)
            evaluations += r.evaluations
        starts = [t.expr.cost for t in targets]
        known = [t.best_known for t in targets]
        ratio_to_best, reached = None, None
        if all(k is not None for k in known):
            ratio_to_best = float(np.mean([c / k for c, k in zip(costs, known, strict=True)]))  # type: ignore[operator]
            reached = int(sum(c <= k + 1e-9 for c, k in zip(costs, known, strict=True)))  # type: ignore[operator]
        return Evaluation(
            best_costs=tuple(costs),
            total_cost=float(sum(costs)),
            mean_ratio_to_start=float(np.mean([c / s for c, s in zip(costs, starts, strict=True)])),
            evaluations=evaluations,
            mean_ratio_to_best_known=ratio_to_best,
            reached_best_known=reached,
        )

    def train(self, on_epoch: Callable[[EpochMetrics], None] | None = None) -> list[EpochMetrics]:
        with fewer_gc_pauses(), closing(self.executor):  # the executor's workers stop with the run
            while self.epoch < self.config.training.epochs:
                metrics = self.run_epoch()
                self.epoch += 1
                self.history.append(metrics)
                if self.config.training.keep_weights:
                    self.save_weights()  # before the checkpoint: a resumed epoch is never without them
                self.save()
                self.write_metrics()
                if on_epoch is not None:
                    on_epoch(metrics)
        return self.history

    def write_metrics(self) -> None:
        write_metrics(self.out, self.history)

    def _report(self, what: str, done: int, total: int) -> None:
        if self.progress is not None:
            self.progress(what, done, total)
