"""Figure 5a of the paper: generalisation from bindgen_36 to the 12 unseen bindgen_test expressions.

Table 1's settings (configs/arith_generalisation.yaml: binding_rules, depth 10, 6 expressions per
epoch, A* with a budget of 5000 evaluations while training, 30 epochs), with the 64-feature network
that ships as the default model.  Test cost against epoch at the paper's budget of 5000 evaluations
and at 300 (the reference's test setting, where search without a good value function falls short),
for A* with the GGNN, the NoGNN ablation (no propagation steps), greedy best-first and random search
(zero value function), the start cost and the best-known cost.
"""

from __future__ import annotations

from experiments.curves import Agent, Baseline, CurveExperiment

QUICK = (
    "training.epochs=2",
    "training.exprs_per_epoch=2",
    "search.budget=40",
    "model.hidden=40",
    "model.steps=2",
)

#: The learners and the baselines of both parts of Figure 5.
AGENTS = (
    Agent("ggnn", "A* + GGNN (this project)"),
    Agent("nognn", "A* + NoGNN (no propagation)", ("model.steps=0",)),
)
BASELINES = (
    Baseline("greedy", "greedy best-first", "greedy"),
    Baseline("random", "random search", "random", seeded=True),
)

EXPERIMENT = CurveExperiment(
    figure="fig5_generalisation",
    title="Generalisation: train on bindgen_36, test on the 12 bindgen_test expressions",
    config="configs/arith_generalisation.yaml",
    agents=AGENTS,
    baselines=BASELINES,
    budgets=(300, 5000),
    repetitions=3,
    overrides=("model.hidden=64",),
    eval_every=5,
    quick_overrides=QUICK,
    reduced="3 seeds instead of 10; 64 features; budget 5000 evaluated every 5 epochs",
)
