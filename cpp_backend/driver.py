"""Running emitted C++ from Python: a generated ``main()``, a value format, and calls that compare.

The driver executable holds every def of a program (one translation unit) and a ``main()`` that
reads requests from stdin until end of input and answers each with one line on stdout:

    request:   c DEF_ID ARGS...               call the def
               t DEF_ID SECONDS ARGS...        call it repeatedly for at least SECONDS (at least once)
    answer:    ok VALUE...                     (for c)
               ok COUNT MIN_S MEDIAN_S VALUE...   (for t)
               err MESSAGE                     (a run-time error: index out of range, failed assert...)

Values are flat whitespace-separated tokens following their type (both sides know it): a Float as a
C hex float (``0x1.8p+1``, ``inf``, ``-inf``, ``nan``: exact both ways), an Integer in decimal, a Bool
as ``0``/``1``, a vector as its size then its elements, a tuple as its elements.  The arena is reset
after every request, so a call's memory is released when it returns.

:func:`run_def` is the convenient entry point; :func:`compile_program` gives a
:class:`CompiledProgram` that answers many calls from one process.
"""

from __future__ import annotations

import hashlib
import math
import os
import subprocess
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from cpp_backend.compile import KsCompileError, compile_cpp
from cpp_backend.cpp_text import cpp_type, def_symbol
from cpp_backend.emit import emit_program, selected_defs
from knossos.errors import KsError, KsEvalError, KsUsageError
from knossos.program import Def, Program
from knossos.types import BOOL, FLOAT, INTEGER, Kind, Type
from knossos.values import Value, from_python

#: Seconds a driver process may run for one batch of requests.
RUN_TIMEOUT = 600.0
#: The environment variable that gives a driver its memory budget in MiB, and the budget it gets by
#: default: a call that would allocate more fails with a one-line error instead of exhausting memory.
BUDGET_VARIABLE = "KNOSSOS_CPP_MAX_MIB"
DEFAULT_BUDGET_MIB = 4096


def serializable(t: Type) -> bool:
    """Whether values of ``t`` can cross the driver's text format (no functions inside)."""
    return Kind.LAM not in t.leaves and bool(t.leaves or t.kind is Kind.TUPLE)


def _def_serializable(d: Def) -> bool:
    return all(serializable(p.type) for p in d.params) and serializable(d.ret_type)


# -- the C++ side ------------------------------------------------------------------------------------
def _case(k: int, d: Def) -> str:
    args = [f"a{i}" for i in range(len(d.params))]
    reads = "\n".join(
        f"        const {cpp_type(p.type)} a{i} = ks::read_value<{cpp_type(p.type)}>(in);"
        for i, p in enumerate(d.params)
    )
    call = f"{def_symbol(d.name)}({', '.join(args)})"
    ret = cpp_type(d.ret_type)
    return f"""    case {k}: {{
{reads}
        if (timing) {{  // the value written is the last timed call's: no extra call
            std::vector<double> times;
            std::string value;
            const auto start = std::chrono::steady_clock::now();
            for (bool done = false; !done;) {{
                const ks::Arena::Mark mark = ks::arena().mark();
                const auto t0 = std::chrono::steady_clock::now();
                const {ret} r = {call};
                ks_driver_keep(&r);
                const auto t1 = std::chrono::steady_clock::now();
                times.push_back(std::chrono::duration<double>(t1 - t0).count());
                done = std::chrono::duration<double>(t1 - start).count() >= seconds;
                if (done) ks::write_result(value, r);
                ks::arena().reset(mark);
            }}
            std::sort(times.begin(), times.end());
            char buf[96];
            std::snprintf(buf, sizeof buf, " %zu %a %a", times.size(), times.front(), times[times.size() / 2]);
            out += buf;
            out += value;
            return;
        }}
        const {ret} r = {call};
        ks::write_result(out, r);
        return;
    }}"""


def driver_main(defs: Sequence[Def]) -> str:
    """The C++ ``main()`` answering requests for ``defs`` (numbered in order; see the module docstring)."""
    cases = "\n".join(_case(k, d) for k, d in enumerate(defs) if _def_serializable(d))
    return f"""
// ---- the test driver (cpp_backend.driver) ----
#include <iostream>
#include <iterator>

static void ks_driver_keep(const void* p) {{ asm volatile("" : : "g"(p) : "memory"); }}

static void ks_driver_call(long long id, bool timing, double seconds, ks::Reader& in, std::string& out) {{
    (void)seconds;
    (void)timing;
    switch (id) {{
{cases}
    default:
        throw ks::InputError("unknown def number");
    }}
}}

int main() {{
    std::ios::sync_with_stdio(false);
    if (const char* budget = std::getenv("{BUDGET_VARIABLE}")) {{  // MiB; see cpp_backend.driver
        char* end = nullptr;
        const unsigned long long mib = std::strtoull(budget, &end, 10);
        if (end != budget && *end == 0 && mib > 0 && mib < (1ULL << 40)) ks::arena().set_limit(std::size_t(mib) << 20);
    }}
    std::string text((std::istreambuf_iterator<char>(std::cin)), std::istreambuf_iterator<char>());
    ks::Reader in(std::move(text));
    std::string out;
    while (!in.at_end()) {{
        out.clear();
        const ks::Arena::Mark mark = ks::arena().mark();
        try {{
            const std::string mode = in.token();
            if (mode != "c" && mode != "t") throw ks::InputError("unknown request");
            const long long id = in.integer();
            const double seconds = mode == "t" ? in.real() : 0.0;
            std::string value;
            ks_driver_call(id, mode == "t", seconds, in, value);
            out = "ok" + value + "\\n";
        }} catch (const ks::InputError& e) {{
            std::printf("fatal %s\\n", ks::one_line(e.what()).c_str());
            return 2;
        }} catch (const ks::Error& e) {{
            out = "err " + ks::one_line(e.what()) + "\\n";
        }} catch (const std::bad_alloc&) {{
            out = "err out of memory\\n";
        }} catch (const std::exception& e) {{
            out = "err " + ks::one_line(e.what()) + "\\n";
        }}
        ks::arena().reset(mark);
        ks::release_scratch();
        std::fwrite(out.data(), 1, out.size(), stdout);
    }}
    return 0;
}}
"""


def driver_source(
    program: Program, defs: Iterable[str] | None = None, *, exact_order: bool = False
) -> tuple[str, list[Def]]:
    """Source of a driver executable for the defs (and what they call), and the defs in id order."""
    chosen = selected_defs(program, defs)
    return emit_program(program, [d.name for d in chosen], exact_order=exact_order) + driver_main(chosen), chosen


# -- the value format, Python side ------------------------------------------------------------------------
def encode_value(value: Value, t: Type, out: list[str]) -> None:
    """Append the tokens of ``value`` (in the interpreter's representation) of type ``t``."""
    if t is FLOAT:
        out.append(float(value).hex())
    elif t is INTEGER:
        out.append(str(int(value)))
    elif t is BOOL:
        out.append("1" if value else "0")
    elif t.kind is Kind.VEC:
        out.append(str(len(value)))
        elem = t.elem
        if elem is FLOAT:
            out.extend(float(x).hex() for x in value)
        else:
            for x in value:
                encode_value(x, elem, out)
    elif t.kind is Kind.TUPLE:
        for x, c in zip(value, t.children, strict=True):
            encode_value(x, c, out)
    else:
        raise KsUsageError(f"values of type {t} cannot be passed to C++")


def _parse_float(token: str) -> float:
    if token.lstrip("+-") in ("nan", "NAN"):
        return math.nan
    return float.fromhex(token)


def decode_value(tokens: Sequence[str], pos: int, t: Type) -> tuple[Value, int]:
    """The value of type ``t`` whose tokens start at ``pos``, and the position after it."""
    if t is FLOAT:
        return _parse_float(tokens[pos]), pos + 1
    if t is INTEGER:
        return int(tokens[pos]), pos + 1
    if t is BOOL:
        return tokens[pos] == "1", pos + 1
    if t.kind is Kind.VEC:
        n = int(tokens[pos])
        pos += 1
        if t.elem is FLOAT:
            return [_parse_float(x) for x in tokens[pos : pos + n]], pos + n
        items = []
        for _ in range(n):
            item, pos = decode_value(tokens, pos, t.elem)
            items.append(item)
        return items, pos
    if t.kind is Kind.TUPLE:
        parts = []
        for c in t.children:
            part, pos = decode_value(tokens, pos, c)
            parts.append(part)
        return tuple(parts), pos
    raise KsUsageError(f"values of type {t} cannot come back from C++")


# -- calling ------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Timing:
    """Result of a timed call: the value of the last run, how many runs, min and median seconds per run."""

    value: Value
    runs: int
    min_s: float
    median_s: float


@dataclass
class CompiledProgram:
    """A compiled driver for some defs of a program."""

    program: Program
    executable: Path
    defs: list[Def]
    ids: dict[str, int] = field(default_factory=dict)
    #: The memory a call may allocate, in MiB (beyond it, the call's answer is a KsEvalError).
    budget_mib: int = field(default_factory=lambda: check_budget_mib(None))
    #: Threads for parallel loops (``None``: the machine's cores, :func:`default_threads`).
    threads: int | None = None

    def __post_init__(self) -> None:
        self.ids = {d.name: k for k, d in enumerate(self.defs) if _def_serializable(d)}

    def _request(self, name: str, args: Sequence[object], timing: float | None) -> list[str]:
        k = self.ids.get(name)
        if k is None:
            if name in self.program.defs and name in {d.name for d in self.defs}:
                raise KsUsageError(f"'{name}' takes or returns functions, which cannot be passed to C++")
            raise KsUsageError(f"no def named '{name}' in the compiled program")
        d = self.defs[k]
        if len(args) != len(d.params):
            raise KsUsageError(f"'{d.name}' takes {len(d.params)} argument(s), not {len(args)}")
        tokens = ["c" if timing is None else "t", str(k)]
        if timing is not None:
            tokens.append(float(timing).hex())
        for p, a in zip(d.params, args, strict=True):
            encode_value(from_python(a, p.type, f"argument '{p.name}'"), p.type, tokens)
        return tokens

    def run(
        self, calls: Sequence[tuple[str, Sequence[object]]], timing: float | None = None
    ) -> list[Value | KsEvalError | Timing]:
        """Answer calls ``(def name, arguments)`` in one process: each a value (a :class:`Timing` when
        ``timing`` gives the seconds to repeat each for), or the KsEvalError the C++ code raised."""
        lines = [" ".join(self._request(name, args, timing)) for name, args in calls]
        text = "\n".join(lines) + "\n"
        try:
            proc = subprocess.run(
                [str(self.executable)],
                input=text,
                capture_output=True,
                text=True,
                timeout=RUN_TIMEOUT,
                check=False,
                env={
                    **os.environ,
                    BUDGET_VARIABLE: str(check_budget_mib(self.budget_mib)),
                    "OMP_NUM_THREADS": str(check_threads(self.threads)),
                },
            )
        except subprocess.TimeoutExpired:
            raise KsEvalError(f"the compiled program ran for more than {RUN_TIMEOUT:.0f} s") from None
        answers = proc.stdout.splitlines()
        results: list[Value | KsEvalError | Timing] = []
        for (name, _), answer in zip(calls, answers):
            results.append(self._answer(name, answer, timing is not None))
        if len(results) < len(calls) or proc.returncode != 0:
            fatal = next((a[6:] for a in answers if a.startswith("fatal ")), None)
            if fatal is not None:
                raise KsUsageError(f"the C++ driver could not read its input: {fatal}")
            what = f"exit status {proc.returncode}" if proc.returncode >= 0 else f"signal {-proc.returncode}"
            detail = " ".join(proc.stderr.split())[:200]
            raise KsEvalError(f"the compiled program failed ({what}){': ' + detail if detail else ''}")
        return results

    def _answer(self, name: str, answer: str, timed: bool) -> Value | KsEvalError | Timing:
        if answer.startswith("err "):
            # the C++ code knows no source positions: the error is located at the def's body
            d = self.defs[self.ids[name]]
            err = KsEvalError(answer[4:])
            err.node = d.body
            err.located(self.program.positions.get(d.body))
            return err
        tokens = answer.split()
        if not tokens or tokens[0] != "ok":
            raise KsEvalError(f"unexpected answer from the compiled program: {answer[:100]!r}")
        t = self.defs[self.ids[name]].ret_type
        pos = 1
        if timed:
            runs, min_s, median_s = int(tokens[1]), _parse_float(tokens[2]), _parse_float(tokens[3])
            pos = 4
        value, end = decode_value(tokens, pos, t)
        if end != len(tokens):
            raise KsEvalError("the compiled program's answer does not fit its type")
        return Timing(value, runs, min_s, median_s) if timed else value

    def call(self, name: str, args: Sequence[object]) -> Value:
        """The value of one call (a C++ run-time error is raised as KsEvalError)."""
        result = self.run([(name, args)])[0]
        if isinstance(result, KsError):
            raise result
        return result

    def time(self, name: str, args: Sequence[object], min_seconds: float = 0.2) -> Timing:
        """Call repeatedly for at least ``min_seconds``: min and median time per call, and the value."""
        result = self.run([(name, args)], timing=min_seconds)[0]
        if isinstance(result, KsError):
            raise result
        assert isinstance(result, Timing)
        return result


#: The most threads a compiled program may be asked for.
MAX_THREADS = 1024


def default_threads() -> int:
    """The threads parallel loops use by default: the cores this process may run on."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):  # pragma: no cover - not Linux
        return max(1, os.cpu_count() or 1)


#: The largest budget in MiB (the driver's main() ignores larger ones): 1 TiB.
MAX_BUDGET_MIB = (1 << 20) - 1


def check_budget_mib(mib: int | None) -> int:
    """``mib``, or for ``None`` the budget ``$KNOSSOS_CPP_MAX_MIB`` gives (default
    :data:`DEFAULT_BUDGET_MIB`); anything but a whole number of MiB from 1 to :data:`MAX_BUDGET_MIB` is
    a one-line error."""
    if mib is None:
        text = os.environ.get(BUDGET_VARIABLE, "").strip()
        if not text:
            return DEFAULT_BUDGET_MIB
        if not text.isdigit() or not 1 <= int(text) <= MAX_BUDGET_MIB:
            raise KsUsageError(
                f"{BUDGET_VARIABLE} must be a whole number of MiB from 1 to {MAX_BUDGET_MIB}, not {text!r}"
            )
        return int(text)
    if isinstance(mib, bool) or not isinstance(mib, int) or not 1 <= mib <= MAX_BUDGET_MIB:
        raise KsUsageError(f"the memory budget must be a whole number of MiB from 1 to {MAX_BUDGET_MIB}, not {mib!r}")
    return mib


def check_threads(threads: int | None) -> int:
    """``threads``, or the default for ``None``; anything but a whole number 1..1024 is a one-line error."""
    if threads is None:
        return default_threads()
    if isinstance(threads, bool) or not isinstance(threads, int) or not 1 <= threads <= MAX_THREADS:
        raise KsUsageError(f"threads must be a whole number from 1 to {MAX_THREADS}, not {threads!r}")
    return threads


_compiled: dict[tuple[str, tuple[str, ...], bool], Path] = {}


def compile_program(
    program: Program,
    defs: Iterable[str] | None = None,
    extra_flags: Sequence[str] = (),
    *,
    exact_order: bool = False,
    threads: int | None = None,
) -> CompiledProgram:
    """Compile a driver for the defs of ``program`` (all, or those named and what they call).

    ``exact_order``: Float sums add in index order, bit-identical to the interpreter (otherwise they
    may be reassociated: vectorised and split across threads); ``threads``: for parallel loops
    (``None``: the machine's cores)."""
    check_threads(threads)
    source, chosen = driver_source(program, defs, exact_order=exact_order)
    key = (hashlib.sha256(source.encode()).hexdigest(), tuple(extra_flags), exact_order)
    exe = _compiled.get(key)
    if exe is None or not exe.exists():
        exe = compile_cpp(source, extra_flags, exact_order=exact_order)
        _compiled[key] = exe
    return CompiledProgram(program, exe, chosen, threads=threads)


def run_def(
    program: Program,
    def_name: str,
    args: Sequence[object],
    extra_flags: Sequence[str] = (),
    *,
    exact_order: bool = False,
    threads: int | None = None,
) -> Value:
    """Run ``def_name`` of ``program`` compiled to C++ on ``args`` (Python values as the interpreter
    takes them); the result is in the interpreter's representation, comparable with
    :func:`knossos.values.isclose` (or, with ``exact_order``, equal to the interpreter's to the bit).
    The program is compiled once (cached)."""
    if def_name not in program.defs:
        raise KsUsageError(f"no def named '{def_name}'")
    options = {"exact_order": exact_order, "threads": threads}
    try:
        compiled = compile_program(program, None, extra_flags, **options)  # type: ignore[arg-type]
    except KsCompileError:
        raise
    except KsUsageError:  # something elsewhere in the program has no C++ form: just this def then
        compiled = compile_program(program, [def_name], extra_flags, **options)  # type: ignore[arg-type]
    return compiled.call(def_name, args)
