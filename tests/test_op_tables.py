"""Every op has an entry in every per-op table: a new op cannot be half added.

The tables: its type rule, its reference cost, its sized cost, its meaning in the interpreter, its
C++, and its node type in the networks' graphs.  Literals and variables are built (``const``, ``var``)
and read (the interpreter, the emitter, the sized cost) apart from the tables, so they are left out
where they are handled so.
"""

from __future__ import annotations

import pytest

from cpp_backend import emitter_core
from gnn.graph import NODE_TYPE_INDEX, NUM_NODE_TYPES
from knossos import sized_cost
from knossos.cost import COST_RULES
from knossos.interpreter import STRICT, Interpreter
from knossos.ops import Op
from knossos.typing_rules import TYPE_RULES

LEAVES = {Op.CONST, Op.VAR}


def interpreted(op: Op) -> bool:
    """Strict ops are in STRICT; the others have an ``Interpreter._<op>`` method (how it dispatches)."""
    return op in STRICT or callable(getattr(Interpreter, f"_{op.name.lower()}", None))


TABLES = {
    "type": lambda op: op in TYPE_RULES or op in LEAVES,
    "cost": lambda op: op in COST_RULES,
    "sized cost": lambda op: op in sized_cost._OWN or op in sized_cost.STRUCTURAL or op in LEAVES,
    "interpreter": lambda op: interpreted(op) or op in LEAVES,
    "C++": lambda op: op in emitter_core.STRICT_CPP or op in emitter_core.LAZY_METHODS or op in LEAVES,
    "graph node type": lambda op: op in NODE_TYPE_INDEX,
}


@pytest.mark.parametrize("table", TABLES)
def test_every_op_is_in_the_table(table: str) -> None:
    missing = [op.name for op in Op if not TABLES[table](op)]
    assert not missing, f"ops missing from the {table} table: {missing}"


def test_tables_name_only_ops_and_leaves_are_not_doubled() -> None:
    assert not LEAVES & set(TYPE_RULES)
    assert not set(emitter_core.STRICT_CPP) & set(emitter_core.LAZY_METHODS)
    assert not set(sized_cost._OWN) & sized_cost.STRUCTURAL
    assert all(not (op in STRICT and hasattr(Interpreter, f"_{op.name.lower()}")) for op in Op)
    assert sorted(NODE_TYPE_INDEX.values()) == list(range(NUM_NODE_TYPES))
