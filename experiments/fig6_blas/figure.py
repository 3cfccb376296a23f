"""fig6_blas in the registry: `python -m experiments fig6_blas run|plot`, and its table."""

from experiments.curve_figure import curve_figure
from experiments.fig6_blas.experiment import EXPERIMENT

FIGURE = curve_figure(EXPERIMENT)
