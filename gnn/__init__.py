"""Expression graphs and the GGNN value function.  Depends on :mod:`knossos` only.

Filled in by the value-function issue.
"""
