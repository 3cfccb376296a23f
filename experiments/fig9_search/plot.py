"""Plot fig9_search from its results file (experiments/results/fig9_search/results.jsonl).

Run:  python experiments/fig9_search/plot.py [--quick] [--results FILE] [--out PNG]
"""

from experiments.curve_plot import plot_main
from experiments.fig9_search.experiment import EXPERIMENT

if __name__ == "__main__":
    plot_main(EXPERIMENT)
