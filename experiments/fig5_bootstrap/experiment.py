"""Figure 5b of the paper: bootstrap mode, train = test on the 8 binding_simplify expressions.

configs/bootstrap.yaml as it is (binding_simplify_rules, depth 10, all 8 expressions every epoch, A*
with a budget of 5000 evaluations, 30 epochs, the paper's 200-feature network with bfloat16
inference, explored best targets).  Test cost against epoch at 5000 evaluations (every epoch) and 300
(every 5 epochs), for A* with the GGNN, the NoGNN ablation, greedy best-first and random search, the
start cost and the best-known cost.
"""

from __future__ import annotations

from experiments.curves import CurveExperiment
from experiments.fig5_generalisation.experiment import AGENTS, BASELINES, QUICK

EXPERIMENT = CurveExperiment(
    figure="fig5_bootstrap",
    title="Bootstrap: train and test on the 8 binding_simplify expressions",
    config="configs/bootstrap.yaml",
    agents=AGENTS,
    baselines=BASELINES,
    budgets=(5000, 300),
    repetitions=3,
    eval_every=5,
    quick_overrides=QUICK,
    reduced="3 seeds instead of 10; budget 300 evaluated every 5 epochs",
)
