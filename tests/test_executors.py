"""training.executor: the searches of each epoch run in this process, in a pool of processes or as
Ray tasks, and the same seed gives the same metrics and weights under each; bad settings and a
missing Ray are one-line errors."""

from __future__ import annotations

import hashlib
import json
import logging
import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pytest
import torch

from app.train_cli import main as train_main
from knossos.errors import KsUsageError
from knossos.parser import parse_expr
from rules.sets import get_rule_set
from search.astar import astar
from search.spec import SearchSpec
from training.checkpoint import load_checkpoint
from training.config import load_config
from training.samples import limit_samples, samples_of, split_samples
from training.trainer import Trainer

from conftest import ROOT, run_cli, without_seconds

BOOTSTRAP = "configs/bootstrap.yaml"
TINY = [
    "training.epochs=2",
    "training.exprs_per_epoch=3",
    "search.budget=30",
    "search.test_budget=20",
    "model.hidden=40",
    "model.steps=1",
]
#: Two runs that use every draw of the generator: A* with a plain first epoch and samples drawn from
#: each search, and MCTS (a seed per search) for training and for test.
VARIANTS = {
    "astar": [
        "training.warmup_epochs=1",
        "training.targets=explored_and_reached",
        "training.samples_per_search=6",
        "training.best_targets=true",
        "training.replay_best=5",
    ],
    "mcts": ["search.algorithm=mcts", "search.test_algorithm=mcts", "training.samples_per_search=4"],
}


def setup_module() -> None:
    torch.set_num_threads(1)  # the machine is small and shared (and the workers take the trainer's threads)


def train(out: Path, *overrides: str) -> tuple[list[dict[str, Any]], dict[str, torch.Tensor]]:
    """A tiny run's metrics.jsonl (without its seconds) and final weights."""
    Trainer(load_config(BOOTSTRAP, [*TINY, *overrides]), out).train()
    metrics = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    return without_seconds(metrics), load_checkpoint(out / "checkpoint.pt")["model"]


def assert_same(
    a: tuple[list[dict[str, Any]], dict[str, torch.Tensor]], b: tuple[list[dict[str, Any]], dict[str, torch.Tensor]]
) -> None:
    assert a[0] == b[0]
    assert a[1].keys() == b[1].keys()
    for key in a[1]:
        assert torch.equal(a[1][key], b[1][key]), key


@pytest.fixture(scope="module")
def local_runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    return {name: train(tmp_path_factory.mktemp(f"local_{name}"), *o) for name, o in VARIANTS.items()}


@pytest.fixture(scope="module")
def ray_started() -> Iterator[ModuleType]:
    """Ray on this machine (2 CPUs), for the module; a skip, with its reason, only where Ray is not
    installed or cannot start here."""
    try:
        import ray
    except ImportError as err:
        pytest.skip(f"Ray is not installed ({err}): pip install -e '.[ray]'")
    try:
        ray.init(num_cpus=2, include_dashboard=False, logging_level=logging.WARNING)
    except Exception as err:
        pytest.skip(f"Ray cannot start on this machine: {type(err).__name__}: {err}")
    yield ray
    ray.shutdown()


# -- the same numbers everywhere ----------------------------------------------------------------------------
@pytest.mark.parametrize("variant", list(VARIANTS))
def test_processes_give_the_same_metrics_and_weights(variant: str, local_runs: dict[str, Any], tmp_path: Path) -> None:
    found = train(tmp_path, *VARIANTS[variant], "training.executor=processes", "training.workers=2")
    assert_same(found, local_runs[variant])


def test_train_py_starts_ray_here_by_default_and_gives_the_same_numbers(
    local_runs: dict[str, Any], tmp_path: Path
) -> None:
    """No address: the executor starts Ray on this machine itself (not the test's Ray: a process of its
    own), its workers import this checkout, and it stops Ray when training ends."""
    pytest.importorskip("ray", reason="Ray is not installed: pip install -e '.[ray]'")
    out = tmp_path / "run"
    argv = [sys.executable, "train.py", BOOTSTRAP, "--out", str(out), "--quiet", "--threads", "1"]
    argv += [arg for o in [*TINY, *VARIANTS["astar"], "training.executor=ray"] for arg in ("--set", o)]
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    done = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    if done.returncode and "cannot start or reach Ray on this machine" in done.stderr:
        pytest.skip(f"Ray cannot start on this machine: {done.stderr.strip()}")
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    metrics = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert_same((without_seconds(metrics), load_checkpoint(out / "checkpoint.pt")["model"]), local_runs["astar"])


#: Versions of the weights that go to the searches: astar's first epoch is unguided, then the weights
#: after each fit; mcts's also the first weights.  One ``ray.put`` each, never one per search.
VERSIONS = {"astar": 2, "mcts": 3}


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_ray_gives_the_same_metrics_and_weights(
    variant: str, local_runs: dict[str, Any], ray_started: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    put = ray_started.put
    shipped: list[str] = []

    def counted_put(value: Any, **kwargs: Any) -> Any:
        if isinstance(value, bytes):  # the weights, as pack_weights gives them
            shipped.append(hashlib.sha256(value).hexdigest())
        return put(value, **kwargs)

    monkeypatch.setattr(ray_started, "put", counted_put)
    found = train(tmp_path, *VARIANTS[variant], "training.executor=ray")
    assert_same(found, local_runs[variant])
    assert ray_started.is_initialized()  # Ray started by the caller is left running
    assert len(shipped) == len(set(shipped)) == VERSIONS[variant], shipped


def test_a_run_resumes_under_another_executor(local_runs: dict[str, Any], tmp_path: Path) -> None:
    """Where the searches run changes no number, so a resumed run may move."""
    train(tmp_path, *VARIANTS["astar"], "training.epochs=1")
    found = train(tmp_path, *VARIANTS["astar"], "training.executor=processes", "training.workers=1")
    assert_same(found, local_runs["astar"])


def test_samples_of_is_all_samples_then_the_draw() -> None:
    """The trainer draws from a worker's samples exactly as samples_of draws from a search's."""
    rules = get_rule_set("binding_simplify_rules")
    start = parse_expr("(add (div (mul x y) (add 1.0 (mul x y))) (mul x y))")[0]
    result = astar(start, SearchSpec(rules, 6, 200))
    expanded, passed_over = split_samples(result, "explored_and_reached")
    assert len(expanded) > 8 and len(passed_over) > 8
    assert samples_of(result, "explored_and_reached") == expanded + passed_over
    for limit in (0, 3, 8, 10**6):
        a, b = np.random.default_rng(7), np.random.default_rng(7)
        assert samples_of(result, "explored_and_reached", limit, a) == limit_samples(expanded, passed_over, limit, b)
        assert a.bit_generator.state == b.bit_generator.state


# -- bad settings -------------------------------------------------------------------------------------------
def one_line_error(overrides: list[str]) -> str:
    with pytest.raises(KsUsageError) as info:
        load_config(BOOTSTRAP, overrides)
    rendered = info.value.render()
    assert "\n" not in rendered
    return rendered


def test_unknown_executor() -> None:
    msg = one_line_error(["training.executor=dask"])
    assert msg.endswith("error: training.executor: 'dask' is not one of local, processes, ray"), msg


@pytest.mark.parametrize(
    ("override", "fragment"),
    [("training.workers=-1", "must be at least 0"), ("training.workers=5000", "must be at most 1024")],
)
def test_workers_out_of_range(override: str, fragment: str) -> None:
    assert f"training.workers: {fragment}" in one_line_error([override])


def test_ray_address_is_for_the_ray_executor(capsys: pytest.CaptureFixture[str]) -> None:
    assert "training.ray_address" in one_line_error(["training.ray_address=auto"])
    code, _, err = run_cli(train_main, capsys, BOOTSTRAP, "--ray-address", "auto")
    assert code == 1 and err.count("\n") == 1
    assert "(train.py --ray-address) is for training.executor: ray, not local" in err
    config = load_config(BOOTSTRAP, ["training.executor=ray", 'training.ray_address="10.0.0.1:6379"'])
    assert config.training.ray_address == "10.0.0.1:6379"


def test_without_ray_choosing_it_is_a_one_line_error(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    monkeypatch.setitem(sys.modules, "ray", None)  # import ray raises ImportError
    with pytest.raises(KsUsageError, match=r"pip install -e '\.\[ray\]'"):
        Trainer(load_config(BOOTSTRAP, [*TINY, "training.executor=ray"]), tmp_path)
    out = tmp_path / "run"
    code, _, err = run_cli(train_main, capsys, BOOTSTRAP, "--out", str(out), "--set", "training.executor=ray")
    assert code == 1 and err.count("\n") == 1, err
    assert "training.executor: ray needs Ray, which is not installed (pip install -e '.[ray]')" in err
    assert not out.exists()


def test_repetitions_run_locally_only(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    argv = [BOOTSTRAP, "--out", str(tmp_path), "--repetitions", "2", "--set", "training.executor=processes"]
    code, _, err = run_cli(train_main, capsys, *argv)
    assert code == 1 and err.count("\n") == 1
    assert "use it with training.executor: local" in err


def test_an_outcome_travels_as_one_wire_form() -> None:
    """A worker's outcome pickles its samples' expressions together (shared nodes once) and comes
    back as the same interned expressions."""
    import pickle

    from search.plan import Plan
    from search.settings import SearchSettings
    from training.search_jobs import SearchJob, run_search

    plan = Plan(rules="binding_simplify_rules", search=SearchSettings(depth=6))
    start = parse_expr("(add (div (mul x y) (add 1.0 (mul x y))) (mul x y))")[0]
    outcome = run_search(SearchJob(start, plan.overridden(budget=200), targets="explored_and_reached"), None)
    blob = pickle.dumps(outcome)
    back = pickle.loads(blob)
    assert back == outcome
    assert all(
        a.expr is b.expr for a, b in zip(back.expanded + back.passed_over, outcome.expanded + outcome.passed_over)
    )
    one_by_one = sum(len(pickle.dumps(s.expr)) for s in outcome.expanded + outcome.passed_over)
    assert len(blob) < one_by_one / 2


def test_a_ray_address_that_takes_no_connection_is_a_one_line_error(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    pytest.importorskip("ray", reason="Ray is not installed: pip install -e '.[ray]'")
    with socket.socket() as s:  # a port of this machine that nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    argv = [BOOTSTRAP, "--out", str(tmp_path / "run"), "--set", "training.executor=ray"]
    argv += [arg for o in TINY for arg in ("--set", o)]
    code, _, err = run_cli(train_main, capsys, *argv, "--ray-address", f"127.0.0.1:{port}")
    assert code == 1 and err.count("\n") == 1, err
    assert f"error: training.ray_address: cannot reach Ray at 127.0.0.1:{port}: Connection refused" in err
    assert not (tmp_path / "run").exists()  # said before anything is written
