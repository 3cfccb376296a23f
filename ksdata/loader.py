"""Training and test expressions named by a config: arithmetic sets or defs of program files.

The files sit beside this module (package data), so they are found from an installed package too;
a program file named relative to ``PROGRAMS_ROOT`` (``ksdata/programs/blas_test.kso``) is found either way.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

from knossos.errors import KsUsageError
from knossos.expr import Expr
from knossos.parser import load_program, parse_expr

DATA = Path(__file__).resolve().parent
#: What program files are named relative to: the repository root, or site-packages when installed.
PROGRAMS_ROOT = DATA.parent


@dataclass
class DataSource:
    """Expressions to load (a training config's ``data.train`` / ``data.test``, or a benchmark's set): an
    arithmetic set by name, or defs of a program file."""

    #: A set of ksdata/arithmetic_sets.json (bindgen_36, bindgen_test, binding_simplify_8, ...)
    #: or generated_sets.json (generated_train, generated_validation, generated_heldout); several joined by +.
    set: str | None = None
    #: A program file (relative to the repository root) and the defs of it to use (all targets if empty).
    file: str | None = None
    defs: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Target:
    name: str
    expr: Expr
    #: The reference's best cost for it, where known (in the same cost as ``expr.cost``).
    best_known: float | None


#: The paper's sets, and the generated ones (experiments/corpus/run.py writes the latter).
SET_FILES = ("arithmetic_sets.json", "generated_sets.json")


@cache
def _arithmetic_sets() -> dict[str, dict[str, object]]:
    sets: dict[str, dict[str, object]] = {}
    for name in SET_FILES:
        if (DATA / name).is_file():
            sets.update(json.loads((DATA / name).read_text())["sets"])
    return sets


def set_names(joined: str) -> list[str]:
    """The set names of ``a+b+c`` (several sets joined, as rule sets are)."""
    return [part.strip() for part in joined.split("+")]


@cache
def _best_known_programs() -> dict[str, float]:
    """Best-known def costs by def name, from best_known_costs_programs.txt (the lowest listed)."""
    out: dict[str, float] = {}
    for line in (DATA / "best_known_costs_programs.txt").read_text().splitlines():
        parts = line.split()
        if len(parts) < 3 or not parts[1].startswith("start="):
            continue
        try:
            best = float(line.split("best=")[1].split()[0])
        except (IndexError, ValueError):
            continue
        out[parts[0]] = min(best, out.get(parts[0], best))
    return out


def load_targets(src: DataSource, label: str) -> list[Target]:
    if src.set is not None:
        sets = _arithmetic_sets()
        out: list[Target] = []
        for name in set_names(src.set):
            if name not in sets:
                raise KsUsageError(f"{label}: no arithmetic set '{name}' in '{src.set}' (known: {', '.join(sets)})")
            items = sets[name]["expressions"]
            assert isinstance(items, list)
            out.extend(
                Target(f"{name}[{i}]", parse_expr(item["expr"])[0], _float_or_none(item.get("best_known_cost")))
                for i, item in enumerate(items)
            )
        return out
    assert src.file is not None
    path = Path(src.file) if Path(src.file).is_absolute() else PROGRAMS_ROOT / src.file
    program = load_program(path)
    names = src.defs or [d.name for d in program.targets]
    best = _best_known_programs()
    out = []
    for name in names:
        d = program.defs.get(name)
        if d is None:
            raise KsUsageError(f"{label}: no def '{name}' in {src.file}")
        # best_known_costs lists whole-def costs; search works on the body, which costs less by a constant
        offset = program.def_cost(name) - d.body.cost
        known = best.get(name)
        out.append(Target(name, d.body, None if known is None else known - offset))
    return out


def _float_or_none(x: object) -> float | None:
    return None if x is None else float(x)  # type: ignore[arg-type]
