"""Random rewrite walks with ``ml_rules`` keep the meaning of the shared programs.

For every def of ``blas_test.kso``, ``gelu.kso`` and ``conv1d_rev_test.kso``: walks of 30 random
actions of ``ml_rules`` from the def's body, evaluating after every step on random inputs (Floats
uniform in [0.5, 2], Integers 1 to 3, vectors of length 3) and comparing with the original's value.
Each def has its own stable seed (``zlib.crc32`` of its name).  A def whose original evaluation fails
(an edef without an implementation, say) is skipped.

A walk stops early, counted and reported as a warning in the test output, when

* the expression grows beyond :data:`SIZE_CAP` nodes (inlining makes evaluation slow) or its
  evaluation exceeds the interpreter's step limit;
* a step changes the value, but the rule's documented domain is violated at that site, or the
  change is floating-point (see :func:`test_rules_properties.explain`).

Any other change of value fails, naming the def, the walk, the step, the action and the expression
before and after.  ``rev$conv1d`` is also walked with ``ml_rules`` plus the zero-tensor rules, taking
one of theirs half of the time where they apply.  The CI version runs :data:`CI_WALKS` walks per def (about 10 s).  The full version
(marked ``slow``) runs ``KNOSSOS_WALKS`` walks per def (default 1,000: about an hour here, most of
it in ``rev$conv1d``, whose evaluation takes some 40 ms); it runs only when asked for, with
``-m slow`` or with ``KNOSSOS_WALKS`` set (e.g. ``KNOSSOS_WALKS=50 pytest -m slow tests/test_random_walks.py``).
"""

from __future__ import annotations

import os
import random
import warnings
import zlib
from collections import Counter
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

import pytest
from test_rules_properties import explain

from knossos.errors import KsEvalError
from knossos.interpreter import Interpreter
from knossos.parser import load_program
from knossos.program import Def, Program
from knossos.values import isclose
from rules.actions import actions, apply
from rules.rule_set import RuleSet
from rules.sets import ml_rules, zero_tensor_rules

from conftest import random_value

PROGRAMS = Path(__file__).resolve().parent.parent / "ksdata" / "programs"
FILES = ("blas_test.kso", "gelu.kso", "conv1d_rev_test.kso")
STEPS = 30
SIZE_CAP = 5000
MAX_STEPS = 10**7
REL, ABS = 1e-6, 1e-9
CI_WALKS = 3
FULL_WALKS = int(os.environ.get("KNOSSOS_WALKS", "1000"))


class WalkStopped(UserWarning):
    """Walks of a def stopped before their last step (the counts are in the message)."""


@cache
def program(file: str) -> Program:
    return load_program(PROGRAMS / file)


DEFS = [(file, name) for file in FILES for name in program(file).defs]


@dataclass
class Report:
    walks: int = 0
    steps: int = 0
    #: Why walks ended before their last step.
    stopped: Counter[str] = field(default_factory=Counter)
    examples: dict[str, str] = field(default_factory=dict)

    def stop(self, why: str, detail: str) -> None:
        self.stopped[why] += 1
        self.examples.setdefault(why, detail)

    def summary(self, name: str) -> str:
        parts = [f"{n} {why}" for why, n in sorted(self.stopped.items())]
        text = f"{name}: {self.walks} walks, {self.steps} steps; stopped early: {', '.join(parts) or 'none'}"
        for why, detail in sorted(self.examples.items()):
            text += f"\n  first {why}: {detail}"
        return text


def walk(
    d: Def,
    rng: random.Random,
    walk_number: int,
    interp: Interpreter,
    report: Report,
    rules: RuleSet = ml_rules,
    prefer: frozenset[str] = frozenset(),
) -> None:
    """One walk of :data:`STEPS` random actions of ``rules`` from ``d``'s body; fails if meaning is lost.

    Where rules named in ``prefer`` apply, one of their actions is taken half of the time (rare
    rules would otherwise hardly ever be picked among the hundreds of actions of a program)."""
    args = [random_value(p.type, rng) for p in d.params]
    env = interp.check_args(d, args)
    try:
        expected = interp.eval_expr(d.body, env)
    except KsEvalError as err:
        report.stop("invalid inputs", f"{args}: {err}")
        return
    report.walks += 1
    e = d.body
    for step in range(STEPS):
        choices = actions(e, rules)
        if not choices:
            report.stop("no action", f"walk {walk_number} step {step}")
            return
        preferred = [a for a in choices if a.rule.name in prefer]
        action = rng.choice(preferred if preferred and rng.random() < 0.5 else choices)
        after = apply(e, action)
        report.steps += 1
        if after.size > SIZE_CAP:
            report.stop(f"size > {SIZE_CAP}", f"walk {walk_number} step {step} ({action})")
            return
        crashed = False
        try:
            value: Any = interp.eval_expr(after, env)
            if isclose(expected, value, REL, ABS):
                e = after
                continue
        except KsEvalError as err:
            if "steps" in str(err) and "took more than" in str(err):
                report.stop("step limit", f"walk {walk_number} step {step} ({action})")
                return
            value = err
        except Exception as err:  # e.g. a captured variable of another type: a broken rewrite
            value, crashed = err, True
        why = None if crashed else explain(action, e, env, expected)
        if why is not None:
            report.stop(f"{why} exemption", f"walk {walk_number} step {step}: {action}")
            return
        pytest.fail(
            f"def {d.name}, walk {walk_number}, step {step}: action {action} changed the value\n"
            f"  inputs: {args}\n  expected: {expected!r}\n  got:      {value!r}\n"
            f"  before:\n{e}\n  after:\n{after}"
        )


def run_walks(
    file: str, name: str, walks: int, rules: RuleSet = ml_rules, prefer: frozenset[str] = frozenset()
) -> Report:
    d = program(file).defs[name]
    rng = random.Random(zlib.crc32(name.encode()))
    interp = Interpreter(max_steps=MAX_STEPS)
    # the def must evaluate on random inputs at all (edefs without an implementation do not)
    try:
        interp.call(d, [random_value(p.type, random.Random(0)) for p in d.params])
    except KsEvalError as err:
        pytest.skip(f"{name}: the original does not evaluate: {err}")
    report = Report()
    for w in range(walks):
        walk(d, rng, w, interp, report, rules, prefer)
    stopped = sum(n for why, n in report.stopped.items() if why != "no action")
    if stopped:
        warnings.warn(WalkStopped(report.summary(name)), stacklevel=2)
    print(report.summary(name))
    return report


def skip_unless_full_walks(request: pytest.FixtureRequest) -> None:
    markexpr = str(request.config.getoption("markexpr") or "")
    if "KNOSSOS_WALKS" not in os.environ and not ("slow" in markexpr and "not slow" not in markexpr):
        pytest.skip("the full random walks (about an hour) run with -m slow or KNOSSOS_WALKS=<walks per def>")


@pytest.mark.parametrize(("file", "name"), DEFS, ids=[f"{f}::{n}" for f, n in DEFS])
def test_random_walks_keep_meaning(file: str, name: str) -> None:
    run_walks(file, name, CI_WALKS)


@pytest.mark.slow
@pytest.mark.parametrize(("file", "name"), DEFS, ids=[f"{f}::{n}" for f, n in DEFS])
def test_many_random_walks_keep_meaning(file: str, name: str, request: pytest.FixtureRequest) -> None:
    skip_unless_full_walks(request)
    run_walks(file, name, FULL_WALKS)


def zero_tensor_walks(walks: int) -> Report:
    """rev$conv1d, the program the zero-tensor rules are for, walked with them and the paper's rules."""
    zero_rules = frozenset(r.name for r in zero_tensor_rules)
    return run_walks("conv1d_rev_test.kso", "rev$conv1d", walks, ml_rules + zero_tensor_rules, zero_rules)


def test_walks_with_the_zero_tensor_rules_keep_meaning() -> None:
    report = zero_tensor_walks(CI_WALKS)
    assert report.steps > CI_WALKS  # the walks were not all stopped at their first step


@pytest.mark.slow
def test_many_walks_with_the_zero_tensor_rules_keep_meaning(request: pytest.FixtureRequest) -> None:
    skip_unless_full_walks(request)
    zero_tensor_walks(FULL_WALKS)


def test_every_file_has_defs() -> None:
    for file in FILES:
        assert program(file).defs, file
