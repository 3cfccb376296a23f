"""The PyTorch front end (issue 36): translation time, and the MLP gradient of examples/torch_mlp.py.

Run:  python benchmarks/bench_torch.py [--quick] [--repeats R] [--seconds S] [--sizes ...] [--out FILE]

1. Translation time of ``twenty_ops`` below (20 PyTorch ops: linear x2, tanh, relu, log_softmax,
   sigmoid, mean, sum, exp, ...; 25 core ATen nodes after decomposition) in a fresh Python process,
   torch's import included (the issue's target: under 2 s), --repeats (3) times: the seconds to
   import torch, to translate (tracing the ATen calls, lowering) and their total.
2. examples/torch_mlp.py at --sizes (its default; --quick: 1x16x16x4 with a 20 s search): the
   translated loss and its optimised, compiled gradient against torch, and the gradient's wall time
   against PyTorch eager.
Rows (one JSON object per line, with the code revision and the machine) go to
experiments/results/torch/results.jsonl (--quick: runs/quick/torch/results.jsonl; --out to choose),
written atomically at the end.
"""

from __future__ import annotations

import argparse
import datetime
import importlib.util
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from ksbench.harness import machine, write_rows
from ksbench.results import revision

ROOT = Path(__file__).resolve().parent.parent

TWENTY = (16, 8, 4, 2)  # hidden, inputs, outputs, batch of twenty_ops's examples


def twenty_ops(w1, b1, w2, b2, x, y):  # type: ignore[no-untyped-def]
    import torch
    import torch.nn.functional as F

    h = torch.tanh(F.linear(x, w1, b1))  # linear, tanh
    h2 = torch.relu(h * 2.0 - 1.0)  # mul, sub, relu
    out = F.linear(h2, w2, b2)  # linear
    p = F.log_softmax(out, dim=-1)  # log_softmax
    q = torch.sigmoid(out).mean()  # sigmoid, mean
    r = (out - y).pow(2).sum(1).mean()  # sub, pow, sum, mean
    s = torch.exp(-h).sum() / 10.0  # neg, exp, sum, div
    return -(p * y).sum() + q + r + s  # mul, sum, neg, add, add, add


def child_translate() -> None:
    """Runs in a fresh process: time torch's import and one translation, print them as JSON."""
    start = time.perf_counter()
    import torch

    imported = time.perf_counter()
    from frontends.torch import translate

    hidden, inputs, outputs, batch = TWENTY
    g = torch.Generator().manual_seed(0)
    shapes = [(hidden, inputs), (hidden,), (outputs, hidden), (outputs,), (batch, inputs), (batch, outputs)]
    args = [torch.randn(s, generator=g, dtype=torch.float64) for s in shapes]
    t = time.perf_counter()
    program = translate(twenty_ops, *args)
    done = time.perf_counter()
    d = program.defs["twenty_ops"]
    print(
        json.dumps(
            {
                "import_torch_s": imported - start,
                "translate_s": done - t,
                "total_s": done - start,
                "nodes": d.body.size,
            }
        )
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="small sizes and a short search (a smoke test)")
    parser.add_argument("--repeats", type=int, default=3, help="fresh processes timing the translation (3)")
    parser.add_argument("--seconds", type=float, default=None, help="time limit of each search (the example's: 240)")
    parser.add_argument("--sizes", default=None, help="the example's --sizes (BATCHxINPUTSxHIDDENxOUTPUTS,...)")
    parser.add_argument("--out", default=None, help="where the rows go")
    parser.add_argument("--child-translate", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child_translate:
        child_translate()
        return
    out = Path(
        args.out or ("runs/quick/torch/results.jsonl" if args.quick else "experiments/results/torch/results.jsonl")
    )
    common = {
        "revision": revision(),
        "machine": machine(),
        "cores": len(os.sched_getaffinity(0)),
        "load_average": os.getloadavg()[0],
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
    }
    rows: list[dict[str, Any]] = []
    for k in range(args.repeats):
        done = subprocess.run(
            [sys.executable, "-W", "ignore", __file__, "--child-translate"], capture_output=True, text=True, check=True
        )
        row = {"kind": "translate_20_ops", "repeat": k, **json.loads(done.stdout.strip().splitlines()[-1]), **common}
        rows.append(row)
        print(
            f"translate 20 ops, fresh process: import torch {row['import_torch_s']:.2f} s + translate "
            f"{row['translate_s']:.2f} s = {row['total_s']:.2f} s ({row['nodes']} nodes)"
        )

    spec = importlib.util.spec_from_file_location("torch_mlp", ROOT / "examples" / "torch_mlp.py")
    assert spec is not None and spec.loader is not None
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    argv: list[str] = []
    if args.quick:
        argv += ["--sizes", "1x16x16x4", "--seconds", "20"]
    if args.sizes:
        argv += ["--sizes", args.sizes]
    if args.seconds is not None:
        argv += ["--seconds", str(args.seconds)]
    for row in example.main(argv):
        rows.append({"kind": "mlp_gradient", **row, **common})
    write_rows(out, rows)
    print(f"\nwrote {out}")


if __name__ == "__main__":
    main()
