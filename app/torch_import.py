"""``knossos import`` with its check able to compile: :func:`frontends.cli.register` given
:func:`cpp_backend.compile_def` (``exact_order``), so that a translation too big for the interpreter
(a 64x256x256 MLP: tens of millions of steps) is checked compiled on fresh inputs against torch.

The front end and the C++ backend are one layer and do not import each other (pyproject.toml's
contracts); this is the layer above both that wires them, as :mod:`app.compiled` does for search.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

from cpp_backend.callable import compile_def
from frontends import cli
from knossos.cli import ArgumentParser
from knossos.program import Program


def compiled(program: Program, name: str) -> Callable[..., Any]:
    """The def compiled with sums in index order (the interpreter's to the bit)."""
    return compile_def(program, name, exact_order=True)


def register(sub: argparse._SubParsersAction[ArgumentParser]) -> None:
    """The ``import`` subcommand, checking big translations compiled."""
    cli.register(sub, compiler=compiled)
