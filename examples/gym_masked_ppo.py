"""Train a masked PPO agent (sb3-contrib's MaskablePPO) in ``knossos/Rewrite-v0`` for about a minute, and
compare it with greedy search on the benchmarks it trained on.

Needs the ``gym-train`` extra (``pip install -e '.[gym-train]'``: stable-baselines3 and sb3-contrib)::

    python examples/gym_masked_ppo.py [--seconds 60] [--depth 10] [--seed 0] [--benchmark URI ...]

The policy is a multilayer perceptron over :class:`envs.wrappers.FlatObservation` (one-hot node types
in pre-order, not the graph network), masked with ``action_masks()``.  Each episode starts at one of
the benchmarks, drawn by the environment.  Afterwards every benchmark is played once by the trained
policy (its most likely allowed action), by the greedy agent (the largest immediate reward) and by
greedy best-first search (:func:`search.astar.greedy`, which looks ahead through a whole search tree
of ``--budget`` expressions), and the final costs are printed with the best known ones.  The agent
is scored on the benchmarks it trained on: this shows the API at work, not generalisation.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Sequence
from typing import Any

import gymnasium
import numpy as np

import envs
from envs.datasets import DATASETS
from envs.rewrite import RewriteEnv
from envs.wrappers import FlatObservation
from search.plan import Plan, run

BENCHMARKS = [f"benchmark://binding_simplify_8-v0/{i}" for i in range(4)]


def make_env(benchmarks: Sequence[str], rules: str, depth: int) -> FlatObservation:
    # 128 actions: the states of these sets have at most 97 rewrites; a smaller head trains faster.
    return FlatObservation(
        gymnasium.make(envs.ENV_ID, benchmark=list(benchmarks), rules=rules, depth=depth, max_actions=128)
    )


def play(env: FlatObservation, uri: str, choose: Any) -> float:
    """The final cost of one episode from ``uri`` with ``choose(obs, inner env) -> action``."""
    inner = env.unwrapped
    assert isinstance(inner, RewriteEnv)
    obs, info = env.reset(options={"benchmark": uri})
    done = False
    while not done:
        obs, _, terminated, truncated, info = env.step(choose(obs, inner))
        done = terminated or truncated
    return float(info["cost"])


def greedy_agent(obs: np.ndarray, env: RewriteEnv) -> int:
    costs = [after.cost for _, after in env.successors]
    return int(np.argmin(costs)) if costs else 0


def main(argv: Sequence[str] | None = None) -> dict[str, dict[str, float]]:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seconds", type=float, default=60.0, help="training time")
    p.add_argument("--depth", type=int, default=10, help="steps per episode")
    p.add_argument("--rules", default="binding_simplify_rules")
    p.add_argument("--budget", type=int, default=1000, help="greedy search's evaluations per benchmark")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--benchmark", action="append", help=f"a benchmark URI (repeat; default: {' '.join(BENCHMARKS)})")
    args = p.parse_args(argv)
    try:
        from sb3_contrib import MaskablePPO
        from stable_baselines3.common.callbacks import BaseCallback
    except ModuleNotFoundError:
        raise SystemExit("this example needs sb3-contrib: pip install -e '.[gym-train]'") from None

    class StopAfter(BaseCallback):
        def __init__(self, seconds: float) -> None:
            super().__init__()
            self.deadline = time.perf_counter() + seconds

        def _on_step(self) -> bool:
            return time.perf_counter() < self.deadline

    benchmarks = args.benchmark or BENCHMARKS
    env = make_env(benchmarks, args.rules, args.depth)
    env.reset(seed=args.seed)
    model = MaskablePPO("MlpPolicy", env, n_steps=256, batch_size=64, gamma=1.0, seed=args.seed, verbose=0)
    started = time.perf_counter()
    model.learn(total_timesteps=10**9, callback=StopAfter(args.seconds))
    print(
        f"MaskablePPO: {model.num_timesteps} steps in {time.perf_counter() - started:.0f} s on "
        f"{len(benchmarks)} benchmarks, {args.rules}, depth {args.depth}"
    )

    def ppo(obs: np.ndarray, inner: RewriteEnv) -> int:
        action, _ = model.predict(obs, action_masks=inner.action_masks(), deterministic=True)
        return int(action)

    plan = Plan(rules=args.rules, seed=args.seed).overridden(algorithm="greedy", depth=args.depth, budget=args.budget)
    rows: dict[str, dict[str, float]] = {}
    print(f"  {'benchmark':<34} {'start':>7} {'PPO':>7} {'greedy':>7} {'search':>7} {'best':>7}")
    for uri in benchmarks:
        b = DATASETS.benchmark(uri)
        row = {
            "start": float(b.expr.cost),
            "ppo": play(env, uri, ppo),
            "greedy": play(env, uri, greedy_agent),
            "search": run(b.expr, plan).best_cost,
            "best": float("nan") if b.best_known is None else b.best_known,
        }
        rows[uri] = row
        print(f"  {uri:<34} " + " ".join(f"{v:>7.4g}" for v in row.values()))
    print("  PPO and greedy: the cost where the episode ends; search: the cheapest expression its tree met")
    return rows


if __name__ == "__main__":
    main()
