"""Training configs: the shipped Table 1 scenarios, and one-line errors for every kind of bad config."""

from __future__ import annotations

import dataclasses
import os
import typing
from pathlib import Path

import pytest

from knossos.errors import KsUsageError
from ksdata.loader import load_targets
from rules.sets import get_rule_set
from training.config import TrainConfig, load_config

from conftest import ROOT

CONFIGS = ROOT / "configs"

GOOD = """\
name: tiny
rules: binding_simplify_rules
data:
  train: {set: binding_simplify_8}
  test: {set: binding_simplify_8}
search:
  depth: 5
training:
  epochs: 3
"""


def write(tmp_path: Path, text: str, name: str = "bad.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def error_of(path: Path | str, overrides: list[str] | None = None) -> str:
    with pytest.raises(KsUsageError) as info:
        load_config(path, overrides)
    rendered = info.value.render()
    assert "\n" not in rendered
    return rendered


# -- the shipped configs -----------------------------------------------------------------------------------
def test_every_shipped_config_is_listed() -> None:
    names = sorted(p.name for p in CONFIGS.glob("*.yaml"))
    assert names == [
        "arith_generalisation.yaml",
        "blas.yaml",
        "blas_beam.yaml",
        "blas_pbeam.yaml",
        "blas_pruned.yaml",
        "blas_sym.yaml",
        "blas_tree.yaml",
        "bootstrap.yaml",
        "cnn.yaml",
        "default_model.yaml",
        "default_offline.yaml",
        "default_tree.yaml",
        "gradients.yaml",
    ]
    readme = (CONFIGS / "README.md").read_text()
    for name in names:
        assert f"`{name}`" in readme


@pytest.mark.parametrize("name", ["arith_generalisation", "blas", "bootstrap", "cnn"])
def test_shipped_config_loads_with_its_data_and_rules(name: str) -> None:
    config = load_config(CONFIGS / f"{name}.yaml")
    assert isinstance(config, TrainConfig)
    assert config.name == name
    get_rule_set(config.rules)  # a known rule set
    assert load_targets(config.data.train, "data.train")
    assert load_targets(config.data.test, "data.test")
    # the paper's network (Table 2) and fitting settings
    assert (config.model.hidden, config.model.steps) == (200, 10)
    assert config.training.lr == pytest.approx(1e-4)
    assert config.training.batch_size == 16
    # 30 epochs (section 5), but 5 for BLAS ("We trained for 5 epochs, each of which included
    # optimisation of cost of 6 primitives")
    assert config.training.epochs == (5 if name == "blas" else 30)


def test_arith_generalisation_config() -> None:
    c = load_config(CONFIGS / "arith_generalisation.yaml")
    assert c.rules == "binding_rules"
    assert (c.data.train.set, c.data.test.set) == ("bindgen_36", "bindgen_test")
    assert (c.search.algorithm, c.search.depth, c.search.budget) == ("astar", 10, 5000)
    assert c.training.exprs_per_epoch == 6
    assert len(load_targets(c.data.train, "train")) == 36
    assert len(load_targets(c.data.test, "test")) == 12


def test_bootstrap_config() -> None:
    c = load_config(CONFIGS / "bootstrap.yaml")
    assert c.rules == "binding_simplify_rules"
    assert c.data.train.set == c.data.test.set == "binding_simplify_8"
    assert (c.search.algorithm, c.search.depth, c.search.budget) == ("astar", 10, 5000)
    assert len(load_targets(c.data.train, "train")) == 8


def test_blas_config() -> None:
    c = load_config(CONFIGS / "blas.yaml")
    assert c.rules == "ml_rules_no_bind"
    assert (c.search.algorithm, c.search.test_algorithm, c.search.depth) == ("two-phase", "two-phase", 30)
    assert c.data.train.file == "ksdata/programs/blas_train.kso"
    assert len(c.data.train.defs) == 11
    assert c.data.test.defs == ["gemm"]
    assert [t.name for t in load_targets(c.data.test, "test")] == ["gemm"]


def test_cnn_config() -> None:
    c = load_config(CONFIGS / "cnn.yaml")
    assert c.rules == "ml_rules_no_bind"
    assert (c.search.algorithm, c.search.depth, c.search.budget, c.search.test_budget) == (
        "two-phase",
        40,
        30000,
        30000,
    )
    assert c.data.test.defs == ["rev$conv1d"]
    assert {t.name for t in load_targets(c.data.train, "train")} == {
        "rev$matrix_multiply",
        "rev$matrix_multiply_transpose",
    }


# -- good configs and defaults ---------------------------------------------------------------------------
def test_defaults_fill_what_is_left_out(tmp_path: Path) -> None:
    c = load_config(write(tmp_path, GOOD, "good.yaml"))
    assert c.search.depth == 5
    assert c.search.budget == 5000
    assert c.training.epochs == 3
    assert c.training.seed == 0
    assert c.model.hidden == 200
    assert c.data.train.file is None
    assert c.data.train.defs == []


def test_float_written_without_a_dot(tmp_path: Path) -> None:
    c = load_config(write(tmp_path, GOOD + "  lr: 3e-4\n", "good.yaml"))
    assert c.training.lr == pytest.approx(3e-4)
    assert isinstance(c.training.lr, float)


def test_overrides_are_applied(tmp_path: Path) -> None:
    path = write(tmp_path, GOOD, "good.yaml")
    c = load_config(path, ["training.epochs=2", "model.hidden=64", "model.mlp_head=true", "training.lr=0.01"])
    assert c.training.epochs == 2
    assert c.model.hidden == 64
    assert c.model.mlp_head is True
    assert c.training.lr == pytest.approx(0.01)
    assert load_config(path).training.epochs == 3  # the file is untouched
    # the last of two overrides wins; a whole section and a list go through YAML
    c = load_config(path, ["training.epochs=2", "training.epochs=7", "data.test={set: bindgen_test}"])
    assert c.training.epochs == 7
    assert c.data.test.set == "bindgen_test"
    c = load_config(path, ["data.train={file: x.kso, defs: [f, g]}"])
    assert (c.data.train.file, c.data.train.defs) == ("x.kso", ["f", "g"])


def test_override_of_a_shipped_config() -> None:
    c = load_config(CONFIGS / "bootstrap.yaml", ["training.epochs=2", "search.budget=30"])
    assert (c.training.epochs, c.search.budget, c.search.depth) == (2, 30, 10)


# -- errors ------------------------------------------------------------------------------------------------
def test_unknown_key_names_file_line_and_dotted_key(tmp_path: Path) -> None:
    path = write(tmp_path, GOOD.replace("  depth: 5\n", "  depht: 5\n"))
    msg = error_of(path)
    assert msg.startswith(f"{path}:7:3: error: unknown key 'search.depht'")
    assert "depth" in msg  # the known keys are listed


def test_unknown_key_at_the_top_and_deep(tmp_path: Path) -> None:
    msg = error_of(write(tmp_path, GOOD + "epochs: 3\n"))
    assert msg.startswith(f"{tmp_path / 'bad.yaml'}:10:1: error: unknown key 'epochs'")
    msg = error_of(write(tmp_path, GOOD.replace("{set: binding_simplify_8}\n  test", "{sett: a}\n  test")))
    assert ":4:" in msg
    assert "unknown key 'data.train.sett'" in msg


def test_wrong_type(tmp_path: Path) -> None:
    path = write(tmp_path, GOOD.replace("depth: 5", 'depth: "ten"'))
    assert error_of(path) == f"{path}:7:3: error: search.depth: expected a whole number, not 'ten'"
    path = write(tmp_path, GOOD + "  eval_train: 1\n")
    assert "training.eval_train: expected true or false" in error_of(path)
    path = write(tmp_path, GOOD + "  seed: 2.5\n")
    assert "training.seed: expected a whole number" in error_of(path)
    path = write(tmp_path, GOOD + "  lr: fast\n")
    assert "training.lr: expected a number" in error_of(path)
    path = write(tmp_path, GOOD.replace("name: tiny", "name: 12"))
    assert "name: expected text" in error_of(path)
    path = write(tmp_path, GOOD.replace("search:\n  depth: 5\n", "search: 5\n"))
    assert "search: expected a mapping" in error_of(path)


def test_boolean_is_not_a_number(tmp_path: Path) -> None:
    path = write(tmp_path, GOOD.replace("epochs: 3", "epochs: true"))
    assert "training.epochs: expected a whole number, not True" in error_of(path)


def test_missing_required_key(tmp_path: Path) -> None:
    path = write(tmp_path, GOOD.replace("rules: binding_simplify_rules\n", ""))
    assert error_of(path) == f"{path}: error: missing key 'rules'"
    path = write(tmp_path, GOOD.replace("  test: {set: binding_simplify_8}\n", ""))
    assert error_of(path) == f"{path}: error: missing key 'data.test'"


def test_invalid_yaml(tmp_path: Path) -> None:
    path = write(tmp_path, "name: x\nsearch: [1,\n")
    msg = error_of(path)
    assert msg.startswith(f"{path}:3:1: error: not valid YAML")
    path = write(tmp_path, "name: x\n  rules: : :\n")
    assert ": error: not valid YAML" in error_of(path)


@pytest.mark.parametrize("text", ["", "- a\n- b\n", "just text\n"])
def test_not_a_mapping(tmp_path: Path, text: str) -> None:
    path = write(tmp_path, text)
    assert error_of(path) == f"{path}: error: a config is a mapping of keys to values"


def test_missing_file(tmp_path: Path) -> None:
    path = tmp_path / "nope.yaml"
    assert error_of(path) == f"{path}: error: no such file"
    assert error_of(tmp_path) == f"{tmp_path}: error: is a directory, not a file"


def test_special_and_huge_files_are_not_read(tmp_path: Path) -> None:
    """A device never ends and a FIFO may never answer: refused before reading, as program files are."""
    assert error_of(Path("/dev/zero")).endswith(
        "not a regular file (a device, FIFO or socket); give a YAML config file"
    )
    fifo = tmp_path / "fifo.yaml"
    os.mkfifo(fifo)
    assert "not a regular file" in error_of(fifo)
    huge = write(tmp_path, "# " + "x" * (2**20))
    assert error_of(huge) == f"{huge}: error: larger than 1 MiB, the most read"


@pytest.mark.parametrize("bad", ["training.epochs", "=3", ""])
def test_bad_override(tmp_path: Path, bad: str) -> None:
    msg = error_of(write(tmp_path, GOOD, "good.yaml"), [bad])
    assert f"bad override '{bad}': expected KEY=VALUE" in msg


def test_override_errors_name_the_key(tmp_path: Path) -> None:
    path = write(tmp_path, GOOD, "good.yaml")
    assert "unknown key 'search.depht'" in error_of(path, ["search.depht=3"])
    assert "training.epochs: expected a whole number, not 'two'" in error_of(path, ["training.epochs=two"])
    assert "'name' is not a section" in error_of(path, ["name.first=3"])
    assert "training.epochs: must be at least 1, not 0" in error_of(path, ["training.epochs=0"])


def test_precision_must_be_known(tmp_path: Path) -> None:
    path = write(tmp_path, GOOD, "good.yaml")
    assert "search.precision: 'float16' is not one of float32, bfloat16" in error_of(path, ["search.precision=float16"])


def test_override_error_does_not_point_into_the_file(tmp_path: Path) -> None:
    """A bad value given by --set is not at the file's line of that key (whose value is fine).

    BUG: load_config looks the overridden key up in the file's key lines, so the error for
    ``--set search.depth=ten`` reads ``good.yaml:7:3: error: search.depth: ...`` and points the user
    at ``depth: 5``, a valid line of the file.
    """
    path = write(tmp_path, GOOD, "good.yaml")
    msg = error_of(path, ["search.depth=ten"])
    assert "search.depth: expected a whole number, not 'ten'" in msg
    assert not msg.startswith(f"{path}:7:3:"), msg


@pytest.mark.parametrize("algorithm", ["bfs", "greedy", "exhaustive", "A*"])
def test_search_algorithm_not_allowed(tmp_path: Path, algorithm: str) -> None:
    path = write(tmp_path, GOOD.replace("  depth: 5\n", f"  algorithm: '{algorithm}'\n"))
    msg = error_of(path)
    assert (
        msg
        == f"{path}: error: search.algorithm: '{algorithm}' is not one of astar, lazy-astar, two-phase, beam, pseudo-beam, mcts"
    )
    msg = error_of(write(tmp_path, GOOD, "good.yaml"), [f"search.test_algorithm={algorithm}"])
    assert "search.test_algorithm:" in msg


@pytest.mark.parametrize("algorithm", ["astar", "two-phase", "beam", "pseudo-beam", "mcts"])
def test_search_algorithms_allowed(tmp_path: Path, algorithm: str) -> None:
    c = load_config(write(tmp_path, GOOD, "good.yaml"), [f"search.algorithm={algorithm}"])
    assert c.search.algorithm == algorithm


def test_data_source_with_both_set_and_file(tmp_path: Path) -> None:
    path = write(tmp_path, GOOD.replace("train: {set: binding_simplify_8}", "train: {set: bindgen_36, file: a.kso}"))
    assert error_of(path) == f"{path}: error: data.train: give exactly one of 'set' or 'file'"
    path = write(tmp_path, GOOD.replace("test: {set: binding_simplify_8}", "test: {defs: [f]}"))
    assert error_of(path) == f"{path}: error: data.test: give exactly one of 'set' or 'file'"


@pytest.mark.parametrize(
    ("override", "key"),
    [
        ("search.depth=0", "search.depth"),
        ("search.budget=-1", "search.budget"),
        ("training.batch_size=0", "training.batch_size"),
        ("model.steps=-1", "model.steps"),
        ("training.lr=0", "training.lr"),
        ("training.lr=.nan", "training.lr"),
    ],
)
def test_out_of_range_values(tmp_path: Path, override: str, key: str) -> None:
    msg = error_of(write(tmp_path, GOOD, "good.yaml"), [override])
    assert f"error: {key}: must be" in msg


def test_model_steps_zero_is_allowed(tmp_path: Path) -> None:
    assert load_config(write(tmp_path, GOOD, "good.yaml"), ["model.steps=0"]).model.steps == 0


@pytest.mark.parametrize("override", ["model.hidden=10", "model.hidden=37"])
def test_hidden_too_small_for_the_node_types_is_a_config_error(tmp_path: Path, override: str) -> None:
    """BUG: validate() only asks model.hidden >= 1, but the network needs NUM_NODE_TYPES + 1 (38);
    the config loads, and train.py later dies with a ValueError traceback from ModelConfig."""
    msg = error_of(write(tmp_path, GOOD, "good.yaml"), [override])
    assert "model.hidden" in msg


def test_dropout_out_of_range_is_a_config_error(tmp_path: Path) -> None:
    """BUG: model.dropout is not checked; with mlp_head, torch's Dropout raises a ValueError
    (a traceback from train.py) instead of a one-line config error."""
    msg = error_of(write(tmp_path, GOOD, "good.yaml"), ["model.mlp_head=true", "model.dropout=1.5"])
    assert "model.dropout" in msg


def test_the_model_section_is_the_network_config_with_the_search_depth(tmp_path: Path) -> None:
    from gnn.model_config import ModelConfig

    path = write(tmp_path, GOOD, "good.yaml")
    c = load_config(path, ["model.hidden=48"])
    assert c.model == ModelConfig(hidden=48, depth=5)  # depth: search.depth
    assert dataclasses.replace(c, search=dataclasses.replace(c.search, depth=7)).model.depth == 7
    # a checkpoint's config keeps the YAML keys: no model.depth (it is search.depth)
    assert "depth" not in c.to_dict()["model"] and c.to_dict()["search"]["depth"] == 5
    assert list(c.to_dict()["model"]) == [
        "hidden",
        "steps",
        "mlp_head",
        "dropout",
        "constant_values",
        "kind",
        "cost_normalization",
    ]
    assert "unknown key 'model.depth'" in error_of(path, ["model.depth=3"])


def _enumerated() -> list[tuple[str, tuple[str, ...]]]:
    """Every config key whose value is one of a few names (a Literal type), with the names."""
    import typing

    from gnn.model_config import FILLED_FROM, ModelConfig
    from search.settings import SearchSettings
    from training.config import NARROWED, TrainingConfig

    out = []
    for section, cls in (("search", SearchSettings), ("model", ModelConfig), ("training", TrainingConfig)):
        filled = {f.name for f in dataclasses.fields(cls) if FILLED_FROM in f.metadata}  # not keys of the YAML
        for name, hint in typing.get_type_hints(cls).items():
            hint = NARROWED.get(f"{section}.{name}", hint)  # the searches a network trains with
            if typing.get_origin(hint) is typing.Literal and name not in filled:
                out.append((f"{section}.{name}", typing.get_args(hint)))
    return out


def test_the_cost_names_are_the_cost_models() -> None:
    from knossos.cost_models import COST_MODELS
    from search.settings import CostName

    assert set(typing.get_args(CostName)) == set(COST_MODELS)


def test_the_enumerated_options_are_literal_types() -> None:
    keys = {key for key, _ in _enumerated()}
    assert keys == {
        "search.algorithm",
        "search.test_algorithm",
        "search.precision",
        "search.cost",
        "model.kind",
        "model.cost_normalization",
        "training.targets",
        "training.executor",
    }


@pytest.mark.parametrize(("key", "names"), _enumerated())
def test_an_enumerated_option_takes_its_names_only(tmp_path: Path, key: str, names: tuple[str, ...]) -> None:
    path = write(tmp_path, GOOD, "good.yaml")
    for name in names:
        if (key, name) == ("model.kind", "tree"):
            continue  # with search.precision float32 only: below
        section, field = key.split(".")
        assert getattr(getattr(load_config(path, [f"{key}={name}"]), section), field) == name
    assert load_config(path, ["model.kind=tree"]).model.kind == "tree"
    # errors in a --set value are said to be in the override, not in the file
    assert error_of(path, [f"{key}=nope"]) == f"--set {key}=nope: error: {key}: 'nope' is not one of {', '.join(names)}"
    assert error_of(path, [f"{key}=3"]) == f"--set {key}=3: error: {key}: expected text, not 3"
