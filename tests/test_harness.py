"""ksbench/harness.py: what every benchmark does around its measurements."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from knossos.errors import KsUsageError
from knossos.parser import parse_expr
from ksbench import harness
from search.plan import Plan, run
from search.settings import SearchSettings

from conftest import ROOT


def test_pin_threads_sets_one_thread_before_numpy_and_keeps_a_setting_given() -> None:
    code = (
        "import os, sys\n"
        "from ksbench.harness import THREAD_VARIABLES, pin_threads\n"
        "assert 'numpy' not in sys.modules  # importing the harness loads no numpy\n"
        "pin_threads()\n"
        "print(' '.join(os.environ[v] for v in THREAD_VARIABLES))\n"
    )
    env = {k: v for k, v in os.environ.items() if k not in harness.THREAD_VARIABLES}
    env["MKL_NUM_THREADS"] = "3"
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["1", "1", "3"]


def test_growth_exponent() -> None:
    assert harness.growth_exponent(1.0, 128.0, 8, 16) == pytest.approx(7.0)
    assert harness.growth_exponent(2.0, 8.0, 32, 64) == pytest.approx(2.0)
    assert harness.growth_exponent(None, 1.0, 8, 16) is None and harness.growth_exponent(1.0, 0.0, 8, 16) is None


def test_write_rows_replaces_the_file_whole(tmp_path: Path) -> None:
    out = tmp_path / "deeper" / "rows.jsonl"
    harness.write_rows(out, [{"a": 1}, {"a": 2}])
    harness.write_rows(out, [{"a": 3}])
    assert [json.loads(line) for line in out.read_text().splitlines()] == [{"a": 3}]


def test_search_says_what_it_runs_and_runs_the_plan(capsys: pytest.CaptureFixture[str]) -> None:
    start = parse_expr("(add (mul 2.0 1.0) 0.0)")[0]
    plan = Plan(rules="simplify_rules", search=SearchSettings(algorithm="astar", depth=5, budget=50), seconds=10.0)
    found = harness.search("plain", start, plan, indent="  ")
    assert capsys.readouterr().out == "  searching: plain (astar, simplify_rules, depth 5, 10 s)...\n"
    assert found.best == run(start, plan).best and found.best_cost < found.start_cost
    row = harness.search_row(found)
    assert row["best_cost"] == found.best_cost and row["steps"] == len(found.steps) and row["notes"] == found.notes


def test_stamp_names_the_revision_the_host_and_the_timing() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    harness.add_timing_arguments(ap)
    args = ap.parse_args(["--rounds", "2"])
    assert (args.seconds, args.rounds, args.max_seconds_per_call, args.seconds_search, args.out) == (
        0.2,
        2,
        2.0,
        None,
        None,
    )
    stamp = harness.stamp(args)
    assert stamp["revision"] and stamp["timing"] == {"seconds": 0.2, "rounds": 2, "max_seconds_per_call": 2.0}
    assert set(stamp["host"]) == {"machine", "cpus", "compiler", "flags"} and stamp["quick"] is False


def test_guarded_main_runs_in_a_fresh_cache_and_puts_the_old_one_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("KNOSSOS_CPP_CACHE", str(tmp_path))
    seen: list[str] = []

    def passes() -> bool:
        seen.append(os.environ["KNOSSOS_CPP_CACHE"])
        return True

    def fails() -> bool:
        raise KsUsageError("no such thing")

    assert harness.guarded_main(passes, "bench.py") == 0
    assert seen[0] != str(tmp_path) and not Path(seen[0]).exists()  # a temporary cache, removed after
    assert harness.guarded_main(lambda: False, "bench.py") == 1
    assert harness.guarded_main(fails, "bench.py") == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no such thing" in err and "Traceback" not in err
    assert os.environ["KNOSSOS_CPP_CACHE"] == str(tmp_path)
