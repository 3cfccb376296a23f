"""Plot fig6_cnn from its results file (experiments/results/fig6_cnn/results.jsonl).

Run:  python experiments/fig6_cnn/plot.py [--quick] [--results FILE] [--out PNG]
"""

from experiments.curve_plot import plot_main
from experiments.fig6_cnn.experiment import EXPERIMENT

if __name__ == "__main__":
    plot_main(EXPERIMENT)
