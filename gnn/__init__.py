"""Expression graphs and the GGNN value function.  Depends on :mod:`knossos` only.

OpenMP threads that have no work sleep rather than spin (``OMP_WAIT_POLICY=PASSIVE`` unless the
environment says otherwise): a spinning thread takes a core that search, or another process on a
busy machine, needs.  It must be set before torch loads its OpenMP runtime, hence here.
"""

import os

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
