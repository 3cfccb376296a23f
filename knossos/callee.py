"""What a ``CALL`` node calls: a def, an edef, or a built-in function of the reference prelude.

A :class:`Callee` carries everything a call node needs to know about its target without looking
anything up: the signature (for its type) and the cost of one call (for its cost).  Callees are
interned like expressions: two parses of the same def give the same ``Callee``, so call nodes (which
are interned on their callee) are identical too.  Make them with :func:`def_callee` and
:func:`edef_callee`.
"""

from __future__ import annotations

import enum
import weakref
from typing import TYPE_CHECKING

from knossos.stable_hash import stable_hash
from knossos.types import Type

if TYPE_CHECKING:
    from knossos.program import Def


class CalleeKind(enum.Enum):
    DEF = "def"
    EDEF = "edef"
    BUILTIN = "builtin"


class Callee:
    """A call target.  Identity is equality (each program makes one per target)."""

    __slots__ = ("__weakref__", "body_cost", "definition", "h", "kind", "name", "param_types", "ret_type")

    def __init__(
        self,
        name: str,
        kind: CalleeKind,
        param_types: tuple[Type, ...],
        ret_type: Type,
        body_cost: float,
        definition: Def | None = None,
    ) -> None:
        self.name = name
        self.kind = kind
        self.param_types = param_types
        self.ret_type = ret_type
        #: Cost of running the target once, excluding the call overhead and the arguments.
        self.body_cost = body_cost
        #: The def itself, for inlining; ``None`` for edefs and built-ins.
        self.definition = definition
        self.h = hash((stable_hash(name), ret_type.h, *(t.h for t in param_types)))

    def __repr__(self) -> str:
        return f"Callee({self.kind.value} {self.name})"


_interned: weakref.WeakValueDictionary[tuple[object, ...], Callee] = weakref.WeakValueDictionary()


def def_callee(d: Def) -> Callee:
    """The callee of a def: equal defs (same name, signature and body) share one."""
    key = (CalleeKind.DEF, d.name, d.ret_type, d.params, id(d.body))
    found = _interned.get(key)
    if found is None:
        found = Callee(d.name, CalleeKind.DEF, tuple(p.type for p in d.params), d.ret_type, d.call_cost, d)
        _interned[key] = found
    return found


def edef_callee(
    name: str, param_types: tuple[Type, ...], ret_type: Type, cost: float, kind: CalleeKind = CalleeKind.EDEF
) -> Callee:
    """The callee of an edef (or a prelude built-in) with this signature and cost."""
    key = (kind, name, ret_type, param_types, cost)
    found = _interned.get(key)
    if found is None:
        found = Callee(name, kind, param_types, ret_type, cost)
        _interned[key] = found
    return found
