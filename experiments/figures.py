"""The registry of figures: each folder of experiments/ that owns tables of the documentation, or an
experiment that ``python -m experiments FIGURE run|plot`` runs, holds a :class:`Figure` as FIGURE in
its ``figure.py``.  :func:`figures` walks them in the order of :data:`FOLDERS` (the order
``python -m experiments.summary`` prints the tables in).

A ``figure.py`` imports nothing that loads numpy: ``python -m experiments`` imports them all before it
runs one, and fig7_walltime's run.py pins numpy to one thread before numpy loads.
"""

from __future__ import annotations

import functools
import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

#: A script's main: its command-line arguments in, an exit status out (None: 0).
Main = Callable[[list[str]], int | None]

FOLDERS = (
    "fig5_generalisation",
    "fig5_bootstrap",
    "fig6_blas",
    "fig6_cnn",
    "fig6_gradients",
    "fig9_search",
    "fig7_walltime",
    "default_model",
    "blas_test",
    "egraph_baseline",
    "engines",
    "torch_frontend",
    "default_programs",
    "egglog_engine",
    "gradients",
    "training_runs",
    "layers",
    "cheap_gradients",
)


@dataclass(frozen=True)
class Figure:
    """A folder's part of the registry: what it shows, its tables, and its run and plot scripts."""

    name: str
    #: One line for ``python -m experiments --help``.
    what: str
    #: Its tables by the name of their README marker (``<!-- table:NAME -->``), each made from the results files.
    tables: Mapping[str, Callable[[], str]] = field(default_factory=dict)
    run: Main | None = None
    plot: Main | None = None


@functools.cache
def figures() -> dict[str, Figure]:
    """Every folder's Figure, by name, in the order of FOLDERS."""
    out = {}
    for name in FOLDERS:
        figure = importlib.import_module(f"experiments.{name}.figure").FIGURE
        assert isinstance(figure, Figure) and figure.name == name, name
        out[name] = figure
    return out
