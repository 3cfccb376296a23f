"""Plot fig5_generalisation from its results file (experiments/results/fig5_generalisation/results.jsonl).

Run:  python experiments/fig5_generalisation/plot.py [--quick] [--results FILE] [--out PNG]
"""

from experiments.curve_plot import plot_main
from experiments.fig5_generalisation.experiment import EXPERIMENT

if __name__ == "__main__":
    plot_main(EXPERIMENT)
