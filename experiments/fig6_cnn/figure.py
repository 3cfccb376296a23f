"""fig6_cnn in the registry: `python -m experiments fig6_cnn run|plot`, and its table."""

from experiments.curve_figure import curve_figure
from experiments.fig6_cnn.experiment import EXPERIMENT

FIGURE = curve_figure(EXPERIMENT)
