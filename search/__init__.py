"""The rewrite MDP (state = expression + steps left) and the search algorithms over it.

Depends on :mod:`knossos` and :mod:`rules`; never on :mod:`gnn` (value functions come in through a
small protocol).  Filled in by the search issue.
"""
