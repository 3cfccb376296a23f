"""Plot fig6_gradients from its results file (experiments/results/fig6_gradients/results.jsonl).

Run:  python experiments/fig6_gradients/plot.py [--quick] [--results FILE] [--out PNG]
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from experiments.curve_plot import plot_main
from experiments.fig6_gradients.experiment import EXPERIMENT

if __name__ == "__main__":
    plot_main(EXPERIMENT)
