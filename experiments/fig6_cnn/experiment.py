"""Figure 6b of the paper: train on the conv1d training programs, test on rev$conv1d.

configs/cnn.yaml (ml_rules_no_bind, depth 40, two-phase search, 30000 evaluations per search) with
the 64-feature network.  The cost of rev$conv1d against epoch for the trained value function, the same
search with the zero value function, the start cost and the ksc-style baseline simplifier's cost;
and this project's training for programs (experiments/tree_beam.py) beside plain beam search and
plain pseudo-beam search to depth 99 with commutations pruned, and the training with pseudo-beam search
to depth 99 and both prunings beside the same search with the zero value function.
"""

from __future__ import annotations

from experiments.curves import Agent, Baseline, CurveExperiment
from experiments.tree_beam import (
    BEAM_BASELINE,
    PRUNED_BOTH_BASELINE,
    PRUNED_PSEUDO_BEAM_BASELINE,
    TREE_BEAM_AGENT,
    TREE_PRUNED_AGENT,
)

EXPERIMENT = CurveExperiment(
    figure="fig6_cnn",
    title="CNN: train on conv1d programs, test on rev$conv1d (two-phase A*, beam or pseudo-beam search)",
    config="configs/cnn.yaml",
    agents=(
        Agent("ggnn", "two-phase A* + GGNN (this project)"),
        TREE_BEAM_AGENT,
        TREE_PRUNED_AGENT,
    ),
    baselines=(
        Baseline("zero", "two-phase A*, zero value function", "two-phase"),
        BEAM_BASELINE,
        PRUNED_PSEUDO_BEAM_BASELINE,
        PRUNED_BOTH_BASELINE,
    ),
    budgets=(30000,),
    repetitions=1,
    overrides=("model.hidden=64", "training.epochs=10"),
    ksc_baseline=True,
    quick_overrides=(
        "training.epochs=1",
        "search.budget=20",
        "model.hidden=40",
        "model.steps=2",
    ),
    quick_budgets=(20,),
    reduced="1 seed instead of 10 (3 for the pruned agent, --repetitions 3), 10 epochs instead of 30; 64 features",
)
