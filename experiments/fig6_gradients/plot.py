"""Plot fig6_gradients from its results file (experiments/results/fig6_gradients/results.jsonl).

Run:  python experiments/fig6_gradients/plot.py [--quick] [--results FILE] [--out PNG]
"""

from experiments.curve_plot import plot_main
from experiments.fig6_gradients.experiment import EXPERIMENT

if __name__ == "__main__":
    plot_main(EXPERIMENT)
