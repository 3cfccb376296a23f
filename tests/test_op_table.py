"""The op table (knossos.op_table): every value op has a row, every row has every column, every pass
takes its entries from the rows, and the columns agree with each other (the partials with the
meaning's slope, the fold rules and the C++ with the interpreter)."""

from __future__ import annotations

import math
import random

import pytest

pytest.importorskip("torch")
import torch

from autodiff import primitives
from autodiff.partials import check_templates, function_partial, partial
from cpp_backend import emitter_core, native_cpp
from frontends.aten_math import NATIVE_FUNCTIONS, native_callee
from frontends.aten_ops import VALUE_OP_LOWERINGS
from frontends.torch import TABLES
from knossos import expr as E
from knossos import interpreter
from knossos.cost import COST_RULES, OWN_COST
from knossos.natives import NATIVES
from knossos.op_table import FUNCTIONS, NAMES, PRIMITIVES, ROW, ROWS, FunctionRow, OpKind, OpRow
from knossos.ops import BINDERS, STRUCTURE, Op
from knossos.parser import parse_program
from knossos.types import BOOL, FLOAT, INTEGER, Type, vec
from knossos.typing_rules import TYPE_RULES
from rules.baseline import LOCAL_RULES
from rules.folds import FoldValueOp
from rules.rule import Site
from rules.sets import all_rules

#: The ops that are not value ops: leaves, binding forms, structure, tuples and calls.
NOT_VALUE_OPS = {Op.CONST, Op.VAR, Op.TUPLE, Op.GET, Op.CALL, Op.APPLY, *BINDERS, *(op for op, _ in STRUCTURE.values())}

#: The operand types each kind takes, as the C++ column must cover them.
CPP_FORMS: dict[OpKind, tuple[str, ...]] = {
    OpKind.ARITHMETIC: ("float", "integer", "structure"),
    OpKind.NEGATION: ("float", "integer", "structure"),
    OpKind.FLOAT_FUNCTION: ("float",),
    OpKind.NUMBER: ("float", "integer"),
    OpKind.COMPARISON: ("float", "integer"),
    OpKind.LOGIC: ("boolean",),
    OpKind.CONVERSION: ("integer",),
}
FLOAT_RESULT = {OpKind.ARITHMETIC, OpKind.NEGATION, OpKind.FLOAT_FUNCTION, OpKind.NUMBER}


def test_every_value_op_has_a_row_and_only_value_ops_do() -> None:
    assert set(ROW) == set(Op) - NOT_VALUE_OPS
    assert len(ROW) == len(ROWS)


@pytest.mark.parametrize("row", ROWS, ids=lambda r: r.name)
def test_every_row_has_every_column(row: OpRow) -> None:
    assert PRIMITIVES[row.name] == (row.op, row.arity) and NAMES[row.op] == row.name
    assert row.arity in (1, 2) and row.cost > 0 and callable(row.meaning)
    for form in CPP_FORMS[row.kind]:
        template = getattr(row.cpp, form)
        assert template is not None, f"{row.name} has no C++ for {form} operands"
        assert all(f"{{{k}}}" in template for k in range(row.arity)), template
    if row.kind is OpKind.COMPARISON and row.allows_bool:
        assert row.cpp.boolean is not None
    if row.kind in FLOAT_RESULT:
        assert len(row.partials) == row.arity, f"{row.name} needs a partial per operand"
    else:
        assert not row.differentiable, f"{row.name} has no Float result: no partials"
    assert row.torch, f"{row.name} names no aten op"
    for name in row.torch:
        packet, overload = name.split(".")
        assert hasattr(getattr(torch.ops.aten, packet), overload), name
    if row.fold is not None:
        folds = [r for r in (*all_rules, *LOCAL_RULES) if r.name == row.fold]
        assert folds, f"{row.name}'s fold rule {row.fold} is in no rule set"
        assert all(isinstance(r, FoldValueOp) and r.heads == {row.op} for r in folds)


def test_the_partials_parse_and_use_only_their_names() -> None:
    check_templates()


def test_every_pass_takes_its_entries_from_the_rows() -> None:
    for row in ROWS:
        assert row.op in TYPE_RULES and row.op in COST_RULES and OWN_COST[row.op] == row.cost
        logic = row.kind is OpKind.LOGIC
        assert (row.op in interpreter.STRICT) is not logic
        assert (row.op in emitter_core.STRICT_CPP) is not logic and (row.op in emitter_core.LAZY_METHODS) is logic
        for name in row.torch:
            assert name in VALUE_OP_LOWERINGS
            assert all(name not in table for table in TABLES if table is not VALUE_OP_LOWERINGS), (
                f"{name} is lowered outside the op table too"
            )


def _evaluate(e: E.Expr, env: dict[str, object]) -> object:
    return interpreter.evaluate(e, env)  # type: ignore[arg-type]


def _points(row: OpRow, rng: random.Random) -> list[tuple[float, ...]]:
    # positive operands keep log, sqrt and pow in their domain; away from max's and abs's kinks
    return [tuple(rng.uniform(0.3, 2.0) * rng.choice([1, -1] if row.op is not Op.POW and k else [1])
                  for k in range(row.arity)) for _ in range(5)]  # fmt: skip


@pytest.mark.parametrize("row", [r for r in ROWS if r.differentiable], ids=lambda r: r.name)
def test_the_partials_are_the_slopes_of_the_meaning(row: OpRow) -> None:
    """Each partial, instantiated and interpreted, matches a central difference of the meaning."""
    rng = random.Random(row.name)
    names = [E.var(n, FLOAT) for n in ("a", "b")[: row.arity]]
    result, seed = E.var("r", FLOAT), E.var("seed", FLOAT)
    for point in _points(row, rng):
        if row.op in (Op.LOG, Op.SQRT):
            point = tuple(abs(x) for x in point)
        value = row.meaning(*point)
        for k in range(row.arity):
            got = _evaluate(
                partial(row.op, k, names, result, seed), {**dict(zip("ab", point)), "r": value, "seed": 1.5}
            )
            h = 1e-6 * max(1.0, abs(point[k]))
            up = list(point)
            down = list(point)
            up[k] += h
            down[k] -= h
            slope = (row.meaning(*up) - row.meaning(*down)) / (2 * h)
            assert got == pytest.approx(1.5 * slope, rel=1e-5, abs=1e-7), (row.name, k, point)


def _literal(t: Type, rng: random.Random) -> E.Expr:
    if t is INTEGER:
        return E.const(rng.randint(-5, 5))
    if t is BOOL:
        return E.const(rng.random() < 0.5)
    return E.const(rng.choice([rng.uniform(-3, 3), 0.0, 2.0]))


def _operand_types(row: OpRow) -> list[Type]:
    return {
        OpKind.ARITHMETIC: [FLOAT, INTEGER],
        OpKind.NEGATION: [FLOAT, INTEGER],
        OpKind.FLOAT_FUNCTION: [FLOAT],
        OpKind.NUMBER: [FLOAT, INTEGER],
        OpKind.COMPARISON: [FLOAT, INTEGER, *([BOOL] if row.allows_bool else [])],
        OpKind.LOGIC: [BOOL],
        OpKind.CONVERSION: [INTEGER],
    }[row.kind]


@pytest.mark.parametrize("row", [r for r in ROWS if r.fold is not None], ids=lambda r: r.name)
def test_a_fold_gives_what_the_interpreter_computes(row: OpRow) -> None:
    rule = FoldValueOp(row.op)
    rng = random.Random(row.name)
    folded = 0
    for t in _operand_types(row):
        for _ in range(6):
            node = E.op(row.op, *(_literal(t, rng) for _ in range(row.arity)))
            try:
                want = _evaluate(node, {})
            except Exception:
                want = None
            found = rule.match(Site(root=node, node=node, number=0))
            if found is None:
                assert want is None or (isinstance(want, float) and not math.isfinite(want))
                continue
            folded += 1
            assert found == want and type(found) is type(want)
    assert folded


def test_structures_take_the_structure_form_of_the_cpp() -> None:
    v = E.var("v", vec(FLOAT))
    assert emitter_core.value_op_template(E.op(Op.ADD, v, E.const(1.0))) == ROW[Op.ADD].cpp.structure
    assert emitter_core.value_op_template(E.op(Op.NEG, v)) == ROW[Op.NEG].cpp.structure
    assert emitter_core.value_op_template(E.op(Op.EQ, E.const(True), E.const(False))) == ROW[Op.EQ].cpp.boolean


def _all_ops_program() -> tuple[str, list[str]]:
    """One def applying every row's op to each kind of operand its kind takes (a Bool result as 1 or
    0), the results in a tuple; and the results' descriptions."""
    operands = {FLOAT: ("x", "y"), INTEGER: ("i", "j"), BOOL: ("p", "q")}
    parts: list[str] = []
    types: list[str] = []
    for row in ROWS:
        for t in _operand_types(row):
            call = f"({row.name} {' '.join(operands[t][: row.arity])})"
            if row.kind in (OpKind.COMPARISON, OpKind.LOGIC):
                parts.append(f"(if {call} 1 0)")
                types.append("Integer")
            else:
                parts.append(call)
                types.append(str(FLOAT if row.kind in (OpKind.FLOAT_FUNCTION, OpKind.CONVERSION) else t))
    for row in ROWS:  # the structure forms
        if row.kind is OpKind.ARITHMETIC:
            parts += [f"({row.name} v w)", f"({row.name} x v)"]
            types += ["(Vec Float)", "(Vec Float)"]
        elif row.kind is OpKind.NEGATION:
            parts.append(f"({row.name} v)")
            types.append("(Vec Float)")
    params = "(x : Float) (y : Float) (i : Integer) (j : Integer) (p : Bool) (q : Bool) (v : Vec Float) (w : Vec Float)"
    text = f"(def all_ops (Tuple {' '.join(types)}) ({params})\n  (tuple {' '.join(parts)}))"
    return text, parts


def test_the_cpp_of_every_row_computes_what_the_interpreter_does() -> None:
    """Compiled in exact order, every op on every kind of operand gives the interpreter's value to
    the bit, edge values included (infinities, NaN, -0.0)."""
    from cpp_backend.callable import compile_def
    from knossos.interpreter import call_def

    text, parts = _all_ops_program()
    program = parse_program(text)
    compiled = compile_def(program, "all_ops", exact_order=True, threads=1)
    cases = [
        (1.5, -0.25, 7, -3, True, False),
        (-0.0, 2.0, -8, 5, False, True),
        (math.inf, -math.inf, 0, 1, True, True),
        (math.nan, 0.5, 3, 3, False, False),
        (0.0, 0.0, -1, 2, True, False),
    ]
    for x, y, i, j, p, q in cases:
        v, w = [x, 1.0, -2.5], [y, math.inf, 0.0]
        want = call_def(program.defs["all_ops"], x, y, i, j, p, q, v, w)
        got = compiled(x, y, i, j, p, q, v, w)
        for part, a, b in zip(parts, want, got, strict=True):
            a_list = list(a) if isinstance(a, list) else [a]
            b_list = [float(e) for e in b] if not isinstance(b, int | float) else [b]
            for s, t in zip(a_list, b_list, strict=True):
                if isinstance(s, float) and math.isnan(s):  # (a NaN's sign means nothing)
                    assert math.isnan(t), (part, (x, y, i, j, p, q), s, t)
                else:
                    assert s == t and math.copysign(1, s) == math.copysign(1, t), (part, (x, y, i, j, p, q), s, t)


@pytest.mark.parametrize("f", FUNCTIONS, ids=lambda f: f.name)
def test_every_library_function_has_every_column(f: FunctionRow) -> None:
    assert NATIVES[f.name] is f.meaning and f.name in NATIVE_FUNCTIONS
    assert native_cpp.native_template(native_callee(f.name)) == f.cpp and "{0}" in f.cpp
    assert f.name in primitives.OWN_RULES
    assert f.torch and all(name in VALUE_OP_LOWERINGS for name in f.torch)
    rng = random.Random(f.name)
    a, r, seed = E.var("a", FLOAT), E.var("r", FLOAT), E.var("seed", FLOAT)
    call = E.call(native_callee(f.name), a)
    derivative = function_partial(call, r, seed)
    for _ in range(5):
        x = rng.uniform(-0.9, 2.0)
        got = interpreter.Interpreter().eval_expr(derivative, {"a": x, "r": f.meaning(x), "seed": 1.5})
        h = 1e-6
        slope = (f.meaning(x + h) - f.meaning(x - h)) / (2 * h)
        assert got == pytest.approx(1.5 * slope, rel=1e-5, abs=1e-7), (f.name, x)
