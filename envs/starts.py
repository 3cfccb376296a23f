"""The start expressions of an environment: one program (a bare expression, or a def of a file) or a set.

Every bad setting is a :class:`~knossos.errors.KsUsageError` (or the parser's own error) of one line.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

from gnn.config import DataSource
from gnn.data import load_targets
from knossos.cli import find_def
from knossos.errors import KsUsageError
from knossos.expr import Expr
from knossos.parser import load_program, parse_expr


class Start(NamedTuple):
    """A start expression and the name it is known by (``<expr>``, a def's name, ``generated_train[17]``)."""

    name: str
    expr: Expr


def load_starts(
    program: str | Expr | None, def_name: str | None, expressions: str | Sequence[str | Expr] | None
) -> list[Start]:
    """The starts named by exactly one of ``program`` (with ``def_name`` for a file) and ``expressions``."""
    if program is not None and expressions is not None:
        raise KsUsageError("give program= or expressions=, not both")
    if program is None and expressions is None:
        raise KsUsageError(
            "give program= (an expression, or a .ks/.kso file and def_name=) or expressions= "
            "(a set name such as 'generated_train', or a list of expressions)"
        )
    if expressions is not None:
        if def_name is not None:
            raise KsUsageError("def_name= goes with program= (a file), not with expressions=")
        return _set(expressions)
    assert program is not None
    if isinstance(program, Expr):
        return [Start("<expr>", program)]
    if not isinstance(program, str):
        raise KsUsageError(f"program= must be a string or an expression, not {type(program).__name__}")
    # A leaf alone has no rewrites, so every start worth having begins with "("; anything else is a file.
    if program.lstrip().startswith("("):
        if def_name is not None:
            raise KsUsageError("def_name= needs program= to be a file, not an expression")
        return [Start("<expr>", parse_expr(program)[0])]
    return [_def(program, def_name)]


def _def(path: str, def_name: str | None) -> Start:
    prog = load_program(path)
    if def_name is not None:
        d = find_def(prog, def_name, path)
        return Start(d.name, d.body)
    targets = prog.targets
    if len(targets) != 1:
        names = ", ".join(t.name for t in targets[:8]) + (" ..." if len(targets) > 8 else "")
        raise KsUsageError(f"the file has {len(targets)} defs; pick one with def_name= ({names})", None, path)
    return Start(targets[0].name, targets[0].body)


def _set(expressions: str | Sequence[str | Expr]) -> list[Start]:
    if isinstance(expressions, str):  # set names, joined by + as in configs
        return [Start(t.name, t.expr) for t in load_targets(DataSource(set=expressions), "expressions=")]
    if not isinstance(expressions, Sequence):
        raise KsUsageError(f"expressions= must be a set name or a list, not {type(expressions).__name__}")
    if not expressions:
        raise KsUsageError("expressions= is an empty list")
    out = []
    for i, item in enumerate(expressions):
        name = f"expressions[{i}]"
        if isinstance(item, Expr):
            out.append(Start(name, item))
        elif isinstance(item, str):
            out.append(Start(name, parse_expr(item, name)[0]))
        else:
            raise KsUsageError(f"{name} must be a string or an expression, not {type(item).__name__}")
    return out
