"""``knossos import FILE.py --function NAME --shapes 'W=64x32,b=64,x=32' [-o OUT.ks [--force]]``.

Imports FILE.py as a module (``importlib``; its folder is searched first for its own imports, as
``python FILE.py`` would), makes seeded float64 example tensors of the given shapes and translates
the function with :func:`frontends.torch.translate`, which checks the program on fresh inputs
against torch unless ``--no-check`` is given.  ``NAME=`` (or ``NAME=()``) is a 0-d
tensor, a Float; a parameter left out of --shapes is a Float when it is annotated ``float`` or has a
number as its default.  Without ``-o`` the program is printed; ``-o`` follows optimize.py's rules
(never over FILE, over another existing file only with ``--force``, atomically).  Every failure is
one line, and nothing is written.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import importlib.util
import inspect
import re
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from knossos.cli import ArgumentParser, check_output, write_output
from knossos.errors import KsError, KsUsageError, one_line
from knossos.printer import format_program

if TYPE_CHECKING:  # frontends.check imports torch, which only this command needs
    from frontends.check import Compiler

_SHAPE = re.compile(
    r"\A\s*([A-Za-z_][A-Za-z0-9_]*)\s*=\s*(\(\)|[0-9]+(?:\s*x\s*[0-9]+)*|)\s*"
    r"(?::\s*(float64|float32|int\s*<\s*[0-9]+)\s*)?\Z"
)
#: The most elements one example tensor may have (2^26 float64s: 512 MiB).
MAX_ELEMENTS = 2**26


def register(sub: argparse._SubParsersAction[ArgumentParser], compiler: Compiler | None = None) -> None:
    """Add the ``import`` subcommand to the ``knossos`` command line; ``compiler`` checks a def too
    big for the interpreter compiled (``app.torch_import`` gives ``cpp_backend.compile_def``, which
    this layer may not import)."""
    p = sub.add_parser("import", help="translate a PyTorch function of a .py file to a Knossos program")
    p.add_argument("file", metavar="FILE.py")
    p.add_argument("--function", required=True, metavar="NAME", help="the function to translate")
    p.add_argument(
        "--shapes",
        default="",
        metavar="'W=64x32,b=64,x=32,idx=8:int<50'",
        help="the shape of each tensor parameter (NAME= or NAME=() for a Float), float64 unless :float32 or "
        ":int<N> follows (int64 indices in [0, N)); seeded examples of them are traced",
    )
    p.add_argument("-o", dest="out", metavar="OUT.ks", help="write the program here instead of to stdout")
    p.add_argument("--force", action="store_true", help="let -o overwrite an existing file")
    p.add_argument(
        "--no-check",
        action="store_true",
        help="do not evaluate the program on fresh inputs against torch before writing it",
    )
    p.set_defaults(run=cmd_import, compiler=compiler)


def parse_shapes(text: str) -> dict[str, tuple[int, ...]]:
    """``'W=64x32,b=64,s='`` as ``{"W": (64, 32), "b": (64,), "s": ()}``."""
    return {name: shape for name, (shape, _) in parse_specs(text).items()}


def parse_specs(text: str) -> dict[str, tuple[tuple[int, ...], str]]:
    """``'W=64x32,idx=8:int<50'`` as ``{"W": ((64, 32), "float64"), "idx": ((8,), "int<50")}``."""
    out: dict[str, tuple[tuple[int, ...], str]] = {}
    for item in filter(str.strip, text.split(",")):
        m = _SHAPE.match(item)
        if m is None:
            raise KsUsageError(
                f"bad --shapes item '{item.strip()[:60]}': expected NAME=N, NAME=NxM... or NAME= for a Float, "
                "then :float32 or :int<N> for another dtype"
            )
        name, dims, kind = m.group(1), m.group(2), re.sub(r"\s", "", m.group(3) or "float64")
        if name in out:
            raise KsUsageError(f"--shapes gives '{name}' twice")
        shape = tuple(int(d) for d in dims.split("x")) if dims and dims != "()" else ()
        n = 1
        for d in shape:
            n *= d
        if n > MAX_ELEMENTS:
            raise KsUsageError(f"--shapes: '{name}' has {n} elements, more than {MAX_ELEMENTS}")
        if kind.startswith("int") and int(kind[4:]) < 1:
            raise KsUsageError(f"--shapes: '{name}' has no values in int<{kind[4:]}> (give N of at least 1)")
        out[name] = (shape, kind)
    return out


def load_function(path: str, name: str) -> Any:
    """The function ``name`` of the Python file ``path``, imported as a module."""
    file = Path(path)
    if not file.is_file():
        raise KsUsageError("no such file" if not file.exists() else "not a regular file", None, path)
    digest = hashlib.sha256(str(file.resolve()).encode()).hexdigest()[:12]
    spec = importlib.util.spec_from_file_location(f"knossos_import_{digest}", file)
    if spec is None or spec.loader is None:
        raise KsUsageError("cannot be imported as a Python module (give a .py file)", None, path)
    module = importlib.util.module_from_spec(spec)
    # The file imports its neighbours as it would run under `python FILE` (whose sys.path[0] is its
    # folder); the entry is taken out again below, so nothing else of the process sees it.
    folder = str(file.resolve().parent)
    sys.path.insert(0, folder)
    try:
        with contextlib.redirect_stdout(sys.stderr):  # the program may be going to stdout
            spec.loader.exec_module(module)
    except Exception as err:  # whatever the user's code raises on import
        raise KsUsageError(f"importing it failed: {type(err).__name__}: {err}", None, path) from None
    except SystemExit:
        raise KsUsageError("importing it called sys.exit()", None, path) from None
    finally:
        if folder in sys.path:
            sys.path.remove(folder)
    fn = getattr(module, name, None)
    if fn is None or not callable(fn):
        found = sorted(k for k, v in vars(module).items() if inspect.isfunction(v) and v.__module__ == module.__name__)
        raise KsUsageError(
            f"no function named '{name}' (its functions: {', '.join(found) or 'none'})",
            None,
            path,
        )
    return fn


def example_args(fn: Any, shapes: dict[str, tuple[tuple[int, ...], str]], label: str) -> list[Any]:
    """Seeded examples for ``fn``'s positional parameters, in order: ``shapes`` gives each tensor's
    shape and kind (``float64``, ``float32``, ``int<N>``: int64 in [0, N))."""
    import torch

    try:
        params = [
            p
            for p in inspect.signature(fn).parameters.values()
            if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
        ]
    except (TypeError, ValueError):
        raise KsUsageError("cannot read the function's parameters", None, label) from None
    names = [p.name for p in params]
    unknown = [n for n in shapes if n not in names]
    if unknown:
        raise KsUsageError(f"--shapes names {', '.join(unknown)}, not parameters of the function ({', '.join(names)})")
    g = torch.Generator().manual_seed(0)
    out: list[Any] = []
    for p in params:
        if p.name in shapes:
            shape, kind = shapes[p.name]
            if kind.startswith("int"):
                out.append(torch.randint(0, int(kind[4:]), shape, generator=g))
            else:
                out.append(torch.randn(shape, generator=g, dtype=getattr(torch, kind)))
        elif p.annotation in (float, "float") or _number(p.default):
            out.append(1.0)
        else:
            raise KsUsageError(
                f"--shapes gives no shape for the parameter '{p.name}' (NAME=N, NAME=NxM, or NAME= for a Float)"
            )
    return out


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def cmd_import(args: argparse.Namespace) -> int:
    if args.out is not None:
        check_output(args.out, args.file, args.force)
    shapes = parse_specs(args.shapes)
    fn = load_function(args.file, args.function)
    from frontends.torch import translate  # torch: only for this command

    examples = example_args(fn, shapes, args.file)
    try:
        program = translate(fn, *examples, name=args.function, check=not args.no_check, compiler=args.compiler)
    except KsError as err:
        raise err.located(None, args.file) from None
    given = ",".join(
        f"{k}={'x'.join(map(str, v))}{'' if kind == 'float64' else ':' + kind}" for k, (v, kind) in shapes.items()
    )
    header = one_line(f"; knossos import {Path(args.file).name} --function {args.function} --shapes '{given}'")
    text = header + "\n" + format_program(program)
    write_output(text, args.out, args.force)
    return 0
