"""training.targets=explored: fit every expanded state for each number of steps the search looked
below it (training.trainer.samples_of, training.fit.Sample.shorter, BestTargets with several columns)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from test_train_cli import metrics, run, train_cmd

from gnn.model import ModelConfig, ValueNetwork
from gnn.sample import Sample
from knossos.errors import KsUsageError
from knossos.parser import parse_expr
from rules.sets import get_rule_set
from search.astar import astar
from search.spec import SearchSpec
from training.config import load_config
from training.fit import Fitter
from training.trainer import BestTargets, samples_of

A = parse_expr("(add x 1.0)")[0]
B = parse_expr("(mul x 2.0)")[0]
START = parse_expr("(add (div (mul x y) (add 1.0 (mul x y))) (mul x y))")[0]


@pytest.fixture(scope="module")
def search():  # type: ignore[no-untyped-def]
    return astar(START, SearchSpec(get_rule_set("binding_simplify_rules"), 6, 400))


def test_explored_samples_are_the_expanded_states_with_every_column_up_to_their_height(search) -> None:  # type: ignore[no-untyped-def]
    vt = search.graph.value_targets()
    row = {e: i for i, e in enumerate(vt.exprs)}
    samples = samples_of(search, "explored")
    assert {s.expr for s in samples} == set(search.graph.edges)  # expanded states with steps left
    assert len(samples) < len(samples_of(search, "reached"))
    for s in samples:
        i = row[s.expr]
        assert 1 <= s.steps_left <= vt.steps_left[i]
        assert s.steps_left == vt.explored[i]
        assert [*s.shorter, s.target] == list(vt.table[i, 1 : s.steps_left + 1])
        assert all(b >= a for a, b in zip(s.shorter, [*s.shorter[1:], s.target]))  # monotone in t
    start = next(s for s in samples if s.expr == START)
    assert start.steps_left == 6 and start.target == search.start_cost - search.best_cost


def test_reached_samples_are_unchanged(search) -> None:  # type: ignore[no-untyped-def]
    vt = search.graph.value_targets()
    samples = samples_of(search)
    assert len(samples) == int(np.sum(vt.steps_left > 0)) and all(s.shorter == () for s in samples)
    with pytest.raises(ValueError, match="unknown target scheme"):
        samples_of(search, "everything")


def test_explored_and_reached_adds_the_states_passed_over_at_their_steps_left(search) -> None:  # type: ignore[no-untyped-def]
    explored = samples_of(search, "explored")
    both = samples_of(search, "explored_and_reached")
    assert both[: len(explored)] == explored
    passed_over = both[len(explored) :]
    expanded = set(search.graph.edges)
    reached = {s.expr: s for s in samples_of(search, "reached")}
    assert passed_over and all(s.expr not in expanded and s == reached[s.expr] for s in passed_over)
    assert {s.expr for s in both} == {e for e, s in reached.items() if s.steps_left > 0} | {s.expr for s in explored}


def test_a_sample_limit_draws_half_expanded_and_half_passed_over(search) -> None:  # type: ignore[no-untyped-def]
    explored = set(samples_of(search, "explored"))
    everything = samples_of(search, "explored_and_reached")
    passed_over = len(everything) - len(explored)
    assert passed_over > len(explored) > 20
    rng = np.random.default_rng(0)
    few = samples_of(search, "explored_and_reached", 20, rng)
    assert len(few) == 20 and set(few) <= set(everything)
    assert sum(s in explored for s in few) == 10
    # few passed-over states: the rest of the limit goes to expanded ones
    assert samples_of(search, "explored", 20, rng) != [] and len(samples_of(search, "explored", 20, rng)) == 20
    assert samples_of(search, "explored_and_reached", 10**6, rng) == everything


def test_a_sample_fits_every_column_it_carries(monkeypatch: pytest.MonkeyPatch) -> None:
    torch.manual_seed(0)
    net = ValueNetwork(ModelConfig(hidden=48, steps=1, depth=4))
    fitter = Fitter(net, huber_delta=1.0)
    table = torch.tensor([[0.0, 1.0, 2.0, 3.0], [10.0, 10.0, 10.0, 10.0]])
    monkeypatch.setattr(net, "forward", lambda graphs: table[: graphs.num_graphs])
    # A fits columns t = 1, 2, 3 to 0/1, 2/2, 9/3: errors 0, 0, 1 (-> 0.5); B fits t = 2 to 20/2
    samples = [Sample(A, 3, 9.0, (0.0, 2.0)), Sample(B, 2, 20.0)]
    assert fitter.loss(samples).item() == pytest.approx(0.5 / 4)
    assert [t for t, _ in samples[0].fitted(4)] == [1, 2, 3]
    assert [t for t, _ in samples[0].fitted(2)] == [1, 2]  # columns beyond the network's depth fold into its last


def test_best_targets_merge_every_column() -> None:
    best = BestTargets(depth=4)
    assert best.merge([Sample(A, 3, 2.0, (0.0, 1.0))]) == [Sample(A, 3, 2.0, (0.0, 1.0))]
    # a later search does better with 1 step, worse with 3: each column keeps its best, monotone in t
    assert best.merge([Sample(A, 3, 0.5, (1.5, 1.5))]) == [Sample(A, 3, 2.0, (1.5, 1.5))]
    assert np.array_equal(best.table[A], [0.0, 1.5, 1.5, 2.0, 2.0])
    assert best.merge([Sample(A, 1, 0.0)]) == [Sample(A, 1, 1.5)]


def test_config_names_an_unknown_scheme() -> None:
    with pytest.raises(KsUsageError, match=r"training.targets: 'all' is not one of reached, explored"):
        load_config("configs/bootstrap.yaml", ["training.targets=all"])


def test_training_with_explored_targets(tmp_path: Path) -> None:
    out = tmp_path / "explored"
    done = run(train_cmd(out, "--set", "training.targets=explored", "--set", "training.best_targets=true"))
    assert done.returncode == 0, done.stderr
    rows = metrics(out)
    assert len(rows) == 2 and all(r["samples"] > 0 for r in rows)


class FixedValue:
    """A value function that estimates ``per_step * t`` for every expression."""

    def __init__(self, per_step: dict[object, float]) -> None:
        self.per_step = per_step

    def values(self, exprs, depth):  # type: ignore[no-untyped-def]
        return np.array([[self.per_step[e] * t for t in range(depth + 1)] for e in exprs])


def test_replay_picks_the_remembered_states_the_network_underestimates_most() -> None:
    C = parse_expr("(sub x 3.0)")[0]
    best = BestTargets(depth=4)
    best.merge([Sample(A, 2, 2.0, (1.0,)), Sample(B, 3, 3.0, (0.0, 0.0)), Sample(C, 1, 0.5)])
    # A: known 1, 2 within 1, 2 steps; estimated 0.5 a step: gap 1.0 (at t = 2, not beyond its horizon)
    # B: known 0, 0, 3; estimated 1.2 a step: gap -0.6 (over-estimates: nothing to replay)
    # C: known 0.5; estimated 0.2: gap 0.3
    value = FixedValue({A: 0.5, B: 1.2, C: 0.2})
    assert best.underestimated(value, set(), 5) == [Sample(A, 2, 2.0, (1.0,)), Sample(C, 1, 0.5)]
    assert best.underestimated(value, set(), 1) == [Sample(A, 2, 2.0, (1.0,))]
    assert best.underestimated(value, {A}, 5) == [Sample(C, 1, 0.5)]
    assert best.underestimated(value, set(), 0) == []


def test_replay_best_needs_best_targets() -> None:
    with pytest.raises(KsUsageError, match=r"training.replay_best: needs training.best_targets"):
        load_config("configs/bootstrap.yaml", ["training.replay_best=10", "training.best_targets=false"])
    with pytest.raises(KsUsageError, match=r"training.replay_best: must be at least 0"):
        load_config("configs/bootstrap.yaml", ["training.replay_best=-1", "training.best_targets=true"])


def test_training_with_replayed_best_targets_resumes_identically(tmp_path: Path) -> None:
    extra = ("--set", "training.targets=explored", "--set", "training.best_targets=true")
    extra += ("--set", "training.replay_best=50")
    whole, split = tmp_path / "whole", tmp_path / "split"
    assert run(train_cmd(whole, *extra)).returncode == 0
    assert run(train_cmd(split, *extra, "--set", "training.epochs=1")).returncode == 0
    done = run(train_cmd(split, *extra, "--resume"))
    assert done.returncode == 0, done.stderr
    strip = [{k: v for k, v in r.items() if k != "seconds"} for r in metrics(whole)]
    assert [{k: v for k, v in r.items() if k != "seconds"} for r in metrics(split)] == strip
    assert metrics(whole)[1]["replayed"] > 0


def test_warmup_epochs_search_with_the_zero_value_function(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from gnn.networks import Network
    from training import executors
    from training.search_jobs import Outcome, SearchJob
    from training.trainer import Trainer

    overrides = ["training.warmup_epochs=1", "training.epochs=2", "training.exprs_per_epoch=2"]
    overrides += ["search.budget=30", "search.test_budget=10", "model.hidden=40", "model.steps=1"]
    trainer = Trainer(load_config("configs/bootstrap.yaml", overrides), tmp_path)
    used: list[tuple[int, str]] = []
    search = executors.run_search

    def recording(job: SearchJob, network: Network | None) -> Outcome:
        if job.plan.search.budget == 30:  # a training search, not an evaluation
            used.append((trainer.epoch, "network" if network is not None else "zero"))
        return search(job, network)

    monkeypatch.setattr(executors, "run_search", recording)
    trainer.train()
    assert used == [(0, "zero"), (0, "zero"), (1, "network"), (1, "network")]
    with pytest.raises(KsUsageError, match=r"training.warmup_epochs: must be at least 0"):
        load_config("configs/bootstrap.yaml", ["training.warmup_epochs=-1"])
