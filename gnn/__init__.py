"""Value networks: expression graphs, the GGNN and the tree network, their value functions for search,
and the shipped models (their training is :mod:`training`).

The graphs and networks depend on :mod:`knossos` only; the value functions and the network's settings
also on :mod:`search`'s value protocol, settings and limits; nothing here imports :mod:`training` or
:mod:`app`.

OpenMP threads that have no work sleep rather than spin (``OMP_WAIT_POLICY=PASSIVE`` unless the
environment says otherwise): a spinning thread takes a core that search, or another process on a
busy machine, needs.  It must be set before torch loads its OpenMP runtime, hence here.
"""

import os

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
