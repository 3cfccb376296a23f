"""Value networks: expression graphs, the GGNN and the tree network, their training and the shipped models.

The graphs and networks depend on :mod:`knossos` only; value functions, configs and the training
loop also on :mod:`search` (and the training loop on :mod:`rules`); nothing here imports :mod:`app`.

OpenMP threads that have no work sleep rather than spin (``OMP_WAIT_POLICY=PASSIVE`` unless the
environment says otherwise): a spinning thread takes a core that search, or another process on a
busy machine, needs.  It must be set before torch loads its OpenMP runtime, hence here.
"""

import os

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
