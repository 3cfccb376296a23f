"""The rewrite MDP (state = expression + steps left) and the search algorithms over it.

Depends on :mod:`knossos` and :mod:`rules`.  Value functions come in through a small protocol
(:mod:`search.value`); :mod:`search.models` imports :mod:`gnn` only when a trained model is named.
"""
