"""Gymnasium environments of the rewrite MDP.

Importing this package registers ``knossos/Rewrite-v0`` (:mod:`envs.rewrite`), Gymnasium's convention
(``import compiler_gym`` does the same), so that ``gymnasium.make("knossos/Rewrite-v0", ...)`` builds
one.  Only the name is registered here: the environment's module, which loads torch through
:mod:`gnn.graph`, is imported when the first environment is made.
"""

from __future__ import annotations

try:
    import gymnasium
except ModuleNotFoundError:  # an optional dependency: say which extra brings it
    raise ModuleNotFoundError("envs needs gymnasium: pip install -e '.[gym]'") from None

ENV_ID = "knossos/Rewrite-v0"

if ENV_ID not in gymnasium.registry:  # a second import (importlib.reload) would warn about overriding it
    gymnasium.register(id=ENV_ID, entry_point="envs.rewrite:RewriteEnv")
