"""What a ``CALL`` node calls: a def, an edef, or a built-in function of the reference prelude.

A :class:`Callee` carries everything a call node needs to know about its target without looking
anything up: the signature (for its type) and the cost of one call (for its cost).  Calls to the
same target share one ``Callee`` object, and call nodes are interned on it.
"""

from __future__ import annotations

import enum
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

    __slots__ = ("name", "kind", "param_types", "ret_type", "body_cost", "definition", "h")

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
