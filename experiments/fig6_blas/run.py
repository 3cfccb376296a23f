"""Run fig6_blas (resumable: a rerun carries on where an interrupted one stopped).

Run:  python experiments/fig6_blas/run.py [--quick] [--repetitions N] [--jobs N] [--quiet] [--no-train]
"""

from experiments.curves import run_main
from experiments.fig6_blas.experiment import EXPERIMENT

if __name__ == "__main__":
    run_main(EXPERIMENT)
