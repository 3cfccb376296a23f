"""The reference interpreter: the meaning of every Knossos program.

Every rewrite rule and the C++ backend are checked against it.  Evaluation is strict except for the
branches of ``if`` and the right operands of ``and``/``or``.  It keeps an explicit stack of
generators (one per node being evaluated), so deep expressions do not reach Python's recursion
limit; each generator reads like the recursive evaluator it replaces (``value = yield child``).

Variables live in one mutable dictionary per function activation: a binder sets its variable,
evaluates its body and restores the previous binding, which is exact because evaluation is
strictly nested.  A ``lam`` value captures a copy.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from knossos import arith, trampoline
from knossos.callee import CalleeKind
from knossos.errors import KsEvalError, KsUsageError
from knossos.expr import Expr
from knossos.natives import NATIVES
from knossos.op_table import ROWS, OpKind, OpRow
from knossos.ops import Op
from knossos.program import Def, SizeTree, TupleSizes, VecSizes
from knossos.types import FLOAT, INTEGER, Kind, Type
from knossos.values import Value, add, elementwise_value, from_python, zero_like, zero_of

#: The most vector elements one evaluation allocates in all (build, sumbuild, constVec, deltaVec) by
#: default: about 3 GiB of Python floats, and minutes of interpretation.
DEFAULT_MAX_ELEMENTS = 10**8

_Env = dict[str, Value]
_Eval = trampoline.Step[tuple[Expr, _Env], Value]
_MISSING = object()


@dataclass(frozen=True)
class _Closure:
    """The value of a ``lam``."""

    param: str
    body: Expr
    env: _Env


def _lifted(row: OpRow, t: Type, v: Value) -> Value:
    """A one-operand op over a structure of numbers, element by element."""
    if t.kind is Kind.VEC:
        return [_lifted(row, t.elem, x) for x in v]
    if t.kind is Kind.TUPLE:
        return tuple(_lifted(row, c, x) for c, x in zip(t.children, v, strict=True))
    return _scalar_meaning(row, t)(v)


def _scalar_meaning(row: OpRow, t: Type) -> Any:
    return row.integer_meaning if t is INTEGER and row.integer_meaning is not None else row.meaning


def _strict_rule(row: OpRow) -> Any:
    """The evaluation of a value op, from its row (op_table): f(node, argument values)."""
    if row.kind is OpKind.ARITHMETIC:
        on_ints = row.integer_meaning or row.meaning
        return lambda node, v: elementwise_value(row.meaning, on_ints, node.args[0].type, node.args[1].type, v[0], v[1])
    if row.kind is OpKind.NEGATION:
        return lambda node, v: _lifted(row, node.type, v[0])
    # (the interpreter's inner loop: the functions bound here, not looked up at each evaluation)
    meaning, integers = row.meaning, row.integer_meaning
    if integers is None:
        return lambda node, v: meaning(*v)
    return lambda node, v: (integers if node.args[0].type is INTEGER else meaning)(*v)


def _index(node: Expr, v: list[Value]) -> Value:
    i, vector = v
    if not 0 <= i < len(vector):
        raise KsEvalError(f"index {i} is out of range for a vector of size {len(vector)}")
    return vector[i]


def _sum(node: Expr, v: list[Value]) -> Value:
    return _total(node.type, v[0])


def _total(t: Type, items: Sequence[Value]) -> Value:
    if not items:
        return zero_of(t)
    if t is FLOAT:
        return arith.fsum_in_order(items)
    acc = items[0]
    for x in items[1:]:
        acc = add(t, acc, x)
    return acc


def _const_vec(node: Expr, v: list[Value]) -> Value:
    n, x = v
    _check_size(n, "constVec")
    return [x] * n


def _delta_vec(node: Expr, v: list[Value]) -> Value:
    n, i, x = v
    _check_size(n, "deltaVec")
    zero = zero_like(x)
    return [x if k == i else zero for k in range(n)]


def _check_size(n: int, what: str) -> None:
    if n < 0:
        raise KsEvalError(f"{what} of negative size {n}")


def _get(node: Expr, v: list[Value]) -> Value:
    return v[0][node.data[0] - 1]


#: Ops whose arguments are all evaluated first: op -> f(node, argument values).
STRICT: dict[Op, Any] = {
    **{row.op: _strict_rule(row) for row in ROWS if row.kind is not OpKind.LOGIC},
    Op.INDEX: _index,
    Op.SIZE: lambda node, v: len(v[0]),
    Op.SUM: _sum,
    Op.CONSTVEC: _const_vec,
    Op.DELTAVEC: _delta_vec,
    Op.TUPLE: lambda node, v: tuple(v),
    Op.GET: _get,
}


_LOGIC = {row.op: row.meaning for row in ROWS if row.kind is OpKind.LOGIC}


class Interpreter:
    """Evaluates expressions and defs."""

    def __init__(self, max_steps: int | None = None, max_elements: int | None = DEFAULT_MAX_ELEMENTS) -> None:
        #: Stop with an error after this many evaluated nodes (``None``: no limit).
        self.max_steps = max_steps
        #: Refuse, with an error, a vector that would take the elements allocated by one evaluation
        #: past this many (``None``: no limit), before allocating it.
        self.max_elements = max_elements
        self._allocated = 0

    @property
    def allocated(self) -> int:
        """The vector elements allocated by the last evaluation (what ``max_elements`` bounds)."""
        return self._allocated

    # -- entry points -----------------------------------------------------------------------
    def eval_expr(self, expr: Expr, env: _Env) -> Value:
        """Evaluate ``expr`` with its free variables taken from ``env``."""
        missing = [n for n in expr.free if n not in env]
        if missing:
            raise KsUsageError(f"no value given for {', '.join(sorted(missing))}")
        return self._run(expr, dict(env))

    def call(self, d: Def, args: Sequence[object]) -> Value:
        """Call def ``d`` on arguments given as Python values (lists or numpy arrays for vectors)."""
        return self.call_checked(d, self.check_args(d, args))

    def check_args(self, d: Def, args: Sequence[object]) -> _Env:
        """The environment of a call of ``d``: arguments checked and converted, sizes bound."""
        if len(args) != len(d.params):
            raise KsUsageError(f"'{d.name}' takes {len(d.params)} argument(s), not {len(args)}")
        env: _Env = {}
        for p, a in zip(d.params, args, strict=True):
            env[p.name] = from_python(a, p.type, f"argument '{p.name}'")
        for p in d.params:
            _bind_sizes(p.sizes, env[p.name], env, p.name)
        return env

    def call_checked(self, d: Def, env: _Env) -> Value:
        """Run the body of ``d`` in an environment made by :meth:`check_args`."""
        return self._run(d.body, dict(env))

    # -- the machine ------------------------------------------------------------------------
    def _run(self, root: Expr, env: _Env) -> Value:
        self._allocated = 0
        try:
            return trampoline.run_steps(
                lambda item: self._start(*item),
                (root, env),
                max_steps=self.max_steps,
                on_error=_at_node,
                errors=(KsEvalError,),
            )
        except trampoline.StepLimitExceeded as err:
            raise KsEvalError(f"evaluation took more than {err.limit} steps") from None

    def _allocate(self, n: int, what: str) -> None:
        """Count a vector of ``n`` elements against the budget, before it is made."""
        _check_size(n, what)
        self._allocated += n
        if self.max_elements is not None and self._allocated > self.max_elements:
            raise KsEvalError(
                f"{what} of {n:,} elements would take this evaluation past its budget of {self.max_elements:,} "
                "vector elements (--max-elements raises it)"
            )

    def _start(self, node: Expr, env: _Env) -> Value | _Eval:
        op = node.op
        if op is Op.CONST:
            return node.data
        if op is Op.VAR:
            try:
                return env[node.data]
            except KeyError:
                raise KsEvalError(f"variable '{node.data}' has no value") from None
        if op in STRICT:
            return self._strict(node, env)
        return getattr(self, f"_{op.name.lower()}")(node, env)  # type: ignore[no-any-return]

    def _strict(self, node: Expr, env: _Env) -> _Eval:
        values: list[Value] = []
        for a in node.args:
            if a.op is Op.CONST:
                values.append(a.data)
            elif a.op is Op.VAR and a.data in env:
                values.append(env[a.data])
            else:
                values.append((yield a, env))
        if node.op is Op.CONSTVEC or node.op is Op.DELTAVEC:
            self._allocate(values[0], node.op.name.lower().replace("vec", "Vec"))
        return STRICT[node.op](node, values)

    def _if(self, node: Expr, env: _Env) -> _Eval:
        cond = yield node.args[0], env
        return (yield node.args[1] if cond else node.args[2], env)

    def _logic(self, node: Expr, env: _Env) -> _Eval:
        """``and``/``or``: the right operand is computed only when the left does not decide."""
        meaning = _LOGIC[node.op]
        left = yield node.args[0], env
        if meaning(left, False) == meaning(left, True):
            return bool(meaning(left, False))
        return (yield node.args[1], env)

    _and = _or = _logic

    def _assert(self, node: Expr, env: _Env) -> _Eval:
        if not (yield node.args[0], env):
            raise KsEvalError("assertion failed")
        return (yield node.args[1], env)

    def _let(self, node: Expr, env: _Env) -> _Eval:
        var, rhs, body = node.args
        value = yield rhs, env
        saved = env.get(var.data, _MISSING)
        env[var.data] = value
        result = yield body, env
        _restore(env, var.data, saved)
        return result

    def _lam(self, node: Expr, env: _Env) -> _Eval:
        return _Closure(node.args[0].data, node.args[1], dict(env))
        yield  # pragma: no cover  (makes this a generator like the others)

    def _apply(self, node: Expr, env: _Env) -> _Eval:
        closure = yield node.args[0], env
        arg = yield node.args[1], env
        inner = dict(closure.env)
        inner[closure.param] = arg
        return (yield closure.body, inner)

    def _build(self, node: Expr, env: _Env) -> _Eval:
        n_expr, var, body = node.args
        n = yield n_expr, env
        self._allocate(n, node.op.name.lower())
        saved = env.get(var.data, _MISSING)
        out: list[Value] = []
        for i in range(n):
            env[var.data] = i
            out.append((yield body, env))
        _restore(env, var.data, saved)
        return out

    def _sumbuild(self, node: Expr, env: _Env) -> _Eval:
        items = yield from self._build(node, env)
        return _total(node.type, items)

    def _call(self, node: Expr, env: _Env) -> _Eval:
        values: list[Value] = []
        for a in node.args:
            values.append((yield a, env))
        callee = node.data
        if callee.kind is CalleeKind.DEF:
            d: Def = callee.definition
            inner: _Env = {p.name: v for p, v in zip(d.params, values, strict=True)}
            for p in d.params:
                _bind_sizes(p.sizes, inner[p.name], inner, p.name)
            return (yield d.body, inner)
        native = NATIVES.get(callee.name)
        if native is None:
            raise KsEvalError(f"edef '{callee.name}' has no implementation in the interpreter")
        return native(*values)


def _at_node(err: Exception, item: tuple[Expr, _Env]) -> Exception:
    """A run-time error, with the expression it happened in (the innermost one still evaluating)."""
    if isinstance(err, KsEvalError) and err.node is None:
        err.node = item[0]
    return err


def _restore(env: _Env, name: str, saved: object) -> None:
    if saved is _MISSING:
        env.pop(name, None)
    else:
        env[name] = saved


def _bind_sizes(sizes: SizeTree, value: Value, env: _Env, where: str) -> None:
    """Bind the size variables of a sized parameter type, checking that they agree."""
    stack: list[tuple[SizeTree, Value, str]] = [(sizes, value, where)]
    while stack:
        tree, v, path = stack.pop()
        if isinstance(tree, VecSizes):
            if tree.name is not None:
                have = env.get(tree.name, _MISSING)
                if have is not _MISSING and have != len(v):
                    raise KsUsageError(f"{path} has {len(v)} elements but size '{tree.name}' is already {have}")
                env[tree.name] = len(v)
            if tree.elem is not None:
                stack.extend((tree.elem, x, f"{path}[{i}]") for i, x in enumerate(v))
        elif isinstance(tree, TupleSizes):
            stack.extend((t, x, f"{path}.{i + 1}") for i, (t, x) in enumerate(zip(tree.parts, v, strict=True)))


def evaluate(expr: Expr, env: _Env) -> Value:
    """Evaluate a bare expression (free variables from ``env``)."""
    return Interpreter().eval_expr(expr, env)


def call_def(d: Def, *args: object) -> Value:
    """Call a def on Python arguments."""
    return Interpreter().call(d, list(args))
