"""Expressions: the one place to import nodes and the functions that build, walk and rewrite them.

Nodes are immutable, interned, and equal exactly when alpha-equivalent.  The ideas behind them live
in modules of their own, which this module gathers:

- :mod:`knossos.node`: the :class:`Expr` class and its views;
- :mod:`knossos.interning`: building nodes (:func:`make`, :func:`const`, :func:`var` and a builder
  per op) through the tables that make every node unique;
- :mod:`knossos.alpha`: the alpha-hash arithmetic behind those tables (:func:`alpha_equal`,
  :func:`occurrences`);
- :mod:`knossos.walk`: pre-order walks and node numbers (:func:`preorder`, :func:`path_to`,
  :func:`node_at`, :func:`names_in`, :func:`distinct_nodes`);
- :mod:`knossos.rebuild`: a rewrite's ancestors built again (:func:`replace_at`,
  :func:`replace_on_path`), in C where knossos/_climb.c was built.

It also connects the nodes to the modules above them (see :func:`knossos.node.connect`): a node is
written as text by :mod:`knossos.printer` and pickled in the wire form of :mod:`knossos.serialize`.
"""

from __future__ import annotations

from knossos import node
from knossos.alpha import alpha_equal, occurrences
from knossos.interning import (
    TABLE_CALLBACKS,
    build,
    call,
    const,
    get,
    lam,
    let,
    live_nodes,
    make,
    op,
    sumbuild,
    tuple_,
    var,
)
from knossos.node import Expr, Position
from knossos.printer import format_expr
from knossos.rebuild import compiled_rebuild, replace_at, replace_on_path
from knossos.serialize import expr_from_wire, expr_to_wire
from knossos.walk import Ancestors, distinct_nodes, names_in, node_at, path_to, preorder

node.connect(make, format_expr, expr_to_wire, expr_from_wire)

__all__ = [
    "TABLE_CALLBACKS",
    "Ancestors",
    "Expr",
    "Position",
    "alpha_equal",
    "build",
    "call",
    "compiled_rebuild",
    "const",
    "distinct_nodes",
    "get",
    "lam",
    "let",
    "live_nodes",
    "make",
    "names_in",
    "node_at",
    "occurrences",
    "op",
    "path_to",
    "preorder",
    "replace_at",
    "replace_on_path",
    "sumbuild",
    "tuple_",
    "var",
]
