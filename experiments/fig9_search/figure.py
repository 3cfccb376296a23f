"""fig9_search in the registry: `python -m experiments fig9_search run|plot`, and its table."""

from experiments.curve_figure import curve_figure
from experiments.fig9_search.experiment import EXPERIMENT

FIGURE = curve_figure(EXPERIMENT)
