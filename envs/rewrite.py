"""``knossos/Rewrite-v0``: the rewrite MDP of :mod:`search.mdp` as a Gymnasium environment.

A state is an expression and the steps left; an action rewrites with one rule at one node; the
reward is the drop in the reference cost, ``cost(before) - cost(after)``.

Observation (a :class:`~gymnasium.spaces.Dict`):

* ``graph``: the expression's graph as the value network sees it (:func:`gnn.graph.expr_graph`), a
  :class:`~gymnasium.spaces.GraphInstance` with ``nodes`` the node type of each node in pre-order
  (int64 ``[N]``, ``NUM_NODE_TYPES`` values), ``edges`` the edge types (int64 ``[E]``,
  ``NUM_EDGE_TYPES`` values) and ``edge_links`` each edge's source and target node (int64 ``[E, 2]``).
* ``node_value``: the network's other node feature, the squashed value of each constant (0 for
  every other node), float32 ``[N, 1]`` (a column, as a Gymnasium sequence of one-element boxes).
* ``steps_left``: 0 to ``depth``.

Actions: ``Discrete(max_actions)``; action ``i`` is the ``i``-th of the state's rewrites in the
order of :func:`rules.actions.actions` (by node number, then by the rule set's order), which
:attr:`RewriteEnv.successors` lists.  ``info["action_mask"]`` (int8 ``[max_actions]``) marks those
that exist.  A masked-out action, as ``action_space.sample()`` gives, leaves the expression as it is
with reward 0 and ``info["invalid_action"] = True`` but spends a step, so that every episode ends
within ``depth`` steps (``invalid_action="raise"`` makes it a ValueError instead).  A state with
more than ``max_actions`` rewrites offers the first ``max_actions`` (``info["actions_dropped"]``
counts the rest; a warning says so once per environment).

An episode is terminated when no action is left: at zero steps left, or at an expression no rule
rewrites.  It is never truncated (add a ``TimeLimit`` for that).  ``reset`` picks the start: the
one program, or one of a set drawn with the environment's seeded ``np_random`` (``options={"index":
i}`` picks start ``i``, ``options={"benchmark": uri}`` a benchmark, or draws from a dataset, for
this episode).

Conventions of the RL libraries: :meth:`RewriteEnv.action_masks` is ``info["action_mask"]`` as
booleans (what sb3-contrib's MaskablePPO asks for); starts are benchmarks with URIs and datasets
(:mod:`envs.datasets`, ``env.datasets``); :attr:`RewriteEnv.state` is the episode as a replayable
``(benchmark, actions, reward)`` (:mod:`envs.state`), which :meth:`RewriteEnv.validate` replays.
"""

from __future__ import annotations

from collections.abc import Sequence
from numbers import Integral
from typing import Any, Final

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from envs.datasets import DATASETS, SCHEME, Datasets, split_uri
from envs.starts import Start, load_starts
from envs.state import EnvState, Replay, validate
from gnn.graph import NUM_EDGE_TYPES, NUM_NODE_TYPES, expr_graph
from knossos.errors import KsUsageError, one_line
from knossos.expr import Expr
from knossos.printer import format_expr
from rules.actions import Action
from rules.rule_set import RuleSet
from rules.sets import get_rule_set
from search.mdp import Transitions
from search.state import expr_of

#: Random walks of 10 steps over the bundled sets and programs meet at most 97 rewrites per state
#: with binding_simplify_rules (arithmetic sets) and 448 with ml_rules (gmm programs): twice that.
DEFAULT_MAX_ACTIONS: Final = 1024
#: The largest action space: every step hands out an int8 mask this long (1 MiB), and no state of the
#: bundled sets comes near it; far larger values only fail later, inside numpy.
MAX_ACTIONS_LIMIT: Final = 2**20
INVALID_ACTION_MODES: Final = ("noop", "raise")

Observation = dict[str, Any]


class RewriteEnv(gym.Env[Observation, np.int64]):
    """Rewrite an expression with the rules of ``rules`` for ``depth`` steps (see the module's docstring).

    Args:
        program: a bare expression in parentheses (``"(mul x 1.0)"``, free variables are Floats) or a
            ``.ks``/``.kso`` file whose def ``def_name`` (needed when it has several) is the start.
        expressions: instead of ``program``, the starts to draw from: a set name of
            ``ksdata`` (``generated_train``, ``bindgen_test``, several joined by ``+``) or a
            list of expressions.
        benchmark: instead of either, a benchmark URI (``benchmark://bindgen_test-v0/3``), a dataset's
            (``benchmark://bindgen_test-v0``: each reset draws one of it), or a list of them.
        rules: a rule set name (several joined by ``+``) or a :class:`~rules.rule_set.RuleSet`.
        depth: the steps of an episode.
        max_actions: the size of the action space, 1 to :data:`MAX_ACTIONS_LIMIT`.
        invalid_action: ``"noop"`` (a masked-out action spends a step and changes nothing) or ``"raise"``.
        render_mode: ``None`` or ``"ansi"`` (``render()`` returns the expression's text).
    """

    # render_fps only quiets the checker: "ansi" frames are text returned on demand, never played back.
    metadata: dict[str, Any] = {"render_modes": ["ansi"], "render_fps": 4}  # noqa: RUF012 (Gymnasium's class attribute)

    def __init__(
        self,
        program: str | Expr | None = None,
        *,
        def_name: str | None = None,
        expressions: str | Sequence[str | Expr] | None = None,
        benchmark: str | Sequence[str] | None = None,
        rules: str | RuleSet = "binding_simplify_rules",
        depth: int = 10,
        max_actions: int = DEFAULT_MAX_ACTIONS,
        invalid_action: str = "noop",
        render_mode: str | None = None,
    ) -> None:
        self.depth = _whole_number("depth", depth)
        self.max_actions = _whole_number("max_actions", max_actions, MAX_ACTIONS_LIMIT)
        if invalid_action not in INVALID_ACTION_MODES:
            raise KsUsageError(f"invalid_action= must be 'noop' or 'raise', not {one_line(repr(invalid_action))}")
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise KsUsageError(f"render_mode= must be None or 'ansi', not {one_line(repr(render_mode))}")
        self.rules = _rule_set(rules)
        self.starts: list[Start] = load_starts(program, def_name, expressions, benchmark)
        self.invalid_action = invalid_action
        self.render_mode = render_mode
        self.observation_space = spaces.Dict(
            {
                "graph": spaces.Graph(
                    node_space=spaces.Discrete(NUM_NODE_TYPES), edge_space=spaces.Discrete(NUM_EDGE_TYPES)
                ),
                "node_value": spaces.Sequence(spaces.Box(-np.inf, np.inf, (1,), np.float32), stack=True),
                "steps_left": spaces.Discrete(self.depth + 1),
            }
        )
        self.action_space = spaces.Discrete(self.max_actions)
        self._start: Start | None = None
        self._expr: Expr | None = None
        self._steps_left = 0
        self._successors: list[tuple[Action, Expr]] = []
        self._dropped = 0
        self._over = False  # terminated: step() needs a reset() first
        self._warned_dropped = False
        self._transitions = Transitions(self.rules)
        self._done: list[str] = []  # the rewrites of this episode, NODE:RULE
        self._reward = 0.0

    # -- the state, for agents that look ahead (the example's greedy agent) and for tests -------------
    @property
    def expression(self) -> Expr:
        """The current expression."""
        if self._expr is None:
            raise RuntimeError("call reset() first")
        return self._expr

    @property
    def successors(self) -> list[tuple[Action, Expr]]:
        """The valid actions now, as (action, resulting expression), in the order of the action indices."""
        return list(self._successors)

    def action_masks(self) -> np.ndarray[Any, np.dtype[np.bool_]]:
        """The valid actions now, as booleans: ``info["action_mask"]`` as sb3-contrib's MaskablePPO asks for it."""
        mask = np.zeros(self.max_actions, dtype=bool)
        mask[: len(self._successors)] = True
        return mask

    @property
    def benchmark(self) -> str:
        """The URI (or file URI, or expression text) of this episode's start."""
        if self._start is None:
            raise RuntimeError("call reset() first")
        return self._start.uri

    @property
    def datasets(self) -> Datasets:
        """Every dataset and its benchmarks (:data:`envs.datasets.DATASETS`)."""
        return DATASETS

    @property
    def state(self) -> EnvState:
        """This episode so far as ``(benchmark, actions, reward)``, to write with :func:`envs.state.write_states`."""
        return EnvState(self.benchmark, tuple(self._done), self._reward)

    def validate(self, state: EnvState) -> Replay:
        """Replay ``state`` with this environment's rules and check its reward (:func:`envs.state.validate`);
        the episode under way is left as it is."""
        return validate(state, self.rules)

    # -- the Gymnasium API ---------------------------------------------------------------------------
    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Observation, dict[str, Any]]:
        super().reset(seed=seed)
        self._start = self._pick(options or {})
        # A fresh successor cache per episode: memory stays bounded however many episodes are run.
        self._transitions = Transitions(self.rules)
        self._enter(self._start.expr, self.depth)
        self._over = False
        self._done, self._reward = [], 0.0
        return self._observation(), self._info()

    def step(self, action: int | np.integer[Any]) -> tuple[Observation, float, bool, bool, dict[str, Any]]:
        before = self.expression
        if self._over:
            raise RuntimeError("the episode is over: call reset()")
        index = self._action_index(action)
        done: Action | None = None
        if index < len(self._successors):
            done, after = self._successors[index]
            reward = self._transitions.reward(before, after)
        elif self.invalid_action == "raise":
            raise ValueError(f"action {index} is masked out: this state has {len(self._successors)} actions")
        else:
            after, reward = before, 0.0
        self._enter(after, self._steps_left - 1)
        if done is not None:
            self._done.append(str(done))
            self._reward += reward
        info = self._info()
        info["invalid_action"] = done is None
        info["action"] = None if done is None else str(done)  # "node:rule"
        self._over = not self._successors
        return self._observation(), float(reward), self._over, False, info

    def render(self) -> str | None:
        if self.render_mode != "ansi":
            return None
        return format_expr(self.expression) + "\n"

    # -- helpers -------------------------------------------------------------------------------------
    def _pick(self, options: dict[str, Any]) -> Start:
        unknown = set(options) - {"index", "benchmark"}
        if unknown:
            raise ValueError(
                one_line(f"unknown reset option(s) {sorted(unknown)}: the options are 'index' and 'benchmark'")
            )
        if "index" in options and "benchmark" in options:
            raise ValueError("give reset option 'index' or 'benchmark', not both")
        if "benchmark" in options:
            uri = options["benchmark"]
            if not isinstance(uri, str):
                raise ValueError(f"options['benchmark'] must be a URI, not {type(uri).__name__}")
            if uri.startswith(SCHEME) and split_uri(uri)[1] is None:  # a dataset: draw one of it
                return self.datasets[uri].random_benchmark(self.np_random)
            return self.datasets.benchmark(uri)
        if "index" not in options:
            return self.starts[int(self.np_random.integers(len(self.starts)))]
        index = options["index"]
        if not isinstance(index, Integral) or isinstance(index, bool) or not 0 <= int(index) < len(self.starts):
            raise ValueError(one_line(f"options['index'] must be 0 to {len(self.starts) - 1}, not {index!r}"))
        return self.starts[int(index)]

    def _enter(self, e: Expr, steps_left: int) -> None:
        self._expr, self._steps_left = e, steps_left
        found = [(a, expr_of(c)) for a, c in self._transitions.successors(e)] if steps_left > 0 else []
        self._successors = found[: self.max_actions]
        self._dropped = len(found) - len(self._successors)
        if self._dropped and not self._warned_dropped:
            self._warned_dropped = True
            gym.logger.warn(
                f"a state has {len(found)} actions, more than max_actions={self.max_actions}: "
                "the last ones are dropped (info['actions_dropped'] counts them)"
            )

    def _action_index(self, action: object) -> int:
        if not self.action_space.contains(action):
            raise ValueError(one_line(f"action {action!r} is not in Discrete({self.max_actions})"))
        return int(np.asarray(action))  # an int, a numpy integer or a 0-d array

    def _observation(self) -> Observation:
        g = expr_graph(self.expression)
        # Copies: the graph's arrays are cached, shared and read-only; users keep what they are given.
        return {
            "graph": spaces.GraphInstance(
                nodes=g.node_type.copy(), edges=g.edge_type.copy(), edge_links=g.edge_index.T.copy()
            ),
            "node_value": g.node_value.reshape(-1, 1).copy(),
            "steps_left": self._steps_left,
        }

    def _info(self) -> dict[str, Any]:
        mask = np.zeros(self.max_actions, dtype=np.int8)
        mask[: len(self._successors)] = 1
        assert self._start is not None
        return {
            "action_mask": mask,
            "num_actions": len(self._successors),
            "actions_dropped": self._dropped,
            "cost": float(self.expression.cost),
            "start": self._start.name,
            "benchmark": self._start.uri,
        }


class EnvSettingError(KsUsageError, ValueError):
    """A setting out of its range: a usage error, and a ValueError as Gymnasium code expects."""


def _whole_number(name: str, value: object, limit: int | None = None) -> int:
    if not isinstance(value, Integral) or isinstance(value, bool) or int(value) < 1:
        raise EnvSettingError(f"{name}= must be a whole number of at least 1, not {one_line(repr(value))}")
    if limit is not None and int(value) > limit:
        raise EnvSettingError(f"{name}= must be at most {limit:,}, not {int(value):,}")
    return int(value)


def _rule_set(rules: object) -> RuleSet:
    if isinstance(rules, RuleSet):
        return rules
    if not isinstance(rules, str):
        raise KsUsageError(f"rules= must be a rule set name or a RuleSet, not {type(rules).__name__}")
    return get_rule_set(rules)
