"""train.py end to end (tiny runs): run folders, refusing to overwrite, resuming, repetitions, bad input;
and optimize.py --model with the checkpoint a run wrote."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import torch

from conftest import ROOT, without_seconds

TINY = [
    "--set",
    "training.epochs=2",
    "--set",
    "search.budget=30",
    "--set",
    "search.test_budget=30",
    "--set",
    "model.hidden=48",
    "--set",
    "model.steps=2",
    "--set",
    "training.exprs_per_epoch=2",
]
BOOTSTRAP = "configs/bootstrap.yaml"
#: One thread per process: the machine is small and shared.
ENV = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
START = "(div (div 1.0 x) (add 1.0 (div 1.0 x)))"


def setup_module() -> None:
    torch.set_num_threads(1)


def train_cmd(out: Path, *extra: str, config: str = BOOTSTRAP) -> list[str]:
    return [sys.executable, "train.py", config, "--out", str(out), "--quiet", *TINY, *extra]


def run(argv: list[str], timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, cwd=ROOT, env=ENV, capture_output=True, text=True, timeout=timeout)


def metrics(folder: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (folder / "metrics.jsonl").read_text().splitlines()]


def snapshot(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def assert_one_line_error(done: subprocess.CompletedProcess[str], *fragments: str) -> str:
    assert done.returncode == 1, (done.returncode, done.stderr)
    assert "Traceback" not in done.stderr, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert ": error: " in lines[0]
    for f in fragments:
        assert f in lines[0]
    return lines[0]


@pytest.fixture(scope="module")
def first_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One uninterrupted tiny run of two epochs (shared; tests that change a run work on a copy)."""
    out = tmp_path_factory.mktemp("train") / "run"
    done = run(train_cmd(out))
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"{out}: epoch 2, loss ")
    return out


def copy_of(run_folder: Path, tmp_path: Path) -> Path:
    out = tmp_path / "run"
    shutil.copytree(run_folder, out)
    return out


# -- a run ----------------------------------------------------------------------------------------------
def test_run_writes_checkpoint_metrics_and_tensorboard(first_run: Path) -> None:
    assert (first_run / "checkpoint.pt").is_file()
    lines = metrics(first_run)
    assert [m["epoch"] for m in lines] == [1, 2]
    for m in lines:
        assert isinstance(m["loss"], float) and m["loss"] >= 0
        assert len(m["train_exprs"]) == 2
        assert m["train_evaluations"] <= 2 * 30
        assert m["samples"] > 0
        best = m["test"]["best_costs"]
        assert len(best) == 8
        assert m["test"]["total_cost"] == pytest.approx(sum(best))
        assert 0 < m["test"]["mean_ratio_to_start"] <= 1
        assert 0 <= m["test"]["reached_best_known"] <= 8
        assert "train" not in m  # eval_train is false in bootstrap.yaml
    events = list((first_run / "tensorboard").glob("events.out.tfevents.*"))
    assert events and all(e.stat().st_size > 0 for e in events)
    assert not list(first_run.glob("*.tmp"))


def hyperparameters_logged(folder: Path) -> tuple[dict[str, object], list[str], list[str]]:
    """From a run's TensorBoard events: the HParams session's values, the HParams session statuses
    and the text summaries' tags."""
    from tensorboard.backend.event_processing.event_file_loader import EventFileLoader
    from tensorboard.plugins.hparams import plugin_data_pb2

    values: dict[str, object] = {}
    statuses: list[str] = []
    texts: list[str] = []
    for path in sorted((folder / "tensorboard").glob("events.out.tfevents.*")):
        for event in EventFileLoader(str(path)).Load():
            for v in event.summary.value:
                if v.metadata.plugin_data.plugin_name == "hparams":
                    data = plugin_data_pb2.HParamsPluginData.FromString(v.metadata.plugin_data.content)
                    if data.HasField("session_start_info"):
                        for key, value in data.session_start_info.hparams.items():
                            values[key] = getattr(value, value.WhichOneof("kind"))
                    if data.HasField("session_end_info"):
                        statuses.append(str(data.session_end_info.status))
                elif v.metadata.plugin_data.plugin_name == "text":
                    texts.append(v.tag)
    return values, statuses, texts


def test_the_config_is_in_tensorboard_as_hyperparameters(first_run: Path) -> None:
    values, statuses, texts = hyperparameters_logged(first_run)
    assert values["search.depth"] == 10 and values["model.hidden"] == 48 and values["training.epochs"] == 2
    assert values["search.algorithm"] == "astar" and values["data.train.set"] == "binding_simplify_8"
    assert values["rules"] == "binding_simplify_rules" and values["name"] == "bootstrap"
    assert "model.depth" not in values and "data.train.file" not in values  # filled in; None
    assert len(statuses) == 1  # the run finished
    assert [t for t in texts if t.startswith("hyperparameters")]


def keys(row: dict[str, Any]) -> list[object]:
    """A metrics line's keys, in order, with those of its evaluations."""
    return [(k, list(v)) if isinstance(v, dict) else k for k, v in row.items()]


def test_metrics_lines_have_the_keys_of_the_committed_runs(first_run: Path) -> None:
    """The lines a run writes now are those train.py has always written (same keys, same order):
    the committed bootstrap run's, made with the same config."""
    committed = ROOT / "experiments" / "results" / "training" / "bootstrap_h64" / "metrics.jsonl"
    before = {json.dumps(keys(json.loads(line))) for line in committed.read_text().splitlines()}
    assert {json.dumps(keys(m)) for m in metrics(first_run)} == before


def test_checkpoint_contents(first_run: Path) -> None:
    state = torch.load(first_run / "checkpoint.pt", map_location="cpu", weights_only=False)
    assert state["epoch"] == 2
    assert state["model_config"]["hidden"] == 48
    assert state["model_config"]["steps"] == 2
    assert state["model_config"]["depth"] == 10  # the search depth
    assert state["config"]["training"]["epochs"] == 2
    assert state["data"]["test"] == [f"binding_simplify_8[{i}]" for i in range(8)]
    assert without_seconds(state["history"]) == without_seconds(metrics(first_run))


def test_again_without_resume_is_refused(first_run: Path) -> None:
    before = snapshot(first_run)
    done = run(train_cmd(first_run))
    assert_one_line_error(done, str(first_run), "--resume")
    assert snapshot(first_run) == before


def test_resume_after_completion_does_nothing_new(first_run: Path, tmp_path: Path) -> None:
    out = copy_of(first_run, tmp_path)
    before = snapshot(out)
    done = run(train_cmd(out, "--resume"))
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"{out}: epoch 2, ")
    assert len(metrics(out)) == 2
    after = snapshot(out)
    assert after["checkpoint.pt"] == before["checkpoint.pt"]
    assert after["metrics.jsonl"] == before["metrics.jsonl"]


def test_resume_with_another_config_is_refused(first_run: Path, tmp_path: Path) -> None:
    out = copy_of(first_run, tmp_path)
    before = snapshot(out)
    done = run(train_cmd(out, "--resume", "--set", "search.budget=31"))
    assert_one_line_error(done, "different config", "search.budget")
    assert snapshot(out)["checkpoint.pt"] == before["checkpoint.pt"]


def test_a_checkpoint_from_before_a_config_key_existed_resumes_with_its_default(
    first_run: Path, tmp_path: Path
) -> None:
    out = copy_of(first_run, tmp_path)
    state = torch.load(out / "checkpoint.pt", weights_only=False)
    del state["config"]["training"]["replay_best"]  # as written before training.replay_best was added
    torch.save(state, out / "checkpoint.pt")
    done = run(train_cmd(out, "--resume", "--set", "training.epochs=3"))
    assert done.returncode == 0, done.stderr
    assert [m["epoch"] for m in metrics(out)] == [1, 2, 3]
    done = run(train_cmd(out, "--resume", "--set", "training.epochs=4", "--set", "training.replay_best=5"))
    assert_one_line_error(done, "different config", "training.replay_best")


def test_training_with_bfloat16_searches(tmp_path: Path) -> None:
    out = tmp_path / "bf16"
    done = run(train_cmd(out, "--set", "search.precision=bfloat16", "--set", "training.epochs=1"))
    assert done.returncode == 0, done.stderr
    (epoch,) = metrics(out)
    assert len(epoch["test"]["best_costs"]) == 8
    saved = torch.load(out / "checkpoint.pt", weights_only=False)
    assert all(t.dtype == torch.float32 for t in saved["model"].values())  # fitting stays in float32


def test_resume_may_add_epochs(first_run: Path, tmp_path: Path) -> None:
    out = copy_of(first_run, tmp_path)
    done = run(train_cmd(out, "--resume", "--set", "training.epochs=3"))
    assert done.returncode == 0, done.stderr
    assert [m["epoch"] for m in metrics(out)] == [1, 2, 3]
    values, statuses, _ = hyperparameters_logged(out)
    assert values["training.epochs"] == 2 and len(statuses) == 2  # logged by the first session only


#: Resume determinism runs: epoch 1 without evaluation (fast), epoch 2 with a slower one, to be killed in;
#: a replay buffer (epoch 1's samples come back from the checkpoint) and dropout (the torch generator's state).
SLOW_SECOND_EPOCH = [
    *("--set", "training.eval_every=2", "--set", "search.test_budget=1000"),
    *("--set", "training.replay_epochs=2", "--set", "model.mlp_head=true"),
]


def test_killed_and_resumed_run_matches_an_uninterrupted_one(tmp_path: Path) -> None:
    """SIGKILL during epoch 2, then --resume: the same metrics and weights as an uninterrupted run."""
    whole = tmp_path / "whole"
    done = run(train_cmd(whole, *SLOW_SECOND_EPOCH))
    assert done.returncode == 0, done.stderr
    assert [("test" in m) for m in metrics(whole)] == [False, True]

    out = tmp_path / "killed"
    ckpt = out / "checkpoint.pt"
    proc = subprocess.Popen(
        train_cmd(out, *SLOW_SECOND_EPOCH), cwd=ROOT, env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        deadline = time.monotonic() + 90
        while not ckpt.exists():
            assert proc.poll() is None, "the run ended before its first checkpoint"
            assert time.monotonic() < deadline, "no checkpoint in time"
            time.sleep(0.01)
        time.sleep(0.05)  # into epoch 2 (about 2 s long)
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.wait(timeout=30)
    assert proc.returncode == -signal.SIGKILL
    state = torch.load(ckpt, map_location="cpu", weights_only=False)
    assert state["epoch"] == 1, "killed too late: epoch 2 had finished"
    assert len(metrics(out)) == 1

    done = run(train_cmd(out, *SLOW_SECOND_EPOCH, "--resume"))
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"{out}: epoch 2, ")
    assert not list(out.glob("*.tmp"))
    assert without_seconds(metrics(out)) == without_seconds(metrics(whole))
    resumed = torch.load(ckpt, map_location="cpu", weights_only=False)
    uninterrupted = torch.load(whole / "checkpoint.pt", map_location="cpu", weights_only=False)
    assert resumed["model"].keys() == uninterrupted["model"].keys()
    for name, tensor in uninterrupted["model"].items():
        assert torch.equal(resumed["model"][name], tensor), name


def test_repetitions_write_one_folder_per_seed(tmp_path: Path) -> None:
    out = tmp_path / "reps"
    done = run(train_cmd(out, "--repetitions", "2", "--set", "training.epochs=1", "--set", "search.test_budget=10"))
    assert done.returncode == 0, done.stderr
    assert sorted(p.name for p in out.iterdir()) == ["seed0", "seed1"]
    for k in (0, 1):
        folder = out / f"seed{k}"
        assert (folder / "checkpoint.pt").is_file()
        assert list((folder / "tensorboard").glob("events.out.tfevents.*"))
        (m,) = metrics(folder)
        assert m["epoch"] == 1
        assert len(m["test"]["best_costs"]) == 8
        state = torch.load(folder / "checkpoint.pt", map_location="cpu", weights_only=False)
        assert state["config"]["training"]["seed"] == k
        assert f"{folder}: epoch 1, " in done.stdout
    # and a second run into the same folder is refused as a whole
    done = run(train_cmd(out, "--repetitions", "2", "--set", "training.epochs=1", "--set", "search.test_budget=10"))
    assert_one_line_error(done, "seed0", "--resume")


# -- bad input -------------------------------------------------------------------------------------------
def test_missing_config_file(tmp_path: Path) -> None:
    done = run(train_cmd(tmp_path / "out", config=str(tmp_path / "nope.yaml")))
    assert_one_line_error(done, "nope.yaml", "no such file")
    assert not (tmp_path / "out").exists()


def test_unknown_key(tmp_path: Path) -> None:
    done = run(train_cmd(tmp_path / "out", "--set", "search.depht=3"))
    assert_one_line_error(done, "unknown key 'search.depht'")
    bad = tmp_path / "bad.yaml"
    bad.write_text((ROOT / BOOTSTRAP).read_text().replace("  depth: 10", "  depht: 10"))
    done = run(train_cmd(tmp_path / "out", config=str(bad)))
    line = assert_one_line_error(done, "unknown key 'search.depht'")
    assert line.startswith(f"{bad}:9:3: error: ")
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    ("extra", "fragment"),
    [
        (["--set", "training.epochs"], "bad override"),
        (["--repetitions", "0"], "--repetitions must be at least 1"),
        (["--set", "rules=no_such_rules"], "unknown rule set 'no_such_rules'"),
    ],
)
def test_other_bad_input(tmp_path: Path, extra: list[str], fragment: str) -> None:
    assert_one_line_error(run(train_cmd(tmp_path / "out", *extra)), fragment)


def test_hidden_too_small_is_a_one_line_error(tmp_path: Path) -> None:
    """BUG: model.hidden below NUM_NODE_TYPES + 1 passes the config checks; ModelConfig's ValueError
    then escapes train.py as a traceback."""
    assert_one_line_error(run(train_cmd(tmp_path / "out", "--set", "model.hidden=10")), "model.hidden")


# -- optimize.py --model ----------------------------------------------------------------------------------
def test_optimize_with_the_trained_model(first_run: Path) -> None:
    argv = [sys.executable, "optimize.py", "--model", str(first_run / "checkpoint.pt"), "--expr", START]
    done = run([*argv, "--rules", "binding_simplify_rules", "--budget", "50", "--json", "--quiet"])
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["start_cost"] == 7.0
    assert result["best_cost"] <= result["start_cost"]
    assert result["evaluations"] <= 50


def test_optimize_with_a_file_that_is_not_a_checkpoint(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from app.optimize_cli import main

    garbage = tmp_path / "garbage.pt"
    garbage.write_bytes(b"this is not a checkpoint\n" * 10)
    argv = ["--model", str(garbage), "--expr", START, "--rules", "binding_simplify_rules", "--budget", "5"]
    assert main([*argv, "--json", "--quiet"]) == 1
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"{garbage}: error: not a readable checkpoint (")
    assert "\n" not in err
    torch.save({"weights": [1, 2, 3]}, tmp_path / "other.pt")  # a torch file, but not from train.py
    assert main(["--model", str(tmp_path / "other.pt"), *argv[2:], "--quiet"]) == 1
    assert capsys.readouterr().err.strip() == f"{tmp_path / 'other.pt'}: error: not a checkpoint written by train.py"
    assert main(["--model", str(tmp_path / "missing.pt"), *argv[2:], "--quiet"]) == 1
    assert "no model file" in capsys.readouterr().err


def test_optimize_with_a_checkpoint_of_another_network(
    first_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """BUG: a checkpoint whose weights do not fit the network (an older model layout, or a damaged
    file) gets past load_checkpoint's checks; load_state_dict's RuntimeError then escapes
    (optimize.py --model and train.py --resume print a traceback instead of a one-line error)."""
    from app.optimize_cli import main

    state = torch.load(first_run / "checkpoint.pt", map_location="cpu", weights_only=False)
    state["model"] = {k: v for k, v in state["model"].items() if not k.startswith("conv.")}
    old = tmp_path / "old.pt"
    torch.save(state, old)
    argv = ["--model", str(old), "--expr", START, "--rules", "binding_simplify_rules", "--budget", "5", "--quiet"]
    assert main(argv) == 1
    assert capsys.readouterr().err.startswith(f"{old}: error: ")
