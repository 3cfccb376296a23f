"""From PyTorch to a compiled, optimised gradient: an MLP's loss, end to end (issue 36).

Run:  python examples/torch_mlp.py [--sizes 1x256x256x10,64x256x1024x10] [--seconds S] [--budget N]
          [--threads T] [--json FILE]

1. ``mlp_loss`` is plain PyTorch: a tanh hidden layer, a linear output, the mean squared error.
2. ``frontends.torch.translate`` traces it to core ATen at each size
   (batch x inputs x hidden x outputs) and lowers it to one Knossos def of builds and sums.
3. ``autodiff.grad_program`` adds ``rev$mlp_loss`` (reverse mode: a sum of one-hot terms).
4. The ``gradients`` model (gnn/models/gradients.pt) searches ``rev$mlp_loss`` with the rules,
   search, depth and budget it was trained with (``gradient_rules``, pseudo-beam) under the
   allocation-aware cost told the real sizes (``search.plan.choose_plan`` and ``search.plan.run``,
   as ``optimize.py --model gradients --size ...`` runs them, not tidied),
   for at most --seconds (240) seconds; so does the same search without the model (value scale 0,
   "plain"), and the cheaper of the two programs under that cost is kept.  A learned search is
   worth what it finds beyond plain search: both are printed.
5. ``cpp_backend.compile_def`` compiles the forward def and the kept gradient to C++ callables.

It prints, per size, the loss and each gradient against torch (forward, ``torch.autograd``; the
largest relative difference, target 1e-9) and the wall time of one compiled gradient call against
PyTorch eager (forward + ``torch.autograd.grad``, float64, CPU, torch's default threads; the compiled
code on all cores), min per call over three interleaved rounds of at least 0.5 s each.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from app.models import load_value_function
from autodiff import grad_program
from cpp_backend.bench import format_seconds, time_python
from cpp_backend.callable import compile_def
from frontends.torch import translate
from search.plan import choose_plan, run

NAMES = ("W1", "b1", "W2", "b2", "x", "y")


def mlp_loss(W1, b1, W2, b2, x, y):
    h = torch.tanh(F.linear(x, W1, b1))
    out = F.linear(h, W2, b2)
    return ((out - y) ** 2).mean()


def shapes(batch: int, inputs: int, hidden: int, outputs: int) -> dict[str, tuple[int, ...]]:
    return {
        "W1": (hidden, inputs),
        "b1": (hidden,),
        "W2": (outputs, hidden),
        "b2": (outputs,),
        "x": (batch, inputs),
        "y": (batch, outputs),
    }


def relative(got: Any, want: Any) -> float:
    got, want = np.asarray(got, dtype=np.float64), np.asarray(want, dtype=np.float64)
    return float(np.max(np.abs(got - want)) / max(float(np.max(np.abs(want))), 1e-300))


def run_size(
    size: tuple[int, int, int, int], seconds: float, budget: int | None, threads: int | None
) -> dict[str, Any]:
    dims = shapes(*size)
    g = torch.Generator().manual_seed(0)
    examples = [torch.randn(s, generator=g, dtype=torch.float64) for s in dims.values()]
    timings: dict[str, float] = {}

    t = time.perf_counter()
    # not checked on the interpreter (minutes at the larger sizes): the compiled loss and gradient are
    # compared with torch below, on other inputs
    program = translate(mlp_loss, *examples, check=False)
    timings["translate_s"] = time.perf_counter() - t

    t = time.perf_counter()
    program = grad_program(program, defs=["mlp_loss"], mode="rev")
    timings["grad_s"] = time.perf_counter() - t
    rev = program.defs["rev$mlp_loss"]

    searches: dict[str, dict[str, Any]] = {}
    best, kept = rev.body, "as written"
    for name, scale in (("model", None), ("plain", 0.0)):
        # the model's plan (as optimize.py --model gradients --size ... --seconds S: the model's rules,
        # search, depth and budget, the sizes told to the alloc cost model)
        model = load_value_function("gradients", scale=scale)
        plan = choose_plan(rev.body, rev.name, model, budget=budget, seconds=seconds, sizes=dims, cost="alloc")
        t = time.perf_counter()
        found = run(rev.body, plan, model)
        cost = plan.cost()
        searches[name] = {"seconds": time.perf_counter() - t, "alloc_cost": cost(found.best)}
        if cost(found.best) < cost(best):
            best, kept = found.best, name
    timings["search_s"] = sum(r["seconds"] for r in searches.values())
    optimised = program.with_def(dataclasses.replace(rev, body=best))

    t = time.perf_counter()
    forward = compile_def(program, "mlp_loss", threads=threads)
    gradient = compile_def(optimised, "rev$mlp_loss", threads=threads)
    timings["compile_s"] = time.perf_counter() - t

    # Values on fresh inputs (not the examples the function was traced with).
    g = torch.Generator().manual_seed(1)
    args = [torch.randn(s, generator=g, dtype=torch.float64, requires_grad=True) for s in dims.values()]
    arrays = [a.detach().numpy() for a in args]
    loss = mlp_loss(*args)
    grads = torch.autograd.grad(loss, args)
    errors = {"loss": relative(forward(*arrays), loss.detach().numpy())}
    for name, got, want in zip(NAMES, gradient(*arrays, 1.0), grads, strict=True):
        errors[f"d{name}"] = relative(got, want.numpy())

    def eager() -> Any:
        return torch.autograd.grad(mlp_loss(*args), args)

    compiled_s = eager_s = float("inf")
    for _ in range(3):  # interleaved rounds, so that both see the machine's load alike
        compiled_s = min(compiled_s, time_python(lambda: gradient(*arrays, 1.0), 0.5)[0])
        eager_s = min(eager_s, time_python(eager, 0.5)[0])
    return {
        "size": dict(zip(("batch", "inputs", "hidden", "outputs"), size, strict=True)),
        "errors": errors,
        "cost": {"before": rev.body.cost, "after": best.cost},
        "alloc_cost": {"before": cost(rev.body), "after": cost(best)},
        "searches": searches,
        "kept": kept,
        "compiled_grad_s": compiled_s,
        "eager_grad_s": eager_s,
        "torch_threads": torch.get_num_threads(),
        **timings,
    }


def print_rows(rows: list[dict[str, Any]]) -> None:
    for r in rows:
        s = r["size"]
        print(f"\nbatch {s['batch']}, inputs {s['inputs']}, hidden {s['hidden']}, outputs {s['outputs']}")
        print(f"  translate {r['translate_s']:.2f} s, knossos grad {r['grad_s']:.3f} s, compile {r['compile_s']:.1f} s")
        for name, found in r["searches"].items():
            print(
                f"  search with {'the gradients model' if name == 'model' else 'no model (plain)'}: "
                f"{found['seconds']:.0f} s, alloc cost {r['alloc_cost']['before']:.4g} -> {found['alloc_cost']:.4g}"
                f"{' (kept)' if r['kept'] == name else ''}"
            )
        print("  | value | max relative difference from torch |")
        print("  |---|---|")
        for name, err in r["errors"].items():
            print(f"  | {name} | {err:.1e} {'ok' if err <= 1e-9 else 'ABOVE 1e-9'} |")
        ratio = r["compiled_grad_s"] / r["eager_grad_s"]
        print(
            f"  gradient: compiled {format_seconds(r['compiled_grad_s'])}, PyTorch eager "
            f"{format_seconds(r['eager_grad_s'])} ({ratio:.2f}x eager's time)"
        )


def parse_size(text: str) -> tuple[int, int, int, int]:
    parts = text.split("x")
    if len(parts) != 4 or not all(p.isdigit() and int(p) > 0 for p in parts):
        raise argparse.ArgumentTypeError(f"'{text}': expected BATCHxINPUTSxHIDDENxOUTPUTS, e.g. 1x256x256x10")
    b, i, h, o = (int(p) for p in parts)
    return b, i, h, o


def main(argv: list[str] | None = None) -> list[dict[str, Any]]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="1x256x256x10,64x256x1024x10", help="BATCHxINPUTSxHIDDENxOUTPUTS,...")
    parser.add_argument("--seconds", type=float, default=240.0, help="time limit of each search (240)")
    parser.add_argument("--budget", type=int, default=None, help="evaluations per search (the model's: 150,000)")
    parser.add_argument("--threads", type=int, default=None, help="threads of the compiled code (all cores)")
    parser.add_argument("--json", default=None, help="also write the rows here, one JSON object per line")
    args = parser.parse_args(argv)
    sizes = [parse_size(s) for s in args.sizes.split(",")]
    rows = []
    for size in sizes:
        rows.append(run_size(size, args.seconds, args.budget, args.threads))
        print_rows(rows[-1:])
    if args.json:
        Path(args.json).write_text("".join(json.dumps(r) + "\n" for r in rows))
    return rows


if __name__ == "__main__":
    main()
