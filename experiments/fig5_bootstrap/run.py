"""Run fig5_bootstrap (resumable: a rerun carries on where an interrupted one stopped).

Run:  python experiments/fig5_bootstrap/run.py [--quick] [--repetitions N] [--jobs N] [--quiet] [--no-train]
"""

from experiments.curves import run_main
from experiments.fig5_bootstrap.experiment import EXPERIMENT

if __name__ == "__main__":
    run_main(EXPERIMENT)
