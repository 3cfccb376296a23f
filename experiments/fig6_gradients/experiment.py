"""Figure 6b with the gradient rules: the `gradients` training (configs/gradients.yaml) tested on rev$conv1d.

The paper's Figure 6b (experiments/fig6_cnn) searches rev$conv1d with ml_rules_no_bind, where no
search gets below the as-written cost by more than 0.13%.  Here the same program is searched with
gradient_rules under the allocation-aware cost (docs/cost.md), whose units the curve is in: each
kept epoch of the `gradients` training run, searched with pseudo-beam to depth 150 and both prunings
(the training's value scale, 0.5), beside the same search with the zero value function, the start
cost and the ksc-style baseline simplifier's.  The network is trained on reverse-mode defs of
gradients_train.kso only; rev$conv1d is its test program, never trained on.
"""

from __future__ import annotations

from experiments.curves import Agent, Baseline, CurveExperiment

TEST = ("data.test.file=ksdata/programs/conv1d_rev_test.kso", "data.test.defs=[rev$conv1d]")

EXPERIMENT = CurveExperiment(
    figure="fig6_gradients",
    title="CNN gradient with gradient_rules: train on reverse-mode defs, test on rev$conv1d (pseudo-beam, alloc cost)",
    config="configs/gradients.yaml",
    agents=(Agent("gradients", "pseudo-beam + tree network (--model gradients' training)", test_search="pseudo-beam"),),
    baselines=(Baseline("pseudo_beam_both", "pseudo-beam, zero value function", "pseudo-beam", False, True, True),),
    budgets=(50000,),
    repetitions=1,
    overrides=TEST,
    eval_every=1,
    ksc_baseline=True,
    quick_overrides=("training.epochs=1", "search.budget=20", "model.hidden=40", "training.warmup_epochs=0"),
    quick_budgets=(20,),
    reduced="1 seed; 10 epochs; 50,000 evaluations per test search",
    log_scale=True,
)
