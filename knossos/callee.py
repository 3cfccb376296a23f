"""What a ``CALL`` node calls: a def, an edef, or a built-in function of the reference prelude.

A :class:`Callee` carries everything a call node needs to know about its target without looking
anything up: the signature (for its type) and the cost of one call (for its cost).  Callees are
interned like expressions: two parses of the same def give the same ``Callee``, so call nodes (which
are interned on their callee) are identical too.  Make them with :func:`edef_callee` here and
:func:`knossos.program.def_callee`: a callee holds its def without knowing the def's class, so this
module stays below the programs and expressions that refer to it.
"""

from __future__ import annotations

import enum
import weakref
from collections.abc import Callable

from knossos.stable_hash import stable_hash
from knossos.types import Type


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
        definition: object = None,
    ) -> None:
        self.name = name
        self.kind = kind
        self.param_types = param_types
        self.ret_type = ret_type
        #: Cost of running the target once, excluding the call overhead and the arguments.
        self.body_cost = body_cost
        #: The def itself (a :class:`knossos.program.Def`), for inlining; ``None`` for edefs and built-ins.
        self.definition = definition
        self.h = hash((stable_hash(name), ret_type.h, *(t.h for t in param_types)))

    def __repr__(self) -> str:
        return f"Callee({self.kind.value} {self.name})"


_interned: weakref.WeakValueDictionary[tuple[object, ...], Callee] = weakref.WeakValueDictionary()


def interned_callee(key: tuple[object, ...], make: Callable[[], Callee]) -> Callee:
    """The callee interned under ``key``, made by ``make`` the first time."""
    found = _interned.get(key)
    if found is None:
        found = make()
        _interned[key] = found
    return found


def edef_callee(
    name: str, param_types: tuple[Type, ...], ret_type: Type, cost: float, kind: CalleeKind = CalleeKind.EDEF
) -> Callee:
    """The callee of an edef (or a prelude built-in) with this signature and cost."""
    key = (kind, name, ret_type, param_types, cost)
    return interned_callee(key, lambda: Callee(name, kind, param_types, ret_type, cost))
