"""The torch front end on public layers and losses (issue 46): ``python benchmarks/bench_torch_suite.py``.

For each layer of :data:`ksdata.torch_suite.SUITE` whose package is installed, at the fast shapes:
translate it (``frontends.torch.translate``, checked on fresh inputs against torch), time that, count
the ATen ops traced, and compare the reverse derivative (``rev$``, :func:`autodiff.grad_program`,
run by the interpreter) with ``torch.autograd`` on other inputs.  With ``--realistic``, translate
at the realistic shapes too, checked compiled (``app.torch_import.compiled``: g++, a few seconds a
layer).  Writes ``experiments/results/torch_suite/results.jsonl`` and, from it, the table of
``docs/torch_suite.md`` (``--doc`` only rewrites the table from the results file).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

from app.torch_import import compiled
from autodiff import grad_program
from frontends.check import disagreement, fresh_inputs
from frontends.dispatch import results, trace
from frontends.torch import translate
from knossos.errors import KsError
from knossos.interpreter import call_def
from knossos.values import to_numpy
from ksbench.results import revision
from ksdata.torch_suite import SUITE, Layer, available, function

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "experiments" / "results" / "torch_suite" / "results.jsonl"
DOC = ROOT / "docs" / "torch_suite.md"
START, END = "<!-- table:torch_suite -->", "<!-- /table -->"


def _ops(fn: Any, args: tuple[torch.Tensor, ...]) -> int | None:
    """The core ATen ops the function calls (None where it cannot be traced)."""
    try:
        graph, _, _ = trace(fn, args, keep=lambda key: False)
    except KsError:
        return None
    return sum(1 for n in graph.nodes if n.op == "call_function")


def _arg(t: torch.Tensor) -> Any:
    return t.numpy() if t.dim() else t.item()


def gradient_problem(program: Any, name: str, fn: Any, args: tuple[torch.Tensor, ...]) -> str:
    """How ``rev$name`` differs from torch.autograd on fresh inputs (relative 1e-6), or ``""``.
    Arguments torch does not differentiate (a loss's target, for some losses) are left out, from
    the last."""
    rev = grad_program(program, defs=[name], mode="rev").defs[f"rev${name}"]
    xs = fresh_inputs(args, seed=1)
    wanted = [x.dtype.is_floating_point for x in xs]
    while True:
        leaves = [x.clone().requires_grad_() if w else x.clone() for x, w in zip(xs, wanted, strict=True)]
        try:
            out = fn(*leaves)
            outs = results(out)
            g = torch.Generator().manual_seed(7)
            drs = [torch.randn(o.shape, generator=g, dtype=o.dtype) for o in outs]
            wants = torch.autograd.grad(outs, [x for x in leaves if x.requires_grad], drs, allow_unused=True)
            break
        except RuntimeError as err:
            if "is not differentiable with respect to argument" not in str(err) or not any(wanted):
                raise
            wanted[max(k for k, w in enumerate(wanted) if w)] = False
    dr: Any = tuple(_arg(d) for d in drs) if isinstance(out, list | tuple) else _arg(drs[0])
    got = call_def(rev, *(_arg(x.detach()) for x in leaves), dr)
    gots = list(got) if len(leaves) > 1 else [got]
    gots = [gx for gx, x in zip(gots, leaves, strict=True) if x.requires_grad]
    for k, (gx, w) in enumerate(zip(gots, wants, strict=True)):
        have = np.asarray(to_numpy(gx), dtype=np.float64)
        want = np.zeros(have.shape) if w is None else w.numpy()
        problem = disagreement(have, want, 1e-6)
        if problem:
            return f"argument {k + 1}: {problem}"
    return ""


def run_layer(layer: Layer, realistic: bool) -> dict[str, Any]:
    row: dict[str, Any] = {
        "name": layer.name,
        "repo": layer.repo,
        "path": layer.path,
        "symbol": layer.symbol,
        "license": layer.license,
    }
    fn, args = function(layer, "fast")
    with contextlib.redirect_stdout(io.StringIO()):
        row["aten_ops"] = _ops(fn, args)
        start = time.perf_counter()
        try:
            program = translate(fn, *args, name="layer")
        except KsError as err:
            row.update(status="refused", message=_relative(err.render()), translate_s=time.perf_counter() - start)
            return row
        row.update(status="translates", translate_s=time.perf_counter() - start, nodes=program.node_count())
        start = time.perf_counter()
        translate(fn, *args, name="layer", check=False)
        row["translate_unchecked_s"] = time.perf_counter() - start
        try:
            problem = gradient_problem(program, "layer", fn, args)
            row["gradient"] = f"differs: {problem}" if problem else "agrees"
        except KsError as err:
            row["gradient"] = f"fails: {_relative(err.render())}"
        except Exception as err:  # torch itself, on the fresh inputs
            row["gradient"] = f"fails: {type(err).__name__}: {str(err).splitlines()[0][:200]}"
        if realistic:
            rfn, rargs = function(layer, "realistic")
            start = time.perf_counter()
            try:
                with contextlib.redirect_stderr(io.StringIO()):
                    translate(rfn, *rargs, name="layer", compiler=compiled)
                row["realistic"] = "checked"
            except KsError as err:
                row["realistic"] = f"refused: {_relative(err.render())}"
            row["realistic_s"] = time.perf_counter() - start
    return row


def _relative(text: str) -> str:
    """Paths in a message relative to the checkout (and to site-packages for installed code)."""
    text = text.replace(str(ROOT) + "/", "")
    for folder in sys.path:
        if folder.endswith("site-packages"):
            text = text.replace(folder + "/", "")
    return text


def two_decoder_layers() -> Layer:
    """Two Llama decoder layers, one after the other: a function of about 250 core ATen ops."""
    one = SUITE["Llama decoder layer"]

    def build(size: str, g: torch.Generator) -> Any:
        first, inputs = one.build(size, g)
        second, _ = one.build(size, g)
        return torch.nn.Sequential(first, second), inputs

    return Layer("two Llama decoder layers", one.repo, one.path, one.symbol, one.license, build, one.package)


def time_translation(repeats: int = 3) -> None:
    """Print the time to translate :func:`two_decoder_layers` (torch imported already), checked and not."""
    layer = two_decoder_layers()
    fn, args = function(layer, "fast")
    print(f"{layer.name}: {_ops(fn, args)} core ATen ops", flush=True)
    for _ in range(repeats):
        with contextlib.redirect_stdout(io.StringIO()):
            start = time.perf_counter()
            program = translate(fn, *args, name="layers", check=False)
            unchecked = time.perf_counter() - start
            start = time.perf_counter()
            translate(fn, *args, name="layers")
            checked = time.perf_counter() - start
        print(f"  translated in {unchecked:.2f} s ({checked:.2f} s with the check), {program.node_count()} nodes")


def write_doc(rows: list[dict[str, Any]]) -> None:
    """The table of docs/torch_suite.md, between its markers, from ``rows``."""
    done = [r for r in rows if r["status"] == "translates"]
    lines = [
        f"{len(done)} of {len(rows)} translate unchanged and agree with torch on fresh inputs; "
        f"{sum(1 for r in done if r.get('gradient') == 'agrees')} gradients agree with torch.autograd "
        f"(revision {str(rows[0].get('revision', '?'))[:7]}, {rows[0].get('date', '?')}).",
        "",
        "| layer | code (repository: path) | ATen ops | translation | time (checked / unchecked) | gradient | realistic shapes |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        where = f"{r['repo']}: `{r['path']}` `{r['symbol']}`"
        if r["status"] == "translates":
            what = f"{r['nodes']} nodes"
            t = f"{r['translate_s']:.2f} s / {r['translate_unchecked_s']:.2f} s"
            grad = r.get("gradient", "")
            real = r.get("realistic", "not run")
            if "realistic_s" in r:
                real += f" ({r['realistic_s']:.1f} s)"
        else:
            what = "refused: `" + r["message"].replace("`", "'") + "`"
            t, grad, real = f"{r['translate_s']:.2f} s", "", ""
        ops = "-" if r["aten_ops"] is None else str(r["aten_ops"])
        cells = [r["name"], where, ops, what, t, grad, real]
        lines.append("| " + " | ".join(cell.replace("|", "\\|") for cell in cells) + " |")
    text = DOC.read_text()
    head, rest = text.split(START, 1)
    _, tail = rest.split(END, 1)
    DOC.write_text(head + START + "\n" + "\n".join(lines) + "\n" + END + tail)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--realistic", action="store_true", help="translate at the realistic shapes too, checked compiled")
    p.add_argument("--doc", action="store_true", help="only rewrite docs/torch_suite.md's table from the results")
    p.add_argument("--only", nargs="*", default=None, help="these layers only (the results file is not written)")
    p.add_argument("--time", action="store_true", help="only time the translation of two Llama decoder layers")
    args = p.parse_args(argv)
    if args.time:
        time_translation()
        return 0
    if args.doc:
        write_doc([json.loads(line) for line in RESULTS.read_text().splitlines() if line.strip()])
        return 0
    rows = []
    stamp = {"revision": revision(), "date": time.strftime("%Y-%m-%d")}
    for name, layer in SUITE.items():
        if args.only is not None and name not in args.only:
            continue
        if not available(layer):
            print(f"{name}: skipped ({layer.package} is not installed)", file=sys.stderr)
            continue
        row = {**run_layer(layer, args.realistic), **stamp}
        rows.append(row)
        print(json.dumps(row), flush=True)
    if args.only is None:
        RESULTS.parent.mkdir(parents=True, exist_ok=True)
        RESULTS.write_text("".join(json.dumps(r) + "\n" for r in rows))
        write_doc(rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
