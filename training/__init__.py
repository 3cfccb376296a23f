"""Training value networks (Algorithm 1): configs, the loop, where its searches run, fitting,
checkpoints, metrics and their report, and exporting a model for search.

Depends on :mod:`gnn` (the networks), :mod:`search`, :mod:`rules` and :mod:`knossos`; nothing
below it imports it, and only the applications (:mod:`app`, :mod:`envs`) and the experiments do.
"""

import gnn  # noqa: F401  # first: it sets OMP_WAIT_POLICY before torch loads its OpenMP runtime
