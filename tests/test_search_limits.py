"""Every search honours its time, state and memory limits, stopping with its best result and a note;
settings no machine could honour are refused in one line (optimize.py) or with a ValueError (SearchSpec)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

import search.spec as spec_module
from app.optimize_cli import main
from knossos.expr import Expr
from knossos.parser import load_program
from rules.actions import Action, apply
from rules.sets import get_rule_set
from search.limits import MAX_BUDGET, MAX_DEPTH, Limits, resident_mib
from search.registry import SEARCHES, get_search
from search.result import SearchResult
from search.spec import SearchRun, SearchSpec, ctrl_c_stops_searches

from conftest import ROOT, run_cli

EXAMPLE = ROOT / "examples" / "bindgen_test_8.ks"
RULES = get_rule_set("ml_rules")
#: Without limits, every search with these settings runs for hours (the issue's report: 30 minutes, 8.5 GB).
ENDLESS = {"depth": 100, "budget": MAX_BUDGET}
#: The searches whose results replay as rewrite sequences (the e-graph's limits: tests/test_egraph.py).
SEQUENCE_SEARCHES = [name for name in SEARCHES if name != "egraph" and not name.startswith("saturate-")]
#: A time limit is honoured when the search returns within this much more (one expansion, one
#: value-function batch, the result): far more than either takes, so a busy machine passes.
SLACK_S = 10.0


def start():  # type: ignore[no-untyped-def]
    return load_program(EXAMPLE).targets[0].body


def check_result(result: SearchResult, limit: str) -> None:
    """Stopped at ``limit`` (and said so once) with a best expression its steps lead to."""
    assert [n for n in result.notes if limit in n] == [result.notes[-1]], result.notes
    assert "the best found so far" in result.notes[-1]
    e = result.start
    for step in result.steps:
        e = apply(e, Action(step.node, RULES.rule(step.rule) if step.rule in RULES else _phase1(step.rule)))
    assert e is result.best and result.best_cost <= result.start_cost
    assert result.to_json()["notes"] == result.notes


def _phase1(name: str):  # type: ignore[no-untyped-def]
    return get_rule_set("phase1").rule(name)


@pytest.mark.parametrize("name", SEQUENCE_SEARCHES)
def test_every_search_stops_at_the_time_limit(name: str) -> None:
    seconds = 0.3
    began = time.perf_counter()
    result = get_search(name)(start(), SearchSpec(rules=RULES, seconds=seconds, **ENDLESS))
    assert time.perf_counter() - began < seconds + SLACK_S
    check_result(result, "time limit of 0.3 s")
    if name == "exhaustive":
        assert result.complete is False


@pytest.mark.parametrize("name", SEQUENCE_SEARCHES)
def test_every_search_stops_at_the_state_limit(name: str) -> None:
    limit = 60
    result = get_search(name)(start(), SearchSpec(rules=RULES, max_states=limit, seconds=60, **ENDLESS))
    check_result(result, f"state limit of {limit} distinct")
    # the limit holds within an expansion too: it stops at the child that reaches it (MCTS and random
    # search keep only some of the children they build, but count them all)
    assert len(result.graph.states) <= limit
    if name not in ("mcts", "random"):
        assert len(result.graph.states) == limit


@pytest.mark.parametrize("name", SEQUENCE_SEARCHES)
def test_every_search_stops_at_the_memory_limit(name: str) -> None:
    tiny = resident_mib() / 2  # already exceeded: the search stops at its first check
    result = get_search(name)(start(), SearchSpec(rules=RULES, max_memory_mib=tiny, seconds=60, **ENDLESS))
    check_result(result, "memory limit")


def test_limits_stay_reached() -> None:
    limits = Limits(seconds=None, max_states=10, max_memory_mib=None)
    assert not limits.reached(9)
    assert limits.reached(10) and limits.reached(0)
    assert limits.note is not None and "state limit of 10" in limits.note


@pytest.mark.parametrize(
    ("bad", "fragment"),
    [
        ({"depth": MAX_DEPTH + 1}, f"at most {MAX_DEPTH}"),
        ({"depth": 10**7}, "at most"),
        ({"budget": MAX_BUDGET + 1}, "no memory holds more"),
        ({"seconds": -1.0}, "time limit"),
        ({"seconds": float("nan")}, "time limit"),
        ({"seconds": float("inf")}, "time limit"),
        ({"max_states": 0}, "state limit"),
        ({"max_memory_mib": 0.0}, "memory limit"),
    ],
    ids=["depth", "depth-millions", "budget", "seconds-negative", "seconds-nan", "seconds-inf", "states", "memory"],
)
def test_spec_refuses_settings_no_machine_can_honour(bad: dict[str, float], fragment: str) -> None:
    settings: dict[str, float] = {"depth": 10, "budget": 100, **bad}
    with pytest.raises(ValueError, match=fragment):
        SearchSpec(rules=RULES, **settings)  # type: ignore[arg-type]


# -- optimize.py ------------------------------------------------------------------------------------
def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    return run_cli(main, capsys, *argv)


@pytest.mark.parametrize(
    ("argv", "fragment"),
    [
        (["--budget", "99999999999999999999"], "argument --budget: must be at most 1000000000"),
        (["--depth", "5000000"], f"argument --depth: must be at most {MAX_DEPTH}"),
        (["--seconds", "nan"], "argument --seconds: must be a finite number greater than 0"),
        (["--seconds", "-2"], "argument --seconds: must be a finite number greater than 0"),
        (["--seconds", "1e999"], "argument --seconds: must be a finite number greater than 0"),
        (["--max-states", "0"], "argument --max-states: must be at least 1"),
        (["--max-memory", "0"], "argument --max-memory: must be a finite number greater than 0"),
    ],
    ids=["budget", "depth", "seconds-nan", "seconds-negative", "seconds-inf", "max-states", "max-memory"],
)
def test_optimize_refuses_absurd_limits(capsys: pytest.CaptureFixture[str], argv: list[str], fragment: str) -> None:
    code, out, err = run(capsys, str(EXAMPLE), "--quiet", *argv)
    assert code == 2 and out == ""
    assert len(err.strip().splitlines()) == 1 and fragment in err, err


@pytest.mark.parametrize("name", ["astar", "mcts"])
def test_optimize_stops_at_seconds_with_a_note(capsys: pytest.CaptureFixture[str], name: str) -> None:
    """The issue's case (a budget of 10^20 ran for 30 minutes) at the largest budget accepted."""
    argv = [str(EXAMPLE), "--search", name, "--budget", str(MAX_BUDGET), "--seconds", "0.5", "--quiet"]
    began = time.perf_counter()
    code, out, err = run(capsys, *argv, "--json")
    assert time.perf_counter() - began < 0.5 + SLACK_S
    assert code == 0 and err == ""
    report = json.loads(out)
    assert report["notes"] and "time limit of 0.5 s" in report["notes"][0]
    code, out, _ = run(capsys, *argv)
    assert code == 0 and "note: stopped at the time limit of 0.5 s; the best found so far" in out


def test_optimize_stops_at_max_states(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, str(EXAMPLE), "--budget", str(MAX_BUDGET), "--max-states", "500", "--json", "--quiet")
    notes = json.loads(out)["notes"]  # the default, saturate-astar, says what its first pass did first
    assert code == 0 and any("state limit of 500" in n for n in notes), notes


class CtrlCAfter:
    """A cost function that presses Ctrl-C at its ``n``-th call (every search asks for costs)."""

    def __init__(self, n: int) -> None:
        self.n = n

    def __call__(self, e: Expr) -> float:
        self.n -= 1
        if self.n == 0:
            raise KeyboardInterrupt
        return e.cost


@pytest.mark.parametrize("name", SEQUENCE_SEARCHES)
def test_ctrl_c_returns_the_best_or_stops_the_program(name: str) -> None:
    """optimize.py: Ctrl-C ends a search with its best so far; train.py (ctrl_c_stops_searches): it
    stops the program, so that no epoch is fitted to a search cut short."""
    spec = SearchSpec(rules=RULES, depth=10, budget=10**6, cost=CtrlCAfter(200))
    assert get_search(name)(start(), spec).interrupted
    with ctrl_c_stops_searches(), pytest.raises(KeyboardInterrupt):
        get_search(name)(start(), replace(spec, cost=CtrlCAfter(200)))
    assert get_search(name)(start(), replace(spec, cost=CtrlCAfter(200))).interrupted  # as it was again


def deep_chain(tmp_path: Path, depth: int) -> Path:
    """The issue's program: ``(add 1.0 (add 1.0 ... x))``, ``depth`` deep.  A search that builds its
    children (here under the alloc cost model, which costs built expressions; under the reference
    model, searches use lazy states: search/state.py) rebuilds the spine above each site, so one full
    expansion builds ``depth**2 / 2`` nodes (at 3000 deep: 4.5 million nodes, tens of seconds and gigabytes)."""
    body = "x"
    for _ in range(depth):
        body = f"(add 1.0 {body})"
    path = tmp_path / "deep.ks"
    path.write_text(f"(def f Float ((x : Float)) {body})\n")
    return path


CHAIN = ["--rules", "simplify_rules", "--model", "none", "--budget", "50", "--json", "--quiet", "--cost", "alloc"]


def test_limits_hold_within_one_expansion_of_a_deep_program(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    chain = str(deep_chain(tmp_path, 3000))
    code, out, err = run(capsys, chain, *CHAIN, "--max-states", "5")
    assert code == 0 and err == ""
    report = json.loads(out)
    assert "state limit of 5 distinct" in report["notes"][0] and report["expanded"] == 1

    # memory in a process of its own, whose peak is what the limit bounds (the full expansion: gigabytes)
    # (VmHWM, not ru_maxrss: Linux carries ru_maxrss over from the forking process, pytest's, through exec)
    peak = "import runpy, sys\nsys.argv = sys.argv[1:]\ntry: runpy.run_path(sys.argv[0], run_name='__main__')\nfinally: print(int(next(l for l in open('/proc/self/status') if l.startswith('VmHWM')).split()[1]) // 1024, file=sys.stderr)"
    limit = 400
    argv = [str(ROOT / "optimize.py"), chain, *CHAIN, "--max-memory", str(limit)]
    done = subprocess.run([sys.executable, "-c", peak, *argv], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0 and "memory limit of 400 MiB" in json.loads(done.stdout)["notes"][0]
    assert int(done.stderr.split()[-1]) < limit + 150  # memory is looked at every 0.25 s: a little past it at most


@pytest.mark.parametrize("name", SEQUENCE_SEARCHES)
def test_every_search_stops_at_the_time_limit_within_an_expansion(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, name: str
) -> None:
    """One whole expansion of a 4000-deep chain takes about a minute (8 million nodes)."""
    began = time.perf_counter()
    code, out, _ = run(capsys, str(deep_chain(tmp_path, 4000)), *CHAIN, "--search", name, "--seconds", "0.5")
    assert time.perf_counter() - began < 0.5 + SLACK_S
    assert code == 0 and "time limit of 0.5 s" in json.loads(out)["notes"][0]


def test_the_default_pipeline_stops_at_the_time_limit_on_a_deep_chain(tmp_path: Path) -> None:
    """Issue 44: optimize.py's default pipeline (no model: saturate-astar here) on the 20,000-deep chain
    with ``--seconds 2`` ran 29 s at 7.2 GiB, its first pass's e-graph extraction looking at no limit.
    Now building, rebuilding and extracting the e-graph stop at the limit, the first pass at half of
    it (the chain's part is kept as it is if its extraction was not done by then), and the search
    gets the rest.  In a process of its own: ``--max-memory`` bounds the whole process, and pytest's
    own memory after the tests before this one can be past 1,000 MiB."""
    chain = str(deep_chain(tmp_path, 20000))
    argv = [sys.executable, str(ROOT / "optimize.py"), chain, "--seconds", "2", "--max-memory", "1000"]
    began = time.perf_counter()
    done = subprocess.run([*argv, "--json", "--quiet"], capture_output=True, text=True, timeout=600)
    # start-up (torch's import) is outside --seconds, hence the slack
    assert time.perf_counter() - began < 2 + SLACK_S
    assert done.returncode == 0 and done.stderr == "", done.stderr
    report = json.loads(done.stdout)
    # The search had its turn (its note below); on a loaded machine its second may pass before it
    # evaluates a state, so the evaluations are not counted here.
    assert report["search"] == "saturate-astar"
    first = report["notes"][0]
    assert first.startswith("saturation before the search"), report["notes"]
    # the first pass ends at its share of the time or at its e-node limit, whichever comes first
    assert "stopped" not in first or any(f"limit of {x}" in first for x in ("1 s", "5,000 e-nodes")), first
    assert any(n.startswith("stopped at the time limit of 2 s") for n in report["notes"]), report["notes"]
    assert report["best_cost"] <= report["start_cost"] == 20000


def test_an_expansion_stops_filtering_and_reaching_children_at_the_time_limit() -> None:
    """Each child is costed by the idle-inline filter and again when reached (under the alloc cost
    model, a walk of the program each: one expansion of a 6,000-line gradient took 108 s, past its
    --seconds 60).  The limits are looked at after each child in both loops: once the clock passes
    the limit, at most one more child is costed."""
    e = start()
    calls: list[Expr] = []
    run: SearchRun | None = None

    def cost(x: Expr) -> float:
        calls.append(x)
        if len(calls) == 8:  # the clock passes the limit now
            assert run is not None
            run.limits.deadline = 0.0
        return x.cost

    spec = SearchSpec(rules=RULES, depth=10, budget=100, cost=cost, seconds=1000.0, prune_inlines=True)
    run = SearchRun(e, spec)
    before = len(calls)
    full = SearchRun(e, replace(spec, cost=lambda x: x.cost)).expand(e, 10)
    reached = run.expand(e, 10)
    assert len(full) > 10 and len(reached) < len(full)
    assert len(calls) <= max(before, 8) + 1
    assert run.limits.note == "stopped at the time limit of 1000 s"


def test_a_value_batch_of_large_states_is_evaluated_in_runs_that_look_at_the_limits(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A value function's batch is cut into runs of at most EVALUATION_NODES nodes (here 1: a state a
    run), and the limits are looked at before each: once the clock passes the limit, no more runs."""
    monkeypatch.setattr(spec_module, "EVALUATION_NODES", 1)
    asked: list[int] = []
    run: SearchRun | None = None

    class Value:
        def values(self, exprs: Sequence[Expr], depth: int) -> np.ndarray:
            asked.append(len(exprs))
            assert run is not None
            run.limits.deadline = 0.0  # the clock passes the limit during the first run
            return np.zeros((len(exprs), depth + 1))

    e = start()
    run = SearchRun(e, SearchSpec(rules=RULES, depth=10, budget=100, value=Value(), seconds=1000.0))
    children = [child for _, child in run.successors(e)][:5]
    assert len(children) == 5
    out = run.evaluate_waiting([(c, 9) for c in children])
    assert asked == [1] and [x[2] for x in out] == children[:1] and run.evaluator.evaluations == 1
