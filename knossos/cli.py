"""The ``knossos`` command: check, print, cost and evaluate programs.

Every command that takes a FILE also takes ``--expr "(...)"``, a bare expression whose free
variables are Floats.  Problems are reported as one line ``FILE:LINE:COL: error: ...`` with exit
status 1; a bug in this program is reported in one line with exit status 3 (set KNOSSOS_DEBUG=1 for
the traceback).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import traceback
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any, NoReturn, TypeVar

from knossos.atomic import atomic_write_text
from knossos.errors import KsError, KsEvalError, KsUsageError, Pos, one_line
from knossos.expr import Expr
from knossos.interpreter import DEFAULT_MAX_ELEMENTS, Interpreter
from knossos.parser import load_program, parse_expr, parse_expr_positions, parse_program, read_source
from knossos.perf import fewer_gc_pauses
from knossos.printer import format_expr, format_program
from knossos.program import Def, Program
from knossos.sized_cost import Abstract, SizedCost, check_size_levels, parse_sizes, sized_def_cost
from knossos.values import from_python, to_json


def whole_number(most: int | None = None) -> Callable[[str], int]:
    """An argparse type: a whole number of at least 1 (and at most ``most``, when given)."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"'{text[:40]}' is not a whole number") from None
        if value < 1:
            raise argparse.ArgumentTypeError(f"must be at least 1, not {value}")
        if most is not None and value > most:
            raise argparse.ArgumentTypeError(f"must be at most {most} (no memory holds more), not {value}")
        return value

    return parse


class ArgumentParser(argparse.ArgumentParser):
    """argparse, but a usage error is one line."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, one_line(f"{self.prog}: error: {message} (see --help)") + "\n")


@dataclass
class Source:
    """What a command works on: a program file, or one bare expression."""

    label: str
    program: Program | None = None
    expr: Expr | None = None
    free: Sequence[Expr] = ()
    #: The program's source text as read (what writing it back with one def replaced keeps).
    text: str | None = None


def load_source(args: argparse.Namespace) -> Source:
    if args.expr is not None:
        if getattr(args, "file", None):
            raise KsUsageError("give either FILE or --expr, not both")
        expr, free = parse_expr(args.expr)
        return Source("<expr>", expr=expr, free=free)
    if not getattr(args, "file", None):
        raise KsUsageError('give a FILE or --expr "(...)"')
    text = read_source(args.file)
    return Source(args.file, program=parse_program(text, args.file), text=text)


def same_file(a: str, b: str) -> bool:
    """Whether two paths name one file (so that an output would overwrite an input)."""
    if Path(a).resolve() == Path(b).resolve():
        return True
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


def check_output(out: str, source: str, force: bool) -> None:
    """A file ``-o`` may write (optimize.py's rules), checked before any work: named, not the input, a
    regular file or nothing in an existing folder, and there already only with ``force``."""
    if not out:
        raise KsUsageError("-o needs a file name, not an empty one")
    if same_file(out, source):
        raise KsUsageError("-o names the input file; refusing to overwrite it", None, out)
    target = Path(out)
    if target.is_dir():
        raise KsUsageError("-o names a folder", None, out)
    if os.path.lexists(out) and not target.is_file():
        raise KsUsageError("-o: not a regular file; refusing to replace it", None, out)
    if not target.resolve().parent.is_dir():
        raise KsUsageError("-o: the folder does not exist", None, out)
    if os.path.lexists(out) and not force:
        raise KsUsageError("-o: the file exists; add --force to overwrite it", None, out)


def write_output(text: str, out: str | None, force: bool) -> None:
    """``text`` to ``out`` (checked by :func:`check_output`) atomically, or to stdout without ``-o``; a
    failed write leaves an existing output as it was, and a file that appeared meanwhile is replaced
    only with ``force``."""
    if out is None:
        sys.stdout.write(text)
        return
    try:
        atomic_write_text(out, text, replace=force)
    except FileExistsError:
        raise KsUsageError("-o: the file appeared meanwhile; add --force to overwrite it", None, out) from None
    except OSError as err:
        raise KsUsageError(f"cannot write: {err.strerror}", None, out) from None


def find_def(program: Program, name: str, file: str) -> Def:
    d = program.defs.get(name)
    if d is None:
        import difflib

        close = difflib.get_close_matches(name, list(program.defs), n=1)
        hint = f" (did you mean '{close[0]}'?)" if close else ""
        raise KsUsageError(f"no def named '{name}'{hint}", None, file)
    return d


# -- commands --------------------------------------------------------------------------------------
def cmd_check(args: argparse.Namespace) -> int:
    if args.expr is not None:
        expr, _ = parse_expr(args.expr)
        print(f"<expr>: ok: {expr.type}, {expr.size} nodes")
        return 0
    if not args.files:
        raise KsUsageError('give one or more FILEs or --expr "(...)"')
    failed = 0
    for file in args.files:
        try:
            program = load_program(file)
        except KsError as err:
            print(err.located(file=file).render(), file=sys.stderr)
            failed += 1
            continue
        print(f"{file}: ok: {len(program.defs)} defs, {len(program.edefs)} edefs, {program.node_count()} nodes")
    return 1 if failed else 0


def cmd_print(args: argparse.Namespace) -> int:
    src = load_source(args)
    if src.expr is not None:
        print(format_expr(src.expr, args.width))
    else:
        assert src.program is not None
        sys.stdout.write(format_program(src.program, args.width))
    return 0


def cmd_cost(args: argparse.Namespace) -> int:
    src = load_source(args)
    sizes = parse_sizes(args.size or [])
    if src.expr is not None:
        env: dict[str, Abstract] = {v.data: None for v in src.free}
        cost = SizedCost().cost(src.expr, env)[0] if sizes else src.expr.cost
        _emit({"cost": _round(cost)}, args.json, lambda o: f"{o['cost']}")
        return 0
    program = src.program
    assert program is not None
    names = [find_def(program, args.def_name, src.label).name] if args.def_name else [d.name for d in program.targets]
    _check_sizes_known(program, names, sizes, src.label)
    costs = {n: _round(sized_def_cost(program, n, sizes) if sizes else program.def_cost(n)) for n in names}
    out: dict[str, Any] = {"defs": costs}
    if sizes:
        out["sizes"] = {k: list(v) if isinstance(v, tuple) else v for k, v in sizes.items()}
        width = max((len(n) for n in names), default=0)
        _emit(out, args.json, lambda o: "\n".join(f"{n:<{width}}  {c}" for n, c in o["defs"].items()))
        return 0
    # optimize.py rewrites and reports the body; the reference costed the def with its wrapper lets
    out["bodies"] = {n: _round(program.defs[n].body.cost) for n in names}
    _emit(out, args.json, _cost_table)
    return 0


def _cost_table(out: dict[str, Any]) -> str:
    rows = [("def", "cost", "body")] + [(n, f"{c:g}", f"{out['bodies'][n]:g}") for n, c in out["defs"].items()]
    widths = [max(len(r[i]) for r in rows) for i in range(3)]
    lines = [f"{a:<{widths[0]}}  {b:>{widths[1]}}  {c:>{widths[2]}}" for a, b, c in rows]
    lines.append(
        "cost: the def as the reference measured it (a let per def it calls and per parameter); "
        "body: its expression, which optimize.py rewrites and reports"
    )
    return "\n".join(lines)


def _check_sizes_known(program: Program, names: list[str], sizes: dict[str, Any], file: str) -> None:
    known: set[str] = set()
    levels: dict[str, int] = {}  # a vector parameter's nesting depth: the most lengths it can be given
    for n in names:
        for d in program.closure(n):
            known.update(p.name for p in d.params)
            known.update(d.size_vars)
            levels.update((p.name, max(levels.get(p.name, 0), p.type.vec_rank)) for p in d.params)
    unknown = sorted(set(sizes) - known)
    if unknown:
        raise KsUsageError(
            f"--size names {', '.join(unknown)}, which no parameter or vector size of the def(s) is called", None, file
        )
    check_size_levels(sizes, levels, file)


def cmd_eval(args: argparse.Namespace) -> int:
    label = _args_label(args.args)
    if args.expr is not None:
        if args.file or args.def_name:
            raise KsUsageError("give either FILE DEF or --expr, not both")
        expr, free, positions = parse_expr_positions(args.expr)
        env = located(lambda: _expr_env(free, _read_args(args.args), label), label)
        interpreter = Interpreter(args.max_steps, args.max_elements)
        result = located(lambda: interpreter.eval_expr(expr, env), "<expr>", positions)
        print(json.dumps(to_json(result, expr.type)))
        return 0
    if not args.file or not args.def_name:
        raise KsUsageError("give FILE DEF (or --expr) and --args ARGS.json")
    program = load_program(args.file)
    d = find_def(program, args.def_name, args.file)
    raw = _read_args(args.args)
    if not isinstance(raw, list):
        raise KsUsageError(f"arguments must be a JSON list with one item per parameter of '{d.name}'", None, label)
    if len(raw) != len(d.params):
        raise KsUsageError(f"'{d.name}' takes {len(d.params)} argument(s), the list has {len(raw)}", None, label)
    interpreter = Interpreter(args.max_steps, args.max_elements)
    values = located(lambda: interpreter.check_args(d, raw), label)
    result = located(lambda: interpreter.call_checked(d, values), args.file, program.positions)
    print(json.dumps(to_json(result, d.ret_type)))
    return 0


_T = TypeVar("_T")


def located(action: Callable[[], _T], file: str | None, positions: Mapping[Expr, Pos] | None = None) -> _T:
    """Run ``action``; a KsError it raises without a file is attributed to ``file`` (and a run-time
    error to where its expression is written, from ``positions``)."""
    try:
        return action()
    except KsError as err:
        node = err.node if isinstance(err, KsEvalError) else None
        pos = positions.get(node) if positions is not None and isinstance(node, Expr) else None
        raise err.located(pos, file) from None


def _args_label(spec: str | None) -> str | None:
    """How error messages name the arguments: the file, or ``<args>`` for inline JSON."""
    if spec is None:
        return None
    return "<args>" if spec.lstrip().startswith(("[", "{")) else spec


def _read_args(spec: str | None) -> Any:
    if spec is None:
        raise KsUsageError("give the arguments with --args ARGS.json (a JSON list, one item per parameter)")
    label = _args_label(spec)
    text = spec if label == "<args>" else read_source(spec)
    try:
        return _decode_json(json.loads(text))
    except json.JSONDecodeError as err:
        raise KsUsageError(f"bad JSON: {err.msg}", Pos(err.lineno, err.colno), label) from None
    except RecursionError:
        raise KsUsageError("the JSON is nested too deeply", None, label) from None
    except ValueError as err:  # e.g. an integer of thousands of digits
        raise KsUsageError(f"bad JSON: {err}", None, label) from None


def _decode_json(value: Any) -> Any:
    """JSON tuples are ``{"tuple": [...]}``: make them Python tuples."""
    if isinstance(value, dict) and set(value) == {"tuple"} and isinstance(value["tuple"], list):
        return tuple(_decode_json(v) for v in value["tuple"])
    if isinstance(value, list):
        return [_decode_json(v) for v in value]
    return value


def _expr_env(free: Sequence[Expr], raw: Any, label: str | None) -> dict[str, Any]:
    names = [v.data for v in free]
    if isinstance(raw, dict):
        missing = [n for n in names if n not in raw]
        extra = [n for n in raw if n not in names]
        if missing or extra:
            raise KsUsageError(
                f"expected values for {', '.join(names) or 'nothing'}; missing {missing}, unknown {extra}", None, label
            )
        values = [raw[n] for n in names]
    elif isinstance(raw, list):
        if len(raw) != len(names):
            raise KsUsageError(
                f"the expression has {len(names)} free variable(s) ({', '.join(names)}), the list has {len(raw)}",
                None,
                label,
            )
        values = raw
    else:
        raise KsUsageError(
            "arguments must be a JSON list (free variables in order of appearance) or an object by name", None, label
        )
    return {v.data: from_python(x, v.type, f"'{v.data}'") for v, x in zip(free, values, strict=True)}


def _round(x: float) -> float:
    return round(x, 6)


def _emit(obj: dict[str, Any], as_json: bool, human: Callable[[dict[str, Any]], str]) -> None:
    print(json.dumps(obj) if as_json else human(obj))


# -- wiring ----------------------------------------------------------------------------------------
def build_parser() -> argparse.ArgumentParser:
    parser = ArgumentParser(prog="knossos", description="Knossos IR tools: check, print, cost and evaluate programs.")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=ArgumentParser)

    def expr_option(p: argparse.ArgumentParser) -> None:
        p.add_argument(
            "--expr", metavar="'(...)'", help="a bare expression instead of a file (free variables are Floats)"
        )

    p = sub.add_parser("check", help="parse and type-check files")
    p.add_argument("files", nargs="*", metavar="FILE")
    expr_option(p)
    p.set_defaults(run=cmd_check)

    p = sub.add_parser("print", help="print a program or expression, formatted")
    p.add_argument("file", nargs="?", metavar="FILE")
    p.add_argument("--width", type=int, default=100, help="line width (default 100)")
    expr_option(p)
    p.set_defaults(run=cmd_print)

    p = sub.add_parser("cost", help="cost of each def (reference cost model, or real sizes with --size)")
    p.add_argument("file", nargs="?", metavar="FILE")
    p.add_argument("--def", dest="def_name", metavar="NAME", help="only this def")
    p.add_argument("--json", action="store_true", help='print {"defs": {NAME: cost}}')
    p.add_argument(
        "--size",
        action="append",
        metavar="NAME=N",
        help="a real size: a size variable, Integer or vector parameter (x=NxM); repeatable",
    )
    expr_option(p)
    p.set_defaults(run=cmd_cost)

    p = sub.add_parser("eval", help="evaluate a def on arguments with the reference interpreter")
    p.add_argument("file", nargs="?", metavar="FILE")
    p.add_argument("def_name", nargs="?", metavar="DEF")
    p.add_argument(
        "--args",
        metavar="ARGS.json",
        help='JSON list, one item per parameter (vectors as lists, tuples as {"tuple": [...]}); a file or inline JSON',
    )
    p.add_argument("--max-steps", type=whole_number(), default=None, help="stop after this many evaluation steps")
    p.add_argument(
        "--max-elements",
        type=whole_number(),
        default=DEFAULT_MAX_ELEMENTS,
        metavar="N",
        help=f"refuse to allocate more than N vector elements in all ({DEFAULT_MAX_ELEMENTS:.0e})",
    )
    expr_option(p)
    p.set_defaults(run=cmd_eval)

    # The packages above the language core (autodiff, the front end, the C++ backend, rules) add their
    # commands through this entry point group, so that the core does not import them.
    for entry in sorted(entry_points(group="knossos.commands"), key=lambda e: e.name):
        entry.load()(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        with fewer_gc_pauses():
            return int(args.run(args))
    except KsError as err:
        print(err.render(), file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("knossos: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0
    except Exception as err:
        return internal_error("knossos", err)


def internal_error(program: str, err: Exception) -> int:
    """A bug: say so in one line (status 3), keeping the traceback for those who ask (KNOSSOS_DEBUG=1)."""
    if os.environ.get("KNOSSOS_DEBUG"):
        traceback.print_exc()
    print(
        one_line(f"{program}: internal error: {type(err).__name__}: {err} (set KNOSSOS_DEBUG=1 for details)"),
        file=sys.stderr,
    )
    return 3


if __name__ == "__main__":
    sys.exit(main())
