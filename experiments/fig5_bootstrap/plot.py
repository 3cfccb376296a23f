"""Plot fig5_bootstrap from its results file (experiments/results/fig5_bootstrap/results.jsonl).

Run:  python experiments/fig5_bootstrap/plot.py [--quick] [--results FILE] [--out PNG]
"""

from experiments.curve_plot import plot_main
from experiments.fig5_bootstrap.experiment import EXPERIMENT

if __name__ == "__main__":
    plot_main(EXPERIMENT)
