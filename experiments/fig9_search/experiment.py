"""Figure 9 of the paper (Appendix D): A* against MCTS, for training and for test.

The generalisation experiment (fig5_generalisation: bindgen_36 -> bindgen_test, depth 10, 64
features) trained with A* or with MCTS (alpha 5, beta 0.5), each tested with A* and with MCTS at a
budget of 300 evaluations: the four combinations.  The A*-trained runs are fig5_generalisation's
GGNN runs (the same folders, so they are trained once); MCTS at test is evaluated from the kept
weights every 5 epochs.
"""

from __future__ import annotations

from experiments.curves import Agent, CurveExperiment
from experiments.fig5_generalisation.experiment import QUICK

EXPERIMENT = CurveExperiment(
    figure="fig9_search",
    title="A* and MCTS for training and test (generalisation to bindgen_test, test budget 300)",
    config="configs/arith_generalisation.yaml",
    agents=(
        Agent("astar_astar", "train A*, test A*", run="ggnn"),
        Agent("astar_mcts", "train A*, test MCTS", run="ggnn", test_search="mcts"),
        Agent("mcts_astar", "train MCTS, test A*", ("search.algorithm=mcts",), run="mcts"),
        Agent("mcts_mcts", "train MCTS, test MCTS", ("search.algorithm=mcts",), run="mcts", test_search="mcts"),
    ),
    baselines=(),
    budgets=(300,),
    repetitions=3,
    overrides=("model.hidden=64",),
    eval_every=5,
    quick_overrides=QUICK,
    quick_budgets=(20,),
    reduced="3 seeds instead of 10; 64 features; MCTS at test every 5 epochs",
    runs_of="fig5_generalisation",
)
