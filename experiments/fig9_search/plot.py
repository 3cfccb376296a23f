"""Plot fig9_search from its results file (experiments/results/fig9_search/results.jsonl).

Run:  python experiments/fig9_search/plot.py [--quick] [--results FILE] [--out PNG]
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from experiments.curve_plot import plot_main
from experiments.fig9_search.experiment import EXPERIMENT

if __name__ == "__main__":
    plot_main(EXPERIMENT)
