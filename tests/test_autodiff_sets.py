"""The committed gradient benchmark sets (ksdata/gradients/) are what make_sets.py makes now,
and their start costs are what ``knossos cost`` says."""

from __future__ import annotations

import json
import subprocess
import sys

from experiments.gradients.make_sets import OUT
from knossos.parser import load_program

from conftest import ROOT


def test_sets_are_up_to_date() -> None:
    """Checked in a fresh process, as make_sets.py writes them: interning shares alpha-equivalent nodes,
    so a program made after other tests may print a binder under a name another term gave it."""
    done = subprocess.run(
        [sys.executable, "experiments/gradients/make_sets.py", "--check"], cwd=ROOT, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_start_costs_are_the_reference_costs() -> None:
    costs = json.loads((OUT / "start_costs.json").read_text())
    assert sorted(costs) == ["rev_blas_test.kso", "rev_blas_train.kso", "rev_conv1d.kso"]
    assert len(costs["rev_blas_train.kso"]) == 31 and len(costs["rev_blas_test.kso"]) == 49
    assert sum(row["test_only"] for row in costs["rev_blas_test.kso"].values()) == 18
    for file, rows in costs.items():
        program = load_program(OUT / file)
        for name, row in rows.items():
            assert round(program.def_cost(name), 6) == row["start"] and program.defs[name].body.size == row["nodes"]
