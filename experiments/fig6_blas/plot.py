"""Plot fig6_blas from its results file (experiments/results/fig6_blas/results.jsonl).

Run:  python experiments/fig6_blas/plot.py [--quick] [--results FILE] [--out PNG]
"""

from experiments.curve_plot import plot_main
from experiments.fig6_blas.experiment import EXPERIMENT

if __name__ == "__main__":
    plot_main(EXPERIMENT)
