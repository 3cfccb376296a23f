"""The committed training runs of experiments/results/training/, side by side: ``python -m training.report``'s
per-epoch tables."""

from __future__ import annotations

import functools

from experiments.figures import Figure
from ksbench.results import RESULTS

#: The training runs of experiments/results/training/ shown side by side, per table.
TRAINING_RUNS = {
    "training_arith": ("arith_h64_b300_seed0", "arith_h64_b300_seed1", "arith_h64_b300_seed2"),
    "training_bootstrap": ("bootstrap_explored_h200_bf16", "bootstrap_explored_h64", "bootstrap_replay_h64"),
    "gradients_training": ("../gradients/training",),
}


def training_table(name: str) -> str:
    """``python -m training.report`` of the committed training runs ``TRAINING_RUNS[name]``: per epoch and
    run, the training loss, the total best test cost, the test expressions at their best-known cost
    and the mean ratio to the start cost."""
    from training.report import table

    runs = [RESULTS / "training" / run for run in TRAINING_RUNS[name]]
    if not all((run / "metrics.jsonl").is_file() for run in runs):
        return "_No results yet: run the training runs listed above._\n"
    return "```text\n" + table(runs) + "\n```\n"


FIGURE = Figure(
    "training_runs",
    "the committed training runs, epoch by epoch",
    {name: functools.partial(training_table, name) for name in TRAINING_RUNS},
)
