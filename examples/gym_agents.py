"""A random and a greedy agent in the Gymnasium environment ``knossos/Rewrite-v0``; nothing is trained.

The random agent picks uniformly among the actions that ``info["action_mask"]`` allows; the greedy one
takes the allowed action with the largest immediate reward (the drop in cost), looking one step ahead
through ``env.unwrapped.successors``.  Each prints, per episode, the start cost, the final cost and
the lowest cost on the way::

    python examples/gym_agents.py [--episodes 3] [--depth 10] [--seed 0]
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import gymnasium
import numpy as np

import envs
from envs.rewrite import RewriteEnv

EXAMPLE = Path(__file__).resolve().parent / "bindgen_test_8.ks"
Agent = Callable[[RewriteEnv, dict[str, Any], np.random.Generator], int]


def random_agent(env: RewriteEnv, info: dict[str, Any], rng: np.random.Generator) -> int:
    allowed = np.flatnonzero(info["action_mask"])
    return int(rng.choice(allowed)) if allowed.size else 0  # nothing allowed: any action is a no-op


def greedy_agent(env: RewriteEnv, info: dict[str, Any], rng: np.random.Generator) -> int:
    costs = [after.cost for _, after in env.successors]
    return int(np.argmin(costs)) if costs else 0  # the cheapest result is the largest reward


def episode(
    env: gymnasium.Env[Any, int], agent: Agent, seed: int, rng: np.random.Generator
) -> tuple[str, float, float, float]:
    """(start, start cost, final cost, lowest cost) of one episode."""
    inner = env.unwrapped  # the environment itself, under gymnasium.make's checking wrappers
    assert isinstance(inner, RewriteEnv)
    _, info = env.reset(seed=seed)
    start, start_cost = info["start"], info["cost"]
    lowest, terminated, truncated = start_cost, False, False
    while not (terminated or truncated):
        _, _, terminated, truncated, info = env.step(agent(inner, info, rng))
        lowest = min(lowest, info["cost"])
    return start, start_cost, info["cost"], lowest


def main(argv: Sequence[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--episodes", type=int, default=3, help="episodes per agent and environment")
    p.add_argument("--depth", type=int, default=10, help="steps per episode")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    settings = {
        "bindgen_test (a set: each reset draws one)": {"expressions": "bindgen_test", "rules": "binding_rules"},
        f"{EXAMPLE.name}, def f": {"program": str(EXAMPLE), "def_name": "f", "rules": "binding_rules"},
        "a bare expression": {"program": "(div (mul x (add y 0.0)) (mul 1.0 x))", "rules": "simplify_rules"},
    }
    agents: dict[str, Agent] = {"random": random_agent, "greedy": greedy_agent}
    for title, kwargs in settings.items():
        env = gymnasium.make(envs.ENV_ID, depth=args.depth, **kwargs)
        print(f"{title}: {kwargs['rules']}, depth {args.depth}")
        print(f"  {'agent':<8} {'start':<16} {'start cost':>10} {'final cost':>10} {'lowest':>8}")
        for name, agent in agents.items():
            rng = np.random.default_rng(args.seed)
            for k in range(args.episodes):
                start, start_cost, final, lowest = episode(env, agent, args.seed + k, rng)
                print(f"  {name:<8} {start:<16} {start_cost:>10.4g} {final:>10.4g} {lowest:>8.4g}")
        env.close()


if __name__ == "__main__":
    main()
