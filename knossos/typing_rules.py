"""Type rules: the result type of each op from the types of its children.

These follow the reference implementation: arithmetic works on numbers, element-wise on equal
vector and tuple types, and broadcasts a scalar over any structure whose leaves are that scalar;
``build`` gives a ``Vec``; ``sumbuild`` gives its body's type; ``if`` needs a ``Bool`` condition and
branches of one type; calls must match their target's signature.  A rule raises
:class:`~knossos.errors.KsTypeError` with a message that names the types involved.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from knossos.errors import KsTypeError
from knossos.op_table import NAMES, ROWS, OpKind, OpRow
from knossos.ops import Op
from knossos.types import BOOL, FLOAT, INTEGER, Kind, Type, lam_type, tuple_of, vec

if TYPE_CHECKING:
    from knossos.callee import Callee
    from knossos.node import Expr

TypeRule = Callable[[tuple["Expr", ...], Any], Type]


def _fail(message: str) -> KsTypeError:
    return KsTypeError(message)


def arithmetic_type(op: Op, left: Type, right: Type) -> Type:
    """Result of add/sub/mul/div: equal numeric types, or a scalar broadcast over a structure."""
    name = NAMES[op]
    if left is right:
        if left.is_numeric_structure:
            return left
        raise _fail(f"'{name}' needs numbers, vectors or tuples of numbers, not {left}")
    if left.is_number and right.is_numeric_structure and right.leaves == left.leaves:
        return right
    if right.is_number and left.is_numeric_structure and left.leaves == right.leaves:
        return left
    raise _fail(f"'{name}' cannot combine {left} and {right}")


def _arith(op: Op) -> TypeRule:
    def rule(args: tuple[Expr, ...], data: Any) -> Type:
        left = args[0].type
        if left is args[1].type and left.is_number:
            return left
        return arithmetic_type(op, left, args[1].type)

    return rule


def _neg(args: tuple[Expr, ...], data: Any) -> Type:
    t = args[0].type
    if not t.is_numeric_structure:
        raise _fail(f"'neg' needs a number, vector or tuple of numbers, not {t}")
    return t


def _float_fn(name: str) -> TypeRule:
    def rule(args: tuple[Expr, ...], data: Any) -> Type:
        for a in args:
            if a.type is not FLOAT:
                raise _fail(f"'{name}' needs Float arguments, not {a.type}")
        return FLOAT

    return rule


def _number(name: str) -> TypeRule:
    def rule(args: tuple[Expr, ...], data: Any) -> Type:
        first = args[0].type
        if not first.is_number or any(a.type is not first for a in args):
            kinds = " and ".join(str(a.type) for a in args)
            wanted = "an Integer or Float" if len(args) == 1 else "two Integers or two Floats"
            raise _fail(f"'{name}' needs {wanted}, not {kinds}")
        return first

    return rule


def _compare(name: str, allow_bool: bool) -> TypeRule:
    def rule(args: tuple[Expr, ...], data: Any) -> Type:
        a, b = args[0].type, args[1].type
        if a is not b or not (a.is_number or (allow_bool and a is BOOL)):
            raise _fail(f"'{name}' needs two arguments of the same scalar type, not {a} and {b}")
        return BOOL

    return rule


def _logic(name: str) -> TypeRule:
    def rule(args: tuple[Expr, ...], data: Any) -> Type:
        for a in args:
            if a.type is not BOOL:
                raise _fail(f"'{name}' needs Bool arguments, not {a.type}")
        return BOOL

    return rule


def _to_float(name: str) -> TypeRule:
    def rule(args: tuple[Expr, ...], data: Any) -> Type:
        if args[0].type is not INTEGER:
            raise _fail(f"'{name}' needs an Integer, not {args[0].type}")
        return FLOAT

    return rule


def _value_op_rule(row: OpRow) -> TypeRule:
    """The type rule of a value op, by its kind (op_table)."""
    kind = row.kind
    if kind is OpKind.ARITHMETIC:
        return _arith(row.op)
    if kind is OpKind.NEGATION:
        return _neg
    if kind is OpKind.FLOAT_FUNCTION:
        return _float_fn(row.name)
    if kind is OpKind.NUMBER:
        return _number(row.name)
    if kind is OpKind.COMPARISON:
        return _compare(row.name, allow_bool=row.allows_bool)
    if kind is OpKind.LOGIC:
        return _logic(row.name)
    return _to_float(row.name)


def _need_integer(what: str, t: Type) -> None:
    if t is not INTEGER:
        raise _fail(f"{what} must be an Integer, not {t}")


def _need_vec(what: str, t: Type) -> Type:
    if t.kind is not Kind.VEC:
        raise _fail(f"{what} must be a vector, not {t}")
    return t.elem


def _index(args: tuple[Expr, ...], data: Any) -> Type:
    _need_integer("the position given to 'index'", args[0].type)
    return _need_vec("the second argument of 'index'", args[1].type)


def _size(args: tuple[Expr, ...], data: Any) -> Type:
    _need_vec("the argument of 'size'", args[0].type)
    return INTEGER


def _sum(args: tuple[Expr, ...], data: Any) -> Type:
    elem = _need_vec("the argument of 'sum'", args[0].type)
    if not elem.is_numeric_structure:
        raise _fail(f"'sum' needs a vector of numbers, vectors or tuples of numbers, not {args[0].type}")
    return elem


def _const_vec(args: tuple[Expr, ...], data: Any) -> Type:
    _need_integer("the size given to 'constVec'", args[0].type)
    return vec(args[1].type)


def _delta_vec(args: tuple[Expr, ...], data: Any) -> Type:
    _need_integer("the size given to 'deltaVec'", args[0].type)
    _need_integer("the position given to 'deltaVec'", args[1].type)
    if not args[2].type.is_numeric_structure:
        raise _fail(f"'deltaVec' needs a number, vector or tuple of numbers, not {args[2].type}")
    return vec(args[2].type)


def _if(args: tuple[Expr, ...], data: Any) -> Type:
    if args[0].type is not BOOL:
        raise _fail(f"the condition of 'if' must be Bool, not {args[0].type}")
    if args[1].type is not args[2].type:
        raise _fail(f"the branches of 'if' have different types: {args[1].type} and {args[2].type}")
    return args[1].type


def _assert(args: tuple[Expr, ...], data: Any) -> Type:
    if args[0].type is not BOOL:
        raise _fail(f"the condition of 'assert' must be Bool, not {args[0].type}")
    return args[1].type


def _tuple(args: tuple[Expr, ...], data: Any) -> Type:
    return tuple_of(*(a.type for a in args))


def _get(args: tuple[Expr, ...], data: Any) -> Type:
    index, count = data
    t = args[0].type
    if t.kind is not Kind.TUPLE:
        raise _fail(f"get${index}${count} needs a tuple, not {t}")
    if len(t.children) != count:
        raise _fail(f"get${index}${count} needs a tuple of {count} elements, not {t}")
    elem: Type = t.children[index - 1]
    return elem


def _let(args: tuple[Expr, ...], data: Any) -> Type:
    var, rhs, body = args
    if var.type is not rhs.type:
        raise _fail(f"'{var.data}' is declared {var.type} but bound to a value of type {rhs.type}")
    return body.type


def _lam(args: tuple[Expr, ...], data: Any) -> Type:
    return lam_type(args[0].type, args[1].type)


def _build(args: tuple[Expr, ...], data: Any) -> Type:
    _need_integer("the size given to 'build'", args[0].type)
    _need_integer("the index variable of 'build'", args[1].type)
    return vec(args[2].type)


def _sumbuild(args: tuple[Expr, ...], data: Any) -> Type:
    _need_integer("the size given to 'sumbuild'", args[0].type)
    _need_integer("the index variable of 'sumbuild'", args[1].type)
    if not args[2].type.is_numeric_structure:
        raise _fail(f"'sumbuild' needs a body of numbers, vectors or tuples of numbers, not {args[2].type}")
    return args[2].type


def _call(args: tuple[Expr, ...], data: Callee) -> Type:
    params = data.param_types
    if len(args) != len(params):
        raise _fail(f"'{data.name}' takes {len(params)} argument(s), not {len(args)}")
    for i, (a, p) in enumerate(zip(args, params, strict=True)):
        if a.type is not p:
            raise _fail(f"argument {i + 1} of '{data.name}' must be {p}, not {a.type}")
    return data.ret_type


def _apply(args: tuple[Expr, ...], data: Any) -> Type:
    f, arg = args
    if f.type.kind is not Kind.LAM:
        raise _fail(f"cannot call a value of type {f.type}")
    if arg.type is not f.type.lam_arg:
        raise _fail(f"the function takes {f.type.lam_arg}, not {arg.type}")
    return f.type.lam_ret


TYPE_RULES: dict[Op, TypeRule] = {
    **{row.op: _value_op_rule(row) for row in ROWS},
    Op.INDEX: _index,
    Op.SIZE: _size,
    Op.SUM: _sum,
    Op.CONSTVEC: _const_vec,
    Op.DELTAVEC: _delta_vec,
    Op.IF: _if,
    Op.ASSERT: _assert,
    Op.TUPLE: _tuple,
    Op.GET: _get,
    Op.LET: _let,
    Op.LAM: _lam,
    Op.BUILD: _build,
    Op.SUMBUILD: _sumbuild,
    Op.CALL: _call,
    Op.APPLY: _apply,
}
