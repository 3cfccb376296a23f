"""fig5_bootstrap in the registry: `python -m experiments fig5_bootstrap run|plot`, and its table."""

from experiments.curve_figure import curve_figure
from experiments.fig5_bootstrap.experiment import EXPERIMENT

FIGURE = curve_figure(EXPERIMENT)
