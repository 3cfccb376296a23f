"""Run fig6_gradients (resumable: a rerun carries on where an interrupted one stopped).

Run:  python experiments/fig6_gradients/run.py [--quick] [--quiet] [--no-train]

``--no-train`` evaluates the epochs a training run already holds (runs/experiments/fig6_gradients/
gradients_seed0, e.g. a copy of `python train.py configs/gradients.yaml --out runs/gradients`).
"""

from experiments.curves import run_main
from experiments.fig6_gradients.experiment import EXPERIMENT

if __name__ == "__main__":
    run_main(EXPERIMENT)
