"""``knossos grad FILE [--def NAME] [--mode rev|fwd|both] [-o OUT.ks [--force]]``.

Writes FILE's program with ``fwd$``/``rev$`` defs added (every def's, or NAME's, and those of the
defs they call).  ``-o`` follows optimize.py's rules: never over FILE, over another existing file
only with ``--force``, only ever a regular file, written atomically.  A def that cannot be
differentiated is a one-line error, and nothing is written.
"""

from __future__ import annotations

import argparse
import sys

from autodiff.derivatives import derivative_defs, with_derivatives
from knossos.cli import ArgumentParser, check_output, find_def, located, write_output
from knossos.parser import load_program
from knossos.printer import format_program


def register(sub: argparse._SubParsersAction[ArgumentParser]) -> None:
    """Add the ``grad`` subcommand to the ``knossos`` command line."""
    p = sub.add_parser("grad", help="add forward- and reverse-mode derivatives (fwd$f, rev$f) of a program's defs")
    p.add_argument("file", metavar="FILE")
    p.add_argument("--def", dest="def_name", metavar="NAME", help="only this def (and the defs it calls)")
    p.add_argument("--mode", choices=("rev", "fwd", "both"), default="both", help="which derivatives (default both)")
    p.add_argument("-o", dest="out", metavar="OUT.ks", help="write the program here instead of to stdout")
    p.add_argument("--force", action="store_true", help="let -o overwrite an existing file")
    p.set_defaults(run=cmd_grad)


def cmd_grad(args: argparse.Namespace) -> int:
    if args.out is not None:
        check_output(args.out, args.file, args.force)
    program = load_program(args.file)
    names = [find_def(program, args.def_name, args.file).name] if args.def_name else None
    maker = located(lambda: derivative_defs(program, names, args.mode), args.file)
    result = with_derivatives(program, maker)
    for name in maker.reused:
        print(f"knossos grad: note: keeping the program's own '{name}'", file=sys.stderr)
    text = format_program(result)
    write_output(text, args.out, args.force)
    return 0
