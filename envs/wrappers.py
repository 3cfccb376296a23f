"""Wrappers for RL libraries whose policies take fixed-size observations only (Stable-Baselines3's do).

:class:`FlatObservation` turns the graph observation into one float32 vector: the first
``max_nodes`` nodes in pre-order, each a one-hot node type and its constant's squashed value, then
``steps_left / depth``.  Edges are left out, and nodes past ``max_nodes`` too (a warning says so
once): enough for a multilayer perceptron on small expressions, not what the graph network sees.
``action_masks()`` and the rest of the environment stay reachable through ``get_wrapper_attr``.
"""

from __future__ import annotations

from typing import Any, Final

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from envs.rewrite import EnvSettingError, Observation, RewriteEnv
from gnn.graph import NUM_NODE_TYPES

#: The bundled arithmetic sets' expressions have at most 37 nodes; ten steps of new_bind and lift_bind add some.
DEFAULT_MAX_NODES: Final = 128
MAX_NODES_LIMIT: Final = 4096


class FlatObservation(gym.ObservationWrapper[np.ndarray, np.int64, Observation]):
    """The observation as ``[max_nodes * (NUM_NODE_TYPES + 1) + 1]`` float32 (see the module's docstring)."""

    def __init__(self, env: gym.Env[Observation, np.int64], max_nodes: int = DEFAULT_MAX_NODES) -> None:
        super().__init__(env)
        if not isinstance(env.unwrapped, RewriteEnv):
            raise EnvSettingError(f"FlatObservation wraps knossos/Rewrite-v0, not {type(env.unwrapped).__name__}")
        if isinstance(max_nodes, bool) or not isinstance(max_nodes, int) or not 1 <= max_nodes <= MAX_NODES_LIMIT:
            raise EnvSettingError(f"max_nodes= must be a whole number from 1 to {MAX_NODES_LIMIT}, not {max_nodes!r}")
        self.max_nodes = max_nodes
        self._depth = env.unwrapped.depth
        size = max_nodes * (NUM_NODE_TYPES + 1) + 1
        self.observation_space = spaces.Box(-np.inf, np.inf, (size,), np.float32)
        self._warned = False

    def observation(self, observation: Observation) -> np.ndarray:
        nodes = observation["graph"].nodes
        n = min(len(nodes), self.max_nodes)
        if len(nodes) > self.max_nodes and not self._warned:
            self._warned = True
            gym.logger.warn(
                f"an expression has {len(nodes)} nodes, more than max_nodes={self.max_nodes}: the rest are left out"
            )
        types = np.zeros((self.max_nodes, NUM_NODE_TYPES), dtype=np.float32)
        types[np.arange(n), nodes[:n]] = 1.0
        values = np.zeros(self.max_nodes, dtype=np.float32)
        values[:n] = observation["node_value"][:n, 0]
        steps = np.float32(observation["steps_left"] / self._depth)
        return np.concatenate([types.ravel(), values, [steps]]).astype(np.float32)

    def action_masks(self) -> Any:
        """The wrapped environment's :meth:`~envs.rewrite.RewriteEnv.action_masks`."""
        return self.env.get_wrapper_attr("action_masks")()
