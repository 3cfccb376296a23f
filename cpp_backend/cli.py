"""``knossos cpp FILE [--def NAME] [-o OUT.cpp [--force]] [--driver] [--exact-order]``: emit a program as C++17.

Registered through the ``knossos.commands`` entry point (see pyproject.toml).  The output stands alone
(the runtime header is inlined); ``--driver`` adds the test driver's ``main()`` (see
:mod:`cpp_backend.driver`).  ``-o`` overwrites an existing file only with ``--force``, never the input
FILE, and never anything but a regular file.
"""

from __future__ import annotations

import argparse

from cpp_backend.driver import driver_source
from cpp_backend.emit import emit_program
from knossos.cli import ArgumentParser, check_output, find_def, located, write_output
from knossos.parser import load_program


def register(sub: argparse._SubParsersAction[ArgumentParser]) -> None:
    """Add the ``cpp`` subcommand to the ``knossos`` command line."""
    p = sub.add_parser("cpp", help="emit a program (or one def and what it calls) as C++17")
    p.add_argument("file", metavar="FILE")
    p.add_argument("--def", dest="def_name", metavar="NAME", help="only this def and the defs it calls")
    p.add_argument("-o", dest="out", metavar="OUT.cpp", help="write the C++ here instead of to stdout")
    p.add_argument("--force", action="store_true", help="let -o overwrite an existing file")
    p.add_argument("--driver", action="store_true", help="add the test driver's main() (requests on stdin)")
    p.add_argument(
        "--exact-order",
        action="store_true",
        help="Float sums add in index order, bit-identical to the interpreter (by default, compiled with "
        "-fopenmp, they may be vectorised and split across threads: equal up to rounding)",
    )
    p.set_defaults(run=cmd_cpp)


def cmd_cpp(args: argparse.Namespace) -> int:
    if args.out is not None:
        check_output(args.out, args.file, args.force)
    program = load_program(args.file)
    names = [find_def(program, args.def_name, args.file).name] if args.def_name else None
    if args.driver:
        source = located(lambda: driver_source(program, names, exact_order=args.exact_order)[0], args.file)
    else:
        source = located(lambda: emit_program(program, names, exact_order=args.exact_order), args.file)
    write_output(source, args.out, args.force)
    return 0
