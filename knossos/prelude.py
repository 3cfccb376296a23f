"""Built-in functions every program may call without declaring them.

These are the reference's prelude: type-specialised arithmetic such as ``add$ff`` or ``add$vfvf``
(which ksc-generated programs call), with the reference's costs.  Their meaning is that of the
corresponding primitive op; :mod:`knossos.natives` implements them.
"""

from __future__ import annotations

from knossos.callee import Callee, CalleeKind, edef_callee
from knossos.cost import ASSUMED_VECTOR_SIZE, MALLOC_COST
from knossos.types import BOOL, FLOAT, INTEGER, Type, vec

_VF = vec(FLOAT)

# name -> (parameter types, return type, cost of one call besides the call overhead)
_PRELUDE: dict[str, tuple[tuple[Type, ...], Type, float]] = {
    "add$ii": ((INTEGER, INTEGER), INTEGER, 1.0),
    "add$ff": ((FLOAT, FLOAT), FLOAT, 1.0),
    "add$vfvf": ((_VF, _VF), _VF, MALLOC_COST + ASSUMED_VECTOR_SIZE * 1.0),
    "sub$ii": ((INTEGER, INTEGER), INTEGER, 1.0),
    "sub$ff": ((FLOAT, FLOAT), FLOAT, 1.0),
    "mul$ii": ((INTEGER, INTEGER), INTEGER, 1.0),
    "mul$ff": ((FLOAT, FLOAT), FLOAT, 2.0),
    "div$ii": ((INTEGER, INTEGER), INTEGER, 1.0),
    "div$ff": ((FLOAT, FLOAT), FLOAT, 2.0),
    "exp$f": ((FLOAT,), FLOAT, 4.0),
    "log$f": ((FLOAT,), FLOAT, 4.0),
    "eq$ii": ((INTEGER, INTEGER), BOOL, 1.0),
    "eq$ff": ((FLOAT, FLOAT), BOOL, 1.0),
    "gt$ii": ((INTEGER, INTEGER), BOOL, 1.0),
    "gt$ff": ((FLOAT, FLOAT), BOOL, 1.0),
    "gte$ii": ((INTEGER, INTEGER), BOOL, 1.0),
    "gte$ff": ((FLOAT, FLOAT), BOOL, 1.0),
    "$ranhashdoub": ((INTEGER,), FLOAT, 1.0),
}

PRELUDE: dict[str, Callee] = {
    name: edef_callee(name, params, ret, cost, CalleeKind.BUILTIN) for name, (params, ret, cost) in _PRELUDE.items()
}
