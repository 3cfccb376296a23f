"""The cheap-gradient principle, measured: each def's generated ``rev$`` (not optimised) against the def.

Run:  python benchmarks/bench_cheap_gradients.py [--quick] [--seconds T] [--only FILE[:DEF] ...]
          [--generator LABEL] [--out FILE]

A reverse-mode derivative should cost a small constant times its function (Baur-Strassen; Griewank
and Walther: about 3-5 in operations).  For every def of the shipped programs (ksdata/programs/*.kso,
benchmarks/programs/backend.ks) and of the layers of benchmarks/programs/layers.ks, ``knossos grad
--mode rev`` makes ``rev$f``; both are compiled as one C++ driver (cpp_backend, one thread) and timed
on the same inputs (min per call of calls repeated for at least --seconds, 0.2); a program's own
rev$ defs (ksc's, in conv1d_rev_*.kso and gmm_*.kso) are dropped and made anew.  Inputs: the
def's parameters from :func:`cpp_backend.bench.make_inputs` at the case's size (every vector
length 64 for the dataset's programs, but for lengths their assertions tie to it (TIED_SIZES), 256
for backend.ks, the shapes below for the layers; --quick: a quarter of each, at least 4), and ``d$r`` random of the shape of the def's result there.
Checked: ``rev$f`` compiled against the interpreter's ``rev$f`` at every length capped at 4
("verified"; the tests check the derivatives against finite differences).

Printed per def: the def's time, rev$'s, their ratio; with rows of another --generator label in the
results file (``before``: the generator before issue 45, run as ``PYTHONPATH=OLD_CHECKOUT python
benchmarks/bench_cheap_gradients.py --generator before`` where OLD_CHECKOUT holds its autodiff/),
that label's rev$ time and ratio, and the speed-up.  Then the number of defs within 5x, and the
geometric mean of the ratios.  Output: one JSON line per def in
experiments/results/cheap_gradients/bench.jsonl (--quick: runs/quick/...; --out to choose), with the
code revision, the machine and the generator label; a def measured again under the same label
replaces its row (the others stay).  Exit status 1 when a rev$ fails its check.
"""

from __future__ import annotations

from ksbench.harness import pin_threads

pin_threads()  # before numpy loads: one thread, as the C++ code runs

import argparse  # noqa: E402
import json  # noqa: E402
import math  # noqa: E402
import random  # noqa: E402
import sys  # noqa: E402
from collections.abc import Callable, Sequence  # noqa: E402
from dataclasses import dataclass  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

from autodiff import NotDifferentiable, derivative_defs, with_derivatives, without_derivatives  # noqa: E402
from cpp_backend.bench import Dims, Size, format_seconds, make_inputs, values_agree  # noqa: E402
from cpp_backend.driver import CompiledProgram, Timing, compile_program  # noqa: E402
from knossos.errors import KsError  # noqa: E402
from knossos.interpreter import Interpreter  # noqa: E402
from knossos.parser import load_program  # noqa: E402
from knossos.program import Program  # noqa: E402
from knossos.values import Value  # noqa: E402
from ksbench.harness import compiler_version, cpu_name, machine, write_rows  # noqa: E402
from ksbench.results import revision  # noqa: E402
from ksdata.loader import DATA  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "experiments" / "results" / "cheap_gradients" / "bench.jsonl"
QUICK_RESULTS = ROOT / "runs" / "quick" / "cheap_gradients" / "bench.jsonl"
LAYERS = ROOT / "benchmarks" / "programs" / "layers.ks"
#: The target: rev$ within this factor of its function.
TARGET = 5.0
CHECK_SIZE = 4
#: The layers' shapes (batch 32-64, width 64-256).
LAYER_SIZES: dict[str, dict[str, Dims]] = {
    "matmul": {"x": (32, 256), "w": (256, 256)},
    "mlp": {"x": (32, 256), "w1": (256, 256), "b1": 256, "w2": (64, 256), "b2": 64},
    "attention_scores": {"q": (64, 64), "k": (64, 64)},
    "conv1d": {"w": (16, 16, 5), "x": (16, 256)},
    "layer_norm": {"x": (32, 256), "g": 256, "bias": 256},
    "softmax_xent": {"logits": (64, 256), "labels": (64, 256)},
}


def _tri(n: int) -> int:
    return n * (n - 1) // 2


#: The dataset's defs whose assertions tie one length to another, by name (in every file that has
#: them): their shapes at vector length n.  gmm's ``l`` (one of ``ls``) holds the strict lower
#: triangle of a D x D matrix, D the length of ``q`` (of a row of ``x``): tri(D) = D(D-1)/2 numbers.
TIED_SIZES: dict[str, Callable[[int], dict[str, Dims]]] = {
    "gmm_knossos_makeQ": lambda n: {"q": n, "l": _tri(n)},
    "gmm_knossos_gmm_objective": lambda n: {"ls": (n, _tri(n))},
}


@dataclass(frozen=True)
class Case:
    """A program file and the size of its defs' inputs: ``default`` for every vector length, or named shapes."""

    path: Path
    default: int | None
    named: dict[str, dict[str, Dims]]

    def size(self, def_name: str, quick: bool) -> Size:
        named = self.named.get(def_name, {})

        def shrink(n: int) -> int:
            return max(4, n // 4) if quick else n

        tied = TIED_SIZES.get(def_name)
        if tied is not None and self.default is not None:
            n = shrink(self.default)
            return Size(tied(n), n)

        scaled: dict[str, Dims] = {
            k: tuple(shrink(x) for x in v) if isinstance(v, tuple) else shrink(v) for k, v in named.items()
        }
        return Size(scaled, None if self.default is None else shrink(self.default))

    def check_size(self, def_name: str, size: Size) -> Size:
        """``size`` capped at CHECK_SIZE, with the tied lengths of :data:`TIED_SIZES` tied again."""
        tied = TIED_SIZES.get(def_name)
        if tied is not None and self.default is not None:
            return Size(tied(CHECK_SIZE), CHECK_SIZE)
        return size.capped(CHECK_SIZE)


def cases() -> list[Case]:
    dataset = [Case(p, 64, {}) for p in sorted((DATA / "programs").glob("*.kso"))]
    return [*dataset, Case(ROOT / "benchmarks" / "programs" / "backend.ks", 256, {}), Case(LAYERS, None, LAYER_SIZES)]


# -- one file ---------------------------------------------------------------------------------------------
def like(value: Value, rng: random.Random) -> Value:
    """A random value of the shape of ``value`` (a cotangent of a result): Floats uniform in [0.5, 2]."""
    if isinstance(value, bool | int):
        return ()  # an Integer's or a Bool's cotangent
    if isinstance(value, float):
        return rng.uniform(0.5, 2.0)
    if isinstance(value, list):
        return [like(v, rng) for v in value]
    if isinstance(value, tuple):
        return tuple(like(v, rng) for v in value)
    return value


def seed_args(program: Program, name: str, size: Size, value: Value) -> list[object]:
    """The rev$ def's arguments: the def's, then a random cotangent of its result ``value``."""
    args = make_inputs(program.defs[name], size)
    return [*args, like(value, random.Random(1))]


def differentiate(program: Program, names: list[str]) -> tuple[Program, dict[str, str]]:
    """``program`` with the rev$ of each of ``names`` that has one; and why each other has none."""
    made: list[str] = []
    why: dict[str, str] = {}
    for n in names:
        try:
            derivative_defs(program, [n], "rev")
            made.append(n)
        except NotDifferentiable as err:
            why[n] = err.message
    return with_derivatives(program, derivative_defs(program, made, "rev")), why


def check(program: Program, compiled: CompiledProgram, name: str, small: Size) -> bool | str:
    """Whether the compiled rev$ agrees with the interpreter's at the small size ``small``."""
    interp = Interpreter(max_steps=5 * 10**7)
    try:
        args = make_inputs(program.defs[name], small)
        args.append(like(interp.call(program.defs[name], args), random.Random(1)))
        want = interp.call(program.defs[f"rev${name}"], args)
    except KsError as err:
        return f"not verified: the interpreter failed: {err.message}"
    have = compiled.run([(f"rev${name}", args)])[0]
    return not isinstance(have, KsError) and values_agree(want, have)


def measure_file(case: Case, args: argparse.Namespace) -> list[dict[str, Any]]:
    base = without_derivatives(load_program(case.path), orphans=True)  # the program's own rev$ (ksc's) made anew
    names = [d.name for d in base.targets if not d.name.startswith(("rev$", "fwd$"))]
    if args.only:
        names = [n for n in names if f"{case.path.name}:{n}" in args.only or case.path.name in args.only]
    if not names:
        return []
    program, why = differentiate(base, names)
    rows: list[dict[str, Any]] = []
    for n, message in why.items():
        rows.append({"file": case.path.name, "def": n, "error": message})
    names = [n for n in names if n not in why]
    compiled: dict[str, CompiledProgram | str] = {}
    try:
        whole = compile_program(program, [x for n in names for x in (n, f"rev${n}")], threads=1)
        compiled = dict.fromkeys(names, whole)
    except KsError:  # one def's C++ does not compile: the others on their own
        for n in names:
            try:
                compiled[n] = compile_program(program, [n, f"rev${n}"], threads=1)
            except KsError as err:
                compiled[n] = f"does not compile: {err.message}"
    for n in names:
        c = compiled[n]
        row: dict[str, Any] = {"file": case.path.name, "def": n}
        if isinstance(c, str):
            rows.append({**row, "error": c})
            continue
        size = case.size(n, args.quick)
        row["size"] = size.label()
        try:
            f_args = make_inputs(program.defs[n], size)
            f_time = c.run([(n, f_args)], timing=args.seconds)[0]
            if isinstance(f_time, KsError):
                raise f_time
            assert isinstance(f_time, Timing)
            rev_args = [*f_args, like(f_time.value, random.Random(1))]
            rev_time = c.run([(f"rev${n}", rev_args)], timing=args.seconds)[0]
            if isinstance(rev_time, KsError):
                raise rev_time
            assert isinstance(rev_time, Timing)
        except KsError as err:
            rows.append({**row, "error": f"failed at {size.text() or 'its size'}: {err.message}"})
            continue
        ok = check(program, c, n, case.check_size(n, size))
        row.update(
            f_s=f_time.min_s,
            rev_s=rev_time.min_s,
            ratio=rev_time.min_s / f_time.min_s if f_time.min_s > 0 else math.inf,
            verified=ok if isinstance(ok, bool) else None,
        )
        if isinstance(ok, str):
            row["note"] = ok
        rows.append(row)
    return rows


# -- the table ------------------------------------------------------------------------------------------
def load_rows(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def table(rows: list[dict[str, Any]], label: str, others: list[dict[str, Any]]) -> str:
    before = {(r["file"], r["def"]): r for r in others if "rev_s" in r}
    lines = [
        f"{'def':<48} {'f':>10} {'rev$':>10} {'ratio':>8}   {'other label: rev$':>18} {'ratio':>8} {'speed-up':>9}"
    ]
    ratios = []
    for r in rows:
        key = f"{r['file']}:{r['def']}"
        if "error" in r:
            lines.append(f"{key:<48} {r['error']}")
            continue
        ratios.append(r["ratio"])
        flag = "" if r.get("verified") else ("  NOT VERIFIED" if r.get("verified") is False else "  (unchecked)")
        line = f"{key:<48} {format_seconds(r['f_s']):>10} {format_seconds(r['rev_s']):>10} {r['ratio']:>8.2f}"
        old = before.get((r["file"], r["def"]))
        if old is not None:
            line += f"   {format_seconds(old['rev_s']):>18} {old['ratio']:>8.1f} {old['rev_s'] / r['rev_s']:>8.1f}x"
        lines.append(line + flag)
    if ratios:
        within = sum(x <= TARGET for x in ratios)
        geo = math.exp(sum(math.log(x) for x in ratios) / len(ratios))
        lines.append(
            f"[{label}] {within} of {len(ratios)} rev$ within {TARGET:g}x of their def; "
            f"geometric mean ratio {geo:.2f}, worst {max(ratios):.1f}"
        )
    return "\n".join(lines)


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], allow_abbrev=False)
    p.add_argument("--quick", action="store_true", help="a quarter of every size; results under runs/quick")
    p.add_argument("--seconds", type=float, default=0.2, help="seconds each timing repeats its call for")
    p.add_argument("--only", nargs="*", default=[], metavar="FILE:DEF", help="only these defs (FILE: every def of it)")
    p.add_argument("--generator", default="current", help="the label of these rows (before: the old generator)")
    p.add_argument("--out", type=Path, help="the results file")
    return p.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    out: Path = args.out or (QUICK_RESULTS if args.quick else RESULTS)
    previous = load_rows(out)
    provenance = {
        "generator": args.generator,
        "revision": revision(),
        "cpu": cpu_name(),
        "machine": machine(),
        "compiler": compiler_version(),
        "quick": args.quick,
    }
    out.parent.mkdir(parents=True, exist_ok=True)
    rows: list[dict[str, Any]] = []
    for case in cases():
        print(f"{case.path.name} ...", file=sys.stderr, flush=True)
        rows += [{**r, **provenance} for r in measure_file(case, args)]
        measured = {(r["file"], r["def"]) for r in rows}
        kept = [r for r in previous if r.get("generator") != args.generator or (r["file"], r["def"]) not in measured]
        write_rows(out, [*kept, *rows])
    others = [r for r in previous if r.get("generator") == "before"] if args.generator != "before" else []
    print(table(rows, args.generator, others))
    print(f"rows: {out}")
    return 1 if any(r.get("verified") is False for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
