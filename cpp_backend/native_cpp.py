"""The C++ meaning of the edefs and prelude functions that :mod:`knossos.natives` implements."""

from __future__ import annotations

from knossos.callee import Callee
from knossos.errors import KsUsageError
from knossos.op_table import FUNCTIONS
from knossos.types import BOOL, FLOAT, INTEGER, Type, tuple_of, vec

_F, _I, _B = FLOAT, INTEGER, BOOL
_VF = vec(FLOAT)
_VVF = vec(_VF)

#: name -> [(parameter types, return type, C++ expression with {0}, {1}... for the arguments)]: the
#: C++ meaning of each function of :data:`knossos.natives.NATIVES`, for the signatures it supports.
NATIVE_CPP: dict[str, list[tuple[tuple[Type, ...], Type, str]]] = {
    "abs": [((_F,), _F, "std::fabs({0})"), ((_I,), _I, "ks::abs_i({0})")],
    "max": [((_F, _F), _F, "ks::max_f({0}, {1})"), ((_I, _I), _I, "ks::max_i({0}, {1})")],
    "pow": [((_F, _F), _F, "ks::math::pow({0}, {1})")],
    "tanh": [((_F,), _F, "ks::math::tanh({0})")],
    "exp": [((_F,), _F, "ks::math::exp({0})")],
    "log": [((_F,), _F, "ks::math::log({0})")],
    **{f.name: [((_F,), _F, f.cpp)] for f in FUNCTIONS},
    "lgamma": [((_F,), _F, "ks::lgamma_f({0})")],
    "stop_gradient": [((_F,), _F, "({0})")],
    "fwd$lgamma": [((_F, _F), _F, "(ks::digamma({0}) * {1})")],
    "rev$lgamma": [((_F, _F), _F, "(ks::digamma({0}) * {1})")],
    "dotv": [((_VF, _VF), _F, "ks::dotv({0}, {1})")],
    "mul$Mat$Vec": [((_VVF, _VF), _VF, "ks::mul_mat_vec({0}, {1})")],
    "rev$mul$Mat$Vec": [((_VVF, _VF, _VF), tuple_of(_VVF, _VF), "ks::rev_mul_mat_vec({0}, {1}, {2})")],
    "add$ii": [((_I, _I), _I, "ks::add_i({0}, {1})")],
    "add$ff": [((_F, _F), _F, "({0} + {1})")],
    "add$vfvf": [((_VF, _VF), _VF, "ks::add({0}, {1})")],
    "sub$ii": [((_I, _I), _I, "ks::sub_i({0}, {1})")],
    "sub$ff": [((_F, _F), _F, "({0} - {1})")],
    "mul$ii": [((_I, _I), _I, "ks::mul_i({0}, {1})")],
    "mul$ff": [((_F, _F), _F, "({0} * {1})")],
    "div$ii": [((_I, _I), _I, "ks::div_i({0}, {1})")],
    "div$ff": [((_F, _F), _F, "({0} / {1})")],
    "exp$f": [((_F,), _F, "ks::math::exp({0})")],
    "log$f": [((_F,), _F, "ks::math::log({0})")],
    "eq$ii": [((_I, _I), _B, "ks::eq({0}, {1})")],
    "eq$ff": [((_F, _F), _B, "ks::eq({0}, {1})")],
    "gt$ii": [((_I, _I), _B, "ks::gt({0}, {1})")],
    "gt$ff": [((_F, _F), _B, "ks::gt({0}, {1})")],
    "gte$ii": [((_I, _I), _B, "ks::gte({0}, {1})")],
    "gte$ff": [((_F, _F), _B, "ks::gte({0}, {1})")],
    "$ranhashdoub": [((_I,), _F, "ks::ranhashdoub({0})")],
}


def native_template(callee: Callee) -> str:
    """The C++ expression template of an edef or prelude function, or a KsUsageError."""
    for params, ret, template in NATIVE_CPP.get(callee.name, []):
        if params == callee.param_types and ret is callee.ret_type:
            return template
    sig = " ".join(str(t) for t in callee.param_types)
    raise KsUsageError(
        f"the C++ backend has no implementation of edef '{callee.name}' taking ({sig}) and returning {callee.ret_type}"
    )
