"""Speed of the rules: enumerating actions and generating children.

Run:  python benchmarks/bench_rules.py [--repeat N]

For gemm (blas_test.kso), rev$conv1d (conv1d_rev_test.kso) and rev$gmm_knossos_gmm_objective
(gmm_test.kso), with ml_rules_no_bind and ml_rules, prints the number of actions, the time to
enumerate them all, and the time per generated child (apply + cost + hash of the result), with the
ratio to the reference implementation's figures measured on this kind of machine.  The
``children()`` column is what search pays per child: rules.actions.children enumerates and
generates every child in one walk (enumeration included, divided by the number of children).

The reference optimised a def together with the defs it calls (as let-bound lambdas), so its
expressions, and its action counts, include the callees' bodies.  Each def is therefore measured
twice: as written (calls to its callees), and with every call inlined, which is closer in size to
the reference's expression.  Search runs under knossos.perf.fewer_gc_pauses(), and so does this.
"""

from __future__ import annotations

from ksbench.harness import announce, pin_threads

pin_threads()  # before numpy loads: one thread, as every benchmark

import argparse  # noqa: E402
import statistics  # noqa: E402
import time  # noqa: E402

from knossos import expr as E  # noqa: E402
from knossos.callee import CalleeKind  # noqa: E402
from knossos.expr import Expr, preorder  # noqa: E402
from knossos.ops import Op  # noqa: E402
from knossos.parser import load_program  # noqa: E402
from knossos.perf import fewer_gc_pauses  # noqa: E402
from ksdata.loader import DATA  # noqa: E402
from rules.actions import actions, apply, children  # noqa: E402
from rules.calls import inline  # noqa: E402
from rules.sets import get_rule_set  # noqa: E402

PROGRAMS = DATA / "programs"
CASES = [
    ("blas_test.kso", "gemm"),
    ("conv1d_rev_test.kso", "rev$conv1d"),
    ("gmm_test.kso", "rev$gmm_knossos_gmm_objective"),
]
# The reference's figures on this kind of machine, with ml_rules_no_bind:
# (actions, ms to enumerate, ms per child), None where not given.
REFERENCE: dict[str, tuple[int | None, float | None, float]] = {
    "gemm": (32, 0.7, 0.47),
    "rev$conv1d": (125, None, 0.73),
    "rev$gmm_knossos_gmm_objective": (541, 9.8, 3.7),
}


def inline_all(e: Expr) -> Expr:
    """``e`` with every call of a def replaced by its body (repeatedly, innermost callees too)."""
    while True:
        call = next((n for n in preorder(e) if n.op is Op.CALL and n.data.kind is CalleeKind.DEF), None)
        if call is None:
            return e
        number = next(i for i, n in enumerate(preorder(e)) if n is call)
        from knossos.expr import replace_at

        e = replace_at(e, number, inline(call.data.definition, call.args))


def measure(e: Expr, rule_set_name: str, repeat: int) -> tuple[int, float, float, float]:
    rule_set = get_rule_set(rule_set_name)
    enum_times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        acts = actions(e, rule_set)
        enum_times.append(time.perf_counter() - t0)
    child_times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        for a in acts:
            child = apply(e, a)
            child.cost  # noqa: B018  (cached at construction; read to make the point)
            hash(child)
        child_times.append((time.perf_counter() - t0) / max(len(acts), 1))
    fused_times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        found = children(e, rule_set)
        fused_times.append((time.perf_counter() - t0) / max(len(found), 1))
        del found
    return len(acts), min(enum_times), statistics.median(child_times), statistics.median(fused_times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    announce("bench_rules")
    loop = "C (knossos/_climb.c)" if E.compiled_rebuild() else "Python (_climb_python)"
    print(f"ancestors rebuilt by the {loop} loop; KNOSSOS_PURE_PYTHON=1 selects the Python one")
    print(
        f"{'def':<31} {'form':<9} {'rules':<17} {'nodes':>6} {'actions':>7} {'enumerate':>10} {'per child':>10}"
        f" {'children()':>10}  vs reference (per child)"
    )
    with fewer_gc_pauses():
        for file, name in CASES:
            body = load_program(PROGRAMS / file).defs[name].body
            for form, e in (("as def", body), ("inlined", inline_all(body))):
                for rules_name in ("ml_rules_no_bind", "ml_rules"):
                    n, t_enum, t_child, t_fused = measure(e, rules_name, args.repeat)
                    ref = REFERENCE[name]
                    ratio = f"{ref[2] / (t_child * 1e3):6.1f}x faster" if rules_name == "ml_rules_no_bind" else ""
                    print(
                        f"{name:<31} {form:<9} {rules_name:<17} {e.size:>6} {n:>7} {t_enum * 1e3:>8.2f}ms {t_child * 1e6:>8.1f}us"
                        f" {t_fused * 1e6:>8.1f}us  {ratio}"
                    )
    print(
        "reference (ml_rules_no_bind): gemm 32 actions, 0.7 ms to enumerate, 0.47 ms per child; rev$conv1d 125 actions,"
    )
    print(
        "0.73 ms per child; rev$gmm_knossos_gmm_objective 541 actions, 9.8 ms to enumerate, 3.7 ms per child. Target >= 10x."
    )


if __name__ == "__main__":
    main()
