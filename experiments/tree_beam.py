"""This project's training for programs, as train.py overrides on top of a figure's config: the tree
network with log-scale targets, trained and tested with beam search, each epoch fitted to a plateau
(configs/blas_beam.yaml's settings; see docs/programs.md).  Figures 6a and 6b add it as an agent,
beside plain beam search as a baseline."""

from experiments.curves import Agent, Baseline

TREE_BEAM: tuple[str, ...] = (
    "model.kind=tree",
    "model.cost_normalization=log",
    "search.algorithm=beam",
    "search.test_algorithm=beam",
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
