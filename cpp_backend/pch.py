"""The runtime header compiled once, as a g++ precompiled header, for every program that inlines it.

A generated source inlines ``runtime.h`` between two marker lines (:func:`cpp_backend.emit.emit_program`).
Parsing it and the standard headers it includes took about 1.3 s of g++'s time on every compilation
(``-ftime-report``, phase parsing; a layer's gradient compiles in 5-7 s, a small def in 2 s).  Here
the text between the markers is written once to a header file in the compile cache, named by the
hash of the compiler, the flags and the text, and compiled to a ``.gch`` beside it; a program is then
compiled from a unit that includes that header in place of the text.  g++ reads the ``.gch`` where it
is valid for the flags and the header text otherwise: either way the unit means the same as the
source.  A source with anything but comments before the runtime (``#define KS_EXACT_ORDER``) is
compiled as it is, since a macro defined before a precompiled header's include would change it.
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable, Sequence
from pathlib import Path

from knossos.atomic import atomic_output, atomic_write_text

RUNTIME_BEGIN = "// ---- runtime.h ----"
RUNTIME_END = "// ---- end of runtime.h ----"
HEADER_NAME = "ks_runtime.h"
#: Seconds the header's compilation may take.
HEADER_TIMEOUT = 300.0


def split_runtime(source: str) -> tuple[str, str, str] | None:
    """``(prefix, runtime, rest)`` of a source that inlines the runtime after nothing but comments
    (``prefix + runtime + rest == source``), else None."""
    begin = source.find(RUNTIME_BEGIN + "\n")
    end = source.find(RUNTIME_END + "\n", begin + 1)
    if begin < 0 or end < 0:
        return None
    prefix = source[:begin]
    if any(line.strip() and not line.lstrip().startswith("//") for line in prefix.splitlines()):
        return None
    return prefix, source[begin:end], source[end:]


def unit_source(prefix: str, header: Path, rest: str) -> str:
    """The source with its runtime text replaced by an include of ``header`` (its first directive,
    as a precompiled header must be)."""
    return f'{prefix}#include "{header}"\n{rest}'


class _NotBuilt(Exception):
    """The header did not compile."""


def precompiled_header(
    folder: Path, runtime: str, cxx: str, flags: Sequence[str], run: Callable[[list[str]], bool]
) -> Path | None:
    """``folder/ks_runtime.h`` holding ``runtime``, with its ``.gch`` built by ``run(command)`` (true
    when the command succeeded) unless present; None when the folder cannot be written, its path
    cannot be written in an include, or the header does not compile (the source is then compiled as
    it is)."""
    if any(c in str(folder) for c in '"\\\n'):
        return None
    header = folder / HEADER_NAME
    gch = folder / (HEADER_NAME + ".gch")
    if gch.exists() and header.exists():
        return header
    try:
        folder.mkdir(parents=True, exist_ok=True)
        atomic_write_text(header, runtime)
        with atomic_output(gch) as tmp:
            # -shared is the link's: a header is compiled with the flags of the units that include it
            command = [cxx, *(f for f in flags if f != "-shared"), "-x", "c++-header", "-o", str(tmp), str(header)]
            if not run(command):
                raise _NotBuilt
    except (OSError, _NotBuilt):
        return None
    return header


def run_quietly(command: list[str]) -> bool:
    """Run a compiler command; whether it succeeded (a missing compiler or a timeout is a failure)."""
    try:
        done = subprocess.run(command, capture_output=True, timeout=HEADER_TIMEOUT, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0
