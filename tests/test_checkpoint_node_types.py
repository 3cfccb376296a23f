"""Checkpoints store the node-type vocabulary their weights were trained on, and loading checks it:
reordering or extending Op cannot silently feed a trained model the wrong ops."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
import torch

from gnn import model_file
from gnn.graph import NODE_TYPE_INDEX, NODE_TYPES
from gnn.model import ModelConfig, ValueNetwork
from gnn.model_file import NODE_TYPES_KEY, UNSTORED_NODE_TYPES, save_model_file, shipped_model, value_function_from_file
from knossos.errors import KsUsageError
from knossos.ops import Op
from training.checkpoint import load_checkpoint


def small_state() -> dict[str, object]:
    net = ValueNetwork(ModelConfig(hidden=40, steps=1, depth=5))
    return {"model": net.state_dict(), "model_config": dataclasses.asdict(net.config)}


def write_raw(path: Path, state: dict[str, object]) -> Path:
    """A checkpoint written as it is, without save_model_file's vocabulary (an older writer's)."""
    torch.save(state, path)
    return path


def test_the_vocabulary_is_the_op_of_each_node_type_index() -> None:
    assert tuple(op.name for op in Op) == NODE_TYPES
    assert all(NODE_TYPES[i] == op.name for op, i in NODE_TYPE_INDEX.items())


def test_new_checkpoints_store_the_vocabulary(tmp_path: Path) -> None:
    path = tmp_path / "m.pt"
    save_model_file(path, small_state())
    assert load_checkpoint(path)[NODE_TYPES_KEY] == list(NODE_TYPES)
    value_function_from_file(path)


@pytest.mark.parametrize("name", ["default", "ggnn", "blas", "blas_beam", "blas_astar", "cnn", "tree_online"])
def test_shipped_models_written_before_the_vocabulary_load_with_todays_order(name: str) -> None:
    path = shipped_model(name)
    assert path is not None
    state = load_checkpoint(path)
    assert state.get(NODE_TYPES_KEY) in (None, list(NODE_TYPES))
    value_function_from_file(path)


def test_a_checkpoint_without_a_vocabulary_loads(tmp_path: Path) -> None:
    value_function_from_file(write_raw(tmp_path / "old.pt", small_state()))


def test_a_checkpoint_without_a_vocabulary_has_the_order_it_was_trained_with() -> None:
    """Op's order when the checkpoints that store no vocabulary were written: today's, up to the ops
    added since at its end (SQRT)."""
    assert NODE_TYPES[: len(UNSTORED_NODE_TYPES)] == UNSTORED_NODE_TYPES
    assert NODE_TYPES[len(UNSTORED_NODE_TYPES) :] == ("SQRT",)


def test_ops_added_at_the_end_get_zero_embeddings(tmp_path: Path) -> None:
    """A tree network trained before the last op existed loads: the new type's embedding row is zero,
    the old rows are as trained, and it evaluates expressions with the new op."""
    from gnn.tree_model import TreeValueNetwork

    net = TreeValueNetwork(ModelConfig(hidden=40, steps=1, depth=5, kind="tree"))
    weights = net.state_dict()
    old_rows = weights["embed.weight"][:-1].clone()
    state = {
        "model": {**weights, "embed.weight": old_rows},
        "model_config": dataclasses.asdict(net.config),
        NODE_TYPES_KEY: list(NODE_TYPES[:-1]),
    }
    loaded = load_checkpoint(write_raw(tmp_path / "before_sqrt.pt", state))
    rows = loaded["model"]["embed.weight"]
    assert rows.shape[0] == len(NODE_TYPES) and torch.equal(rows[:-1], old_rows) and not rows[-1].any()
    value = value_function_from_file(tmp_path / "before_sqrt.pt")
    from knossos.parser import parse_expr

    assert value.values([parse_expr("(add (sqrt x) 1.0)")[0]], 5).shape == (1, 6)


def test_reordering_op_refuses_the_checkpoints_without_a_vocabulary(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    reordered = (NODE_TYPES[1], NODE_TYPES[0], *NODE_TYPES[2:])
    monkeypatch.setattr(model_file, "NODE_TYPES", reordered)  # as if VAR came before CONST in Op
    message = r"node types are not this code's.*another order: type 0 is CONST there, VAR here"
    with pytest.raises(KsUsageError, match=message):
        load_checkpoint(write_raw(tmp_path / "old.pt", small_state()))
    ggnn = shipped_model("ggnn")
    assert ggnn is not None
    with pytest.raises(KsUsageError, match=message):
        load_checkpoint(ggnn)


def test_a_reordered_vocabulary_is_refused(tmp_path: Path) -> None:
    reordered = list(NODE_TYPES)
    reordered[0], reordered[1] = reordered[1], reordered[0]
    path = write_raw(tmp_path / "reordered.pt", {**small_state(), NODE_TYPES_KEY: reordered})
    with pytest.raises(KsUsageError, match=r"node types are not this code's.*another order: type 0 is VAR there"):
        value_function_from_file(path)


def test_a_vocabulary_with_other_ops_is_refused(tmp_path: Path) -> None:
    path = write_raw(tmp_path / "other.pt", {**small_state(), NODE_TYPES_KEY: [*NODE_TYPES, "MATMUL"]})
    with pytest.raises(KsUsageError, match="unknown here: \\['MATMUL'\\]"):
        load_checkpoint(path)
    path = write_raw(tmp_path / "bad.pt", {**small_state(), NODE_TYPES_KEY: "ADD"})
    with pytest.raises(KsUsageError, match="not a list of op names"):
        load_checkpoint(path)
