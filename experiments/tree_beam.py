"""This project's training for programs, as train.py overrides on top of a figure's config: the tree
network with log-scale targets, each epoch fitted to a plateau, trained and tested with beam search
(configs/blas_beam.yaml's settings) or with pseudo-beam search to depth 99 and both prunings
(configs/blas_pruned.yaml's; see docs/programs.md).  Figures 6a and 6b add them as agents, beside
the same searches with the zero value function as baselines."""

from experiments.curves import Agent, Baseline

#: The tree network with log-scale targets, each epoch fitted to a plateau: what both agents share.
TREE_FITTING: tuple[str, ...] = (
    "model.kind=tree",
    "model.cost_normalization=log",
    "search.value_scale=0.5",
    "training.fit_passes=30",
    "training.fit_patience=5",
    "training.lr=5e-4",
    "training.batch_size=64",
    "training.targets=explored_and_reached",
    "training.best_targets=true",
    "training.samples_per_search=600",
    "training.replay_epochs=3",
)
TREE_BEAM: tuple[str, ...] = (*TREE_FITTING, "search.algorithm=beam", "search.test_algorithm=beam")
TREE_PRUNED: tuple[str, ...] = (
    *TREE_FITTING,
    "search.algorithm=pseudo-beam",
    "search.test_algorithm=pseudo-beam",
    "search.depth=99",
    "search.prune_commutes=true",
    "search.prune_inlines=true",
)

TREE_BEAM_AGENT = Agent("tree_beam", "beam search + tree network, log targets (this project)", overrides=TREE_BEAM)
BEAM_BASELINE = Baseline("beam", "beam search, zero value function", "beam")
#: The best plain search for programs found here (docs/programs.md).
PRUNED_PSEUDO_BEAM_BASELINE = Baseline(
    "pseudo_beam_pruned",
    "pseudo-beam search to depth 99, commutations pruned, zero value function",
    "pseudo-beam",
    prune_commutes=True,
    depth=99,
)
TREE_PRUNED_AGENT = Agent(
    "tree_pruned",
    "pseudo-beam search to depth 99, both prunings + tree network, log targets (this project)",
    overrides=TREE_PRUNED,
)
#: Plain pseudo-beam search to depth 99 with both prunings: the best plain search for programs here.
PRUNED_BOTH_BASELINE = Baseline(
    "pseudo_beam_both",
    "pseudo-beam search to depth 99, commutations and idle inlines pruned, zero value function",
    "pseudo-beam",
    prune_commutes=True,
    prune_inlines=True,
    depth=99,
)
