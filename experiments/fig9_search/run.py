"""Run fig9_search (resumable: a rerun carries on where an interrupted one stopped).

Run:  python experiments/fig9_search/run.py [--quick] [--repetitions N] [--jobs N] [--quiet] [--no-train]
"""

from experiments.curves import run_main
from experiments.fig9_search.experiment import EXPERIMENT

if __name__ == "__main__":
    run_main(EXPERIMENT)
