"""The applications: optimize.py and train.py, and what wires the packages together for them.

The one layer that may import every other: ``app`` > ``gnn`` > ``search`` > ``rules`` > ``knossos``
(checked by the import-linter contracts in pyproject.toml).  :mod:`app.optimize_cli` is optimize.py
(command line, outputs, C++ emission, benchmark tables), :mod:`app.train_cli` is train.py, and
:mod:`app.models` turns a model's name on a command line into a value function (loading :mod:`gnn`'s
checkpoints, which search itself never imports).
"""
