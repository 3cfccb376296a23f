"""fig6_gradients in the registry: `python -m experiments fig6_gradients run|plot`, and its table.

``run --no-train`` evaluates the epochs a training run already holds (runs/experiments/fig6_gradients/
gradients_seed0, e.g. a copy of `python train.py configs/gradients.yaml --out runs/gradients`).
"""

from experiments.curve_figure import curve_figure
from experiments.fig6_gradients.experiment import EXPERIMENT

FIGURE = curve_figure(EXPERIMENT)
