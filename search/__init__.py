"""The rewrite MDP (state = expression + steps left) and the search algorithms over it.

Depends on :mod:`knossos` and :mod:`rules`, never on :mod:`gnn` or :mod:`app`.  Value functions come in
through a small protocol (:mod:`search.value`); :mod:`app.models` loads a trained one by name.
"""
