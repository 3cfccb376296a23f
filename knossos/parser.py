"""From text to type-checked programs and expressions.

:func:`parse_program` reads ``.ks``/``.kso`` text (defs and edefs) and :func:`parse_expr` one bare
expression.  Expressions are converted by a driver that keeps a stack of generators, one per form
being converted, so arbitrarily deep programs never reach Python's recursion limit; each generator
reads like the recursive code it replaces (``value = yield subform``).

Every error is a :class:`~knossos.errors.KsError` that names the file, line and column.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Generator, Sequence
from pathlib import Path

from knossos import expr as E
from knossos import trampoline
from knossos.callee import Callee, edef_callee
from knossos.cost import DEFAULT_EDEF_COST
from knossos.errors import KsError, KsSyntaxError, KsTypeError, Pos
from knossos.expr import Expr
from knossos.op_table import KEYWORDS, PRIMITIVES
from knossos.ops import Op
from knossos.prelude import PRELUDE
from knossos.program import (
    COST_PREFIX,
    Def,
    Edef,
    Param,
    Program,
    SizeTree,
    TupleSizes,
    VecSizes,
    def_callee,
    size_names,
)
from knossos.reader import Form, Literal, SList, Symbol, read_forms
from knossos.types import BOOL, FLOAT, INTEGER, MAX_TYPE_DEPTH, Kind, Type, lam_type, tuple_of, vec
from knossos.user_files import read_regular_file

_GET = re.compile(r"get\$([0-9]+)\$([0-9]+)")
_SCALAR_TYPES = {"Integer": INTEGER, "Float": FLOAT, "Bool": BOOL}
#: Primitives that a program may redeclare as edefs (the reference's programs declare these).
_REDECLARABLE = frozenset({"abs", "max", "pow", "tanh", "exp", "log"})

Conversion = Generator[Form, Expr, Expr]


def _describe(form: Form) -> str:
    if isinstance(form, Symbol):
        return f"'{form.name}'"
    if isinstance(form, Literal):
        return f"the literal {form.text}"
    return "a list"


class _Scope:
    """Variables in scope: a name maps to the stack of its bindings, innermost last."""

    def __init__(self) -> None:
        self._vars: dict[str, list[Expr]] = {}

    def bind(self, v: Expr) -> None:
        self._vars.setdefault(v.data, []).append(v)

    def unbind(self, name: str) -> None:
        stack = self._vars[name]
        stack.pop()
        if not stack:
            del self._vars[name]

    def lookup(self, name: str) -> Expr | None:
        stack = self._vars.get(name)
        return stack[-1] if stack else None


class Parser:
    """Converts forms to expressions and programs.  One instance per source text."""

    def __init__(self, file: str | None = None, free_variables_are_floats: bool = False) -> None:
        self.file = file
        self.program = Program()
        self.scope = _Scope()
        self.free_variables_are_floats = free_variables_are_floats
        #: Free variables met in a bare expression, in order of first appearance.
        self.free_variables: list[Expr] = []
        self._edef_costs: dict[str, float] = {}

    # -- errors --------------------------------------------------------------------------------
    def error(self, message: str, form: Form | Pos | None) -> KsError:
        pos = form if isinstance(form, Pos) or form is None else form.pos
        return KsSyntaxError(message, pos, self.file)

    def type_error(self, message: str, form: Form | Param) -> KsError:
        return KsTypeError(message, form.pos, self.file)

    # -- programs ------------------------------------------------------------------------------
    def parse_program(self, forms: Sequence[Form]) -> Program:
        if not forms:
            raise KsSyntaxError("the file holds no definitions", None, self.file)
        self._edef_costs = self._scan_cost_declarations(forms)
        for form in forms:
            head = form[0] if isinstance(form, SList) and form else None
            if isinstance(head, Symbol) and head.name == "def":
                self._def(form)  # type: ignore[arg-type]
            elif isinstance(head, Symbol) and head.name == "edef":
                self._edef(form)  # type: ignore[arg-type]
            else:
                raise self.error("expected (def ...) or (edef ...) at the top level", form)
        return self.program

    def _scan_cost_declarations(self, forms: Sequence[Form]) -> dict[str, float]:
        """Constant ``cost$f`` defs give the cost of edef ``f``; find them before any call."""
        costs: dict[str, float] = {}
        for form in forms:
            if not (isinstance(form, SList) and len(form) == 5 and isinstance(form[1], Symbol)):
                continue
            if not (isinstance(form[0], Symbol) and form[0].name == "def" and form[1].name.startswith(COST_PREFIX)):
                continue
            body = form[4]
            while isinstance(body, SList) and body and isinstance(body[0], Symbol) and body[0].name == "let":
                body = body[-1]
            if isinstance(body, Literal) and not isinstance(body.value, bool):
                costs[form[1].name[len(COST_PREFIX) :]] = float(body.value)
        return costs

    def _new_name(self, form: Form, what: str) -> str:
        if not isinstance(form, Symbol):
            raise self.error(f"expected the name of the {what}, found {_describe(form)}", form)
        name = form.name
        if name in self.program.defs or name in self.program.edefs:
            raise self.type_error(f"'{name}' is already defined", form)
        if name in KEYWORDS and not (what == "edef" and name in _REDECLARABLE):
            raise self.error(f"'{name}' is a built-in and cannot be redefined", form)
        if name in PRELUDE or _GET.fullmatch(name):
            raise self.error(f"'{name}' is a built-in function and cannot be redefined", form)
        return name

    def _def(self, form: SList) -> None:
        if len(form) != 5:
            raise self.error("a def is (def NAME RETURN-TYPE (PARAMETERS) BODY)", form)
        name = self._new_name(form[1], "def")
        ret_type, ret_sizes = self.parse_type(form[2])
        params = self._params(form[3])
        self.scope = _Scope()
        for p in params:
            self.scope.bind(E.var(p.name, p.type))
        size_vars = _size_vars(params)
        for size_name, where in size_vars.items():
            if any(p.name == size_name for p in params):
                raise self.type_error(f"'{size_name}' names both a parameter and a vector size", where)
            self.scope.bind(E.var(size_name, INTEGER))
        body = self.convert(form[4])
        if body.type is not ret_type:
            raise self.type_error(
                f"'{name}' is declared to return {ret_type} but its body has type {body.type}", form[4]
            )
        d = Def(name, ret_type, params, body, ret_sizes, form.pos)
        self.program.add(d, def_callee(d))

    def _params(self, form: Form) -> tuple[Param, ...]:
        if not isinstance(form, SList):
            raise self.error("the parameters of a def are a list: ((x : Float) ...) or (x : Float)", form)
        items: list[Form] = [form] if len(form) >= 2 and _is_colon(form[1]) else list(form)
        params: list[Param] = []
        for item in items:
            name, t, sizes = self._typed_name(item, "parameter")
            if any(p.name == name for p in params):
                raise self.type_error(f"parameter '{name}' appears twice", item)
            params.append(Param(name, t, sizes, item.pos))
        return tuple(params)

    def _typed_name(self, form: Form, what: str) -> tuple[str, Type, SizeTree]:
        if not (isinstance(form, SList) and len(form) >= 3 and _is_colon(form[1])):
            raise self.error(f"expected a {what} (NAME : TYPE), found {_describe(form)}", form)
        name = self._binder_name(form[0])
        type_forms = form[2:]
        if len(type_forms) == 1:
            return (name, *self.parse_type(type_forms[0]))
        implicit = SList(type_forms[0].pos)
        implicit.extend(type_forms)
        return (name, *self.parse_type(implicit))

    def _binder_name(self, form: Form) -> str:
        if not isinstance(form, Symbol):
            raise self.error(f"expected a variable name, found {_describe(form)}", form)
        if form.name in KEYWORDS or form.name in PRELUDE or _GET.fullmatch(form.name):
            raise self.error(f"'{form.name}' is a built-in name and cannot name a variable", form)
        return form.name

    def _edef(self, form: SList) -> None:
        if len(form) != 4:
            raise self.error("an edef is (edef NAME RETURN-TYPE (ARGUMENT-TYPES))", form)
        name = self._new_name(form[1], "edef")
        ret_type, _ = self.parse_type(form[2])
        arg_form = form[3]
        if not isinstance(arg_form, SList):
            raise self.error("the argument types of an edef are a list, e.g. (Float Float)", arg_form)
        while isinstance(arg_form, SList) and len(arg_form) == 1:
            arg_form = arg_form[0]
        if (
            isinstance(arg_form, SList)
            and arg_form
            and isinstance(arg_form[0], Symbol)
            and arg_form[0].name in ("Vec", "Tuple", "Lam")
        ):
            t, _ = self.parse_type(arg_form)
            param_types = t.children if t.kind is Kind.TUPLE else (t,)
        elif isinstance(arg_form, SList):
            param_types = tuple(self.parse_type(f)[0] for f in arg_form)
        else:
            param_types = (self.parse_type(arg_form)[0],)
        cost = self._edef_costs.get(name, DEFAULT_EDEF_COST)
        self.program.add(Edef(name, ret_type, param_types, form.pos), edef_callee(name, param_types, ret_type, cost))

    # -- types ---------------------------------------------------------------------------------
    def parse_type(self, form: Form, depth: int = 0) -> tuple[Type, SizeTree]:
        """A type and the names of its vector sizes (``(Vec n Float)``)."""
        if depth > MAX_TYPE_DEPTH:
            raise self.error("type is nested too deeply", form)
        while isinstance(form, SList) and len(form) == 1 and (isinstance(form[0], SList) or _is_scalar_name(form[0])):
            form = form[0]  # ((pointless)) brackets, as the reference allows
        if isinstance(form, Symbol):
            t = _SCALAR_TYPES.get(form.name)
            if t is None:
                raise self.error(f"unknown type '{form.name}'", form)
            return t, None
        if not isinstance(form, SList) or not form or not isinstance(form[0], Symbol):
            raise self.error(
                f"expected a type, found {_describe(form) if not isinstance(form, SList) or form else '()'}", form
            )
        head, rest = form[0].name, form[1:]
        if head == "Vec":
            size: str | None = None
            if len(rest) == 2:
                if not isinstance(rest[0], Symbol):
                    raise self.error("the size of a (Vec n T) must be a name", rest[0])
                size = self._binder_name(rest[0])
                rest = rest[1:]
            if len(rest) != 1:
                raise self.error("a vector type is (Vec T) or (Vec n T)", form)
            elem, inner = self.parse_type(rest[0], depth + 1)
            return vec(elem), (None if size is None and inner is None else VecSizes(size, inner))
        if head == "Tuple":
            parts = [self.parse_type(f, depth + 1) for f in rest]
            trees = tuple(s for _, s in parts)
            return tuple_of(*(t for t, _ in parts)), (None if all(s is None for s in trees) else TupleSizes(trees))
        if head == "Lam":
            if len(rest) != 2:
                raise self.error("a function type is (Lam ARGUMENT RESULT)", form)
            return lam_type(self.parse_type(rest[0], depth + 1)[0], self.parse_type(rest[1], depth + 1)[0]), None
        raise self.error(f"unknown type '{head}'", form[0])

    # -- expressions ---------------------------------------------------------------------------
    def convert(self, form: Form) -> Expr:
        """Convert one expression form (iteratively; see the module docstring)."""
        result: Expr = trampoline.run_steps(self._start, form, on_error=self._locate, errors=(KsError,))
        return result

    def _locate(self, err: Exception, form: Form) -> Exception:
        assert isinstance(err, KsError)
        return err.located(form.pos, self.file)

    def _start(self, form: Form) -> Expr | Conversion:
        """An atom becomes an expression at once; a list becomes a conversion to run."""
        if isinstance(form, Literal):
            return E.const(form.value)
        if isinstance(form, Symbol):
            return self._variable(form)
        if not form:
            raise self.error("empty form ()", form)
        head = form[0]
        if isinstance(head, SList):  # ((lam ...) x): how the printer writes applying a non-variable
            return self._recorded(self._apply_value(form), form.pos)
        if not isinstance(head, Symbol):
            raise self.error(f"expected an operator or function name, found {_describe(head)}", head)
        return self._recorded(self._dispatch(head.name, form), form.pos)

    def _recorded(self, conversion: Conversion, pos: Pos) -> Conversion:
        """``conversion``, remembering where its expression is first written (for run-time errors)."""
        e = yield from conversion
        self.program.positions.setdefault(e, pos)
        return e

    def _variable(self, form: Symbol) -> Expr:
        v = self.scope.lookup(form.name)
        if v is not None:
            return v
        name = form.name
        if name in KEYWORDS:
            raise self.error(f"'{name}' is a keyword, not a value", form)
        if name in self.program.callees or name in PRELUDE:
            raise self.type_error(f"'{name}' is a function: call it as ({name} ...)", form)
        if self.free_variables_are_floats:
            v = E.var(name, FLOAT)
            self.scope.bind(v)
            self.free_variables.append(v)
            return v
        raise self.type_error(f"undefined variable '{name}'", form)

    def _dispatch(self, name: str, form: SList) -> Conversion:
        special: dict[str, Callable[[SList], Conversion]] = {
            "let": self._let,
            "lam": self._lam,
            "build": self._build,
            "sumbuild": self._build,
            "tuple": self._tuple,
            "select": self._select,
        }
        if name in special:
            return special[name](form)
        local = self.scope.lookup(name)
        callee = self.program.callees.get(name)
        # Lexical scoping: a local function shadows functions of its name.  A local that is not a
        # function cannot be applied, so there the name means the def or edef: rewrites (lift_bind,
        # inline_call, fresh names) put calls under binders of the callee's name, and they print so.
        if local is not None and (local.type.kind is Kind.LAM or callee is None):
            if local.type.kind is not Kind.LAM:
                raise self.type_error(f"'{name}' is a variable of type {local.type}, not a function", form[0])
            return self._apply(local, form)
        if callee is not None:
            return self._call(callee, form)
        if name in PRIMITIVES:
            return self._primitive(name, form)
        m = _GET.fullmatch(name)
        if m:
            return self._get(int(m.group(1)), int(m.group(2)), form)
        if name in PRELUDE:
            return self._call(PRELUDE[name], form)
        if name in ("def", "edef"):
            raise self.error(f"'{name}' is only allowed at the top level", form)
        raise self.type_error(f"unknown function '{name}'", form[0])

    def _arity(self, form: SList, name: str, count: int) -> None:
        if len(form) - 1 != count:
            raise self.type_error(f"'{name}' takes {count} argument(s), not {len(form) - 1}", form)

    def _primitive(self, name: str, form: SList) -> Conversion:
        op, count = PRIMITIVES[name]
        self._arity(form, name, count)
        args = []
        for f in form[1:]:
            args.append((yield f))
        return E.make(op, tuple(args))

    def _call(self, callee: Callee, form: SList) -> Conversion:
        self._arity(form, callee.name, len(callee.param_types))
        args = []
        for f in form[1:]:
            args.append((yield f))
        return E.call(callee, *args)

    def _apply(self, function: Expr, form: SList) -> Conversion:
        args = []
        for f in form[1:]:
            args.append((yield f))
        arg = args[0] if len(args) == 1 else E.tuple_(*args)
        return E.make(Op.APPLY, (function, arg))

    def _apply_value(self, form: SList) -> Conversion:
        """``(FUNCTION ARG...)`` where FUNCTION is itself an expression, e.g. ``((lam (z : Float) z) 1.0)``."""
        function = yield form[0]
        if function.type.kind is not Kind.LAM:
            raise self.type_error(f"only a function can be applied, not a value of type {function.type}", form[0])
        return (yield from self._apply(function, form))

    def _tuple(self, form: SList) -> Conversion:
        args = []
        for f in form[1:]:
            args.append((yield f))
        return E.tuple_(*args)

    def _get(self, index: int, count: int, form: SList) -> Conversion:
        self._arity(form, f"get${index}${count}", 1)
        if not 1 <= index <= count:
            raise self.type_error(f"get${index}${count}: the index must be between 1 and {count}", form[0])
        t = yield form[1]
        return E.get(index, count, t)

    def _select(self, form: SList) -> Conversion:
        if len(form) != 3 or not isinstance(form[2], Literal) or type(form[2].value) is not int:
            raise self.error("select is (select TUPLE INDEX) with a literal 0-based index", form)
        index = form[2].value
        t = yield form[1]
        if t.type.kind is not Kind.TUPLE:
            raise self.type_error(f"select needs a tuple, not {t.type}", form[1])
        count = len(t.type.children)
        if not 0 <= index < count:
            raise self.type_error(f"select index {index} is out of range for a tuple of {count}", form[2])
        return E.get(int(index) + 1, count, t)

    def _let(self, form: SList) -> Conversion:
        bindings = self._let_bindings(form)
        bound: list[tuple[Expr, Expr]] = []
        for name_form, value_form in bindings:
            name = self._binder_name(name_form)
            rhs = yield value_form
            v = E.var(name, rhs.type)
            self.scope.bind(v)
            bound.append((v, rhs))
        body = yield form[-1]
        for v, _ in reversed(bound):
            self.scope.unbind(v.data)
        for v, rhs in reversed(bound):
            body = E.let(v, rhs, body)
        return body

    def _let_bindings(self, form: SList) -> list[tuple[Form, Form]]:
        usage = "a let is (let (NAME VALUE) BODY), (let ((NAME VALUE) ...) BODY) or (let NAME VALUE BODY)"
        if len(form) == 4:
            return [(form[1], form[2])]
        if len(form) != 3 or not isinstance(form[1], SList) or not form[1]:
            raise self.error(usage, form)
        spec = form[1]
        if not isinstance(spec[0], SList):
            if len(spec) != 2:
                raise self.error(usage, spec)
            return [(spec[0], spec[1])]
        pairs: list[tuple[Form, Form]] = []
        for item in spec:
            if not isinstance(item, SList) or len(item) != 2:
                raise self.error("each let binding is (NAME VALUE)", item)
            pairs.append((item[0], item[1]))
        return pairs

    def _lam(self, form: SList) -> Conversion:
        if len(form) != 3:
            raise self.error("a lambda is (lam (NAME : TYPE) BODY)", form)
        name, t, _ = self._typed_name(form[1], "lambda parameter")
        v = E.var(name, t)
        self.scope.bind(v)
        body = yield form[2]
        self.scope.unbind(name)
        return E.lam(v, body)

    def _build(self, form: SList) -> Conversion:
        what = form[0].name  # type: ignore[union-attr]
        usage = f"a {what} is ({what} SIZE (lam (i : Integer) BODY))"
        if len(form) != 3 or not (isinstance(form[2], SList) and len(form[2]) == 3):
            raise self.error(usage, form)
        fn = form[2]
        if not (isinstance(fn[0], Symbol) and fn[0].name == "lam"):
            raise self.error(usage, fn)
        if isinstance(fn[1], Symbol):
            name, t = self._binder_name(fn[1]), INTEGER
        else:
            name, t, _ = self._typed_name(fn[1], "index variable")
            if t is not INTEGER:
                raise self.type_error(f"the index variable of {what} must be an Integer, not {t}", fn[1])
        n = yield form[1]
        v = E.var(name, INTEGER)
        self.scope.bind(v)
        body = yield fn[2]
        self.scope.unbind(name)
        return E.make(Op.BUILD if what == "build" else Op.SUMBUILD, (n, v, body))


def _is_scalar_name(form: Form) -> bool:
    return isinstance(form, Symbol) and form.name in _SCALAR_TYPES


def _is_colon(form: Form) -> bool:
    return isinstance(form, Symbol) and form.name == ":"


def _size_vars(params: Sequence[Param]) -> dict[str, Param]:
    out: dict[str, Param] = {}
    for p in params:
        for n in size_names(p.sizes):
            out.setdefault(n, p)
    return out


# -- entry points ------------------------------------------------------------------------------------


def parse_program(text: str, file: str | None = None) -> Program:
    """Parse and type-check the defs and edefs of a ``.ks``/``.kso`` text."""
    return Parser(file).parse_program(read_forms(text, file))


def parse_expr(text: str, file: str | None = "<expr>") -> tuple[Expr, list[Expr]]:
    """Parse one bare expression whose free variables are Floats.

    Returns the expression and its free variables in order of first appearance.
    """
    expr, free, _ = parse_expr_positions(text, file)
    return expr, free


def parse_expr_positions(text: str, file: str | None = "<expr>") -> tuple[Expr, list[Expr], dict[Expr, Pos]]:
    """:func:`parse_expr`, and where each of its list expressions is first written."""
    forms = read_forms(text, file)
    if len(forms) != 1:
        raise KsSyntaxError(f"expected one expression, found {len(forms)}", None, file)
    parser = Parser(file, free_variables_are_floats=True)
    return parser.convert(forms[0]), parser.free_variables, parser.program.positions


#: The largest program file read, in MiB (KNOSSOS_MAX_SOURCE_MIB overrides it): checking a 50 MB
#: program takes minutes and gigabytes, and a device such as /dev/zero never ends.
MAX_SOURCE_MIB = 32


def read_source(path: str | Path) -> str:
    """The text of a source file, or a one-line error naming it: only a regular file of at most
    ``MAX_SOURCE_MIB`` is read (never a device, FIFO or socket), in UTF-8 (a leading BOM is dropped)."""
    data = read_regular_file(path, _max_source_bytes(), "program file", " (set KNOSSOS_MAX_SOURCE_MIB to read more)")
    if b"\x00" in data:
        raise KsSyntaxError("this is a binary file, not Knossos text", None, str(path))
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        raise KsSyntaxError(f"not UTF-8 text (bad byte at offset {err.start})", None, str(path)) from None


def _max_source_bytes() -> int:
    """``MAX_SOURCE_MIB``, or KNOSSOS_MAX_SOURCE_MIB where it is a whole number of MiB of at least 1."""
    text = os.environ.get("KNOSSOS_MAX_SOURCE_MIB", "")
    mib = int(text) if text.isdigit() and 0 < int(text) <= 2**20 else MAX_SOURCE_MIB
    return mib * 2**20


def load_program(path: str | Path) -> Program:
    """Read, parse and type-check a program file."""
    return parse_program(read_source(path), str(path))
