"""One row per value op of the language: the one place an op is defined.

A row holds everything the passes need to know about one op, so adding an op is adding a row (as
egg's ``define_language!`` and tinygrad's op tables do); ``tests/test_op_table.py`` checks that every
row has every column and that each pass takes its entries from here:

- ``name``, ``arity``: how the text writes it (:mod:`knossos.parser`);
- ``kind``: the shape of its type rule (:mod:`knossos.typing_rules`), of its cost rule
  (:mod:`knossos.cost`) and of its evaluation over structures (:mod:`knossos.interpreter`);
- ``cost``: its own cost per element (the reference's; for abs, max, pow, tanh and sqrt, which it
  did not have, what the cost$ declarations of its programs give these edefs);
- ``meaning``: its value on scalar operands (``integer_meaning`` on Integers where that differs),
  which the interpreter lifts over structures and the constant-folding rules call;
- ``cpp``: its C++ for each kind of operand (:mod:`cpp_backend.emit`);
- ``partials``: for each operand, ``seed`` times the partial derivative of the result ``r`` with
  respect to it, written in the language over the names ``seed``, ``r`` and the operands ``a``, ``b``:
  reverse mode takes the result's cotangent as the seed, forward mode an operand's tangent
  (:mod:`autodiff.partials`); ``NOT_DIFFERENTIABLE`` for ops whose result is not a Float;
- ``torch``: the aten ops that mean this op element-wise, and how their operands are taken
  (:mod:`frontends.aten_ops`);
- ``fold``: the name of the rule that folds it on literals, or None where no rule does.

:data:`FUNCTIONS` is the same for the library's functions of one Float (``erf``, ``log1p``, ...),
which a program declares with an ``edef`` and calls: their meaning (:mod:`knossos.natives`), C++,
partial (over ``seed``, ``r``, the operand ``a``, and ``self``, the function itself) and aten ops.

The binding forms, vectors and tuples (``let``, ``build``, ``sumbuild``, ``index``, ...) are the
language's structure, not value ops: every pass is about them, and their code lives with each pass.
"""

from __future__ import annotations

import enum
import math
import operator
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from knossos import arith
from knossos.ops import STRUCTURE, Op


class OpKind(enum.Enum):
    """What an op takes and gives; its type rule, cost rule and evaluation follow from it."""

    #: add, sub, mul, div: two numbers of one type, or a number broadcast over a structure of them
    ARITHMETIC = "arithmetic"
    #: neg: a number, or a structure of numbers
    NEGATION = "negation"
    #: Floats to a Float
    FLOAT_FUNCTION = "float function"
    #: an Integer or a Float (all operands of one type) to that type
    NUMBER = "number"
    #: two scalars of one type to a Bool; ``allows_bool`` rows also compare Bools
    COMPARISON = "comparison"
    #: Bools to a Bool; the right operand is computed only when the left does not decide
    LOGIC = "logic"
    #: an Integer to a Float
    CONVERSION = "conversion"


@dataclass(frozen=True)
class Cpp:
    """C++ templates (``{0}``, ``{1}``: the operands' C++) by the operands' types; None where the
    op's kind does not take such operands."""

    float: str | None = None
    integer: str | None = None
    #: a structure (Vec or Tuple) among the operands: the runtime's element-wise function
    structure: str | None = None
    boolean: str | None = None


class TorchStyle(enum.Enum):
    """How the front end takes an aten op's operands to this op."""

    #: element-wise with broadcasting, in the result's dtype (an ``alpha`` scales the second)
    BINARY = "binary"
    #: of Floats (an integer tensor is converted first, as torch promotes it)
    FLOAT = "float"
    #: of the tensor's own dtype (neg, abs keep an integer tensor's)
    SIGNED = "signed"
    #: a comparison, in the type torch promotes both operands to
    COMPARE = "compare"
    #: ``logical_*``: of the operands taken as Bools
    LOGICAL = "logical"
    #: ``&``, ``|``: of Bool tensors only
    BITWISE = "bitwise"
    #: a dtype conversion (``_to_copy``)
    CONVERT = "convert"


#: ``seed`` times the partial derivative of ``r`` by one operand, as text over ``seed``, ``r``, ``a``, ``b``.
Partial = str
#: The partials of an op whose result is not a Float (a Bool or an Integer): no tangent passes.
NOT_DIFFERENTIABLE: tuple[Partial, ...] = ()
#: The names a partial may use for the operands, in order.
OPERAND_NAMES = ("a", "b")


@dataclass(frozen=True)
class OpRow:
    op: Op
    name: str
    arity: int
    kind: OpKind
    cost: float
    meaning: Callable[..., Any]
    cpp: Cpp
    partials: tuple[Partial, ...]
    torch: dict[str, TorchStyle]
    fold: str | None
    #: its value on Integers, where that differs from ``meaning`` (overflow is an error)
    integer_meaning: Callable[..., Any] | None = None
    #: (comparisons) whether Bools compare too
    allows_bool: bool = False
    #: on Floats it never fails (C gives NaN or an infinity), so the backend may compute it
    #: unconditionally, even in a branch not taken
    never_fails: bool = True

    @property
    def differentiable(self) -> bool:
        return bool(self.partials)


def _compare_cpp(name: str) -> Cpp:
    t = f"ks::{name}({{0}}, {{1}})"
    return Cpp(float=t, integer=t, boolean=t)


def _arith_cpp(name: str, symbol: str) -> Cpp:
    return Cpp(
        float=f"({{0}} {symbol} {{1}})", integer=f"ks::{name}_i({{0}}, {{1}})", structure=f"ks::{name}({{0}}, {{1}})"
    )


def _binary_torch(name: str) -> dict[str, TorchStyle]:
    return {f"{name}.Tensor": TorchStyle.BINARY, f"{name}.Scalar": TorchStyle.BINARY}


def _compare_torch(name: str) -> dict[str, TorchStyle]:
    return {f"{name}.Tensor": TorchStyle.COMPARE, f"{name}.Scalar": TorchStyle.COMPARE}


ROWS: tuple[OpRow, ...] = (
    OpRow(
        op=Op.ADD,
        name="add",
        arity=2,
        kind=OpKind.ARITHMETIC,
        cost=1.0,
        meaning=arith.fadd,
        cpp=_arith_cpp("add", "+"),
        partials=("seed", "seed"),
        torch=_binary_torch("add"),
        fold="cprop_add",
        integer_meaning=arith.checked_add,
    ),
    OpRow(
        op=Op.SUB,
        name="sub",
        arity=2,
        kind=OpKind.ARITHMETIC,
        cost=1.0,
        meaning=arith.fsub,
        cpp=_arith_cpp("sub", "-"),
        partials=("seed", "(neg seed)"),
        torch=_binary_torch("sub"),
        fold="cprop_sub",
        integer_meaning=arith.checked_sub,
    ),
    OpRow(
        op=Op.MUL,
        name="mul",
        arity=2,
        kind=OpKind.ARITHMETIC,
        cost=2.0,
        meaning=arith.fmul,
        cpp=_arith_cpp("mul", "*"),
        partials=("(mul seed b)", "(mul seed a)"),
        torch=_binary_torch("mul"),
        fold="cprop_mul",
        integer_meaning=arith.checked_mul,
    ),
    OpRow(
        op=Op.DIV,
        name="div",
        arity=2,
        kind=OpKind.ARITHMETIC,
        cost=2.0,
        meaning=arith.fdiv,
        cpp=_arith_cpp("div", "/"),
        partials=("(div seed b)", "(neg (mul seed (div r b)))"),
        torch=_binary_torch("div"),
        fold="cprop_div",
        integer_meaning=arith.idiv,
    ),
    OpRow(
        op=Op.NEG,
        name="neg",
        arity=1,
        kind=OpKind.NEGATION,
        cost=1.0,
        meaning=operator.neg,
        cpp=Cpp(float="(-{0})", integer="ks::neg_i({0})", structure="ks::neg({0})"),
        partials=("(neg seed)",),
        torch={"neg.default": TorchStyle.SIGNED},
        fold="cprop_neg",
        integer_meaning=arith.checked_neg,
    ),
    OpRow(
        op=Op.EXP,
        name="exp",
        arity=1,
        kind=OpKind.FLOAT_FUNCTION,
        cost=4.0,
        meaning=arith.fexp,
        cpp=Cpp(float="ks::math::exp({0})"),
        partials=("(mul seed r)",),
        torch={"exp.default": TorchStyle.FLOAT},
        fold="cprop_exp",
    ),
    OpRow(
        op=Op.LOG,
        name="log",
        arity=1,
        kind=OpKind.FLOAT_FUNCTION,
        cost=4.0,
        meaning=arith.flog,
        cpp=Cpp(float="ks::math::log({0})"),
        partials=("(div seed a)",),
        torch={"log.default": TorchStyle.FLOAT},
        fold="cprop_log",
    ),
    OpRow(
        op=Op.TANH,
        name="tanh",
        arity=1,
        kind=OpKind.FLOAT_FUNCTION,
        cost=8.0,
        meaning=math.tanh,
        cpp=Cpp(float="ks::math::tanh({0})"),
        partials=("(mul seed (sub 1.0 (mul r r)))",),
        torch={"tanh.default": TorchStyle.FLOAT},
        fold=None,
    ),
    OpRow(
        op=Op.SQRT,
        name="sqrt",
        arity=1,
        kind=OpKind.FLOAT_FUNCTION,
        cost=4.0,
        meaning=arith.fsqrt,
        cpp=Cpp(float="std::sqrt({0})"),
        partials=("(div seed (mul 2.0 r))",),
        torch={"sqrt.default": TorchStyle.FLOAT},
        fold="cprop_sqrt",
    ),
    OpRow(
        op=Op.POW,
        name="pow",
        arity=2,
        kind=OpKind.FLOAT_FUNCTION,
        cost=10.0,
        meaning=arith.fpow,
        cpp=Cpp(float="ks::math::pow({0}, {1})"),
        partials=("(mul seed (mul b (pow a (sub b 1.0))))", "(mul seed (mul r (log a)))"),
        torch={"pow.Tensor_Tensor": TorchStyle.FLOAT},
        fold=None,
    ),
    OpRow(
        op=Op.ABS,
        name="abs",
        arity=1,
        kind=OpKind.NUMBER,
        cost=2.0,
        meaning=abs,
        cpp=Cpp(float="std::fabs({0})", integer="ks::abs_i({0})"),
        partials=("(if (lt a 0.0) (neg seed) seed)",),
        torch={"abs.default": TorchStyle.SIGNED},
        fold=None,
        integer_meaning=arith.checked_abs,
    ),
    OpRow(
        op=Op.MAX,
        name="max",
        arity=2,
        kind=OpKind.NUMBER,
        cost=2.0,
        meaning=arith.cmax,
        cpp=Cpp(float="ks::max_f({0}, {1})", integer="ks::max_i({0}, {1})"),
        # max(a, b) is a unless a < b
        partials=("(if (lt a b) 0.0 seed)", "(if (lt a b) seed 0.0)"),
        # (torch.maximum propagates NaN, which max does not: the front end writes it with a test)
        torch={"clamp_min.default": TorchStyle.BINARY},
        fold=None,
    ),
    OpRow(
        op=Op.EQ,
        name="eq",
        arity=2,
        kind=OpKind.COMPARISON,
        cost=1.0,
        meaning=operator.eq,
        cpp=_compare_cpp("eq"),
        partials=NOT_DIFFERENTIABLE,
        torch=_compare_torch("eq"),
        fold="cprop_eq",
        allows_bool=True,
    ),
    OpRow(
        op=Op.NE,
        name="ne",
        arity=2,
        kind=OpKind.COMPARISON,
        cost=1.0,
        meaning=operator.ne,
        cpp=_compare_cpp("ne"),
        partials=NOT_DIFFERENTIABLE,
        torch=_compare_torch("ne"),
        fold="cprop_ne",
        allows_bool=True,
    ),
    OpRow(
        op=Op.GT,
        name="gt",
        arity=2,
        kind=OpKind.COMPARISON,
        cost=1.0,
        meaning=operator.gt,
        cpp=_compare_cpp("gt"),
        partials=NOT_DIFFERENTIABLE,
        torch=_compare_torch("gt"),
        fold="cprop_gt",
    ),
    OpRow(
        op=Op.GTE,
        name="gte",
        arity=2,
        kind=OpKind.COMPARISON,
        cost=1.0,
        meaning=operator.ge,
        cpp=_compare_cpp("gte"),
        partials=NOT_DIFFERENTIABLE,
        torch=_compare_torch("ge"),
        fold="cprop_gteq",
    ),
    OpRow(
        op=Op.LT,
        name="lt",
        arity=2,
        kind=OpKind.COMPARISON,
        cost=1.0,
        meaning=operator.lt,
        cpp=_compare_cpp("lt"),
        partials=NOT_DIFFERENTIABLE,
        torch=_compare_torch("lt"),
        fold="cprop_lt",
    ),
    OpRow(
        op=Op.LTE,
        name="lte",
        arity=2,
        kind=OpKind.COMPARISON,
        cost=1.0,
        meaning=operator.le,
        cpp=_compare_cpp("lte"),
        partials=NOT_DIFFERENTIABLE,
        torch=_compare_torch("le"),
        fold="cprop_lte",
    ),
    OpRow(
        op=Op.OR,
        name="or",
        arity=2,
        kind=OpKind.LOGIC,
        cost=1.0,
        meaning=operator.or_,
        cpp=Cpp(boolean="({0} | {1})"),
        partials=NOT_DIFFERENTIABLE,
        torch={"logical_or.default": TorchStyle.LOGICAL, "bitwise_or.Tensor": TorchStyle.BITWISE},
        fold=None,
    ),
    OpRow(
        op=Op.AND,
        name="and",
        arity=2,
        kind=OpKind.LOGIC,
        cost=1.0,
        meaning=operator.and_,
        cpp=Cpp(boolean="({0} & {1})"),
        partials=NOT_DIFFERENTIABLE,
        torch={"logical_and.default": TorchStyle.LOGICAL, "bitwise_and.Tensor": TorchStyle.BITWISE},
        fold=None,
    ),
    OpRow(
        op=Op.TO_FLOAT,
        name="to_float",
        arity=1,
        kind=OpKind.CONVERSION,
        cost=1.0,
        meaning=float,
        cpp=Cpp(integer="static_cast<double>({0})"),
        partials=NOT_DIFFERENTIABLE,
        # (a dtype conversion, which is to_float from an integer tensor to a float one)
        torch={"_to_copy.default": TorchStyle.CONVERT},
        fold="cprop_to_float",
    ),
)

#: The row of each value op.
ROW: dict[Op, OpRow] = {row.op: row for row in ROWS}

#: Ops written ``(name arg...)`` with a fixed number of arguments, by their name in the text.
PRIMITIVES: dict[str, tuple[Op, int]] = {**{row.name: (row.op, row.arity) for row in ROWS}, **STRUCTURE}

#: Text name of every op that has one (``CONST``, ``VAR``, ``CALL`` and ``APPLY`` have none).
NAMES: dict[Op, str] = {op: name for name, (op, _) in PRIMITIVES.items()}
NAMES.update(
    {
        Op.LET: "let",
        Op.LAM: "lam",
        Op.BUILD: "build",
        Op.SUMBUILD: "sumbuild",
        Op.TUPLE: "tuple",
        Op.GET: "get",
    }
)

#: Words that cannot be used as variable or function names.
KEYWORDS: frozenset[str] = frozenset(
    [*PRIMITIVES, "let", "lam", "build", "sumbuild", "tuple", "select", "def", "edef", "true", "false"]
)

ARITHMETIC = frozenset(row.op for row in ROWS if row.kind is OpKind.ARITHMETIC)
#: The ops that compute a Float from Floats (the differentiable ones).
FLOAT_OPS = frozenset(row.op for row in ROWS if row.differentiable)


@dataclass(frozen=True)
class FunctionRow:
    """A function of the language's library from a Float to a Float, declared ``(edef name Float
    (Float))`` by a program that calls it (a call costs the edef's cost, as any edef's)."""

    name: str
    meaning: Callable[[float], float]
    #: C++ template over the operand ``{0}``
    cpp: str
    #: ``seed`` times its derivative, over ``seed``, ``r``, ``a`` and ``self`` (a call of itself)
    partial: Partial
    #: aten ops that mean it element-wise, on Floats (an integer tensor converted first)
    torch: tuple[str, ...]


#: sin' = cos = sin(x + pi/2) and cos' = -sin = cos(x + pi/2): each a call of the function itself,
#: which the program declares (the other may not be).
_QUARTER_TURN = "(self (add a 1.5707963267948966))"

FUNCTIONS: tuple[FunctionRow, ...] = (
    FunctionRow(
        name="erf",
        meaning=math.erf,
        cpp="ks::math::erf({0})",
        # 2 / sqrt(pi) exp(-x^2)
        partial="(mul seed (mul 1.1283791670955126 (exp (neg (mul a a)))))",
        torch=("erf.default",),
    ),
    FunctionRow(
        name="log1p",
        meaning=arith.flog1p,
        cpp="ks::math::log1p({0})",
        partial="(mul seed (div 1.0 (add 1.0 a)))",
        torch=("log1p.default",),
    ),
    FunctionRow(
        name="expm1",
        meaning=arith.fexpm1,
        cpp="ks::math::expm1({0})",
        partial="(mul seed (add r 1.0))",
        torch=("expm1.default",),
    ),
    FunctionRow(
        name="sin",
        meaning=arith.fsin,
        cpp="ks::math::sin({0})",
        partial=f"(mul seed {_QUARTER_TURN})",
        torch=("sin.default",),
    ),
    FunctionRow(
        name="cos",
        meaning=arith.fcos,
        cpp="ks::math::cos({0})",
        partial=f"(mul seed {_QUARTER_TURN})",
        torch=("cos.default",),
    ),
    FunctionRow(
        name="cosh",
        meaning=arith.fcosh,
        cpp="std::cosh({0})",
        # sinh, in exps (the program need not declare sinh)
        partial="(mul seed (div (sub (exp a) (exp (neg a))) 2.0))",
        torch=("cosh.default",),
    ),
)

#: The row of each library function, by name.
FUNCTION: dict[str, FunctionRow] = {f.name: f for f in FUNCTIONS}
