"""Checkpoints load without running code from the file: a crafted ``.pt`` whose pickle would call a
function is refused with a one-line error by every entry point that reads one, and nothing runs;
the checkpoints the project writes (training state with expressions, samples and numpy arrays; the
shipped model) still load."""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from gnn.model_file import DEFAULT_MODEL, save_model_file
from gnn.sample import Sample
from knossos.errors import KsUsageError
from knossos.parser import parse_expr
from training.checkpoint import load_checkpoint

from conftest import ROOT

ENV = {**os.environ, "OMP_NUM_THREADS": "1"}


class _Payload:
    """Unpickled unsafely, creates the file ``marker`` (``open(marker, "w")``)."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[Any, ...]:
        return (open, (str(self.marker), "w"))


def malicious_checkpoint(folder: Path, where: str = "top") -> tuple[Path, Path]:
    """A checkpoint of the usual shape whose pickle calls ``open`` (at the top level, or deep inside
    the weights); returns (the file, the marker file it would create)."""
    marker = folder / "pwned"
    weights: dict[str, Any] = {"w": torch.zeros(2)}
    state: dict[str, Any] = {"model": weights, "model_config": {"hidden": 8}}
    if where == "top":
        state["extra"] = _Payload(marker)
    else:
        weights["w2"] = [1, {"deep": _Payload(marker)}]
    path = folder / "evil.pt"
    torch.save(state, path)
    return path, marker


def run(*argv: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, *argv], cwd=cwd, env=ENV, capture_output=True, text=True, timeout=300)


def assert_refused(done: subprocess.CompletedProcess[str], path: Path) -> None:
    assert done.returncode == 1, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert "Traceback" not in done.stderr
    assert f"{path}: error: refusing to load" in lines[0]
    assert "builtins.open" in lines[0] or "io.open" in lines[0]


def test_the_payload_is_live_when_unpickled_unsafely(tmp_path: Path) -> None:
    """The control: the crafted file does run code under the unsafe loader (so the tests below mean something)."""
    path, marker = malicious_checkpoint(tmp_path)
    done = run("-c", f"import torch; torch.load({str(path)!r}, weights_only=False)")
    assert done.returncode == 0, done.stderr
    assert marker.exists()


@pytest.mark.parametrize("where", ["top", "deep"])
def test_load_checkpoint_refuses_and_runs_nothing(tmp_path: Path, where: str) -> None:
    path, marker = malicious_checkpoint(tmp_path, where)
    with pytest.raises(KsUsageError, match="refusing to load") as err:
        load_checkpoint(path)
    assert "\n" not in err.value.render()
    assert not marker.exists()


def test_optimize_model_refuses_and_runs_nothing(tmp_path: Path) -> None:
    path, marker = malicious_checkpoint(tmp_path)
    done = run("optimize.py", "--expr", "(add x 0.0)", "--model", str(path), "--budget", "5", "--quiet")
    assert_refused(done, path)
    assert not marker.exists()


def test_export_refuses_and_runs_nothing(tmp_path: Path) -> None:
    path, marker = malicious_checkpoint(tmp_path)
    out = tmp_path / "out.pt"
    done = run("-m", "training.export", str(path), str(out))
    assert_refused(done, path)
    assert not marker.exists() and not out.exists()


def test_train_resume_refuses_and_runs_nothing(tmp_path: Path) -> None:
    folder = tmp_path / "run"
    folder.mkdir()
    path, marker = malicious_checkpoint(folder)
    path.rename(folder / "checkpoint.pt")
    done = run("train.py", "configs/bootstrap.yaml", "--out", str(folder), "--resume", "--quiet")
    assert_refused(done, folder / "checkpoint.pt")
    assert not marker.exists()


def test_a_plain_pickle_with_a_payload_is_refused(tmp_path: Path, recwarn: pytest.WarningsRecorder) -> None:
    """Not torch's zip format at all: the legacy loader reads plain pickles, and must be safe too."""
    marker = tmp_path / "pwned"
    path = tmp_path / "plain.pt"
    path.write_bytes(pickle.dumps({"model": {}, "model_config": {}, "x": _Payload(marker)}))
    with pytest.raises(KsUsageError):
        load_checkpoint(path)
    assert not marker.exists()
    assert not recwarn.list  # only the one line


def test_a_crafted_expression_is_a_one_line_error(tmp_path: Path) -> None:
    """Expressions are allowed, but only rebuilt through the checked constructors: a wire form with
    an unknown op or a dangling child is an unreadable checkpoint, not a crash."""
    from knossos.serialize import expr_from_wire

    class BadExpr:
        def __reduce__(self) -> tuple[Any, ...]:
            return (expr_from_wire, ([(9999, None, None, (5,))],))

    path = tmp_path / "bad.pt"
    torch.save({"model": {}, "model_config": {}, "replay": [BadExpr()]}, path)
    with pytest.raises(KsUsageError, match="not a readable checkpoint"):
        load_checkpoint(path)


@pytest.mark.parametrize("damage", ["truncated", "not a zip", "empty", "folder"])
def test_damaged_files_are_one_line_errors(tmp_path: Path, damage: str) -> None:
    path = tmp_path / "model.pt"
    torch.save({"model": {"w": torch.zeros(3)}, "model_config": {}}, path)
    if damage == "truncated":
        path.write_bytes(path.read_bytes()[:200])
    elif damage == "not a zip":
        path.write_bytes(b"PK\x03\x04 this is not really a checkpoint")
    elif damage == "empty":
        path.write_bytes(b"")
    else:
        path.unlink()
        path.mkdir()
    with pytest.raises(KsUsageError) as err:
        load_checkpoint(path)
    assert str(path) in err.value.render() and "\n" not in err.value.render()


def test_training_state_round_trips(tmp_path: Path) -> None:
    """What train.py checkpoints (expressions in samples and as dict keys, numpy arrays and scalars,
    random states, plain settings, keys added later) loads back equal under the safe loader."""
    e, _ = parse_expr("(div (mul x y) (add 1.0 (mul x y)))")
    rng = np.random.default_rng(3)
    state: dict[str, Any] = {
        "model": {"w": torch.arange(4.0)},
        "model_config": {"hidden": 48, "steps": 2},  # settings a network can have (load_checkpoint checks them)
        "model_kind": "ggnn",
        "numpy_rng": rng.bit_generator.state,
        "torch_rng": torch.get_rng_state(),
        "replay": [[Sample(e, 3, 1.5, (0.5, 1.0))]],
        "best_targets": {e: np.array([0.0, 0.5, 1.5])},
        "best_horizons": {e: 3},
        "history": [{"loss": np.float64(0.25), "n": np.int64(3), "ok": True, "none": None, "t": (1, 2)}],
    }
    path = tmp_path / "checkpoint.pt"
    save_model_file(path, state)
    back = load_checkpoint(path)
    assert back["replay"][0][0] == state["replay"][0][0]
    assert back["replay"][0][0].expr is e  # back through the intern table
    assert list(back["best_targets"]) == [e]
    assert np.array_equal(back["best_targets"][e], state["best_targets"][e])
    assert back["numpy_rng"] == state["numpy_rng"]
    assert back["history"] == state["history"]
    assert back["model_kind"] == "ggnn"
    assert torch.equal(back["torch_rng"], state["torch_rng"])


def test_replay_samples_pickled_under_their_old_module_load(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Training checkpoints written before training/ was split from gnn/ name their replay samples
    ``gnn.fit.Sample``: they still load (and resume), as training.fit's Sample."""
    import types

    e, _ = parse_expr("(mul x 2.0)")
    old = types.ModuleType("gnn.fit")
    old.Sample = Sample  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "gnn.fit", old)
    monkeypatch.setattr(Sample, "__module__", "gnn.fit")
    path = tmp_path / "checkpoint.pt"
    save_model_file(path, {"model": {}, "model_config": {"hidden": 48}, "replay": [[Sample(e, 2, 1.0, (0.5,))]]})
    monkeypatch.undo()
    with zipfile.ZipFile(path) as z:
        assert any(b"gnn.fit" in z.read(n) for n in z.namelist() if n.endswith(".pkl"))
    assert load_checkpoint(path)["replay"] == [[Sample(e, 2, 1.0, (0.5,))]]


def test_the_shipped_model_loads_safely() -> None:
    state = load_checkpoint(DEFAULT_MODEL)
    assert {"model", "model_config", "value_scale"} <= state.keys()
    with zipfile.ZipFile(DEFAULT_MODEL) as z:  # a torch zip checkpoint, so the safe unpickler read it
        assert any(name.endswith("data.pkl") for name in z.namelist())


def test_export_never_overwrites_without_asking(tmp_path: Path) -> None:
    out = tmp_path / "mine.pt"
    out.write_bytes(b"something a user wrote")
    done = run("-m", "training.export", str(DEFAULT_MODEL), str(out))
    assert done.returncode == 1 and "add --force" in done.stderr and "Traceback" not in done.stderr
    assert out.read_bytes() == b"something a user wrote"
    done = run("-m", "training.export", str(DEFAULT_MODEL), str(tmp_path))
    assert done.returncode == 1 and "names a folder" in done.stderr
    done = run("-m", "training.export", str(DEFAULT_MODEL), str(out), "--force")
    assert done.returncode == 0, done.stderr
    assert load_checkpoint(out)["model"].keys() == load_checkpoint(DEFAULT_MODEL)["model"].keys()


def test_expressions_with_calls_round_trip(tmp_path: Path) -> None:
    """Call nodes carry what they call (a def with its parameters, sizes and body): the BLAS and GMM
    programs' defs, as a replay buffer holds them, load back with the same costs and text."""
    from knossos.parser import load_program

    exprs = [
        d.body
        for name in ("blas_train.kso", "gmm_test.kso", "conv1d_rev_test.kso")
        for d in load_program(ROOT / "ksdata" / "programs" / name).targets
    ]
    path = tmp_path / "calls.pt"
    save_model_file(path, {"model": {}, "model_config": {}, "replay": [[Sample(e, 3, 1.0) for e in exprs]]})
    back = [s.expr for s in load_checkpoint(path)["replay"][0]]
    assert [e.cost for e in back] == [e.cost for e in exprs]
    assert [str(e) for e in back] == [str(e) for e in exprs]
