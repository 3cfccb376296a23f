"""The program models that ship as ``--model blas`` (gnn/models/blas.pt, configs/blas_pruned.yaml),
``--model blas_beam`` (configs/blas_beam.yaml), ``--model blas_astar`` (configs/blas_tree.yaml) and
``--model cnn`` (Figure 6b's ``tree_pruned`` agent: configs/cnn.yaml with experiments/tree_beam.py's
TREE_PRUNED)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from gnn.model_file import shipped_model, value_function_from_file, value_scale_of
from knossos.parser import load_program
from search.settings import SearchSettings
from training.checkpoint import load_checkpoint

from conftest import ROOT

PROGRAMS = ROOT / "ksdata" / "programs"


PRUNED = {"prune_commutes": True, "prune_inlines": True}


@pytest.mark.parametrize(
    ("name", "defaults"),
    [
        ("blas", {"depth": 99, "algorithm": "pseudo-beam", "test_algorithm": "pseudo-beam", **PRUNED}),
        ("blas_beam", {"depth": 60, "algorithm": "beam", "test_algorithm": "beam"}),
        ("blas_astar", {"depth": 30, "algorithm": "astar"}),
        ("cnn", {"depth": 99, "algorithm": "pseudo-beam", "test_algorithm": "pseudo-beam", **PRUNED}),
    ],
)
def test_the_blas_models_load_with_their_search_defaults(name: str, defaults: dict[str, object]) -> None:
    path = shipped_model(name)
    assert path is not None
    state = load_checkpoint(path)
    assert state["model_config"]["kind"] == "tree" and state["model_config"]["cost_normalization"] == "log"
    value = value_function_from_file(path)
    assert value.rules == "ml_rules_no_bind"  # each model brings the rule set it was trained with
    assert value.settings == SearchSettings(value_scale=value.scale, **defaults)  # type: ignore[arg-type]


@pytest.mark.parametrize(("name", "scale"), [("blas", 0.1), ("blas_beam", 0.2), ("blas_astar", 0.5), ("cnn", 0.5)])
def test_the_program_models_search_with_the_value_scale_chosen_for_them(name: str, scale: float) -> None:
    path = shipped_model(name)
    assert path is not None
    assert value_scale_of(load_checkpoint(path)) == scale


@pytest.mark.parametrize("name", ["blas", "blas_beam", "blas_astar"])
def test_the_blas_models_never_saw_a_def_that_is_only_in_blas_test(name: str) -> None:
    path = shipped_model(name)
    assert path is not None
    data = load_checkpoint(path)["config"]["data"]
    assert data["train"]["file"] == "experiments/data/programs/blas_train.kso"
    trained = set(data["train"]["defs"]) or {d.name for d in load_program(PROGRAMS / "blas_train.kso").targets}
    test_only = {d.name for d in load_program(PROGRAMS / "blas_test.kso").targets} - trained
    assert len(test_only) == 18 and {"rot", "gemv", "amxmy", "gemm_no_maty"} <= test_only
    assert data["test"]["file"] == data["train"]["file"]  # epochs were chosen on training defs


def test_optimize_with_the_blas_model_uses_its_search_depth_and_pruning() -> None:
    command = [sys.executable, "optimize.py", str(PROGRAMS / "blas_test.kso"), "--def", "scal"]
    done = subprocess.run(
        [*command, "--rules", "ml_rules_no_bind", "--model", "blas", "--budget", "200", "--json", "--quiet"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["depth"] == 99 and report["search"] == "pseudo-beam"
    assert report["prune_commutes"] and report["prune_inlines"]
    assert report["best_cost"] < report["start_cost"]


def test_the_cnn_model_never_saw_rev_conv1d() -> None:
    path = shipped_model("cnn")
    assert path is not None
    data = load_checkpoint(path)["config"]["data"]
    assert data["train"]["file"] == "experiments/data/programs/conv1d_rev_train.kso"
    assert data["train"]["defs"] == ["rev$matrix_multiply", "rev$matrix_multiply_transpose"]
    # the file holds rev$conv1d too; the config trains on the other two only
    assert "rev$conv1d" in {d.name for d in load_program(PROGRAMS / "conv1d_rev_train.kso").targets}
