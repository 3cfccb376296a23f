"""The value network that ships with the package (gnn/models/default.pt) loads and guides search.

It was trained with configs/arith_generalisation.yaml (64 features; see the README).  At the
reference's test budget of 300 evaluations, A* with it improves the bundled example, a bindgen_test
expression the training never saw, where A* with the zero value function finds nothing.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np

from gnn.checkpoint import DEFAULT_MODEL, load_value_function
from knossos.parser import parse_expr

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


def test_the_default_model_beats_the_zero_value_function_on_the_example() -> None:
    learned = optimise("default")
    zero = optimise("none")
    assert learned["start_cost"] == zero["start_cost"] == 12.0
    assert zero["best_cost"] == 12.0
    assert float(learned["best_cost"]) <= 9.1  # type: ignore[arg-type]


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
