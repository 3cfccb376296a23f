"""fig5_generalisation in the registry: `python -m experiments fig5_generalisation run|plot`, and its table."""

from experiments.curve_figure import curve_figure
from experiments.fig5_generalisation.experiment import EXPERIMENT

FIGURE = curve_figure(EXPERIMENT)
