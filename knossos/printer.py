"""Writing expressions and programs as indented Knossos text that parses back to the same thing.

Layout: a form that fits in the remaining width is written on one line; otherwise its arguments go on
lines of their own, aligned under the first one, and the bodies of ``let``, ``lam``, ``build`` and
``sumbuild`` go on the next line, indented by two.  Runs of nested ``let`` are written as one
multi-binding ``let``.  The writer works from an explicit stack, so depth is no problem, and
indentation stops growing at :data:`MAX_INDENT` so that very deep programs stay linear in size.
"""

from __future__ import annotations

from sexpdata import Symbol as _SexpSymbol

from knossos.expr import Expr
from knossos.ops import NAMES, Op
from knossos.program import Def, Edef, Param, Program, SizeTree, TupleSizes, VecSizes
from knossos.types import Kind, Type

WIDTH = 100
MAX_INDENT = 60


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


def _head(node: Expr) -> str:
    if node.op is Op.CALL:
        return quote_name(node.data.name)
    if node.op is Op.GET:
        return f"get${node.data[0]}${node.data[1]}"
    return NAMES[node.op]


def _binding(v: Expr) -> str:
    return f"({quote_name(v.data)} : {v.type})"


def _let_chain(node: Expr) -> tuple[list[tuple[Expr, Expr]], Expr]:
    bindings: list[tuple[Expr, Expr]] = []
    while node.op is Op.LET:
        bindings.append((node.args[0], node.args[1]))
        node = node.args[2]
    return bindings, node


def _flat_texts(root: Expr, limit: int) -> dict[int, str]:
    """One-line text of every subterm no longer than ``limit`` characters (iterative, post-order)."""
    texts: dict[int, str] = {}
    too_long: set[int] = set()
    stack: list[tuple[Expr, bool]] = [(root, False)]
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


def _flat(node: Expr, texts: dict[int, str]) -> str:
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
        indent = min(indent, MAX_INDENT)
        self.emit("\n" + " " * indent)

    def text(self) -> str:
        return "".join(self.parts)


# Work items: a string to emit, an int to start a new line at that indent, or an expression.
_Item = str | int | Expr


def format_expr(root: Expr, width: int = WIDTH, indent: int = 0) -> str:
    """``root`` as text; continuation lines are indented at least ``indent``."""
    texts = _flat_texts(root, width)
    w = _Writer(width)
    w.col = indent
    stack: list[_Item] = [root]
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
        stack.extend(reversed(_broken(item, min(w.col, MAX_INDENT))))
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


def _broken(node: Expr, base: int) -> list[_Item]:
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
    body = format_expr(d.body, width, indent=2)
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
