"""PyTorch functions to Knossos: ``translate(fn, *example_args) -> Program``.

    import torch
    from frontends.torch import translate

    def f(W, b, x):
        return torch.tanh(W @ x + b).sum()

    program = translate(f, torch.randn(64, 32, dtype=torch.float64), torch.randn(64, dtype=torch.float64),
                        torch.randn(32, dtype=torch.float64))

The function's core ATen graph is traced (:mod:`frontends.dispatch`; or, with
``tracer="export"``, exported with ``torch.export`` and ``run_decompositions()``: the same graph); each
op becomes build/sumbuild/index code (:mod:`frontends.aten`), so the rewrite rules see inside
it.  The program has one def, named after the function, whose parameters are the function's tensor
arguments in order: a tensor of rank k is a ``Vec`` nested k deep of Floats, a 0-d tensor or a Python
number a Float.  Shapes are the examples', read from the traced graph: the def is for those shapes
only.  An op without a lowering, a dtype other than float64 (or Bool, from comparisons), a shape or a
branch that depends on data are one-line :class:`~knossos.errors.KsUsageError`\\ s naming the op and
the line of the user's code it comes from.  So that no value of the examples is baked in, a tensor
computed from the arguments may not leave torch (:mod:`frontends.dispatch`), the function is traced
again on fresh inputs and must give the same graph and constants (:mod:`frontends.provenance`), and
the def is checked on those inputs against torch (:mod:`frontends.check`; ``check=False`` skips it).
"""

from __future__ import annotations

import contextlib
import inspect
import linecache
import operator
import os
import re
import sys
import traceback
import warnings
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import torch

from frontends.aten import LOWERINGS as CORE_LOWERINGS
from frontends.aten import Call, Lowering, Unsupported
from frontends.aten_composite import COMPOSITE_LOWERINGS
from frontends.aten_index import INDEX_LOWERINGS
from frontends.aten_math import MATH_LOWERINGS, NATIVE_FUNCTIONS, native_callee
from frontends.aten_ops import VALUE_OP_LOWERINGS
from frontends.aten_several import ARG_LOWERINGS, SEVERAL, Results
from frontends.check import AGREE_TOLERANCE, FLOAT32_TOLERANCE, Compiler, check_def, fresh_inputs
from frontends.dispatch import TraceError, trace
from frontends.flat_loops import nest_flat_loops
from frontends.provenance import first_difference
from frontends.tensor import FreshNames, LetBlock, Tensor, from_var, iadd, ic, imul, literal_of, tensor_type
from knossos import expr as E
from knossos.callee import CalleeKind
from knossos.errors import KsError, KsUsageError, Pos, one_line
from knossos.expr import Expr, distinct_nodes
from knossos.op_table import KEYWORDS
from knossos.ops import Op
from knossos.program import Def, Edef, Param, Program, def_callee
from knossos.types import BOOL, FLOAT, INTEGER, Type

#: The tables of the ops with one result, looked up in this order (each read when an op is lowered).
TABLES = (VALUE_OP_LOWERINGS, CORE_LOWERINGS, MATH_LOWERINGS, INDEX_LOWERINGS, COMPOSITE_LOWERINGS, ARG_LOWERINGS)
#: The element type of each dtype translated: floats are computed in double (float32 results are
#: checked against torch with :data:`frontends.check.FLOAT32_TOLERANCE`), integers are 64-bit.
ELEMENTS: dict[Any, Type] = {
    torch.float64: FLOAT,
    torch.float32: FLOAT,
    torch.int64: INTEGER,
    torch.int32: INTEGER,
    torch.bool: BOOL,
}

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_FRAME = re.compile(r'File "(?P<file>[^"]+)", line (?P<line>[0-9]+), in (?P<fn>\S+)')
_TORCH_DIR = os.path.dirname(torch.__file__)
_HERE = os.path.dirname(os.path.abspath(__file__))
_T = TypeVar("_T")


def lowering(key: str) -> Lowering | None:
    """The lowering of the op ``key`` (``"add.Tensor"``) with one result, or None."""
    for table in TABLES:
        found = table.get(key)
        if found is not None:
            return found
    return None


def supported_ops() -> list[str]:
    """The core ATen ops that have a lowering (``aten.NAME.OVERLOAD``)."""
    return sorted({f"aten.{k}" for table in (*TABLES, SEVERAL) for k in table})


def translate(
    fn: Callable[..., Any],
    *example_args: Any,
    name: str | None = None,
    tracer: str = "dispatch",
    check: bool = True,
    compiler: Compiler | None = None,
) -> Program:
    """A program of one def computing ``fn`` on arguments of the examples' shapes (float64 tensors,
    or Python numbers, which become Floats).  ``tracer`` is ``"dispatch"`` (the default,
    :mod:`frontends.dispatch`) or ``"export"`` (``torch.export``: the same graph, slower).  With
    ``check`` (the default), the def is evaluated on fresh inputs by the interpreter and compared with
    torch (:mod:`frontends.check`); a disagreement is an error.  A def too big for the interpreter is
    checked compiled by ``compiler`` (``cpp_backend.compile_def`` with ``exact_order``, which this
    layer does not import: ``knossos import`` passes it), and refused without one."""
    if tracer not in ("dispatch", "export"):
        raise KsUsageError(f"unknown tracer '{tracer}': expected dispatch or export")
    if isinstance(fn, torch.nn.Module) or not callable(fn):
        raise KsUsageError("translate takes a plain function (pass a module's parameters as arguments)")
    args = tuple(_example(a, k) for k, a in enumerate(example_args))
    params = _param_names(fn, len(args))
    def_name = _knossos_name(str(name or getattr(fn, "__name__", "f")), set(), "f")
    fresh = fresh_inputs(args)
    if tracer == "export":
        graph, inputs, constants = _export(fn, args)
    else:
        graph, inputs, constants = found = _dispatch_trace(fn, args, "its examples")
        difference = first_difference(found, _dispatch_trace(fn, fresh, "other inputs of the same shapes"))
        if difference is not None:
            raise _node_error(*difference)
    program = _lower(graph, inputs, constants, params, def_name)
    if check:
        check_def(program, def_name, fn, fresh, _error_at, tolerance_of(graph), compiler)
    return program


def tolerance_of(graph: torch.fx.Graph) -> float:
    """The check's tolerance: :data:`~frontends.check.FLOAT32_TOLERANCE` where a value of the graph is
    float32 (torch computes it in float32, the translation in double)."""
    for node in graph.nodes:
        vals, _ = torch.utils._pytree.tree_flatten(node.meta.get("val"))
        if any(isinstance(v, torch.Tensor) and v.dtype == torch.float32 for v in vals):
            return FLOAT32_TOLERANCE
    return AGREE_TOLERANCE


def _example(a: Any, k: int) -> torch.Tensor:
    if isinstance(a, bool) or not isinstance(a, torch.Tensor | int | float):
        raise KsUsageError(f"argument {k + 1}: expected a float64 tensor or a number, not {type(a).__name__}")
    if not isinstance(a, torch.Tensor):
        return torch.tensor(float(a), dtype=torch.float64)
    if a.dtype not in ELEMENTS or a.dtype is torch.bool:
        raise KsUsageError(f"argument {k + 1}: expected a float64, float32 or int64 tensor, not {a.dtype}")
    return a


def _knossos_name(name: str, taken: set[str], fallback: str) -> str:
    """``name`` as a Knossos identifier, not a keyword nor in ``taken``."""
    out = name if _NAME.match(name) else fallback
    while out in KEYWORDS or out in taken:
        out += "_"
    taken.add(out)
    return out


def _param_names(fn: Callable[..., Any], n: int) -> list[str]:
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        sig = None
    names: list[str] = []
    if sig is not None:
        for p in sig.parameters.values():
            if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD):
                names.append(p.name)
            elif p.kind is p.VAR_POSITIONAL:
                break
    names = names[:n] + [f"a{k}" for k in range(len(names), n)]
    taken: set[str] = set()
    return [_knossos_name(s, taken, f"a{k}") for k, s in enumerate(names)]


class _Wrapper(torch.nn.Module):
    def __init__(self, fn: Callable[..., Any]) -> None:
        super().__init__()
        self.fn = fn

    def forward(self, *args: Any) -> Any:
        return self.fn(*args)


def _user_functions(fn: Callable[..., Any]) -> list[Callable[..., Any]]:
    """``fn`` and the functions defined beside it (in its file), whose lines the error messages name."""
    code = getattr(fn, "__code__", None)
    if code is None:
        return []
    found = [fn]
    for value in getattr(fn, "__globals__", {}).values():
        c = getattr(value, "__code__", None)
        if inspect.isfunction(value) and c is not None and c.co_filename == code.co_filename and value is not fn:
            found.append(value)
    return found


def _export(
    fn: Callable[..., Any], args: tuple[torch.Tensor, ...]
) -> tuple[torch.fx.Graph, list[str], dict[str, torch.Tensor]]:
    """The decomposed graph, the names of its user inputs in order, and its constants by input name."""
    from torch.export.graph_signature import InputKind

    anchors: set[tuple[str, str]] = getattr(torch.fx.proxy, "_STACK_TRACE_ANCHORS", set())
    added = {(f.__code__.co_filename, f.__code__.co_name) for f in _user_functions(fn)} - anchors
    anchors.update(added)  # record the user's frames in the graph's stack traces, not only forward's
    try:
        with warnings.catch_warnings(), contextlib.redirect_stdout(sys.stderr):
            warnings.simplefilter("ignore", FutureWarning)  # torch's own deprecation notices, not the user's
            exported = torch.export.export(_Wrapper(fn), args, strict=False).run_decompositions()
    except KsUsageError:
        raise
    except SystemExit as err:
        raise _error_at(f"the function called sys.exit({err.code!r})", _formatted(err)) from None
    except Exception as err:  # torch's many errors: data-dependent control flow, unsupported Python...
        raise KsUsageError(f"torch.export failed: {_first_line(err)}") from None
    finally:
        anchors.difference_update(added)
    inputs: list[str] = []
    constants: dict[str, torch.Tensor] = {}
    for spec in exported.graph_signature.input_specs:
        arg_name = getattr(spec.arg, "name", None)
        if arg_name is None:
            raise KsUsageError(f"an input of kind {spec.kind.name} that is not a tensor")
        if spec.kind is InputKind.USER_INPUT:
            inputs.append(arg_name)
        elif spec.kind is InputKind.CONSTANT_TENSOR and spec.target is not None:
            value = exported.constants[spec.target]
            if not isinstance(value, torch.Tensor):
                raise KsUsageError(f"a constant of type {type(value).__name__}")
            constants[arg_name] = value
        else:
            raise KsUsageError(f"an input of kind {spec.kind.name} (pass parameters and buffers as arguments)")
    return exported.graph, inputs, constants


def _dispatch_trace(
    fn: Callable[..., Any], args: tuple[torch.Tensor, ...], what: str
) -> tuple[torch.fx.Graph, list[str], dict[str, torch.Tensor]]:
    try:
        with contextlib.redirect_stdout(sys.stderr):  # the program may be going to stdout
            return trace(fn, args, keep=lambda key: lowering(key) is not None or key in SEVERAL)
    except TraceError as err:
        raise _error_at(err.message, err.stack) from None
    except KsUsageError:
        raise
    except SystemExit as err:  # not a reason to end the caller's process without a word
        raise _error_at(f"the function called sys.exit({err.code!r})", _formatted(err)) from None
    except Exception as err:  # the function itself failed on its examples (a shape mismatch...)
        raise _error_at(f"the function failed on {what}: {_first_line(err)}", _formatted(err)) from None


def _formatted(err: BaseException) -> str:
    return "".join(traceback.format_exception(err))


def _first_line(err: Exception) -> str:
    """``Type: first line of the message`` (at most 300 characters of it)."""
    text = str(err).strip()
    return f"{type(err).__name__}: {(text.splitlines()[0] if text else type(err).__name__)[:300]}"


# -- where a node comes from ---------------------------------------------------------------------------
def _source_of(stack: str) -> tuple[str | None, Pos | None, str]:
    """The innermost frame of a formatted stack outside torch and these front ends."""
    best: tuple[str | None, Pos | None, str] = (None, None, "")
    for m in _FRAME.finditer(stack):
        file = m.group("file")
        if file.startswith(_TORCH_DIR) or os.path.dirname(os.path.abspath(file)) == _HERE:
            continue
        line = int(m.group("line"))
        text = linecache.getline(file, line)
        col = len(text) - len(text.lstrip()) + 1 if text.strip() else 1
        best = (file, Pos(line, col), text.strip())
    return best


def _error_at(message: str, stack: str) -> KsUsageError:
    """``message`` at the user's line of ``stack``, quoting it."""
    file, pos, text = _source_of(stack)
    where = f" in `{one_line(text)}`" if text else ""
    return KsUsageError(f"{message}{where}", pos, file)


def _node_error(node: torch.fx.Node, message: str) -> KsUsageError:
    return _error_at(message, node.meta.get("stack_trace") or "")


def _op_name(node: torch.fx.Node) -> str:
    target = node.target
    name = getattr(target, "__name__", None) if not isinstance(target, str) else target
    text = str(target)
    return text if text.startswith("aten.") else f"{getattr(target, '__module__', '')}.{name}".lstrip(".")


# -- the graph -------------------------------------------------------------------------------------------
def _shape(node: torch.fx.Node) -> tuple[tuple[int, ...], Any]:
    """The static shape and dtype torch recorded for ``node``'s value (a dynamic one is an error)."""
    val = node.meta.get("val")
    if not isinstance(val, torch.Tensor):
        if isinstance(val, torch.SymInt | torch.SymFloat | torch.SymBool):
            raise _node_error(node, f"a dynamic shape: {_op_name(node)} computes a size from the data")
        raise _node_error(node, f"{_op_name(node)} gives a {type(val).__name__}, not a tensor")
    dims = []
    for d in val.shape:
        if not isinstance(d, int):
            raise _node_error(
                node,
                f"a dynamic shape: {_op_name(node)} gives a tensor of size {tuple(val.shape)}, known only at run time",
            )
        dims.append(d)
    return tuple(dims), val.dtype


def _uses(node: torch.fx.Node) -> int:
    """How many times ``node`` is an argument (counting repeats within one user)."""
    flat: list[torch.fx.Node] = []
    for user in node.users:
        torch.fx.node.map_arg((user.args, user.kwargs), flat.append)
    return sum(1 for n in flat if n is node)


def _constant(block: LetBlock, value: torch.Tensor, node: torch.fx.Node) -> Tensor:
    elem = _element(node, value.dtype, "a constant tensor")
    shape = tuple(int(d) for d in value.shape)
    if value.numel() > 1024:
        raise _node_error(node, f"a constant tensor of {value.numel()} elements (at most 1024 become literals)")
    flat = value.reshape(-1).tolist()
    if not shape:
        return Tensor((), lambda idx: literal_of(flat[0], elem), cheap=True, elem=elem)
    if not flat:
        return Tensor(shape, lambda idx: literal_of(0, elem), cheap=True, elem=elem)

    def pick(i: Expr, lo: int, hi: int) -> Expr:  # a balanced tree of ifs over the flat index
        if hi - lo == 1:
            return literal_of(flat[lo], elem)
        mid = (lo + hi) // 2
        return E.op(Op.IF, E.op(Op.LT, i, E.const(mid)), pick(i, lo, mid), pick(i, mid, hi))

    def at(idx: tuple[Expr, ...]) -> Expr:
        f = ic(0)
        for i, n in zip(idx, shape, strict=True):
            f = iadd(imul(f, n), i)
        return block.share(f, lambda v: pick(v, 0, len(flat)))

    return block.materialise(Tensor(shape, at, cheap=False, elem=elem), "const")


def _lower(
    graph: torch.fx.Graph, inputs: list[str], constants: dict[str, torch.Tensor], params: list[str], def_name: str
) -> Program:
    names = FreshNames([*params, def_name])
    block = LetBlock(names)
    values: dict[torch.fx.Node, Any] = {}
    param_vars: list[Param] = []
    shapes: dict[str, tuple[int, ...]] = {}
    by_input = dict(zip(inputs, params, strict=True))
    output: Any = None
    for node in graph.nodes:
        if node.op == "placeholder":
            shape, dtype = _shape(node)
            if node.name in constants:
                values[node] = _constant(block, constants[node.name], node)
                continue
            elem = _element(node, dtype, "an argument")
            v = E.var(by_input[node.name], tensor_type(len(shape), elem))
            param_vars.append(Param(v.data, v.type))
            values[node] = from_var(v, shape, elem)
            shapes[v.data] = shape
        elif node.op == "call_function":
            if not node.users and _op_name(node).startswith("aten._assert"):
                continue  # a check torch adds (of a dtype, say): shapes and dtypes are checked here anyway
            if node.target is operator.getitem:
                values[node] = _result_of(block, node, values)
            elif isinstance(node.meta.get("val"), list | tuple):
                values[node] = _call_several(block, node, values)
            else:
                values[node] = _call(block, node, values)
        elif node.op == "output":
            output = torch.fx.node.map_arg(node.args[0], lambda n: values[n])
        else:
            raise _node_error(node, f"a graph node of kind {node.op} ({node.target})")
    # a reshape and its inverse read rows plainly; a loop over a flattened index is two nested loops
    body = _copied_arguments(nest_flat_loops(_result(block, output)), param_vars, shapes, names)
    d = Def(def_name, body.type, tuple(param_vars), body)
    program = Program()
    called = {n.data.name for n in E.preorder(body) if n.op is Op.CALL and n.data.kind is CalleeKind.EDEF}
    for fname in NATIVE_FUNCTIONS:  # the library functions the def calls, declared before it
        if fname in called:
            program.add(Edef(fname, FLOAT, (FLOAT,)), native_callee(fname))
    program.add(d, def_callee(d))
    return program


def _copied_arguments(body: Expr, params: list[Param], shapes: dict[str, tuple[int, ...]], names: FreshNames) -> Expr:
    """``body`` with each argument of rank 2 or more that a sum reads (a product's operand) read from
    a copy, a build of its shape bound at the start.  The copy costs O(n), against the product's O(n k);
    reverse mode then knows the rows' sizes (a def's parameter types do not say them) and gives the
    products' cotangents as plain gathers, where it would otherwise test each row's size in the loops,
    and the C++ backend emit each product twice, for rows of the size read and of others."""
    summed = _free_in_sums(body)
    copies: list[tuple[Expr, Expr]] = []
    for p in params:
        shape = shapes.get(p.name, ())
        if len(shape) < 2 or p.name not in summed:
            continue
        v = E.var(p.name, p.type)
        copy = E.var(names("arg"), p.type)
        copies.append((copy, LetBlock(names).whole(from_var(v, shape))))
        body = _renamed(body, p.name, copy, {})
    for copy, rhs in reversed(copies):
        body = E.let(copy, rhs, body)
    return body


def _free_in_sums(e: Expr) -> set[str]:
    """The names free in the body of some sumbuild of ``e``."""
    found: set[str] = set()
    for x in distinct_nodes(e):
        if x.op is Op.SUMBUILD:
            found |= x.args[2].free
    return found


def _renamed(e: Expr, name: str, new: Expr, done: dict[int, Expr]) -> Expr:
    """``e`` with the variable ``name`` read as ``new`` (``name`` is a parameter: nothing rebinds it)."""
    if name not in e.free:
        return e
    if id(e) in done:
        return done[id(e)]
    out = new if e.op is Op.VAR else e.replace_args(tuple(_renamed(a, name, new, done) for a in e.args))
    done[id(e)] = out
    return out


def _element(node: torch.fx.Node, dtype: Any, what: str) -> Type:
    elem = ELEMENTS.get(dtype)
    if elem is None:
        raise _node_error(
            node, f"{what} of dtype {dtype} (float64, float32, int64, int32 and bool tensors are translated)"
        )
    return elem


def _call(block: LetBlock, node: torch.fx.Node, values: dict[torch.fx.Node, Any]) -> Tensor:
    shape, dtype = _shape(node)
    name = _op_name(node)
    key = name.removeprefix("aten.")
    lower = lowering(key) if name.startswith("aten.") else None
    if lower is None:
        raise _node_error(node, f"unsupported op {name}")
    elem = _element(node, dtype, f"{name} gives a tensor")
    t = _lowered(node, lambda: lower(_call_of(block, node, values, shape, elem)))
    _agree(node, t, shape, dtype)
    return block.cheap(t) if _uses(node) > 1 else t


def _call_several(block: LetBlock, node: torch.fx.Node, values: dict[torch.fx.Node, Any]) -> Results:
    """An op with several results: a lowering of :data:`SEVERAL`, its results read by getitem nodes."""
    name = _op_name(node)
    lower = SEVERAL.get(name.removeprefix("aten.")) if name.startswith("aten.") else None
    if lower is None:
        raise _node_error(node, f"unsupported op {name}")
    first = next((v for v in node.meta["val"] if isinstance(v, torch.Tensor)), None)
    shape = tuple(int(d) for d in first.shape) if first is not None else ()
    elem = ELEMENTS.get(first.dtype, FLOAT) if first is not None else FLOAT
    return _lowered(node, lambda: lower(_call_of(block, node, values, shape, elem)))


def _result_of(block: LetBlock, node: torch.fx.Node, values: dict[torch.fx.Node, Any]) -> Any:
    """``results[k]`` of an op with several results (``operator.getitem``)."""
    parent, k = node.args
    name = _op_name(parent) if isinstance(parent, torch.fx.Node) else "an op"
    val = node.meta.get("val")
    if isinstance(val, list | tuple):  # a list inside the results: its parts are read by getitem nodes
        return values[parent][k]  # type: ignore[index]
    shape, dtype = _shape(node)
    _element(node, dtype, f"{name} gives as its result {k} a tensor")
    t = values[parent][k]  # type: ignore[index]
    if t is None:
        raise _node_error(node, f"result {k} of {name} has no lowering")
    _agree(node, t, shape, dtype)
    return block.cheap(t) if _uses(node) > 1 else t


def _call_of(
    block: LetBlock, node: torch.fx.Node, values: dict[torch.fx.Node, Any], shape: tuple[int, ...], elem: Type
) -> Call:
    args = torch.fx.node.map_arg(node.args, lambda n: values[n])
    kwargs = torch.fx.node.map_arg(node.kwargs, lambda n: values[n])
    return Call(block, tuple(args), dict(kwargs), shape, elem)


def _lowered(node: torch.fx.Node, lower: Callable[[], _T]) -> _T:
    try:
        return lower()
    except Unsupported as err:
        raise _node_error(node, f"{_op_name(node)} with {err}") from None
    except KsError as err:  # a type error in the code made (no position of its own): the user's line
        if err.pos is not None:
            raise
        raise _node_error(node, f"{_op_name(node)}: {err.message}") from None


def _agree(node: torch.fx.Node, t: Tensor, shape: tuple[int, ...], dtype: Any) -> None:
    want = ELEMENTS.get(dtype, FLOAT)
    if t.shape != shape or t.elem is not want:
        raise _node_error(
            node,
            f"{_op_name(node)} was lowered to a tensor of shape {t.shape} of {t.elem}, torch gives {shape} of "
            f"{want} (please report it)",
        )


def _result(block: LetBlock, output: Any) -> Expr:
    items = list(output) if isinstance(output, list | tuple) else [output]
    parts: list[Expr] = []
    for item in items:
        if not isinstance(item, Tensor):
            raise KsUsageError(f"the function returns a {type(item).__name__}; return tensors")
        parts.append(block.whole(item))
    body = parts[0] if len(parts) == 1 else E.tuple_(*parts)
    return block.wrap(body)


__all__ = ["supported_ops", "translate"]


def example_tensors(shapes: Sequence[tuple[int, ...]], seed: int = 0) -> list[torch.Tensor]:
    """float64 example tensors of these shapes (0-d for ``()``), seeded."""
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(s, generator=g, dtype=torch.float64) for s in shapes]
