"""Writing expressions and programs as indented Knossos text that parses back to the same thing.

Layout: a form that fits in the remaining width is written on one line; otherwise its arguments go on
lines of their own, aligned under the first one, and the bodies of ``let``, ``lam``, ``build`` and
``sumbuild`` go on the next line, indented by two.  Runs of nested ``let`` are written as one
multi-binding ``let``.  The writer works from an explicit stack, so depth is no problem, and
indentation stops growing at :data:`_MAX_INDENT` so that very deep programs stay linear in size.

The text reads back as the same (interned) expressions: an application of anything but a variable is
``((lam ...) x)``, and a local function named like a def or edef that is called in its scope is written
under a fresh name (``var0_1``), since ``(var0 ...)`` there would apply the local.
"""

from __future__ import annotations

from collections.abc import Generator, Iterator
from dataclasses import dataclass
from typing import Any, Protocol

from sexpdata import Symbol as _SexpSymbol

from knossos import trampoline
from knossos.node import Expr
from knossos.op_table import NAMES
from knossos.ops import BINDERS, Op
from knossos.program import Def, Edef, Param, Program, SizeTree, TupleSizes, VecSizes
from knossos.types import Kind, Type
from knossos.walk import names_in

WIDTH = 100
_MAX_INDENT = 60


def quote_name(name: str) -> str:
    """A name as an atom that reads back as that name (special characters escaped)."""
    quoted: str = _SexpSymbol.quote(name)
    return quoted


def format_literal(value: bool | int | float) -> str:
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, float):
        return repr(value)
    return str(value)


def format_type(t: Type, sizes: SizeTree = None) -> str:
    """A type, with the size names of a sized type where given."""
    if t.kind is Kind.VEC:
        size = sizes.name if isinstance(sizes, VecSizes) else None
        elem = format_type(t.elem, sizes.elem if isinstance(sizes, VecSizes) else None)
        return f"(Vec {quote_name(size)} {elem})" if size else f"(Vec {elem})"
    if t.kind is Kind.TUPLE:
        parts = sizes.parts if isinstance(sizes, TupleSizes) else (None,) * len(t.children)
        return "(" + " ".join(["Tuple", *(format_type(c, s) for c, s in zip(t.children, parts, strict=True))]) + ")"
    return str(t)


class _Node(Protocol):
    """What the layout reads of a node: an :class:`Expr`, or a :class:`_Renamed` view of one."""

    @property
    def op(self) -> Op: ...
    @property
    def args(self) -> tuple[_Node, ...]: ...
    @property
    def data(self) -> Any: ...
    @property
    def type(self) -> Type: ...


@dataclass(frozen=True, slots=True, eq=False)
class _Renamed:
    """A node as printed where some variables in it are written under other names."""

    op: Op
    args: tuple[_Node, ...]
    data: Any
    type: Type


def _dag(root: Expr) -> Iterator[Expr]:
    """Every distinct node of ``root`` once, children before parents."""
    seen: set[int] = set()
    stack: list[tuple[Expr, bool]] = [(root, False)]
    while stack:
        node, ready = stack.pop()
        if ready:
            yield node
        elif id(node) not in seen:
            seen.add(id(node))
            stack.append((node, True))
            stack.extend((a, False) for a in node.args)


def _unclashed(root: Expr, params: frozenset[str] = frozenset()) -> _Node:
    """``root``, or a view of it where each local function named like a def or edef called in its scope
    has a fresh name.  In the text ``(f ...)`` under a local function ``f`` applies the local (lexical
    scoping), so such a call, which rewrites can make (a fresh ``var0`` let-bound around a call of a
    def ``var0``), would read back as an application.  A binder named like one of ``params`` (the def's
    parameters, which rewrites can shadow: ``(let (x (mul x 2.0)) ...)``) is renamed too, for the
    reader.  Binders are alpha-renamed only: same node."""
    called: set[str] = set()
    bound: set[str] = set()
    shadowing: set[str] = set()
    seen = {id(root)}
    stack = [root]
    while stack:  # any order: only which names are called and which local functions are bound
        node = stack.pop()
        if node.op is Op.CALL:
            called.add(node.data.name)
        elif node.op in BINDERS:
            v = node.args[BINDERS[node.op][0]]
            if v.type.kind is Kind.LAM:
                bound.add(v.data)
            if v.data in params:
                shadowing.add(v.data)
        for a in node.args:
            if id(a) not in seen:
                seen.add(id(a))
                stack.append(a)
    clashing = called & bound
    if not clashing and not shadowing:
        return root
    names = names_in(root)
    return _Renamer(root, clashing, names | called | params, shadowing).view


class _Renamer:
    """The view made by :func:`_unclashed` (iterative, so depth is no problem; shared nodes that
    need no renaming stay shared)."""

    def __init__(self, root: Expr, clashing: set[str], taken: set[str], shadowing: set[str] | None = None) -> None:
        self.shadowing = shadowing or set()
        self.fresh: dict[str, str] = {}
        for name in sorted(clashing | self.shadowing):
            k = 1
            while f"{name}_{k}" in taken:
                k += 1
            self.fresh[name] = f"{name}_{k}"
        #: The clashing names each node calls, and whether a binder in it must be renamed.
        self.calls: dict[int, frozenset[str]] = {}
        self.renames: dict[int, bool] = {}
        for node in _dag(root):
            here = frozenset({node.data.name}) & clashing if node.op is Op.CALL else frozenset()
            self.calls[id(node)] = here.union(*(self.calls[id(a)] for a in node.args))
            self.renames[id(node)] = self._clashes(node) or any(self.renames[id(a)] for a in node.args)
        self.memo: dict[tuple[int, tuple[tuple[str, str], ...]], _Node] = {}
        self.view: _Node = trampoline.run_steps(self._start, (root, {}))

    def _clashes(self, node: Expr) -> bool:
        if node.op not in BINDERS:
            return False
        var_index, scope_index = BINDERS[node.op]
        v = node.args[var_index]
        return v.data in self.shadowing or (
            v.type.kind is Kind.LAM and v.data in self.calls[id(node.args[scope_index])]
        )

    def _start(self, item: tuple[Expr, dict[str, str]]) -> _Node | Generator[Any, _Node, _Node]:
        node, env = item
        free = node.free  # the renamed names it has: the smaller of the two looked up in the other
        renamed = (n for n in free if n in env) if len(free) <= len(env) else (n for n in env if n in free)
        key = (id(node), tuple(sorted((n, env[n]) for n in renamed)))
        if not key[1] and not self.renames[id(node)]:
            return node
        if key in self.memo:
            return self.memo[key]
        if node.op is Op.VAR:
            return _Renamed(Op.VAR, (), env[node.data], node.type)
        return self._rebuild(node, env, key)

    def _rebuild(
        self, node: Expr, env: dict[str, str], key: tuple[int, tuple[tuple[str, str], ...]]
    ) -> Generator[Any, _Node, _Node]:
        var_index, scope_index = BINDERS.get(node.op, (-1, -1))
        inner = env
        if var_index >= 0:
            v = node.args[var_index]
            if self._clashes(node):
                inner = {**env, v.data: self.fresh[v.data]}
            elif v.data in env:  # a binder of the same name that needs none: it shadows the renamed one
                inner = {n: m for n, m in env.items() if n != v.data}
        args: list[_Node] = []
        for i, a in enumerate(node.args):
            if i == var_index:
                args.append(_Renamed(Op.VAR, (), inner.get(a.data, a.data), a.type))
            else:
                args.append((yield (a, inner if i == scope_index else env)))
        view = _Renamed(node.op, tuple(args), node.data, node.type)
        self.memo[key] = view
        return view


def _head(node: _Node) -> str:
    if node.op is Op.CALL:
        return quote_name(node.data.name)
    if node.op is Op.GET:
        return f"get${node.data[0]}${node.data[1]}"
    return NAMES[node.op]


def _binding(v: _Node) -> str:
    return f"({quote_name(v.data)} : {v.type})"


def _let_chain(node: _Node) -> tuple[list[tuple[_Node, _Node]], _Node]:
    bindings: list[tuple[_Node, _Node]] = []
    while node.op is Op.LET:
        bindings.append((node.args[0], node.args[1]))
        node = node.args[2]
    return bindings, node


def _flat_texts(root: _Node, limit: int) -> dict[int, str]:
    """One-line text of every subterm no longer than ``limit`` characters (iterative, post-order)."""
    texts: dict[int, str] = {}
    too_long: set[int] = set()
    stack: list[tuple[_Node, bool]] = [(root, False)]
    while stack:
        node, ready = stack.pop()
        key = id(node)
        if key in texts or key in too_long:
            continue
        if not ready:
            stack.append((node, True))
            stack.extend((a, False) for a in node.args)
            continue
        if any(id(a) in too_long for a in node.args):
            too_long.add(key)
            continue
        text = _flat(node, texts)
        if len(text) > limit:
            too_long.add(key)
        else:
            texts[key] = text
    return texts


def _flat(node: _Node, texts: dict[int, str]) -> str:
    op = node.op
    if op is Op.CONST:
        return format_literal(node.data)
    if op is Op.VAR:
        return quote_name(node.data)
    a = [texts.get(id(x), "") for x in node.args]
    if op is Op.LET:
        return f"(let ({a[0]} {a[1]}) {a[2]})"
    if op is Op.LAM:
        return f"(lam {_binding(node.args[0])} {a[1]})"
    if op in (Op.BUILD, Op.SUMBUILD):
        return f"({NAMES[op]} {a[0]} (lam {_binding(node.args[1])} {a[2]}))"
    if op is Op.APPLY:
        return f"({a[0]} {a[1]})"
    return "(" + " ".join([_head(node), *a]) + ")"


class _Writer:
    def __init__(self, width: int) -> None:
        self.width = width
        self.parts: list[str] = []
        self.col = 0

    def emit(self, text: str) -> None:
        self.parts.append(text)
        nl = text.rfind("\n")
        self.col = len(text) - nl - 1 if nl >= 0 else self.col + len(text)

    def newline(self, indent: int) -> None:
        indent = min(indent, _MAX_INDENT)
        self.emit("\n" + " " * indent)

    def text(self) -> str:
        return "".join(self.parts)


# Work items: a string to emit, an int to start a new line at that indent, or an expression.
_Item = str | int | _Node


def format_expr(root: Expr, width: int = WIDTH, indent: int = 0, params: frozenset[str] = frozenset()) -> str:
    """``root`` as text; continuation lines are indented at least ``indent``; a binder that shadows one
    of ``params`` (the names a def binds around its body) is printed under a fresh name."""
    node = _unclashed(root, params)
    texts = _flat_texts(node, width)
    w = _Writer(width)
    w.col = indent
    stack: list[_Item] = [node]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            w.emit(item)
            continue
        if isinstance(item, int):
            w.newline(item)
            continue
        flat = texts.get(id(item))
        if not item.args:
            w.emit(_flat(item, texts))
            continue
        if flat is not None and w.col + len(flat) + _closers_after(stack, width) <= width:
            w.emit(flat)
            continue
        stack.extend(reversed(_broken(item, min(w.col, _MAX_INDENT))))
    return w.text()


def _closers_after(stack: list[_Item], limit: int) -> int:
    """Length of the run of closing parentheses that will follow on the same line (at most ``limit``)."""
    total = 0
    for item in reversed(stack):
        if not (isinstance(item, str) and item and item.strip(")") == ""):
            break
        total += len(item)
        if total > limit:
            break
    return total


def _broken(node: _Node, base: int) -> list[_Item]:
    """The items of ``node`` laid out over several lines, starting at column ``base``."""
    op = node.op
    if op is Op.LET:
        bindings, body = _let_chain(node)
        if len(bindings) == 1:
            v, rhs = bindings[0]
            return [f"(let ({quote_name(v.data)} ", rhs, ")", base + 2, body, ")"]
        items: list[_Item] = ["(let ("]
        for i, (v, rhs) in enumerate(bindings):
            if i:
                items.append(base + 6)
            items += [f"({quote_name(v.data)} ", rhs, ")"]
        return [*items, ")", base + 2, body, ")"]
    if op is Op.LAM:
        return [f"(lam {_binding(node.args[0])}", base + 2, node.args[1], ")"]
    if op in (Op.BUILD, Op.SUMBUILD):
        size, index, body = node.args
        return [f"({NAMES[op]} ", size, f" (lam {_binding(index)}", base + 2, body, "))"]
    if op is Op.APPLY:
        return ["(", node.args[0], base + 1, node.args[1], ")"]
    head = _head(node)
    if not node.args:
        return [f"({head})"]
    align = base + len(head) + 2
    items = [f"({head} ", node.args[0]]
    for a in node.args[1:]:
        items += [align, a]
    return [*items, ")"]


def format_def(d: Def, width: int = WIDTH) -> str:
    params = [_param(p) for p in d.params]
    head = f"(def {quote_name(d.name)} {format_type(d.ret_type, d.ret_sizes)} ({' '.join(params)})"
    if len(head) > width:  # the parameters on a line of their own, or one per line
        first = f"(def {quote_name(d.name)} {format_type(d.ret_type, d.ret_sizes)}"
        one_line = f"     ({' '.join(params)})"
        head = f"{first}\n{one_line}" if len(one_line) <= width else f"{first}\n     (" + "\n      ".join(params) + ")"
    body = format_expr(d.body, width, indent=2, params=frozenset(p.name for p in d.params) | set(d.size_vars))
    if "\n" not in body and "\n" not in head and len(head) + 1 + len(body) + 1 <= width:
        return f"{head} {body})"
    return f"{head}\n  {body})"


def _param(p: Param) -> str:
    return f"({quote_name(p.name)} : {format_type(p.type, p.sizes)})"


def format_edef(e: Edef) -> str:
    args = " ".join(format_type(t) for t in e.param_types)
    return f"(edef {quote_name(e.name)} {format_type(e.ret_type)} ({args}))"


def format_program(program: Program, width: int = WIDTH) -> str:
    """Every def and edef, in order, separated by blank lines."""
    chunks = [format_def(item, width) if isinstance(item, Def) else format_edef(item) for item in program.items]
    return "\n\n".join(chunks) + "\n"
