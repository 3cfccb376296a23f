"""The RL conventions of ``knossos/Rewrite-v0`` (envs/): ``action_masks()``, benchmark URIs and datasets,
replayable states in CSV with ``validate``, vectorised environments, and the masked PPO example."""

from __future__ import annotations

import importlib.util
import io
import runpy
import warnings
from typing import Any

import gymnasium
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

import envs
from envs.datasets import DATASETS, BenchmarkError, load_benchmark
from envs.rewrite import RewriteEnv
from envs.state import EnvState, StateError, read_states, validate, write_states
from envs.wrappers import FlatObservation
from knossos.errors import KsError
from knossos.printer import format_expr
from ksdata.loader import DataSource, load_targets

from conftest import ROOT

EXPR = "(div (div 1.0 x) (add 1.0 (div 1.0 x)))"
EXAMPLE = ROOT / "examples" / "bindgen_test_8.ks"


def make(**kwargs: Any) -> RewriteEnv:
    env = gymnasium.make(envs.ENV_ID, **kwargs)
    assert isinstance(env.unwrapped, RewriteEnv)
    return env.unwrapped


def play(env: RewriteEnv, seed: int, steps: int) -> dict[str, Any]:
    """Random allowed actions, chosen by ``action_masks()``, until the episode ends or ``steps`` are done."""
    rng = np.random.default_rng(seed)
    _, info = env.reset(seed=seed)
    for _ in range(steps):
        allowed = np.flatnonzero(env.action_masks())
        _, _, terminated, _, info = env.step(int(rng.choice(allowed)) if allowed.size else 0)
        if terminated:
            break
    return info


# -- action_masks ---------------------------------------------------------------------------------------
def test_action_masks_is_the_info_mask_as_booleans_at_every_step() -> None:
    env = make(program=EXPR, depth=4, max_actions=16)
    _, info = env.reset(seed=0)
    for _ in range(4):
        mask = env.action_masks()
        assert mask.dtype == np.bool_ and mask.shape == (16,)
        np.testing.assert_array_equal(mask, info["action_mask"].astype(bool))
        assert mask.sum() == info["num_actions"] == len(env.successors)
        _, _, terminated, _, info = env.step(int(np.flatnonzero(mask)[0]))
    assert terminated and not env.action_masks().any()


def test_action_masks_is_reachable_through_wrappers() -> None:
    """sb3-contrib asks the outermost wrapper, through get_wrapper_attr."""
    env = FlatObservation(gymnasium.make(envs.ENV_ID, program=EXPR, depth=3))
    obs, info = env.reset(seed=0)
    assert obs.shape == env.observation_space.shape and obs.dtype == np.float32
    np.testing.assert_array_equal(env.get_wrapper_attr("action_masks")(), info["action_mask"].astype(bool))
    np.testing.assert_array_equal(env.action_masks(), info["action_mask"].astype(bool))


# -- benchmarks and datasets -----------------------------------------------------------------------------
def test_datasets_list_the_sets_and_program_files() -> None:
    names = [d.name for d in DATASETS]
    assert {"bindgen_test-v0", "generated_train-v0", "blas_test-v0", "gmm_train-v0"} <= set(names)
    assert not any("template" in n for n in names)
    d = DATASETS["benchmark://bindgen_test-v0"]
    assert DATASETS["bindgen_test-v0"] is d and "bindgen_test-v0" in DATASETS and "nope-v0" not in DATASETS
    assert (d.uri, d.kind, d.rules, len(d)) == ("benchmark://bindgen_test-v0", "expressions", "binding_rules", 12)
    assert d.benchmark_uris()[3] == "benchmark://bindgen_test-v0/3"
    assert DATASETS["blas_test-v0"].rules == "ml_rules"
    assert "benchmark://blas_test-v0/dot" in DATASETS["blas_test-v0"].benchmark_uris()


def test_a_benchmark_uri_names_the_sets_expression_and_best_known_cost() -> None:
    targets = load_targets(DataSource(set="bindgen_test"), "test")
    b = load_benchmark("benchmark://bindgen_test-v0/3")
    assert (b.name, b.expr, b.best_known) == ("bindgen_test[3]", targets[3].expr, targets[3].best_known)
    assert DATASETS["bindgen_test-v0"].benchmark(3) == b == DATASETS.benchmark(b.uri)
    dot = load_benchmark("benchmark://blas_test-v0/dot")
    blas = load_targets(DataSource(file="ksdata/programs/blas_test.kso"), "test")
    assert dot.expr == next(t.expr for t in blas if t.name == "dot")
    f = load_benchmark(f"file://{EXAMPLE}#f")
    assert (f.name, f.uri, f.expr.cost) == ("f", f"file://{EXAMPLE.resolve()}#f", 12.0)
    e = load_benchmark(EXPR)
    assert (e.name, e.uri, format_expr(e.expr)) == ("<expr>", EXPR, EXPR)


@pytest.mark.parametrize(
    ("uri", "message"),
    [
        ("benchmark://nope-v0/1", "no dataset 'nope-v0' (known: bindgen_36-v0, "),
        ("benchmark://bindgen_test-v0/12", "no benchmark '12' in benchmark://bindgen_test-v0 (its ids: 0 to 11)"),
        ("benchmark://bindgen_test-v0/x", "no benchmark 'x' in benchmark://bindgen_test-v0"),
        ("benchmark://blas_test-v0/nodef", "no benchmark 'nodef' in benchmark://blas_test-v0 (its ids: float_matrix"),
        (
            "benchmark://bindgen_test-v0",
            "names a dataset, not a benchmark: add /ID, e.g. benchmark://bindgen_test-v0/0",
        ),
        ("bindgen_test-v0/3", "a benchmark is benchmark://DATASET/ID, file://PATH#DEF or an expression in parentheses"),
        ("file:///no/such.ks", "a file benchmark names its def after '#'"),
        ("file:///no/such.ks#f", "/no/such.ks: error: no such file"),
        (f"file://{EXAMPLE}#g", "no def named 'g'"),
        ("(add x", "<benchmark>:1:1: error: unbalanced parentheses"),
        ("benchmark://bindgen_test-v0/3\nx", "no benchmark '3\\nx'"),
    ],
)
def test_bad_benchmarks_are_one_line_errors(uri: str, message: str) -> None:
    with pytest.raises(KsError) as caught:
        load_benchmark(uri)
    text = str(caught.value)
    assert message in text and "\n" not in text
    if isinstance(caught.value, BenchmarkError):
        assert isinstance(caught.value, ValueError)


def test_an_environment_starts_from_a_benchmark_or_draws_from_a_dataset() -> None:
    env = make(benchmark="benchmark://bindgen_test-v0/3", rules="binding_rules")
    _, info = env.reset(seed=0)
    assert (info["start"], info["benchmark"], env.benchmark) == ("bindgen_test[3]",) + (
        "benchmark://bindgen_test-v0/3",
    ) * 2

    def draws(seed: int) -> list[str]:
        env = make(benchmark="benchmark://bindgen_test-v0", rules="binding_rules")
        return [env.reset(seed=seed)[1]["benchmark"]] + [env.reset()[1]["benchmark"] for _ in range(7)]

    assert draws(3) == draws(3) != draws(4)
    assert set(draws(3)) <= set(DATASETS["bindgen_test-v0"].benchmark_uris()) and len(set(draws(3))) > 1
    # a list of benchmarks and datasets; the starts of expressions= have URIs too
    env = make(benchmark=["benchmark://bindgen_test-v0/0", "benchmark://gelu-v0"], rules="ml_rules")
    assert [s.uri for s in env.starts][:2] == ["benchmark://bindgen_test-v0/0", "benchmark://gelu-v0/rev$add"]
    assert len(env.starts) == 1 + len(DATASETS["gelu-v0"])
    assert (
        make(expressions="bindgen_test").reset(options={"index": 5})[1]["benchmark"] == "benchmark://bindgen_test-v0/5"
    )


def test_reset_options_pick_a_benchmark_or_a_dataset_for_one_episode() -> None:
    env = make(program=EXPR, rules="binding_simplify_rules")
    _, info = env.reset(options={"benchmark": "benchmark://binding_simplify_8-v0/2"})
    assert info["start"] == "binding_simplify_8[2]"
    assert env.reset()[1]["start"] == "<expr>"  # the next reset is the environment's own again
    seen = {env.reset(seed=s, options={"benchmark": "benchmark://bindgen_test-v0"})[1]["start"] for s in range(8)}
    assert len(seen) > 1 and all(s.startswith("bindgen_test[") for s in seen)
    assert env.reset(options={"benchmark": EXPR})[1]["start"] == "<expr>"
    for options, message in [
        ({"benchmark": "benchmark://nope-v0/1"}, "no dataset 'nope-v0'"),
        ({"benchmark": 3}, "options['benchmark'] must be a URI, not int"),
        ({"benchmark": EXPR, "index": 0}, "give reset option 'index' or 'benchmark', not both"),
        ({"seed": 1}, "unknown reset option(s) ['seed']: the options are 'index' and 'benchmark'"),
    ]:
        with pytest.raises(ValueError) as caught:
            env.reset(options=options)
        assert message in str(caught.value) and "\n" not in str(caught.value)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"benchmark": "benchmark://nope-v0"}, "no dataset 'nope-v0'"),
        ({"benchmark": []}, "benchmark= is an empty list"),
        ({"benchmark": 3}, "benchmark= must be a URI or a list of URIs, not int"),
        (
            {"benchmark": EXPR, "program": EXPR},
            "give one of program=, expressions= and benchmark=, not program= and benchmark=",
        ),
        ({"benchmark": EXPR, "def_name": "f"}, "def_name= goes with program= (a file), not with benchmark="),
    ],
)
def test_bad_benchmark_settings_are_one_line_errors(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(KsError) as caught:
        RewriteEnv(**kwargs)
    assert message in str(caught.value) and "\n" not in str(caught.value)


def test_gymnasiums_checker_passes_on_a_dataset() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        check_env(make(benchmark="benchmark://bindgen_test-v0", rules="binding_rules", depth=2))


# -- replayable states ------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "kwargs",
    [
        {"benchmark": "benchmark://bindgen_test-v0", "rules": "binding_rules"},
        {"program": EXPR, "rules": "binding_simplify_rules"},
        {"program": str(EXAMPLE), "def_name": "f", "rules": "binding_rules"},
        {"expressions": [EXPR, "(mul x 1.0)"], "rules": "simplify_rules"},
    ],
    ids=["dataset", "expression", "file", "list"],
)
def test_a_state_goes_through_csv_and_replays_to_the_same_expression(kwargs: dict[str, Any], tmp_path: Any) -> None:
    env = make(depth=6, **kwargs)
    states, ends = [], []
    for seed in range(3):
        info = play(env, seed, 6)
        state = env.state
        assert state.reward == pytest.approx(load_benchmark(state.benchmark).expr.cost - info["cost"])
        states.append(state)
        ends.append(env.expression)
    path = tmp_path / "states.csv"
    write_states(path, states)
    assert path.read_text().splitlines()[0] == "benchmark,actions,reward"
    back = read_states(path)
    assert [(s.benchmark, s.actions) for s in back] == [(s.benchmark, s.actions) for s in states]
    assert [s.reward for s in back] == pytest.approx([s.reward for s in states], abs=1e-9)
    for state, end in zip(back, ends):
        replay = env.validate(state)
        assert replay.end == end and replay.reward == pytest.approx(state.reward)


def test_the_state_leaves_out_masked_out_actions() -> None:
    env = make(program=EXPR, depth=3)
    _, info = env.reset()
    env.step(info["num_actions"])  # masked out: nothing done
    _, reward, _, _, info = env.step(0)
    assert env.state == EnvState(EXPR, (info["action"],), reward)
    assert env.state.reward == pytest.approx(7.0 - info["cost"])


def test_validate_rejects_a_state_that_does_not_replay() -> None:
    env = make(benchmark="benchmark://bindgen_test-v0/0", rules="binding_rules", depth=4)
    play(env, 0, 4)
    good = env.state
    assert good.actions
    cases = [
        (EnvState(good.benchmark, good.actions, good.reward + 1), "the actions earn a reward of"),
        (
            EnvState(good.benchmark, (*good.actions, "999:new_bind"), good.reward),
            f"action {len(good.actions) + 1} ('999:new_bind') is not a rewrite",
        ),
        (
            EnvState(good.benchmark, ("0:no_rule",), 0.0),
            "action 1 ('0:no_rule') is not a rewrite of the expression it meets under binding_rules",
        ),
        (EnvState("benchmark://bindgen_test-v0/99", (), 0.0), "no benchmark '99'"),
        ("not a state", "validate() takes an EnvState, not str"),
    ]
    for state, message in cases:
        with pytest.raises(ValueError) as caught:
            validate(state, "binding_rules")  # type: ignore[arg-type]
        assert isinstance(caught.value, KsError)
        assert message in str(caught.value) and "\n" not in str(caught.value), str(caught.value)
    # the same actions under another rule set are another episode
    with pytest.raises(StateError, match="is not a rewrite of the expression it meets under simplify_rules"):
        validate(good, "simplify_rules")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "the header must be benchmark,actions,reward, not ''"),
        ("a,b\n", "the header must be benchmark,actions,reward, not 'a,b'"),
        ("benchmark,actions,reward\nx,y\n", "line 2: 2 fields, expected 3"),
        ("benchmark,actions,reward\nx,,many\n", "line 2: reward 'many' is not a number"),
        ("benchmark,actions,reward\nx,,nan\n", "line 2: reward 'nan' is not finite"),
    ],
)
def test_bad_state_files_are_one_line_errors(text: str, message: str) -> None:
    with pytest.raises(StateError) as caught:
        read_states(io.StringIO(text))
    assert message in str(caught.value) and "\n" not in str(caught.value)


def test_a_byte_order_mark_is_dropped(tmp_path: Any) -> None:
    """A states CSV saved with a UTF-8 BOM (as Windows editors do) reads as without one, from a path or a
    text stream (issue 44, item 8a); a BOM anywhere else is data."""
    path = tmp_path / "states.csv"
    state = EnvState(EXPR, ("0:mul_one",), 1.5)
    write_states(path, [state])
    path.write_bytes(b"\xef\xbb\xbf" + path.read_bytes())
    assert read_states(path) == [state]
    assert read_states(io.StringIO("\ufeff" + path.read_text(encoding="utf-8-sig"))) == [state]
    with pytest.raises(StateError, match="the header must be"):
        read_states(io.StringIO("\ufeff\ufeffbenchmark,actions,reward\n"))


def test_a_state_file_that_is_not_utf8_is_a_one_line_error(tmp_path: Any) -> None:
    path = tmp_path / "states.csv"
    path.write_bytes(b"benchmark,actions,reward\n\xff,,1\n")
    with pytest.raises(StateError, match="not UTF-8 text") as caught:
        read_states(path)
    assert str(path) in str(caught.value) and "\n" not in str(caught.value)


def test_a_missing_state_file_is_a_one_line_error(tmp_path: Any) -> None:
    with pytest.raises(StateError, match="cannot read states: No such file"):
        read_states(tmp_path / "none.csv")


# -- vectorised environments ------------------------------------------------------------------------------
@pytest.mark.parametrize("mode", ["sync", "async"])
def test_make_vec_steps_several_environments(mode: str) -> None:
    kwargs: dict[str, Any] = {"vector_kwargs": {"shared_memory": False}} if mode == "async" else {}
    vec = gymnasium.make_vec(
        envs.ENV_ID,
        num_envs=3,
        vectorization_mode=mode,
        benchmark="benchmark://bindgen_test-v0",
        rules="binding_rules",
        depth=2,
        **kwargs,
    )
    try:
        obs, info = vec.reset(seed=7)
        assert obs["steps_left"].tolist() == [2, 2, 2] and len(obs["graph"]) == 3
        assert info["action_mask"].shape == (3, 1024)
        masks = np.stack(vec.call("action_masks"))
        np.testing.assert_array_equal(masks, info["action_mask"].astype(bool))
        first = list(info["benchmark"])
        again = list(vec.reset(seed=7)[1]["benchmark"])
        assert first == again, "seeded resets draw the same starts"
        for _ in range(2):
            obs, reward, terminated, truncated, info = vec.step(np.zeros(3, dtype=np.int64))
            assert reward.shape == (3,) and not truncated.any()
        assert terminated.all() and obs["steps_left"].tolist() == [0, 0, 0]
        # the next step resets each sub-environment (Gymnasium's next-step autoreset)
        obs, reward, terminated, _, _ = vec.step(np.zeros(3, dtype=np.int64))
        assert obs["steps_left"].tolist() == [2, 2, 2] and reward.tolist() == [0.0, 0.0, 0.0]
    finally:
        vec.close()


# -- the masked PPO example --------------------------------------------------------------------------------
@pytest.mark.skipif(
    importlib.util.find_spec("sb3_contrib") is None, reason="sb3-contrib is not installed (the gym-train extra)"
)
def test_the_masked_ppo_example_trains_and_compares(capsys: pytest.CaptureFixture[str]) -> None:
    example = runpy.run_path(str(ROOT / "examples" / "gym_masked_ppo.py"))
    rows = example["main"](
        ["--seconds", "2", "--depth", "3", "--budget", "50", "--benchmark", "benchmark://binding_simplify_8-v0/1"]
    )
    out = capsys.readouterr().out
    assert "MaskablePPO:" in out and "benchmark://binding_simplify_8-v0/1" in out
    row = rows["benchmark://binding_simplify_8-v0/1"]
    assert row["start"] == 10.0 and row["search"] <= row["start"]
