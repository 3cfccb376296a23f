"""Patterns: expressions with holes, written in the Knossos syntax with ``?name`` for a hole.

``(add 0.0 ?a)`` matches an ``add`` whose first argument is the literal zero and binds ``?a`` to the
second.  A hole that appears twice must match the same expression both times (``is``).  Binders bind
holes too: in ``(build ?n (lam ?i ?body))`` the hole ``?i`` matches the index variable.  Numeric
literals in patterns match Integer and Float literals of that value; in a right-hand side they are
made with the scalar type of the expression being rewritten.

Two forms match what a fixed shape cannot, for rows whose right side is built by an applier (see
:mod:`rules.rule`): ``(tuple ?es...)`` matches a tuple of any length and binds ``?es`` to the tuple
(its elements are its arguments), and ``(get$?i$?n ?t)`` matches a ``get`` of any index (the index
is the matched node's, not a hole).
"""

from __future__ import annotations

from dataclasses import dataclass

from knossos import expr as E
from knossos.errors import KsSyntaxError
from knossos.expr import Expr
from knossos.op_table import PRIMITIVES
from knossos.ops import Op
from knossos.reader import Form, Literal, SList, Symbol, read_forms
from knossos.types import FLOAT, INTEGER, Type

Bindings = dict[str, Expr]


@dataclass(frozen=True)
class Hole:
    name: str  # without the '?'
    #: ``?name...``: the elements of a tuple of any length (the only argument of a tuple pattern).
    rest: bool = False


@dataclass(frozen=True)
class Lit:
    value: bool | int | float


@dataclass(frozen=True)
class OpPattern:
    op: Op
    args: tuple[Pattern, ...]


Pattern = Hole | Lit | OpPattern

_BINDING_FORMS = {"build": Op.BUILD, "sumbuild": Op.SUMBUILD}
_ANY_GET = "get$?i$?n"
_REST = "..."


def parse_pattern(text: str) -> Pattern:
    """Parse one pattern; raises KsSyntaxError (with the pattern text) if it is malformed."""
    forms = read_forms(text, "<pattern>")
    if len(forms) != 1:
        raise KsSyntaxError(f"a pattern is one expression: {text!r}")
    return _convert(forms[0], text)


def _convert(form: Form, text: str) -> Pattern:
    if isinstance(form, Literal):
        return Lit(form.value)
    if isinstance(form, Symbol):
        if form.name.endswith(_REST):
            raise KsSyntaxError(f"in pattern {text!r}: '{form.name}' may only be the one argument of a tuple")
        if form.name.startswith("?") and len(form.name) > 1:
            return Hole(form.name[1:])
        raise KsSyntaxError(f"in pattern {text!r}: '{form.name}' is neither a ?hole nor a literal")
    if not form or not isinstance(form[0], Symbol):
        raise KsSyntaxError(f"in pattern {text!r}: expected (op ...)")
    head = form[0].name
    parts = form[1:]
    if head == "let":  # (let (?x ?e) ?body)
        if len(parts) != 2 or not isinstance(parts[0], SList) or len(parts[0]) != 2:
            raise KsSyntaxError(f"in pattern {text!r}: a let pattern is (let (?x ?e) ?body)")
        return OpPattern(Op.LET, (_hole(parts[0][0], text), _convert(parts[0][1], text), _convert(parts[1], text)))
    if head in _BINDING_FORMS:  # (build ?n (lam ?i ?body))
        if len(parts) != 2 or not isinstance(parts[1], SList) or len(parts[1]) != 3:
            raise KsSyntaxError(f"in pattern {text!r}: a {head} pattern is ({head} ?n (lam ?i ?body))")
        lam_form = parts[1]
        return OpPattern(
            _BINDING_FORMS[head], (_convert(parts[0], text), _hole(lam_form[1], text), _convert(lam_form[2], text))
        )
    if head == "tuple":
        if len(parts) == 1 and isinstance(parts[0], Symbol) and parts[0].name.endswith(_REST):
            rest = _hole(Symbol(parts[0].name[: -len(_REST)], parts[0].pos), text)
            return OpPattern(Op.TUPLE, (Hole(rest.name, rest=True),))
        return OpPattern(Op.TUPLE, tuple(_convert(p, text) for p in parts))
    if head == _ANY_GET:
        if len(parts) != 1:
            raise KsSyntaxError(f"in pattern {text!r}: '{head}' takes 1 argument")
        return OpPattern(Op.GET, (_convert(parts[0], text),))
    if head not in PRIMITIVES:
        raise KsSyntaxError(f"in pattern {text!r}: unknown op '{head}'")
    op, arity = PRIMITIVES[head]
    if len(parts) != arity:
        raise KsSyntaxError(f"in pattern {text!r}: '{head}' takes {arity} argument(s)")
    return OpPattern(op, tuple(_convert(p, text) for p in parts))


def _hole(form: Form, text: str) -> Hole:
    pattern = _convert(form, text)
    if not isinstance(pattern, Hole):
        raise KsSyntaxError(f"in pattern {text!r}: a bound variable must be a ?hole")
    return pattern


def holes(pattern: Pattern) -> list[str]:
    """Names of the holes, in order of first appearance."""
    out: list[str] = []
    stack = [pattern]
    while stack:
        p = stack.pop()
        if isinstance(p, Hole):
            if p.name not in out:
                out.append(p.name)
        elif isinstance(p, OpPattern):
            stack.extend(reversed(p.args))
    return out


def needs_applier(pattern: Pattern) -> bool:
    """Whether ``pattern`` has a form only a row with an applier may use: a rest hole (matched by a
    tuple's arity, and bound to the tuple) or a get (its index is not matched, so cannot be built)."""
    stack = [pattern]
    while stack:
        p = stack.pop()
        if isinstance(p, OpPattern):
            if p.op is Op.GET or _rest_hole(p) is not None:
                return True
            stack.extend(p.args)
    return False


def _rest_hole(p: OpPattern) -> Hole | None:
    return p.args[0] if len(p.args) == 1 and isinstance(p.args[0], Hole) and p.args[0].rest else None


def head_op(pattern: Pattern) -> Op | None:
    return pattern.op if isinstance(pattern, OpPattern) else None


def match_pattern(pattern: Pattern, node: Expr) -> Bindings | None:
    """The hole bindings under which ``pattern`` is ``node``, or None."""
    bindings: Bindings = {}
    stack: list[tuple[Pattern, Expr]] = [(pattern, node)]
    while stack:
        p, e = stack.pop()
        if isinstance(p, Hole):
            seen = bindings.get(p.name)
            if seen is None:
                bindings[p.name] = e
            elif seen is not e:
                return None
        elif isinstance(p, Lit):
            if e.op is not Op.CONST or not literal_matches(p.value, e):
                return None
        else:
            rest = _rest_hole(p)
            if rest is not None:  # the tuple itself stands for its elements
                if e.op is not p.op:
                    return None
                stack.append((Hole(rest.name), e))
                continue
            if e.op is not p.op or len(e.args) != len(p.args):
                return None
            stack.extend(zip(p.args, e.args, strict=True))
    return bindings


def literal_matches(value: bool | int | float, e: Expr) -> bool:
    """Whether the pattern literal ``value`` matches the literal ``e`` (numbers: of either number type)."""
    if isinstance(value, bool) or e.type.kind.name == "BOOL":
        return e.data is value
    return e.type.is_number and e.data == value


def instantiate(pattern: Pattern, bindings: Bindings, scalar: Type | None) -> Expr:
    """Build ``pattern`` with its holes filled; numeric literals get type ``scalar``."""
    built: dict[int, Expr] = {}
    stack: list[tuple[Pattern, bool]] = [(pattern, False)]
    while stack:
        p, ready = stack.pop()
        if isinstance(p, Hole):
            built[id(p)] = bindings[p.name]
        elif isinstance(p, Lit):
            built[id(p)] = E.const(literal_value(p.value, scalar))
        elif not ready:
            stack.append((p, True))
            stack.extend((a, False) for a in p.args)
        else:
            built[id(p)] = E.make(p.op, tuple(built[id(a)] for a in p.args))
    return built[id(pattern)]


def literal_value(value: bool | int | float, scalar: Type | None) -> bool | int | float:
    """The pattern literal ``value`` as a literal of a right-hand side whose node has type ``scalar``."""
    if isinstance(value, bool):
        return value
    if scalar is INTEGER:
        return int(value)
    if scalar is FLOAT:
        return float(value)
    raise ValueError("a numeric literal on a right-hand side needs a scalar number type")
