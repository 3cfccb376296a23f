"""Compiling generated C++ with g++, cached on a hash of the source and the flags.

``g++ -O3 -std=c++17 -ffp-contract=off -fno-gcse-after-reload -march=native -fopenmp -DKS_VECTOR_MATH
[-DKS_EXACT_ORDER] ... -lmvec`` (``-march=native``, ``-fopenmp`` and glibc's vector math left out where the compiler refuses
them) runs
through :mod:`subprocess` with an argument list, never a shell.  Results are cached under
``$KNOSSOS_CPP_CACHE`` (default ``~/.cache/knossos-cpp``) in a folder named by the SHA-256 of the
compiler, the flags and the source; the folder keeps ``source.cpp`` and ``compile.log`` too.  A source
that inlines the runtime is compiled from ``unit.cpp``, which includes it precompiled
(:mod:`cpp_backend.pch`; built once per compiler and flags in a ``runtime-*`` folder of the cache, or
of ``$KNOSSOS_CPP_RUNTIME_CACHE``).  The
compiler is ``$KNOSSOS_CXX`` or ``g++``.  A missing compiler or a failed compilation raises
:class:`KsCompileError`, one line naming the log file with the compiler's full output.
"""

from __future__ import annotations

import hashlib
import os
import platform
import shlex
import subprocess
import tempfile
import threading
from collections.abc import Sequence
from pathlib import Path

from cpp_backend.pch import precompiled_header, run_quietly, split_runtime, unit_source
from knossos.atomic import atomic_output, atomic_write_text
from knossos.errors import KsUsageError

#: -ffp-contract=off: no FMA, IEEE as the interpreter.  -fno-gcse-after-reload: that pass took about a
#: tenth of g++'s time on a layer's gradient (Llama attention 9.1 -> 8.2 s) for no run time measured.
BASE_FLAGS: tuple[str, ...] = ("-O3", "-std=c++17", "-ffp-contract=off", "-fno-gcse-after-reload")
NATIVE_FLAG = "-march=native"
#: OpenMP (it ships with gcc): parallel loops, and vectorised (reassociated) Float sums unless exact order.
OPENMP_FLAG = "-fopenmp"
#: glibc's vector math (libmvec: vector variants of libm's exp, log, tanh...): g++ vectorises the loops
#: that call them (runtime.h: KS_VECTOR_MATH; the library comes after the source, as the linker wants).
VECTOR_MATH_FLAG = "-DKS_VECTOR_MATH"
#: g++ sinks a call whose result only one side of a select uses into a branch, and threads two selects
#: on one test into one branch; a loop with a branch is not vectorised: the emitter's selects
#: (``c ? exp(x) : x``) stay selects.
SELECT_FLAGS: tuple[str, ...] = ("-fno-tree-sink", "-fno-thread-jumps")
VECTOR_MATH_LIBS: tuple[str, ...] = ("-lmvec", "-lm")
#: Exact order: Float sums add in index order, as the interpreter's (runtime.h: KS_EXACT_ORDER).
EXACT_ORDER_FLAG = "-DKS_EXACT_ORDER"
#: Shared objects export only what is marked so: without it, the runtime's inline statics (the arena)
#: are GNU unique symbols, one per process for every library loaded, whatever their runtime's version.
HIDDEN_FLAG = "-fvisibility=hidden"
#: Seconds one compilation may take.
COMPILE_TIMEOUT = 900.0


class KsCompileError(KsUsageError):
    """The C++ compiler is missing, or it rejected the source (the message names the log file)."""


class _Stats:
    """How many compilations actually ran in this process (cache hits do not count)."""

    compilations = 0


stats = _Stats()
_lock = threading.Lock()
_native_ok: dict[str, bool] = {}
_openmp_ok: dict[str, bool] = {}
_vector_math_ok: dict[str, bool] = {}


def cache_dir() -> Path:
    """Where compiled programs are kept: ``$KNOSSOS_CPP_CACHE`` or ``~/.cache/knossos-cpp``."""
    env = os.environ.get("KNOSSOS_CPP_CACHE")
    if env:
        return Path(env).expanduser()
    base = os.environ.get("XDG_CACHE_HOME")
    return (Path(base).expanduser() if base else Path.home() / ".cache") / "knossos-cpp"


def runtime_dir() -> Path:
    """Where the precompiled runtime headers are kept: ``$KNOSSOS_CPP_RUNTIME_CACHE`` or the cache
    folder (:func:`cache_dir`)."""
    env = os.environ.get("KNOSSOS_CPP_RUNTIME_CACHE")
    return Path(env).expanduser() if env else cache_dir()


def compiler() -> str:
    """The C++ compiler command: ``$KNOSSOS_CXX`` or ``g++``."""
    return os.environ.get("KNOSSOS_CXX") or "g++"


def _cpu_tag() -> str:
    """What ``-march=native`` depends on, for the cache key (binaries are not shared across CPUs)."""
    model = ""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.startswith(("model name", "flags")):
                    model += line.strip()
                    if line.startswith("flags"):
                        break
    except OSError:
        pass
    return platform.machine() + "|" + hashlib.sha256(model.encode()).hexdigest()[:16]


def native_supported(cxx: str | None = None) -> bool:
    """Whether the compiler accepts ``-march=native`` (probed once per compiler)."""
    return _accepts(cxx or compiler(), (NATIVE_FLAG,), "int main() { return 0; }\n", _native_ok)


_OPENMP_PROBE = (
    "#include <omp.h>\nint main() { int s = 0;\n#pragma omp parallel for reduction(+ : s)\n"
    "for (int i = 0; i < 4; ++i) s += i;\nreturn s == 6 && omp_get_max_threads() > 0 ? 0 : 1; }\n"
)


def openmp_supported(cxx: str | None = None) -> bool:
    """Whether the compiler builds and links ``-fopenmp`` code (probed once per compiler)."""
    return _accepts(cxx or compiler(), (OPENMP_FLAG,), _OPENMP_PROBE, _openmp_ok)


# A loop calling exp declared with its vector variants, as runtime.h does: linking fails without libmvec.
_VECTOR_MATH_PROBE = (
    '#include <cstdio>\ndouble vexp(double) noexcept __asm__("exp") __attribute__((simd("notinbranch"), const));\n'
    "int main(int argc, char**) { double x[64], s = 0;\nfor (int i = 0; i < 64; ++i) x[i] = argc * 0.01 * i;\n"
    "for (int i = 0; i < 64; ++i) x[i] = vexp(x[i]);\nfor (int i = 0; i < 64; ++i) s += x[i];\n"
    'std::printf("%g", s); return s > 64 ? 0 : 1; }\n'
)


def vector_math_supported(cxx: str | None = None) -> bool:
    """Whether the compiler builds and links loops vectorised over glibc's vector math (probed once per
    compiler, with the flags the programs get, so that the probe's loop is vectorised as theirs are)."""
    cxx = cxx or compiler()
    flags = [*BASE_FLAGS, *([NATIVE_FLAG] if native_supported(cxx) else []), *SELECT_FLAGS]
    return _accepts(cxx, flags, _VECTOR_MATH_PROBE, _vector_math_ok, libs=VECTOR_MATH_LIBS)


def _accepts(cxx: str, flags: Sequence[str], source: str, known: dict[str, bool], libs: Sequence[str] = ()) -> bool:
    """Whether ``cxx`` compiles and links ``source`` with ``flags`` and then ``libs``, remembered in
    ``known`` per compiler."""
    if cxx not in known:
        with tempfile.TemporaryDirectory(prefix="knossos-cpp-") as tmp:
            src = Path(tmp) / "probe.cpp"
            src.write_text(source, encoding="utf-8")
            try:
                proc = subprocess.run(
                    [cxx, *flags, "-o", str(Path(tmp) / "probe"), str(src), *libs],
                    capture_output=True,
                    timeout=120,
                    check=False,
                )
                known[cxx] = proc.returncode == 0
            except (OSError, subprocess.TimeoutExpired):
                known[cxx] = False
    return known[cxx]


def compile_flags(extra_flags: Sequence[str] = (), shared: bool = False, *, exact_order: bool = False) -> list[str]:
    """The flags a compilation uses (later flags win: ``extra_flags=("-O1",)`` overrides ``-O3``).

    ``-fopenmp`` where the compiler has it (without it, loops run on one thread and sums in order);
    ``-DKS_VECTOR_MATH`` where glibc's vector math links (not with ``exact_order``); with ``exact_order``,
    ``-DKS_EXACT_ORDER``: Float sums add in index order and elementary functions are libm's, bit-identical
    to the interpreter.  Libraries to link come after the source: :func:`link_libraries`."""
    flags = list(BASE_FLAGS)
    if native_supported():
        flags.append(NATIVE_FLAG)
    if openmp_supported():
        flags.append(OPENMP_FLAG)
    if exact_order:
        flags.append(EXACT_ORDER_FLAG)
    elif vector_math_supported():
        flags += [VECTOR_MATH_FLAG, *SELECT_FLAGS]
    if shared:
        flags += ["-shared", "-fPIC", HIDDEN_FLAG]
    flags += list(extra_flags)
    return flags


def link_libraries(flags: Sequence[str]) -> list[str]:
    """The libraries a compilation with ``flags`` links, placed after its source."""
    return list(VECTOR_MATH_LIBS) if VECTOR_MATH_FLAG in flags else []


def cache_key(source: str, flags: Sequence[str], cxx: str) -> str:
    h = hashlib.sha256()
    for part in (cxx, _cpu_tag(), *flags):
        h.update(part.encode("utf-8", "surrogateescape") + b"\0")
    h.update(b"\0")
    h.update(source.encode("utf-8", "surrogateescape"))
    return h.hexdigest()


def _first_error(output: str) -> str:
    for line in output.splitlines():
        if "error" in line:
            text = " ".join(line.split())
            return text if len(text) <= 200 else text[:197] + "..."
    return ""


def _unit(source: str, folder: Path, flags: Sequence[str], cxx: str) -> Path | None:
    """``folder/unit.cpp``: ``source`` including its runtime precompiled, or None where it does not
    inline the runtime or the header cannot be precompiled (then the source is compiled as it is)."""
    split = split_runtime(source)
    if split is None:
        return None
    prefix, runtime, rest = split
    header = precompiled_header(
        runtime_dir() / f"runtime-{cache_key(runtime, flags, cxx)}", runtime, cxx, flags, run_quietly
    )
    if header is None:
        return None
    unit = folder / "unit.cpp"
    atomic_write_text(unit, unit_source(prefix, header, rest))
    return unit


def compile_cpp(
    source: str, extra_flags: Sequence[str] = (), *, shared: bool = False, exact_order: bool = False
) -> Path:
    """Compile ``source`` into an executable (or, with ``shared``, a shared object); return its path.

    The result is cached: the same source and flags give the same path without compiling again.
    ``exact_order``: see :func:`compile_flags`.
    """
    cxx = compiler()
    flags = compile_flags(extra_flags, shared, exact_order=exact_order)
    key = cache_key(source, flags, cxx)
    folder = cache_dir() / key
    out = folder / ("module.so" if shared else "program")
    if out.exists():
        return out
    with _lock:
        if out.exists():
            return out
        try:
            folder.mkdir(parents=True, exist_ok=True)
        except OSError as err:
            raise KsCompileError(f"cannot create the C++ cache folder {folder}: {err.strerror}") from None
        src = folder / "source.cpp"
        log = folder / "compile.log"
        atomic_write_text(src, source)
        unit = _unit(source, folder, flags, cxx) or src
        with atomic_output(out) as tmp_out:  # the executable appears whole or not at all
            cmd = [cxx, *flags, "-o", str(tmp_out), str(unit), *link_libraries(flags)]
            command_line = " ".join(shlex.quote(c) for c in cmd)
            try:
                proc = subprocess.run(cmd, capture_output=True, text=True, timeout=COMPILE_TIMEOUT, check=False)
            except FileNotFoundError:
                atomic_write_text(log, f"{command_line}\n\nthe C++ compiler '{cxx}' was not found\n")
                raise KsCompileError(
                    f"the C++ compiler '{cxx}' was not found (install g++ or set KNOSSOS_CXX); details in {log}"
                ) from None
            except OSError as err:
                atomic_write_text(log, f"{command_line}\n\ncannot run the C++ compiler: {err}\n")
                raise KsCompileError(f"cannot run the C++ compiler '{cxx}': {err.strerror}; details in {log}") from None
            except subprocess.TimeoutExpired:
                atomic_write_text(log, f"{command_line}\n\ntimed out after {COMPILE_TIMEOUT:.0f} s\n")
                raise KsCompileError(
                    f"C++ compilation took more than {COMPILE_TIMEOUT:.0f} s; details in {log}"
                ) from None
            atomic_write_text(log, f"{command_line}\n\n{proc.stdout}{proc.stderr}")
            if proc.returncode != 0:
                first = _first_error(proc.stdout + proc.stderr)
                summary = f": {first}" if first else f" (exit status {proc.returncode})"
                raise KsCompileError(f"C++ compilation failed{summary}; the full compiler output is in {log}")
        stats.compilations += 1
        return out
