"""Speed of the language core: parsing, checking and costing, building big expressions, comparing them.

Run:  python benchmarks/bench_ir.py [--repeat N]

Prints, for this machine:
  * time to parse + type-check + cost every shared program (target: under 2 s);
  * time to build rev$gmm_knossos_gmm_objective (gmm_test.kso) from text, cold (no node of it alive)
    and warm (an equal program alive, so every node is found in the intern table);
  * time to compare two equal large expressions built separately (target: constant, under 1 us),
    against the size of the expressions, to show it does not grow;
  * time to build one new node (an add; a let with its body) and to find an existing one, with the
    default garbage-collector thresholds and with knossos.perf.fewer_gc_pauses() as search uses.
"""

from __future__ import annotations

from ksbench.harness import announce, pin_threads

pin_threads()  # before numpy loads: one thread, as every benchmark

import argparse  # noqa: E402
import contextlib  # noqa: E402
import gc  # noqa: E402
import statistics  # noqa: E402
import time  # noqa: E402
from collections.abc import Callable  # noqa: E402

from knossos import expr as E  # noqa: E402
from knossos.ops import Op  # noqa: E402
from knossos.parser import parse_program, read_source  # noqa: E402
from knossos.perf import fewer_gc_pauses  # noqa: E402
from knossos.types import FLOAT  # noqa: E402
from ksdata.loader import DATA  # noqa: E402

PROGRAMS = sorted((DATA / "programs").glob("*.kso"))


def best_of(fn: Callable[[], object], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        gc.collect()
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def rlo_node_count(program: object, name: str) -> int:
    """Nodes in the reference's representation of the def (with its callees, params unpacked)."""
    from knossos.program import Program

    assert isinstance(program, Program)
    total = 1
    for d in program.closure(name):
        total += 4 + (5 * len(d.params) if len(d.params) > 1 else 0)
        for node in E.preorder(d.body):
            total += 1 + (node.op is Op.CALL) + (node.op is Op.CALL and len(node.args) > 1) + (node.op is Op.GET)
            total += node.op is Op.NEG  # the reference wrote (neg x) as (sub 0.0 x)
    return total


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    announce("bench_ir")
    texts = {p.name: read_source(p) for p in PROGRAMS}

    def parse_check_cost_all() -> None:
        for name, text in texts.items():
            prog = parse_program(text, name)
            for d in prog.targets:
                prog.def_cost(d.name)

    t_all = best_of(parse_check_cost_all, args.repeat)
    nodes = sum(parse_program(t, n).node_count() for n, t in texts.items())
    print(
        f"parse + check + cost, all {len(texts)} shared programs ({nodes} nodes): {t_all * 1e3:8.1f} ms   (target < 2000 ms)"
    )

    gmm_text = texts["gmm_test.kso"]
    gmm = "rev$gmm_knossos_gmm_objective"
    cold = best_of(lambda: parse_program(gmm_text, "gmm_test.kso"), args.repeat)
    keep = parse_program(gmm_text, "gmm_test.kso")
    warm = best_of(lambda: parse_program(gmm_text, "gmm_test.kso"), args.repeat)
    body = keep.defs[gmm].body
    print(
        f"build {gmm} from text (gmm_test.kso, {body.size} nodes in its body, "
        f"{rlo_node_count(keep, gmm)} in the reference's form): cold {cold * 1e3:.1f} ms, warm {warm * 1e3:.1f} ms"
    )

    print("compare two equal expressions built separately (a == b, then a is b):")
    for depth in (10, 1_000, 100_000):
        a = _chain(depth)
        b = _chain(depth)
        n = 200_000
        t0 = time.perf_counter()
        for _ in range(n):
            a == b  # noqa: B015
        eq = (time.perf_counter() - t0) / n
        t0 = time.perf_counter()
        for _ in range(n):
            a is b  # noqa: B015
        ident = (time.perf_counter() - t0) / n
        print(f"  {a.size:>7} nodes: == {eq * 1e9:6.0f} ns, is {ident * 1e9:6.0f} ns   (target < 1000 ns, constant)")

    x, y = E.var("x", FLOAT), E.var("y", FLOAT)
    for label, ctx in (("default GC thresholds", contextlib.nullcontext()), ("fewer_gc_pauses()", fewer_gc_pauses())):
        with ctx:
            add_us = _per_node(lambda c: E.op(Op.ADD, x, c))
            let_us = _per_node(lambda c: E.let(E.var("t", FLOAT), y, E.op(Op.MUL, E.var("t", FLOAT), c)), per=2)
        print(f"build a new node, {label}: add {add_us:.2f} us, let (with its new body) {let_us:.2f} us per node")
    del keep  # the program: the node below is what stays alive now
    node = E.op(Op.ADD, x, y)
    n = 200_000
    t0 = time.perf_counter()
    for _ in range(n):
        E.op(Op.ADD, x, y)
    print(f"find an existing node (add x y): {(time.perf_counter() - t0) / n * 1e6:.2f} us")
    del node


_serial = 0


def _per_node(build: Callable[[E.Expr], E.Expr], count: int = 50_000, per: int = 1) -> float:
    """Median time per new node of ``build(fresh constant)`` over five batches (microseconds)."""
    global _serial
    samples = []
    for _ in range(5):
        consts = [E.const(float(_serial + i) + 0.5) for i in range(count)]
        _serial += count
        t0 = time.perf_counter()
        built = [build(c) for c in consts]
        samples.append((time.perf_counter() - t0) / (count * per) * 1e6)
        del built
    return statistics.median(samples)


def _chain(depth: int) -> E.Expr:
    e = E.var("x", FLOAT)
    for i in range(depth):
        e = E.let(
            E.var(f"v{i % 7}", FLOAT),
            E.op(Op.MUL, e, E.const(2.0)),
            E.op(Op.ADD, E.var(f"v{i % 7}", FLOAT), E.const(1.0)),
        )
    return e


if __name__ == "__main__":
    main()
