"""The value network that ships with the package (gnn/models/default.pt) loads and guides search.

It was trained with configs/default_model.yaml and chosen on the generated validation set (see the
README).  At the reference's test budget of 300 evaluations, A* with it optimises the bundled example,
a bindgen_test expression that training never saw, to its best known cost, further than plain A*
gets at that budget.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np

from gnn.checkpoint import DEFAULT_MODEL, load_checkpoint, load_value_function
from knossos.parser import load_program, parse_expr

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


def test_the_default_model_is_packaged_and_loads() -> None:
    assert DEFAULT_MODEL.is_file()
    value = load_value_function(DEFAULT_MODEL)
    assert value.network.config.depth == 10
    assert 0.0 < value.scale <= 1.0


def test_the_default_model_never_saw_a_test_expression() -> None:
    config = load_checkpoint(DEFAULT_MODEL)["config"]
    trained_on = config["data"]["train"]["set"].split("+")
    assert "generated_train" in trained_on
    assert not {"generated_heldout", "bindgen_test"} & set(trained_on)
    assert config["data"]["test"]["set"] == "generated_validation"


def test_the_default_model_beats_plain_search_on_the_example() -> None:
    learned = optimise("default")
    zero = optimise("none")
    assert learned["start_cost"] == zero["start_cost"]
    assert float(learned["best_cost"]) < float(zero["best_cost"])  # type: ignore[arg-type]
    sets = json.loads((ROOT / "experiments" / "data" / "arithmetic_sets.json").read_text())["sets"]
    known = {parse_expr(x["expr"])[0]: x["best_known_cost"] for x in sets["bindgen_test"]["expressions"]}
    body = load_program(EXAMPLE).defs["f"].body
    assert learned["best_cost"] == known[body] == 8.1


def test_bfloat16_inference_stays_close_to_float32_and_finds_the_same_program() -> None:
    exact = load_value_function(DEFAULT_MODEL)
    fast = load_value_function(DEFAULT_MODEL, precision="bfloat16")
    sets = json.loads((ROOT / "experiments" / "data" / "arithmetic_sets.json").read_text())["sets"]
    exprs = [parse_expr(x["expr"])[0] for x in sets["bindgen_test"]["expressions"]]
    a, b = exact.values(exprs, 10), fast.values(exprs, 10)
    scale = float(np.abs(a).max())
    assert scale > 0.1
    assert float(np.abs(a - b).max()) <= 0.03 * scale  # bfloat16 keeps 8 bits of mantissa
    assert optimise("default", "--precision", "bfloat16")["best"] == optimise("default")["best"]
