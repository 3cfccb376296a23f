"""Real layers' compiled gradients against PyTorch (issue 45, item 4).

Run:  python benchmarks/bench_layers.py [--quick] [--layers NAME ...] [--seconds S] [--no-torch-compile] [--out FILE]

Each layer of :data:`LAYERS` (public code from ``ksdata.torch_suite``, run unchanged from the installed
packages, cited by repository and path; docs/torch_suite.md) is built at its realistic shapes
(``--quick``: the suite's fast shapes, for a smoke test) as a plain function of its parameters then its
inputs, and taken from PyTorch to a compiled gradient as a user would:

1. ``frontends.torch.translate`` (not checked on the interpreter: the compiled gradient is compared
   with torch.autograd below), then ``autodiff.grad_program(mode="rev")`` adds ``rev$layer``;
2. ``optimize.py FILE --def rev$layer --seconds S`` (the default pipeline, no other flag; S = 30, the
   issue's target, ``--quick``: 1) in a fresh process: the optimisation seconds are its wall time;
3. ``cpp_backend.compile_def`` of ``rev$layer`` as written and as optimised, one thread, each in an
   empty compilation cache: the compile seconds are g++'s (and the emitter's);
4. on other inputs than the traced ones, each compiled gradient against ``torch.autograd.grad``
   (largest relative difference over the differentiated arguments: max |got - want| / max |want|);
5. times (min per call over >= 0.5 s, three interleaved rounds): the two compiled gradients, PyTorch
   eager's forward + backward and ``torch.compile``'s (after its first call, whose seconds are kept),
   all float64 on one thread (torch.set_num_threads(1), OMP/MKL/OpenBLAS at 1).

The end-to-end seconds, PyTorch function to compiled optimised gradient, are translate + grad +
optimise + compile, against torch.compile's first forward + backward call.

Rows (one JSON object per layer, with the code revision, the machine and the load) are appended to
experiments/results/layers/results.jsonl as they finish (--quick: runs/quick/layers/results.jsonl), and
a rerun skips the layers already there, so an interrupted run resumes. The tables of docs/layers.md
and the README are made from that file: ``python -m experiments.summary --write``.
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")  # before numpy and torch load: everything on one thread

import argparse  # noqa: E402
import contextlib  # noqa: E402
import datetime  # noqa: E402
import io  # noqa: E402
import json  # noqa: E402
import platform  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from collections.abc import Callable, Sequence  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

import numpy as np  # noqa: E402
import torch  # noqa: E402
from tqdm import tqdm  # noqa: E402

from autodiff import grad_program  # noqa: E402
from cpp_backend.bench import time_python  # noqa: E402
from cpp_backend.callable import compile_def  # noqa: E402
from frontends.dispatch import results  # noqa: E402
from frontends.torch import translate  # noqa: E402
from knossos.printer import format_program  # noqa: E402
from knossos.values import to_numpy  # noqa: E402
from ksbench.results import QUICK, RESULTS, ResultsFile  # noqa: E402
from ksdata.torch_suite import SUITE, available, function  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent

#: The layers measured by default: matrix products, convolutions, attention, normalisations, RNN cells
#: and losses (names of ksdata.torch_suite.SUITE).
LAYERS = (
    "LayerNorm",
    "RMSNorm",
    "GroupNorm",
    "RNNCell",
    "GRUCell",
    "LSTMCell",
    "Conv1d",
    "Conv2d",
    "Mish",
    "CrossEntropyLoss (label_smoothing)",
    "MSELoss",
    "BCEWithLogitsLoss",
    "Llama MLP (SwiGLU)",
    "GPT-2 MLP",
    "MultiheadAttention",
    "Llama attention",
)

#: optimize.py's time limit per layer (the issue's target for optimisation with no flags).
SECONDS = 30.0


def _array(t: torch.Tensor) -> Any:
    return t.detach().numpy() if t.dim() else t.item()


def _relative(have: Any, want: torch.Tensor | None, shape: tuple[int, ...]) -> float:
    have_a = np.asarray(to_numpy(have), dtype=np.float64).reshape(shape)
    want_a = np.zeros(shape) if want is None else want.detach().numpy()
    scale = max(float(np.max(np.abs(want_a))) if want_a.size else 0.0, 1e-300)
    return float(np.max(np.abs(have_a - want_a)) / scale) if want_a.size else 0.0


class Problem:
    """One layer at one size: its function, inputs on which the gradients are compared and timed (other
    than the traced ones), the arguments torch differentiates, and a cotangent for each output."""

    def __init__(self, name: str, size: str) -> None:
        self.fn, self.examples = function(SUITE[name], size)
        _, self.xs = function(SUITE[name], size, seed=1)
        wanted = [x.dtype.is_floating_point for x in self.xs]
        while True:  # leave out, from the last, arguments torch does not differentiate (a loss's target)
            self.leaves = [x.clone().requires_grad_(w) for x, w in zip(self.xs, wanted, strict=True)]
            try:
                outs = results(self.fn(*self.leaves))
                g = torch.Generator().manual_seed(7)
                self.drs = [torch.randn(o.shape, generator=g, dtype=o.dtype) for o in outs]
                self.want = torch.autograd.grad(outs, self.differentiated, self.drs, allow_unused=True)
                break
            except RuntimeError as err:
                if "is not differentiable with respect to argument" not in str(err) or not any(wanted):
                    raise
                wanted[max(k for k, w in enumerate(wanted) if w)] = False
        out = self.fn(*self.xs)
        self.dr: Any = tuple(_array(d) for d in self.drs) if isinstance(out, list | tuple) else _array(self.drs[0])
        self.arrays = [_array(x) for x in self.xs]

    @property
    def differentiated(self) -> list[torch.Tensor]:
        return [x for x in self.leaves if x.requires_grad]

    def eager(self) -> Any:
        return torch.autograd.grad(results(self.fn(*self.leaves)), self.differentiated, self.drs, allow_unused=True)

    def error(self, gradient: Callable[..., Any]) -> float:
        """The largest relative difference of ``gradient``'s results from torch.autograd's."""
        got = gradient(*self.arrays, self.dr)
        gots = list(got) if len(self.leaves) > 1 else [got]
        pairs = [(g, x) for g, x in zip(gots, self.leaves, strict=True) if x.requires_grad]
        return max(_relative(g, w, tuple(x.shape)) for (g, x), w in zip(pairs, self.want, strict=True))


def _optimise(program_text: str, seconds: float, folder: Path) -> dict[str, Any]:
    """optimize.py's default pipeline on rev$layer, in a fresh process: its report and wall seconds."""
    src, out = folder / "layer.kso", folder / "layer.opt.kso"
    src.write_text(program_text)
    command = [sys.executable, str(ROOT / "optimize.py"), str(src), "--def", "rev$layer", "-o", str(out)]
    command += ["--force", "--json", "--quiet", "--seconds", str(seconds)]
    start = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, check=False, cwd=ROOT)
    wall = time.perf_counter() - start
    if done.returncode != 0:
        raise RuntimeError(f"optimize.py failed: {(done.stderr or done.stdout).strip().splitlines()[-1:]}")
    report = json.loads(done.stdout.strip().splitlines()[-1])
    return {
        "optimise_s": wall,
        "search_s": report["seconds"],
        "cost_before": report["start_cost"],
        "cost_after": report["best_cost"],
        "file": out,
    }


def _compile(source: Path | Any, cache: Path) -> tuple[Callable[..., Any], float]:
    """``rev$layer`` compiled on one thread in an empty cache folder (so g++ runs), and the seconds."""
    cache.mkdir(parents=True, exist_ok=True)
    os.environ["KNOSSOS_CPP_CACHE"] = str(cache)
    start = time.perf_counter()
    gradient = compile_def(source, "rev$layer", threads=1)
    return gradient, time.perf_counter() - start


def run_layer(name: str, size: str, seconds: float, torch_compile: bool, folder: Path) -> dict[str, Any]:
    layer = SUITE[name]
    p = Problem(name, size)
    row: dict[str, Any] = {
        "layer": name,
        "size": size,
        "repo": layer.repo,
        "path": layer.path,
        "symbol": layer.symbol,
        "shapes": [list(x.shape) for x in p.xs],
    }
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        start = time.perf_counter()
        program = translate(p.fn, *p.examples, name="layer", check=False)
        row["translate_s"] = time.perf_counter() - start
        start = time.perf_counter()
        program = grad_program(program, defs=["layer"], mode="rev")
        row["grad_s"] = time.perf_counter() - start
    row["rev_nodes"] = program.defs["rev$layer"].body.size
    opt = _optimise(format_program(program), seconds, folder)
    row.update({k: v for k, v in opt.items() if k != "file"}, seconds_limit=seconds)
    written, row["compile_written_s"] = _compile(program, folder / "cache-written")
    optimised, row["compile_optimised_s"] = _compile(opt["file"], folder / "cache-optimised")
    row["error_written"] = p.error(written)
    row["error_optimised"] = p.error(optimised)
    row["end_to_end_s"] = row["translate_s"] + row["grad_s"] + row["optimise_s"] + row["compile_optimised_s"]

    timed: dict[str, Callable[[], Any]] = {
        "written_s": lambda: written(*p.arrays, p.dr),
        "optimised_s": lambda: optimised(*p.arrays, p.dr),
        "eager_s": p.eager,
    }
    if torch_compile:
        torch._dynamo.reset()
        compiled_fn = torch.compile(p.fn)

        def compiled() -> Any:
            outs = results(compiled_fn(*p.leaves))
            return torch.autograd.grad(outs, p.differentiated, p.drs, allow_unused=True)

        start = time.perf_counter()
        with contextlib.redirect_stderr(io.StringIO()):
            compiled()
        row["torch_compile_first_s"] = time.perf_counter() - start
        timed["torch_compile_s"] = compiled
    best = dict.fromkeys(timed, float("inf"))
    for _ in range(3):  # interleaved rounds, so that all see the machine's load alike
        for key, fn in timed.items():
            best[key] = min(best[key], time_python(fn, 0.5)[0])
    row.update(best)
    return row


def _machine() -> dict[str, Any]:
    return {
        "machine": f"{platform.machine()} {platform.processor() or ''}".strip(),
        "cores": len(os.sched_getaffinity(0)),
        "torch": torch.__version__,
        "torch_threads": torch.get_num_threads(),
    }


def _ratio(row: dict[str, Any], key: str) -> str:
    return f"{row[key] / row['eager_s']:.3g}x" if key in row else "-"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="the suite's fast shapes, 1 s of optimisation")
    parser.add_argument("--layers", nargs="+", default=None, metavar="NAME", help="only these layers")
    parser.add_argument("--seconds", type=float, default=None, help=f"optimize.py's --seconds ({SECONDS:g}; quick: 1)")
    parser.add_argument("--no-torch-compile", action="store_true", help="leave torch.compile out (CI)")
    parser.add_argument("--out", default=None, help="the results file (default: by --quick)")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    names = args.layers or list(LAYERS)
    unknown = [n for n in names if n not in SUITE]
    if unknown:
        print(f"error: no layer named {', '.join(map(repr, unknown))} (ksdata.torch_suite.SUITE)", file=sys.stderr)
        return 2
    size = "fast" if args.quick else "realistic"
    seconds = args.seconds if args.seconds is not None else (1.0 if args.quick else SECONDS)
    out = Path(args.out) if args.out else (QUICK if args.quick else RESULTS) / "layers" / "results.jsonl"
    rows = ResultsFile(out, ("layer", "size", "seconds_limit"))
    todo = []
    for name in names:
        if not available(SUITE[name]):
            print(f"{name}: skipped ({SUITE[name].package} is not installed)", file=sys.stderr)
        elif rows.has(layer=name, size=size, seconds_limit=seconds):
            print(f"{name}: already in {out}", file=sys.stderr)
        else:
            todo.append(name)
    machine = _machine()
    with tempfile.TemporaryDirectory(prefix="bench_layers") as tmp:
        for k, name in enumerate(tqdm(todo, desc="layers", unit="layer", file=sys.stderr)):
            folder = Path(tmp) / str(k)
            folder.mkdir()
            row = run_layer(name, size, seconds, not args.no_torch_compile, folder)
            row.update(machine, load_average=os.getloadavg()[0])
            row["date"] = datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")
            rows.add(row)
            tqdm.write(
                f"{name}: compiled gradient / eager {_ratio(row, 'written_s')} as written, "
                f"{_ratio(row, 'optimised_s')} optimised; torch.compile {_ratio(row, 'torch_compile_s')}; "
                f"error {max(row['error_written'], row['error_optimised']):.1e}",
                file=sys.stderr,
            )
    print(f"wrote {out}")
    bad = [r["layer"] for r in rows if max(r["error_written"], r["error_optimised"]) > 1e-8]
    if bad:
        print(f"error: gradients differ from torch.autograd by more than 1e-8: {', '.join(bad)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
