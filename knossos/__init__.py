"""The Knossos language: expressions, parser and printer, types, interpreter and cost model.

The most used entry points::

    from knossos import load_program, parse_expr, format_expr, evaluate, call_def
    prog = load_program("ksdata/programs/blas_test.kso")
    gemm = prog.defs["gemm"]          # a Def: name, params, ret_type, body (an Expr)
    gemm.body.cost, prog.def_cost("gemm")

Compiled defs (C++) are :func:`cpp_backend.compile_def`.
"""

from knossos.expr import Expr
from knossos.interpreter import call_def, evaluate
from knossos.parser import load_program, parse_expr, parse_program
from knossos.printer import format_def, format_expr, format_program
from knossos.program import Def, Program

__all__ = [
    "Def",
    "Expr",
    "Program",
    "call_def",
    "evaluate",
    "format_def",
    "format_expr",
    "format_program",
    "load_program",
    "parse_expr",
    "parse_program",
]
