"""The Gymnasium environment ``knossos/Rewrite-v0`` (envs/): registration, Gymnasium's checker, and
episodes that agree with applying the same rewrites with the rules directly."""

from __future__ import annotations

import runpy
import subprocess
import sys
import warnings
from typing import Any

import gymnasium
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

import envs
from envs.rewrite import MAX_ACTIONS_LIMIT, RewriteEnv
from knossos.errors import KsError
from knossos.parser import parse_expr
from knossos.printer import format_expr
from rules.actions import children
from rules.sets import get_rule_set

from conftest import ROOT

EXPR = "(div (div 1.0 x) (add 1.0 (div 1.0 x)))"  # 6 actions under binding_simplify_rules, cost 7
EXAMPLE = str(ROOT / "examples" / "bindgen_test_8.ks")


def make(**kwargs: Any) -> RewriteEnv:
    env = gymnasium.make(envs.ENV_ID, **kwargs)
    assert isinstance(env.unwrapped, RewriteEnv)
    return env.unwrapped


def test_import_registers_the_environment_and_loads_no_torch() -> None:
    assert envs.ENV_ID == "knossos/Rewrite-v0"
    assert envs.ENV_ID in gymnasium.registry
    check = "import sys, gymnasium, envs; assert envs.ENV_ID in gymnasium.registry; assert 'torch' not in sys.modules"
    subprocess.run([sys.executable, "-c", check], cwd=ROOT, check=True)


def test_make_with_an_expression_and_with_a_file_and_def() -> None:
    env = gymnasium.make(envs.ENV_ID, program=EXPR, rules="binding_simplify_rules", depth=10)
    obs, info = env.reset(seed=0)
    assert obs in env.observation_space
    assert (info["start"], info["cost"], info["num_actions"], obs["steps_left"]) == ("<expr>", 7.0, 6, 10)
    graph = obs["graph"]
    assert graph.nodes.shape == (parse_expr(EXPR)[0].size,)
    assert graph.edge_links.shape == (graph.edges.shape[0], 2)
    assert obs["node_value"].shape == (graph.nodes.shape[0], 1)

    env = gymnasium.make(envs.ENV_ID, program=EXAMPLE, def_name="f", rules="binding_rules", depth=4)
    obs, info = env.reset()
    assert (info["start"], info["cost"], obs["steps_left"]) == ("f", 12.0, 4)


def test_the_observation_is_the_graph_the_value_network_sees() -> None:
    """Node types, edge links, edge types and constants' values: batch_graphs of the expression alone,
    at every step."""
    from gnn.graph import batch_graphs

    env = make(program="(add (mul 2.0 (div x 1.0)) (let (a (mul x y)) (add a a)))", rules="binding_simplify_rules")
    obs, _ = env.reset()
    for _ in range(3):
        seen = batch_graphs([env.expression])
        graph = obs["graph"]
        np.testing.assert_array_equal(graph.nodes, seen.node_type.numpy())
        np.testing.assert_array_equal(graph.edges, seen.edge_type.numpy())
        np.testing.assert_array_equal(graph.edge_links, seen.edge_index.numpy().T)
        np.testing.assert_array_equal(obs["node_value"][:, 0], seen.node_value.numpy())
        assert graph.edges.size > 0 and obs["node_value"].any()  # a constant (2.0) is on the way
        obs, _, _, _, _ = env.step(0)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"program": EXPR, "depth": 3},
        {"expressions": "bindgen_test", "rules": "binding_rules", "depth": 2, "render_mode": "ansi"},
        {"expressions": ["x"], "depth": 2},  # no action at all: every step is a masked-out one
    ],
    ids=["expression", "set", "dead-end"],
)
def test_gymnasiums_checker_passes_without_warnings(kwargs: dict[str, Any]) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # any complaint of the checker fails the test
        check_env(make(**kwargs))


def test_an_episode_is_the_same_rewrites_applied_with_the_rules() -> None:
    rules, depth = get_rule_set("binding_simplify_rules"), 6
    env = make(program=EXPR, rules="binding_simplify_rules", depth=depth)
    rng = np.random.default_rng(5)
    obs, info = env.reset(seed=1)
    start_cost, total, chosen = info["cost"], 0.0, []
    for step in range(1, depth + 1):
        assert info["num_actions"] == int(info["action_mask"].sum()) == len(children(env.expression, rules))
        assert info["action_mask"][: info["num_actions"]].all()
        action = int(rng.choice(np.flatnonzero(info["action_mask"])))
        obs, reward, terminated, truncated, info = env.step(action)
        chosen.append((action, info["action"]))
        total += reward
        assert obs["steps_left"] == depth - step and not info["invalid_action"] and not truncated
        assert terminated == (step == depth or info["num_actions"] == 0)
        if terminated:
            break
    assert step == depth, "this expression has rewrites at every step"

    e = parse_expr(EXPR)[0]
    for action, name in chosen:
        done, e = children(e, rules)[action]
        assert str(done) == name
    assert env.expression is e
    assert info["cost"] == e.cost
    assert total == pytest.approx(start_cost - e.cost)
    assert info["action_mask"].sum() == 0, "no action is left at zero steps left"
    with pytest.raises(RuntimeError, match=r"the episode is over: call reset\(\)"):
        env.step(0)


def test_a_masked_out_action_spends_a_step_and_changes_nothing() -> None:
    env = make(program=EXPR, depth=2)
    _, info = env.reset()
    obs, reward, terminated, _, info = env.step(info["num_actions"])  # the first index past the valid ones
    assert (reward, terminated, info["invalid_action"], info["action"], obs["steps_left"]) == (
        0.0,
        False,
        True,
        None,
        1,
    )
    assert format_expr(env.expression) == EXPR

    strict = make(program=EXPR, depth=2, invalid_action="raise")
    strict.reset()
    with pytest.raises(ValueError, match="action 6 is masked out: this state has 6 actions"):
        strict.step(6)
    with pytest.raises(ValueError, match=r"action 5000 is not in Discrete\(1024\)"):
        strict.step(5000)


def test_an_expression_without_rewrites_ends_at_the_first_step() -> None:
    env = make(expressions=["x"], depth=5)
    _, info = env.reset()
    assert info["num_actions"] == 0
    _, reward, terminated, _, info = env.step(0)
    assert (reward, terminated, info["invalid_action"]) == (0.0, True, True)


@pytest.mark.parametrize("value", [-1, 0, 2.5, "8", None, 2**20 + 1, 10**30])
def test_max_actions_out_of_range_is_a_one_line_value_error(value: object) -> None:
    with pytest.raises(ValueError, match="max_actions=") as caught:
        RewriteEnv(program=EXPR, max_actions=value)  # type: ignore[arg-type]
    assert isinstance(caught.value, KsError) and "\n" not in str(caught.value)


def test_max_actions_takes_its_limit_and_numpy_integers() -> None:
    env = RewriteEnv(program=EXPR, max_actions=MAX_ACTIONS_LIMIT)
    _, info = env.reset(seed=0)
    assert env.action_space.n == MAX_ACTIONS_LIMIT and info["action_mask"].shape == (MAX_ACTIONS_LIMIT,)
    assert RewriteEnv(program=EXPR, max_actions=np.int64(7)).action_space.n == 7


def test_states_with_more_actions_than_max_actions_drop_the_last() -> None:
    env = make(program=EXPR, max_actions=4)
    with pytest.warns(UserWarning, match="a state has 6 actions, more than max_actions=4"):
        _, info = env.reset()
    assert (info["num_actions"], info["actions_dropped"], info["action_mask"].tolist()) == (4, 2, [1, 1, 1, 1])
    assert [str(a) for a, _ in env.successors] == [str(a) for a, _ in children(env.expression, env.rules)[:4]]


def test_seeded_resets_draw_the_same_starts() -> None:
    def starts(seed: int) -> list[str]:
        env = make(expressions="bindgen_test", rules="binding_rules")
        return [env.reset(seed=seed)[1]["start"]] + [env.reset()[1]["start"] for _ in range(7)]

    assert starts(3) == starts(3)
    assert starts(3) != starts(4)
    assert len(set(starts(3))) > 1
    env = make(expressions=[EXPR, "(mul x 1.0)"])
    assert env.reset(options={"index": 1})[1]["start"] == "expressions[1]"
    with pytest.raises(ValueError, match=r"options\['index'\] must be 0 to 1, not 2"):
        env.reset(options={"index": 2})


def test_render_ansi_is_the_expression() -> None:
    env = make(program=EXPR, render_mode="ansi")
    env.reset()
    assert env.render() == EXPR + "\n"


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({}, "give program= (an expression, or a .ks/.kso file and def_name=), expressions= (a set name"),
        ({"program": EXPR, "expressions": "bindgen_test"}, "give one of program=, expressions= and benchmark=, not "),
        ({"program": EXPR, "rules": "no_rules"}, "unknown rule set 'no_rules'"),
        ({"program": "(add x"}, "<expr>:1:1: error: unbalanced parentheses"),
        ({"program": "no/such/file.ks"}, "no/such/file.ks: error: no such file"),
        ({"program": EXAMPLE, "def_name": "g"}, "error: no def named 'g'"),
        ({"program": str(ROOT / "ksdata/programs/gelu.kso")}, "the file has 5 defs; pick one with def_name="),
        ({"program": EXPR, "def_name": "f"}, "def_name= needs program= to be a file"),
        ({"expressions": "no_set"}, "no arithmetic set 'no_set'"),
        ({"expressions": []}, "expressions= is an empty list"),
        ({"expressions": [EXPR, "(foo"]}, "expressions[1]:1:1: error"),
        ({"program": EXPR, "depth": 0}, "depth= must be a whole number of at least 1, not 0"),
        ({"program": EXPR, "depth": 2.5}, "depth= must be a whole number of at least 1, not 2.5"),
        ({"program": EXPR, "max_actions": -1}, "max_actions= must be a whole number of at least 1"),
        ({"program": EXPR, "max_actions": 0}, "max_actions= must be a whole number of at least 1, not 0"),
        ({"program": EXPR, "max_actions": 2.0}, "max_actions= must be a whole number of at least 1, not 2.0"),
        ({"program": EXPR, "max_actions": "8"}, "max_actions= must be a whole number of at least 1, not '8'"),
        ({"program": EXPR, "max_actions": True}, "max_actions= must be a whole number of at least 1, not True"),
        ({"program": EXPR, "max_actions": 2**20 + 1}, "max_actions= must be at most 1,048,576, not 1,048,577"),
        ({"program": EXPR, "max_actions": 10**30}, "max_actions= must be at most 1,048,576, not 1,000,"),
        ({"program": EXPR, "invalid_action": "skip"}, "invalid_action= must be 'noop' or 'raise'"),
    ],
)
def test_bad_settings_are_one_line_errors(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(KsError) as caught:
        RewriteEnv(**kwargs)
    text = str(caught.value)
    assert message in text and "\n" not in text


def test_the_example_runs_a_random_and_a_greedy_agent(capsys: pytest.CaptureFixture[str]) -> None:
    example = runpy.run_path(str(ROOT / "examples" / "gym_agents.py"))
    example["main"](["--episodes", "1", "--depth", "3"])
    out = capsys.readouterr().out
    assert "random" in out and "greedy" in out
