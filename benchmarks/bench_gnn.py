"""Inference speed of the GGNN value network, and where a learned A* search spends its time.

Run:  python benchmarks/bench_gnn.py [--hidden 200] [--steps 10] [--threads 2] [--seconds 2]
                                    [--precision float32 bfloat16]

Prints forward throughput (graphs per second, no_grad, eval mode, ``--threads`` torch threads,
float32 and bfloat16 inference: gnn/value.py) at
the paper's model size for batches of 16, 64 and 256 bindgen expressions, for gemm (its calls
inlined, as the reference's expression had them) and for rev$conv1d; then one A* search with the
(untrained) network at budget 5000 on a bindgen_test expression, split into time in the network
and time in search.  The reference's model, on this kind of machine: 1157 graphs/s on a batch of 64
small expressions, 100 gemm graphs/s, 36 rev$conv1d graphs/s, and 92% of its search time in the
model.  Target: 2x that throughput at equal model size.
"""

from __future__ import annotations

from ksbench.harness import announce, pin_threads

pin_threads()  # before numpy loads: one thread, as every benchmark

import argparse  # noqa: E402
import json  # noqa: E402
import time  # noqa: E402

from ksdata.loader import DATA  # noqa: E402

REFERENCE = {"bindgen x64": 1157.0, "gemm (inlined)": 100.0, "rev$conv1d": 36.0}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--hidden", type=int, default=200)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--seconds", type=float, default=2.0, help="time per measurement")
    ap.add_argument("--precision", nargs="+", choices=("float32", "bfloat16"), default=["float32", "bfloat16"])
    args = ap.parse_args()
    announce("bench_gnn")

    import torch

    from benchmarks.bench_rules import inline_all
    from gnn.graph import batch_graphs
    from gnn.model import ValueNetwork
    from gnn.model_config import ModelConfig
    from gnn.value import NetworkValue
    from knossos.parser import load_program, parse_expr
    from knossos.perf import fewer_gc_pauses
    from search.plan import Plan, run

    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    sets = json.loads((DATA / "arithmetic_sets.json").read_text())["sets"]
    small = [parse_expr(x["expr"])[0] for x in sets["bindgen_36"]["expressions"]]
    programs = DATA / "programs"
    gemm = inline_all(load_program(programs / "blas_test.kso").defs["gemm"].body)
    conv = load_program(programs / "conv1d_rev_test.kso").defs["rev$conv1d"].body
    net = ValueNetwork(ModelConfig(hidden=args.hidden, steps=args.steps, depth=10)).eval()

    cases = [
        ("bindgen x16", (small * 8)[:16]),
        ("bindgen x64", (small * 8)[:64]),
        ("bindgen x256", (small * 8)[:256]),
        ("gemm (inlined)", [gemm] * 16),
        ("rev$conv1d", [conv] * 16),
    ]
    print(f"model: {args.hidden} features, {args.steps} steps, {args.threads} threads")
    print(f"{'batch':<16} {'precision':<9} {'graphs':>6} {'nodes':>7} {'edges':>7} {'graphs/s':>9}  vs reference")
    for name, exprs in cases:
        batch = batch_graphs(exprs)
        for precision in args.precision:
            model = NetworkValue(net, precision=precision).network
            with torch.no_grad():
                model(batch)
                runs, t0 = 0, time.perf_counter()
                while time.perf_counter() - t0 < args.seconds:
                    model(batch)
                    runs += 1
                rate = len(exprs) * runs / (time.perf_counter() - t0)
            ref = REFERENCE.get(name)
            vs = f"{rate / ref:.2f}x (target 2x)" if ref else ""
            print(
                f"{name:<16} {precision:<9} {len(exprs):>6} {batch.num_nodes:>7} {batch.edge_index.shape[1]:>7} "
                f"{rate:>9.0f}  {vs}"
            )

    e = parse_expr(sets["bindgen_test"]["expressions"][0]["expr"])[0]
    for precision in args.precision:
        value = NetworkValue(net, precision=precision)
        model_time = 0.0
        inner = value.values

        def timed(exprs, depth):  # type: ignore[no-untyped-def]
            nonlocal model_time
            t = time.perf_counter()
            out = inner(exprs, depth)  # noqa: B023  (called only within this iteration)
            model_time += time.perf_counter() - t
            return out

        value.values = timed  # type: ignore[method-assign]
        with fewer_gc_pauses():
            t0 = time.perf_counter()
            r = run(e, Plan(rules="binding_rules").overridden(algorithm="astar", depth=10, budget=5000), value)
            total = time.perf_counter() - t0
        print(
            f"A* with the network ({precision}), bindgen_test[0], budget 5000: {total:.2f} s, of which the network "
            f"{model_time:.2f} s ({100 * model_time / total:.0f}%) and search {total - model_time:.2f} s; "
            f"{r.evaluations} evaluations in {value.forward_calls} forward passes (reference: 92% in the model)"
        )


if __name__ == "__main__":
    main()
