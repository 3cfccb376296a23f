"""cpp_backend.compile_def from several threads (issue 44): compiled defs of one def share a loaded
library, whose call state is per thread; a call's settings (threads, budget) are its own."""

from __future__ import annotations

import ctypes
import ctypes.util
import shutil
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import cpp_backend
from knossos.errors import KsEvalError
from knossos.parser import parse_program

pytestmark = [
    pytest.mark.usefixtures("cpp_cache"),
    pytest.mark.skipif(shutil.which("g++") is None, reason="needs a C++ compiler"),
]

SOURCE = """
(def twice (Vec Float) ((x : Vec Float)) (build (size x) (lam (i : Integer) (mul 2.0 (index i x)))))
(def sumv Float ((x : Vec Float)) (sum x))
"""

#: Threads hammering compiled defs of one def: each checks every result; a crash (the audit's
#: "double free or corruption", SIGABRT) ends the child process, not pytest.
HAMMER = textwrap.dedent(
    """
    import sys, threading
    import numpy as np
    import cpp_backend
    from knossos.parser import parse_program

    program = parse_program(sys.argv[1])
    calls = int(sys.argv[2])
    one, two = (cpp_backend.compile_def(program, name, threads=1) for name in ("twice", "twice"))
    sums = [cpp_backend.compile_def(program, "sumv", threads=1) for _ in range(2)]
    wrong = []

    def hammer(f, g, base):
        for i in range(calls):
            x = np.full(1 + (base + i) % 37, float(base + i))
            y = f(x)
            if y.shape != x.shape or not (y == 2.0 * x).all() or g(x) != x.size * float(base + i):
                wrong.append((base, i))

    jobs = [(one, sums[0], 0), (two, sums[1], 10**6)] + [(one, sums[0], k * 10**7) for k in range(1, 4)]
    threads = [threading.Thread(target=hammer, args=job) for job in jobs]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    print("wrong", len(wrong), "of", len(jobs) * calls)
    """
)


def test_compiled_defs_of_one_def_called_from_several_threads() -> None:
    program = parse_program(SOURCE)
    one, two = cpp_backend.compile_def(program, "twice"), cpp_backend.compile_def(program, "twice")
    assert one.library == two.library  # one library, loaded once: the case of the audit
    cpp_backend.compile_def(program, "sumv")  # compiled here, so that the child finds it cached
    done = subprocess.run(
        [sys.executable, "-c", HAMMER, SOURCE, "4000"], capture_output=True, text=True, timeout=300, check=False
    )
    assert done.returncode == 0, done.stderr[-2000:]  # was SIGABRT: double free or corruption
    assert "wrong 0 of 20000" in done.stdout, done.stdout  # was: other threads' results, no error


def test_one_def_compiled_twice_gives_each_its_own_settings() -> None:
    program = parse_program(SOURCE)
    small = cpp_backend.compile_def(program, "twice", budget_mib=1)
    large = cpp_backend.compile_def(program, "twice")  # the same library, the default budget
    assert small.library == large.library
    x = np.ones(1 << 18)  # 2 MiB of doubles made by the def
    for _ in range(2):  # alternating: one's budget must not stay set for the other
        with pytest.raises(KsEvalError, match="allocation of 2097152 bytes is beyond the memory budget of 1 MiB"):
            small(x)  # by the arena, not only by the result's size: what large reserved is not reused
        assert large(x).sum() == 2.0 * x.size
    assert small(np.ones(4)).tolist() == [2.0] * 4


def test_a_call_puts_back_the_threads_setting_of_its_thread() -> None:
    name = ctypes.util.find_library("gomp")
    if name is None:
        pytest.skip("no libgomp")
    gomp = ctypes.CDLL(name)
    before = gomp.omp_get_max_threads()
    f = cpp_backend.compile_def(parse_program(SOURCE), "sumv", threads=before + 3)
    assert f(np.ones(3)) == 3.0
    assert gomp.omp_get_max_threads() == before  # OpenMP's setting is the thread's, for every library


def test_a_library_exports_only_its_entry_points() -> None:
    """Without hidden visibility the runtime's inline statics (the arena) are GNU unique symbols: one
    for every library of the process, whatever version of the runtime each was compiled with."""
    nm = shutil.which("nm")
    if nm is None:
        pytest.skip("no nm")
    f = cpp_backend.compile_def(parse_program(SOURCE), "sumv")
    listed = subprocess.run([nm, "-D", "--defined-only", str(f.library)], capture_output=True, text=True, check=True)
    exported = {line.split()[-1] for line in listed.stdout.splitlines() if line.split()[1:2] != ["W"]}
    assert exported == {"ks_py_call_0", "ks_py_fetch_0"}, exported
