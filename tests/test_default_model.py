"""The value networks that ship with the package (gnn/models/) load and guide search.

The default (a tree network fitted offline, configs/default_offline.yaml) and the GGNN
(configs/default_model.yaml) were chosen on the generated validation set (see docs/default_model.md).  At the reference's test budget of 300
evaluations, A* with the default gets further than plain A* on held-out expressions, and exactly as
far as the committed benchmark says; A* with the GGNN optimises the bundled example, a bindgen_test
expression that training never saw, to its best known cost, further than plain A* at that budget.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from gnn.model_file import DEFAULT_MODEL, shipped_model, value_function_from_file
from gnn.tree_value import TreeValue
from knossos.parser import load_program, parse_expr
from ksdata.loader import DataSource, load_targets
from rules.sets import get_rule_set
from search.registry import get_search
from search.spec import SearchSpec
from search.value import ZeroValue
from training.checkpoint import load_checkpoint

from conftest import ROOT

EXAMPLE = ROOT / "examples" / "bindgen_test_8.ks"


def optimise(model: str, *extra: str) -> dict[str, object]:
    command = [sys.executable, "optimize.py", str(EXAMPLE), "--rules", "binding_rules", "--budget", "300"]
    done = subprocess.run(
        [*command, "--model", model, "--json", "--quiet", *extra],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=300,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
    )
    assert done.returncode == 0, done.stderr
    result: dict[str, object] = json.loads(done.stdout)
    return result


GGNN = shipped_model("ggnn")
#: The tree network trained online (configs/default_tree.yaml), whose searches made the default's data.
TREE_ONLINE = shipped_model("tree_online")
RESULTS = ROOT / "experiments" / "results" / "default_model" / "searches.jsonl"


def test_the_shipped_models_are_packaged_and_load() -> None:
    assert DEFAULT_MODEL.is_file() and GGNN is not None and TREE_ONLINE is not None
    for path, kind in ((DEFAULT_MODEL, "tree"), (GGNN, "ggnn"), (TREE_ONLINE, "tree")):
        state = load_checkpoint(path)
        assert state["model_config"].get("kind", "ggnn") == kind and state["model_config"]["depth"] == 10
        assert 0.0 < value_function_from_file(path).scale <= 1.0
    assert isinstance(value_function_from_file(DEFAULT_MODEL), TreeValue)


def test_the_shipped_models_never_saw_a_test_expression() -> None:
    assert GGNN is not None and TREE_ONLINE is not None
    for path in (DEFAULT_MODEL, GGNN, TREE_ONLINE):
        config = load_checkpoint(path)["config"]
        trained_on = config["data"]["train"]["set"].split("+")
        assert "generated_train" in trained_on
        assert not {"generated_heldout", "bindgen_test"} & set(trained_on)
        assert config["data"]["test"]["set"] == "generated_validation"


def test_the_default_model_says_how_it_was_fitted() -> None:
    offline = load_checkpoint(DEFAULT_MODEL)["offline"]
    assert offline["data"] and all(d["set"] == "generated_train" and d["searches"] > 0 for d in offline["data"])
    for d in offline["data"]:  # each file's searches: a shipped model, or an earlier pass of the pipeline
        assert d["model"] in ("none", "tree_online", "ggnn") or str(d["model"]).startswith("runs/offline/")


def test_the_default_model_runs_lazy_astar_at_its_chosen_scale() -> None:
    value = value_function_from_file(DEFAULT_MODEL)
    assert value.settings is not None and value.rules == "binding_simplify_rules"
    assert (value.settings.algorithm, value.settings.depth) == ("lazy-astar", 10)
    assert value.scale == 0.05


def test_the_default_model_beats_plain_search_on_held_out_expressions_as_benchmarked() -> None:
    rows = [json.loads(line) for line in RESULTS.read_text().splitlines()]
    benchmarked = {
        (r["model"], r["search"], r["index"]): r["best_cost"]
        for r in rows
        if r["set"] == "generated_heldout" and r["budget"] == 300 and r["index"] < 10
    }
    targets = load_targets(DataSource(set="generated_heldout"), "test")[:10]
    rules = get_rule_set("binding_simplify_rules")
    totals = {}
    runs = [("default", "lazy-astar"), ("default", "astar"), ("none", "astar")]
    for model, search in runs:
        value = value_function_from_file(DEFAULT_MODEL) if model == "default" else ZeroValue()
        costs = []
        for i, t in enumerate(targets):
            costs.append(get_search(search)(t.expr, SearchSpec(rules, 10, 300, value=value)).best_cost)
            assert costs[-1] == benchmarked[model, search, i]  # searches are deterministic
        totals[model, search] = sum(costs)
    assert totals["default", "lazy-astar"] <= totals["default", "astar"] < totals["none", "astar"]


def test_the_ggnn_beats_plain_search_on_the_example() -> None:
    learned = optimise("ggnn")
    zero = optimise("none")
    assert learned["start_cost"] == zero["start_cost"]
    assert float(learned["best_cost"]) < float(zero["best_cost"])  # type: ignore[arg-type]
    sets = json.loads((ROOT / "ksdata" / "arithmetic_sets.json").read_text())["sets"]
    known = {parse_expr(x["expr"])[0]: x["best_known_cost"] for x in sets["bindgen_test"]["expressions"]}
    body = load_program(EXAMPLE).defs["f"].body
    assert learned["best_cost"] == known[body] == 8.1


def test_bfloat16_inference_stays_close_to_float32_and_finds_the_same_program() -> None:
    assert GGNN is not None
    exact = value_function_from_file(GGNN)
    fast = value_function_from_file(GGNN, precision="bfloat16")
    sets = json.loads((ROOT / "ksdata" / "arithmetic_sets.json").read_text())["sets"]
    exprs = [parse_expr(x["expr"])[0] for x in sets["bindgen_test"]["expressions"]]
    a, b = exact.values(exprs, 10), fast.values(exprs, 10)
    scale = float(np.abs(a).max())
    assert scale > 0.1
    assert float(np.abs(a - b).max()) <= 0.03 * scale  # bfloat16 keeps 8 bits of mantissa
    assert optimise("ggnn", "--precision", "bfloat16")["best"] == optimise("ggnn")["best"]


def test_the_tree_network_refuses_bfloat16() -> None:
    done = subprocess.run(
        [sys.executable, "optimize.py", "--expr", "(add x 1.0)", "--model", "default", "--precision", "bfloat16"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=300,
    )
    assert done.returncode == 1 and done.stderr.count("\n") == 1 and "float32 only" in done.stderr


def test_a_model_name_no_file_system_can_hold_is_a_usage_error() -> None:
    from app.models import load_value_function as by_name
    from knossos.errors import KsUsageError

    for name in ("a" * 300, "x=" + "9" * 400, "b" * 5000 + ".pt"):
        with pytest.raises(KsUsageError, match="no model file"):
            by_name(name)
