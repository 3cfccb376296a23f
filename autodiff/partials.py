"""The partial derivatives of the value ops, from their rows in :mod:`knossos.op_table`.

A row writes ``seed`` times each partial derivative as a small expression of the language over the
names ``seed``, ``r`` (the op's result) and ``a``, ``b`` (its operands), for example tanh's
``(mul seed (sub 1.0 (mul r r)))``.  Reverse mode instantiates it with the result's cotangent as the
seed, forward mode with an operand's tangent; every name stands for an atom (a variable or a
literal), so repeating one costs nothing.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cache
from typing import Union

import sexpdata

from knossos import expr as E
from knossos.expr import Expr
from knossos.op_table import FUNCTION, OPERAND_NAMES, PRIMITIVES, ROW
from knossos.ops import Op

#: A parsed partial: a name, a Float literal, (op, parts), or (None, (part,)): a call of the function
#: itself (``self``, in a library function's partial).
Template = Union[str, float, tuple[Union[Op, None], tuple["Template", ...]]]


@cache
def _parse(text: str) -> Template:
    return _template(sexpdata.loads(text))


def _template(x: object) -> Template:
    if isinstance(x, sexpdata.Symbol):
        return str(x)
    if isinstance(x, float):
        return x
    if isinstance(x, list) and x and isinstance(x[0], sexpdata.Symbol) and str(x[0]) in PRIMITIVES:
        op, arity = PRIMITIVES[str(x[0])]
        if len(x) - 1 == arity:
            return (op, tuple(_template(part) for part in x[1:]))
    if isinstance(x, list) and len(x) == 2 and x[0] == sexpdata.Symbol("self"):
        return (None, (_template(x[1]),))
    raise ValueError(f"not a partial derivative template: {sexpdata.dumps(x)}")


def _instance(t: Template, names: dict[str, Expr], call: Expr | None = None) -> Expr:
    if isinstance(t, str):
        return names[t]
    if isinstance(t, float):
        return E.const(t)
    op, parts = t
    args = [_instance(p, names, call) for p in parts]
    if op is None:
        assert call is not None, "only a library function's partial calls itself"
        return E.call(call.data, *args)
    return E.op(op, *args)


def partial(op: Op, k: int, args: Sequence[Expr], r: Expr, seed: Expr) -> Expr:
    """``seed`` times the partial derivative of ``r = op(args)`` by operand ``k`` (atoms all)."""
    names = dict(zip(OPERAND_NAMES, args, strict=False))
    names["r"] = r
    names["seed"] = seed
    return _instance(_parse(ROW[op].partials[k]), names)


def function_partial(call: Expr, r: Expr, seed: Expr) -> Expr:
    """``seed`` times the derivative of ``r``, a call of a library function (op_table.FUNCTIONS)."""
    names = {"a": call.args[0], "r": r, "seed": seed}
    return _instance(_parse(FUNCTION[call.data.name].partial), names, call)


def check_templates() -> None:
    """Parse every row's partials, with the names they may use (a ValueError names a bad one)."""
    texts = [
        (row.name, text, {"seed", "r", *OPERAND_NAMES[: row.arity]}) for row in ROW.values() for text in row.partials
    ]
    texts += [(f.name, f.partial, {"seed", "r", "a"}) for f in FUNCTION.values()]
    for name, text, allowed in texts:
        unknown = _names(_parse(text)) - allowed
        if unknown:
            raise ValueError(f"the partial {text!r} of {name} uses {', '.join(sorted(unknown))}")


def _names(t: Template) -> set[str]:
    if isinstance(t, str):
        return {t}
    if isinstance(t, float):
        return set()
    return set().union(*(_names(p) for p in t[1]))
