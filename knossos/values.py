"""Run-time values of the reference interpreter, and their JSON encoding.

Inside the interpreter a Float is a Python ``float``, an Integer an ``int``, a Bool a ``bool``, a
vector a ``list`` and a tuple a ``tuple``.  Arguments may also come as numpy scalars and arrays.
In JSON, vectors are lists and tuples are ``{"tuple": [...]}``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from knossos.arith import INT_MAX, INT_MIN, checked_add, fadd
from knossos.errors import KsEvalError, KsUsageError
from knossos.types import BOOL, FLOAT, INTEGER, Kind, Type

Value = Any  # float | int | bool | list[Value] | tuple[Value, ...] | Closure


def from_python(value: object, t: Type, where: str = "argument") -> Value:
    """Check ``value`` against ``t`` and convert it to the interpreter's representation."""
    if isinstance(value, np.ndarray):
        value = value.tolist()
    elif isinstance(value, np.generic):
        value = value.item()
    if t is FLOAT:
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise KsUsageError(f"{where} must be a Float, not {_describe(value)}")
        try:
            return float(value)
        except OverflowError:
            raise KsUsageError(f"{where} is out of the Float range") from None
    if t is INTEGER:
        if isinstance(value, bool) or not isinstance(value, int):
            raise KsUsageError(f"{where} must be an Integer, not {_describe(value)}")
        if not INT_MIN <= value <= INT_MAX:
            raise KsUsageError(f"{where} is out of the 64-bit Integer range")
        return value
    if t is BOOL:
        if not isinstance(value, bool):
            raise KsUsageError(f"{where} must be a Bool, not {_describe(value)}")
        return value
    if t.kind is Kind.VEC:
        if not isinstance(value, list):
            raise KsUsageError(f"{where} must be a vector (a list), not {_describe(value)}")
        return [from_python(v, t.elem, f"{where}[{i}]") for i, v in enumerate(value)]
    if t.kind is Kind.TUPLE:
        if isinstance(value, dict) and set(value) == {"tuple"}:
            value = value["tuple"]
            if not isinstance(value, list):
                raise KsUsageError(f'{where} must be {{"tuple": [...]}}')
        elif not isinstance(value, tuple):
            raise KsUsageError(f"{where} must be a tuple, not {_describe(value)}")
        if len(value) != len(t.children):  # type: ignore[arg-type]
            raise KsUsageError(f"{where} must be a tuple of {len(t.children)} elements, not {len(value)}")  # type: ignore[arg-type]
        return tuple(
            from_python(v, c, f"{where}.{i + 1}") for i, (v, c) in enumerate(zip(value, t.children, strict=True))
        )  # type: ignore[call-overload]
    raise KsUsageError(f"{where}: values of type {t} cannot be passed in")


def _describe(value: object) -> str:
    if isinstance(value, bool):
        return "a Bool"
    if isinstance(value, int):
        return "an integer"
    if isinstance(value, float):
        return "a number"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__


def to_json(value: Value, t: Type) -> Any:
    """The JSON-ready form of a value of type ``t``."""
    if t.kind is Kind.VEC:
        return [to_json(v, t.elem) for v in value]
    if t.kind is Kind.TUPLE:
        return {"tuple": [to_json(v, c) for v, c in zip(value, t.children, strict=True)]}
    if t.kind is Kind.LAM:
        return "<function>"
    return value


def to_numpy(value: Value) -> Any:
    """Vectors as numpy arrays (nested vectors as n-d arrays where rectangular), for tests."""
    if isinstance(value, list):
        try:
            return np.array(value, dtype=float)
        except (ValueError, TypeError):
            return [to_numpy(v) for v in value]
    if isinstance(value, tuple):
        return tuple(to_numpy(v) for v in value)
    return value


# -- element-wise arithmetic over structured values --------------------------------------------
ScalarFn = Callable[[Any, Any], Any]


def elementwise_value(f_float: ScalarFn, f_int: ScalarFn, lt: Type, rt: Type, a: Value, b: Value) -> Value:
    """Apply a binary op element-wise, broadcasting a scalar over a structure."""
    if lt is rt:
        return _zip_with(f_float, f_int, lt, a, b)
    if lt.is_number:
        return _broadcast(lambda x: (f_float if lt is FLOAT else f_int)(a, x), rt, b)
    return _broadcast(lambda x: (f_float if rt is FLOAT else f_int)(x, b), lt, a)


def _zip_with(f_float: ScalarFn, f_int: ScalarFn, t: Type, a: Value, b: Value) -> Value:
    if t is FLOAT:
        return f_float(a, b)
    if t is INTEGER:
        return f_int(a, b)
    if t.kind is Kind.VEC:
        if len(a) != len(b):
            raise KsEvalError(f"element-wise operation on vectors of sizes {len(a)} and {len(b)}")
        return [_zip_with(f_float, f_int, t.elem, x, y) for x, y in zip(a, b, strict=True)]
    return tuple(_zip_with(f_float, f_int, c, x, y) for c, x, y in zip(t.children, a, b, strict=True))


def _broadcast(f: Callable[[Any], Any], t: Type, v: Value) -> Value:
    if t.kind is Kind.VEC:
        return [_broadcast(f, t.elem, x) for x in v]
    if t.kind is Kind.TUPLE:
        return tuple(_broadcast(f, c, x) for c, x in zip(t.children, v, strict=True))
    return f(v)


def add(t: Type, a: Value, b: Value) -> Value:
    return _zip_with(fadd, checked_add, t, a, b)


def zero_like(v: Value) -> Value:
    if isinstance(v, bool):
        return False
    if isinstance(v, float):
        return 0.0
    if isinstance(v, int):
        return 0
    if isinstance(v, list):
        return [zero_like(x) for x in v]
    return tuple(zero_like(x) for x in v)


def zero_of(t: Type) -> Value:
    """The zero of a type with no vectors in it (the sum of no elements)."""
    if t is FLOAT:
        return 0.0
    if t is INTEGER:
        return 0
    if t.kind is Kind.TUPLE:
        return tuple(zero_of(c) for c in t.children)
    raise KsEvalError(f"a sum over no elements of type {t} has no defined size")


def isclose(a: Value, b: Value, rel: float = 1e-9, abs_tol: float = 1e-12) -> bool:
    """Approximate equality of two values (NaN equals NaN), for tests and checks."""
    if isinstance(a, list | tuple):
        return (
            isinstance(b, type(a))
            and len(a) == len(b)
            and all(isclose(x, y, rel, abs_tol) for x, y in zip(a, b, strict=True))
        )
    if isinstance(a, float) or isinstance(b, float):
        if math.isnan(a) and math.isnan(b):
            return True
        return math.isclose(a, b, rel_tol=rel, abs_tol=abs_tol)
    return bool(a == b)
