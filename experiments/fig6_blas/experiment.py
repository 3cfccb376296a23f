"""Figure 6a of the paper: train on the 11 BLAS primitives, test on GEMM.

configs/blas.yaml (ml_rules_no_bind, depth 30, two-phase search: the phase-1 rules for the first 15
steps, then all; 6 primitives per epoch, 5000 evaluations per search, 5 epochs as in the paper's
text) with the 64-feature network.  The cost of gemm against epoch for the trained value function,
the same two-phase search with the zero value function, the start cost and the ksc-style baseline
simplifier's cost (rules/baseline.py).  A second agent is this project's training for programs
(docs/programs.md): the tree network with log-scale targets, trained and tested with beam search,
each epoch fitted to a plateau; beside it plain beam search, and plain pseudo-beam search to depth 99
with commutations pruned.  A third agent is trained and tested with pseudo-beam search to depth 99
with both prunings (configs/blas_pruned.yaml's search), beside the same search with the zero value
function (the best plain search for programs here).
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
    figure="fig6_blas",
    title="BLAS: train on 11 primitives, test on gemm (two-phase A* to depth 30, beam or pseudo-beam search)",
    config="configs/blas.yaml",
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
    budgets=(5000,),
    repetitions=3,
    overrides=("model.hidden=64",),
    ksc_baseline=True,
    quick_overrides=(
        "training.epochs=1",
        "training.exprs_per_epoch=2",
        "search.budget=20",
        "model.hidden=40",
        "model.steps=2",
    ),
    quick_budgets=(20,),
    reduced="3 seeds instead of 10; 64 features",
)
