"""Loops over lazy vectors (constVec, deltaVec, a zero) test the vector's kind once, not per element:
the runtime's copies (``ks::each_elem``: copy_dense, prefix_copy) and the emitted loops, which read
through a pointer from ``ks::DenseRead`` (issue 45, the cheap-gradient principle: a sumbuild's one-hot
accumulator read element by element cost an out-of-line call per element).  The C++ agrees with the
interpreter to the bit, and a build counting the runtime's lazy reads shows none per element (but in
the element-wise helpers bcast and neg, left element by element: versioned, their instantiations cost
g++ time on every program)."""

from __future__ import annotations

import random
import subprocess

import pytest

from cpp_backend.bench import same_bits
from cpp_backend.compile import compile_cpp
from cpp_backend.cpp_text import def_symbol
from cpp_backend.driver import compile_program, run_def
from cpp_backend.emit import emit_program
from knossos.interpreter import Interpreter
from knossos.parser import parse_program

# Each def makes lazy vectors of n elements from n, an index k (in range or not) and a Float x, and
# reads them through one helper or loop.  ``z`` is a zero read lazily (ks::zero_like of a dense vector).
SOURCE = """
(def loop_reads (Vec Float) ((n : Integer) (k : Integer) (x : Float))
  (let ((v (build n (lam (i : Integer) (add x (to_float i)))))
        (c (constVec n x))
        (d (deltaVec n k x))
        (z (build (size v) (lam (i : Integer) 0.0))))
    (build n (lam (i : Integer) (add (mul (index i c) (index i v)) (sub (index i d) (index i z)))))))
(def strided_reads (Vec Float) ((n : Integer) (k : Integer) (x : Float))
  (let (d (deltaVec (mul 2 n) k x))
    (build n (lam (i : Integer) (sub (index (mul 2 i) d) (mul 3.0 (index (add (mul 2 i) 1) d)))))))
(def summed_reads Float ((n : Integer) (k : Integer) (x : Float))
  (let (d (deltaVec n k x))
    (sumbuild n (lam (i : Integer) (mul (index i d) (to_float i))))))
(def one_hot_rows (Vec (Vec Float)) ((n : Integer) (k : Integer) (x : Float))
  (let (m (build n (lam (i : Integer) (build n (lam (j : Integer) (mul x (to_float (sub i j))))))))
    (sumbuild n (lam (i : Integer) (deltaVec n i (index i m))))))
(def prefix (Vec Float) ((n : Integer) (k : Integer) (x : Float))
  (let (d (deltaVec (add n 1) k x))
    (build n (lam (i : Integer) (index i d)))))
(def helpers (Tuple (Vec Float) (Vec Float) (Vec Float) (Vec (Vec Float)))
     ((n : Integer) (k : Integer) (x : Float))
  (let ((d (deltaVec n k x))
        (w (build n (lam (i : Integer) (build 2 (lam (j : Integer) (to_float (add i j)))))))
        (zw (build (size w) (lam (i : Integer) (build (size (index i w)) (lam (j : Integer) 0.0))))))
    (tuple (mul (neg x) d) (div d 0.0) (neg d) (mul -2.0 zw))))
"""
NAMES = ["loop_reads", "strided_reads", "summed_reads", "one_hot_rows", "prefix", "helpers"]


def _cases() -> list[tuple[str, list[object]]]:
    rng = random.Random(45)
    cases = []
    for name in NAMES:
        for n in (1, 5):
            for k in (-1, 0, n - 1, n + 3):  # the hot index in range, and out of it (every element zero)
                x = rng.choice([rng.uniform(-3.0, 3.0), -0.0, 0.0])
                cases.append((name, [n, k, x]))
    return cases


@pytest.mark.parametrize(("name", "args"), _cases())
def test_lazy_reads_agree_with_the_interpreter(name: str, args: list[object]) -> None:
    """Signs of zeros included (a deltaVec of -0.0, a product of a zero by a negative number)."""
    program = parse_program(SOURCE)
    want = Interpreter().call(program.defs[name], args)
    have = run_def(program, name, args)
    assert same_bits(want, have), (name, args, want, have)


def test_the_loops_read_through_dense_pointers() -> None:
    """One loop per build (no second copy for lazy vectors), reading through ks::DenseRead's pointers."""
    text = emit_program(parse_program(SOURCE), ["loop_reads", "strided_reads"])
    text = text.split("// ---- end of runtime.h ----")[1]
    assert "ks::DenseRead<double>" in text
    assert ".plain()" not in text and ".get(" not in text


def test_no_lazy_read_per_element() -> None:
    """The runtime's lazy reads (get_lazy, counted in this build) do not grow with the vectors' size."""
    program = parse_program(SOURCE)
    counted = [n for n in NAMES if n != "helpers"]  # (the element-wise helpers read lazy vectors element by element)
    body = emit_program(program, counted)
    calls = "\n".join(
        f'    {def_symbol(name)}(n, 1, 1.5); std::printf("{name} %lld\\n", (long long)ks::lazy_reads); ks::lazy_reads = 0;'
        for name in counted
    )
    main = f"int main(int argc, char** argv) {{\n    const std::int64_t n = std::atoll(argv[1]);\n{calls}\n    return 0;\n}}\n"
    exe = compile_cpp("#define KS_COUNT_LAZY_READS\n" + body + main, ("-O1",))

    def counts(n: int) -> dict[str, int]:
        out = subprocess.run([str(exe), str(n)], capture_output=True, text=True, check=True).stdout
        return {line.split()[0]: int(line.split()[1]) for line in out.splitlines()}

    small, large = counts(8), counts(200)
    assert small == large, (small, large)
    assert all(c <= 2 for c in large.values()), large


def test_a_loops_copy_of_a_lazy_vector_lives_as_long_as_the_loop() -> None:
    """A sum over 1,000 rows of sums over a constVec of 50,000 elements: each inner loop copies it (400
    kB) and releases the copy at its end, so the call stays within a budget of 64 MiB (kept, the copies
    would take 400 MB)."""
    program = parse_program("""
(def rows Float ((m : Integer) (n : Integer) (x : Float))
  (let (c (constVec n x))
    (sumbuild m (lam (i : Integer) (sumbuild n (lam (j : Integer) (mul (index j c) (to_float i))))))))
""")
    compiled = compile_program(program, ["rows"])
    compiled.budget_mib = 64
    assert compiled.call("rows", [1000, 50000, 0.5]) == 0.5 * 50000 * 999 * 1000 / 2
