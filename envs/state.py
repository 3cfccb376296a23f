"""A replayable state of an episode: ``(benchmark, actions, reward)``, as CompilerGym's ``CompilerEnvState``.

``benchmark`` names the start (:func:`envs.datasets.load_benchmark`), ``actions`` are the rewrites done,
as ``NODE:RULE`` (``info["action"]``; masked-out actions changed nothing and are left out), and
``reward`` is the episode's reward so far, the start cost minus the current cost.  States are written
to and read from CSV files with a header ``benchmark,actions,reward`` (the actions joined by spaces)
by :func:`write_states` and :func:`read_states`; :func:`validate` replays one from its benchmark and
checks its reward.  Every bad file, row or state is a one-line :class:`StateError`.
"""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Final, TextIO

from envs.datasets import load_benchmark
from knossos.errors import KsUsageError, one_line
from knossos.expr import Expr
from rules.rule_set import RuleSet
from rules.sets import get_rule_set
from search.mdp import Transitions
from search.state import expr_of

#: The CSV header.
FIELDS: Final = ("benchmark", "actions", "reward")
#: How far a replayed reward may be from the recorded one (costs are sums of tenths and small integers).
_REWARD_TOLERANCE: Final = 1e-6


class StateError(KsUsageError, ValueError):
    """A state that does not replay, or a malformed state file: a usage error, and a ValueError."""


@dataclass(frozen=True)
class EnvState:
    """The start, the rewrites done from it (``NODE:RULE``) and the reward they earned."""

    benchmark: str
    actions: tuple[str, ...] = ()
    reward: float = 0.0


@dataclass(frozen=True)
class Replay:
    """What :func:`validate` found: the start, the expression the actions reach, and the reward."""

    start: Expr
    end: Expr
    reward: float


def write_states(file: str | Path | TextIO, states: Iterable[EnvState]) -> None:
    """Write ``states`` as CSV, with a header, to a path or an open text file."""
    if isinstance(file, str | Path):
        with open(file, "w", newline="", encoding="utf-8") as f:
            write_states(f, states)
        return
    writer = csv.writer(file, lineterminator="\n")
    writer.writerow(FIELDS)
    for s in states:
        # 12 digits: -0.1, not -0.09999999999999964 (costs are sums of tenths; validate allows 1e-6)
        writer.writerow([s.benchmark, " ".join(s.actions), f"{float(s.reward):.12g}"])


#: A UTF-8 byte order mark, as it reads: a CSV may start with one (as a program file may: knossos.parser).
BOM = "\ufeff"


def read_states(file: str | Path | TextIO) -> list[EnvState]:
    """The states of a CSV file that :func:`write_states` wrote (a path, an open file or CSV text in a StringIO),
    in UTF-8; a leading byte order mark is dropped."""
    if isinstance(file, str | Path):
        try:
            with open(file, newline="", encoding="utf-8") as f:
                return _read(f, str(file))
        except OSError as e:
            raise StateError(f"cannot read states: {one_line(e.strerror or str(e))}", None, str(file)) from None
        except UnicodeDecodeError as e:
            raise StateError(f"not UTF-8 text (bad byte at offset {e.start})", None, str(file)) from None
    return _read(file, getattr(file, "name", "<states>"))


def _read(f: TextIO | io.StringIO, name: str) -> list[EnvState]:
    rows = csv.reader(f)
    header = next(rows, None)
    if header and header[0].startswith(BOM):  # a byte order mark (editors on Windows write one): dropped
        header[0] = header[0][len(BOM) :]
    if header is None or tuple(h.strip() for h in header) != FIELDS:
        raise StateError(f"the header must be {','.join(FIELDS)}, not {one_line(','.join(header or []))!r}", None, name)
    out = []
    for line, row in enumerate(rows, start=2):
        if not row:
            continue
        if len(row) != len(FIELDS):
            raise StateError(f"line {line}: {len(row)} fields, expected {len(FIELDS)} ({','.join(FIELDS)})", None, name)
        benchmark, actions, reward = row
        try:
            value = float(reward)
        except ValueError:
            raise StateError(f"line {line}: reward {one_line(reward)!r} is not a number", None, name) from None
        if not math.isfinite(value):
            raise StateError(f"line {line}: reward {one_line(reward)!r} is not finite", None, name)
        out.append(EnvState(benchmark, tuple(actions.split()), value))
    return out


def validate(state: EnvState, rules: str | RuleSet = "binding_simplify_rules") -> Replay:
    """Replay ``state``'s actions with ``rules`` from its benchmark and check its reward.

    Raises a one-line :class:`StateError` when an action is not a rewrite of the expression it meets,
    or when the replayed reward (start cost minus end cost) differs from ``state.reward``.
    """
    if not isinstance(state, EnvState):
        raise StateError(f"validate() takes an EnvState, not {type(state).__name__}")
    rule_set = rules if isinstance(rules, RuleSet) else get_rule_set(rules)
    start = load_benchmark(state.benchmark).expr
    transitions = Transitions(rule_set)
    e = start
    for step, name in enumerate(state.actions, start=1):
        after = next((expr_of(c) for a, c in transitions.successors(e) if str(a) == name), None)
        if after is None:
            raise StateError(
                f"{one_line(state.benchmark)[:200]}: action {step} ({one_line(name)!r}) is not a rewrite of the "
                f"expression it meets under {rule_set.name}"
            )
        e = after
    reward = transitions.cost(start) - transitions.cost(e)
    if not math.isclose(reward, state.reward, rel_tol=0.0, abs_tol=_REWARD_TOLERANCE):
        raise StateError(
            f"{one_line(state.benchmark)[:200]}: the actions earn a reward of {reward:.6g} "
            f"(cost {transitions.cost(start):.6g} to {transitions.cost(e):.6g}), the state says {state.reward:.6g}"
        )
    return Replay(start, e, reward)
