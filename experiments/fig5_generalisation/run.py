"""Run fig5_generalisation (resumable: a rerun carries on where an interrupted one stopped).

Run:  python experiments/fig5_generalisation/run.py [--quick] [--repetitions N] [--jobs N] [--quiet] [--no-train]
"""

from experiments.curves import run_main
from experiments.fig5_generalisation.experiment import EXPERIMENT

if __name__ == "__main__":
    run_main(EXPERIMENT)
