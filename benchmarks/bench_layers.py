"""Real layers' compiled gradients against PyTorch (issue 45, item 4).

Run:  python benchmarks/bench_layers.py [--quick] [--layers NAME ...] [--seconds S] [--no-torch-compile]
      [--step-limit S] [--compile-limit S] [--call-limit S] [--slow-call S] [--redo-failed] [--out FILE]

Each layer of :data:`LAYERS` (public code from ``ksdata.torch_suite``, run unchanged from the installed
packages, cited by repository and path; docs/torch_suite.md) is built at its realistic shapes
(``--quick``: the suite's fast shapes, for a smoke test) as a plain function of its parameters then its
inputs, and taken from PyTorch to a compiled gradient as a user would:

1. ``frontends.torch.translate`` (not checked on the interpreter: the compiled gradient is compared
   with torch.autograd below), then ``autodiff.grad_program(mode="rev")`` adds ``rev$layer``;
2. ``optimize.py FILE --def rev$layer`` with no other flag (the default pipeline and its own time
   limit, as the issue's target asks; ``--seconds S`` passes S on, ``--quick``: 1) in a fresh process:
   the optimisation seconds are its wall time;
3. ``cpp_backend.compile_def`` of ``rev$layer`` as written and as optimised, one thread, each in an
   empty compilation cache: the compile seconds are g++'s (and the emitter's); the runtime header is
   precompiled once for the run first (``runtime_precompile_s``, a tiny def's compilation), as a
   user's first compilation does, and every layer's compilation includes it;
4. on other inputs than the traced ones, one call of each compiled gradient, against
   ``torch.autograd.grad`` (largest relative difference over the differentiated arguments:
   max |got - want| / max |want|);
5. times (min per call over >= 0.5 s, three interleaved rounds): the two compiled gradients, PyTorch
   eager's forward + backward and ``torch.compile``'s (after its first call, whose seconds are kept),
   all float64 on one thread (torch.set_num_threads(1), OMP/MKL/OpenBLAS at 1).  A compiled gradient
   whose call of step 4 took over ``--slow-call`` seconds (1) is timed by that call alone (``calls``
   in the row says how many calls each time is the min of).

Every step has a wall-clock cap (:class:`Caps`), so that the run ends whatever the code measured
does: translate + grad, g++ and the one call of step 4 run in a forked process group killed at its
cap (ksbench.capped), optimize.py at ``--seconds`` + ``--step-limit``.  A layer whose step fails or
runs past its cap still gets its row, with ``status`` ``<step>_timed_out`` or ``<step>_failed``, the
``reason``, and what was measured before; the generated table shows it.  torch.compile failing on a
layer leaves its columns out (``torch_compile_error``).

The end-to-end seconds, PyTorch function to compiled optimised gradient, are translate + grad +
optimise + compile, against torch.compile's first forward + backward call.

Rows (one JSON object per layer, with the code revision, the caps, the machine, the load and the
layer's wall seconds) are appended to experiments/results/layers/results.jsonl as they finish
(--quick: runs/quick/layers/results.jsonl), and a rerun skips the layers already there, failed ones
too unless ``--redo-failed``, so an interrupted run resumes.  The tables of docs/layers.md and the
README are made from that file: ``python -m experiments.summary --write``.
"""

from __future__ import annotations

from ksbench.harness import pin_threads

pin_threads()  # before numpy and torch load: everything on one thread

import argparse  # noqa: E402
import contextlib  # noqa: E402
import datetime  # noqa: E402
import functools  # noqa: E402
import io  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import platform  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from collections.abc import Callable, Iterator, Sequence  # noqa: E402
from dataclasses import asdict, dataclass  # noqa: E402
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
from knossos.parser import parse_program  # noqa: E402
from knossos.printer import format_program  # noqa: E402
from knossos.values import to_numpy  # noqa: E402
from ksbench.capped import Progress, StepFailed, call_capped, error_line  # noqa: E402
from ksbench.results import QUICK, RESULTS, ResultsFile  # noqa: E402
from ksdata.torch_suite import SUITE, available, function  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent

#: The layers measured by default: matrix products, convolutions, attention, normalisations, RNN cells
#: and losses (names of ksdata.torch_suite.SUITE).
LAYERS = (
    "Linear",
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

#: optimize.py's process is killed this long past its default pipeline's own time limit (none given).
DEFAULT_LIMIT = 30.0
#: Interleaved timing rounds.
ROUNDS = 3


@dataclass(frozen=True)
class Caps:
    """The most wall-clock seconds each step of a layer may take: a step past its cap ends the layer's
    measurements, and its row says which step and why (``compile_optimised_timed_out``)."""

    #: optimize.py's --seconds, None: no flag, its default pipeline's own limit (its process is killed
    #: at ``seconds + step``, or DEFAULT_LIMIT + step).
    seconds: float | None = None
    #: translate + grad, and optimize.py's start-up and writing beyond its --seconds.
    step: float = 300.0
    #: g++ (and the emitter) on one gradient.
    compile: float = 300.0
    #: one call of a compiled gradient (the call whose result is compared with torch.autograd).
    call: float = 300.0
    #: a gradient whose first call took longer is timed by that call alone, not called again.
    slow_call: float = 1.0

    def as_row(self) -> dict[str, float]:
        return {k: v for k, v in asdict(self).items() if k != "seconds"}


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

    def error_of(self, got: Any) -> float:
        """The largest relative difference of a gradient's results ``got`` from torch.autograd's."""
        gots = list(got) if len(self.leaves) > 1 else [got]
        pairs = [(g, x) for g, x in zip(gots, self.leaves, strict=True) if x.requires_grad]
        return max(_relative(g, w, tuple(x.shape)) for (g, x), w in zip(pairs, self.want, strict=True))


def _optimise(program: Path, seconds: float | None, limit: float) -> dict[str, Any]:
    """optimize.py's default pipeline on rev$layer, in a fresh process killed after ``limit`` seconds:
    its report and wall seconds."""
    out = program.with_suffix(".opt.kso")
    command = [sys.executable, str(ROOT / "optimize.py"), str(program), "--def", "rev$layer", "-o", str(out)]
    command += ["--force", "--json", "--quiet"]
    if seconds is not None:
        command += ["--seconds", str(seconds)]
    start = time.perf_counter()
    try:
        done = subprocess.run(command, capture_output=True, text=True, check=False, cwd=ROOT, timeout=limit)
    except subprocess.TimeoutExpired:
        raise StepFailed("optimise", True, f"ran past its cap of {limit:g} s") from None
    wall = time.perf_counter() - start
    if done.returncode != 0:
        last = (done.stderr or done.stdout).strip().splitlines()[-1:] or [f"exit status {done.returncode}"]
        raise StepFailed("optimise", False, f"optimize.py: {last[0]}")
    report = json.loads(done.stdout.strip().splitlines()[-1])
    return {
        "optimise_s": wall,
        "search_s": report["seconds"],
        "cost_before": report["start_cost"],
        "cost_after": report["best_cost"],
        "file": out,
    }


def _front(p: Problem, program: Path) -> Callable[[Progress], dict[str, Any]]:
    """Translate then differentiate (in the capped process): write ``rev$layer``'s program to ``program``."""

    def run(progress: Progress) -> dict[str, Any]:
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            progress("translate")
            start = time.perf_counter()
            translated = translate(p.fn, *p.examples, name="layer", check=False)
            progress("grad", translate_s=time.perf_counter() - start)
            start = time.perf_counter()
            differentiated = grad_program(translated, defs=["layer"], mode="rev")
            grad_s = time.perf_counter() - start
        program.write_text(format_program(differentiated))
        return {"grad_s": grad_s, "rev_nodes": differentiated.defs["rev$layer"].body.size}

    return run


def _compiled(program: Path, cache: Path, limit: float, step: str) -> tuple[Callable[..., Any], float]:
    """``rev$layer`` of ``program`` compiled on one thread in an empty cache folder (so g++ runs), in a
    capped process, and its seconds; then loaded here from that cache."""
    cache.mkdir(parents=True, exist_ok=True)
    os.environ["KNOSSOS_CPP_CACHE"] = str(cache)

    def run(progress: Progress) -> float:
        start = time.perf_counter()
        compile_def(program, "rev$layer", threads=1)
        return time.perf_counter() - start

    seconds, _ = call_capped(run, limit, step)
    return compile_def(program, "rev$layer", threads=1), seconds


@contextlib.contextmanager
def _cache_settings_restored() -> Iterator[None]:
    """The compilation cache's settings as they were, after the run points them at its folders."""
    saved = {k: os.environ.get(k) for k in ("KNOSSOS_CPP_CACHE", "KNOSSOS_CPP_RUNTIME_CACHE")}
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def _precompile_runtime(tmp: Path) -> float:
    """Precompile the runtime header once for the run (cpp_backend.pch), as a user's first
    compilation does, into a folder every layer's empty cache then shares: the layers' compile
    seconds are then g++'s on their own code.  Its seconds (a tiny def's whole compilation)."""
    os.environ["KNOSSOS_CPP_RUNTIME_CACHE"] = str(tmp / "runtime")
    os.environ["KNOSSOS_CPP_CACHE"] = str(tmp / "warm-up")
    start = time.perf_counter()
    compile_def(parse_program("(def square Float ((x : Float)) (mul x x))"), "square", threads=1)
    seconds = time.perf_counter() - start
    print(f"runtime header precompiled for this run in {seconds:.1f} s", file=sys.stderr)
    return seconds


def _first_call(gradient: Callable[..., Any], p: Problem, limit: float, step: str) -> tuple[Any, float]:
    """One call of a compiled gradient on the problem's inputs, in a capped process: its result
    (compared with torch.autograd's) and seconds (the time of a gradient too slow to call again)."""

    def run(progress: Progress) -> tuple[Any, float]:
        start = time.perf_counter()
        got = gradient(*p.arrays, p.dr)
        return got, time.perf_counter() - start

    return call_capped(run, limit, step)[0]


def _times(timed: dict[str, Callable[[], Any]], first: dict[str, float], caps: Caps) -> dict[str, Any]:
    """Seconds per call of each of ``timed``: the min over calls repeated for >= 0.5 s in three
    interleaved rounds (so that all see the machine's load alike); a function whose first call took
    over ``caps.slow_call`` seconds keeps that one call's time (a 20 s gradient costs 20 s, not 60)."""
    best = {key: first[key] for key in timed if first.get(key, 0.0) > caps.slow_call}
    calls = dict.fromkeys(best, 1)
    again = [key for key in timed if key not in best]
    best.update(dict.fromkeys(again, float("inf")))
    calls.update(dict.fromkeys(again, 0))
    for _ in range(ROUNDS):
        for key in again:
            low, _, n, _ = time_python(timed[key], 0.5)
            best[key] = min(best[key], low)
            calls[key] += n
    return {**best, "calls": calls}


def _torch_compiled(p: Problem, row: dict[str, Any]) -> Callable[[], Any] | None:
    """torch.compile's forward + backward after its first call (whose seconds go in ``row``); None,
    with the reason in ``row``, when torch.compile fails on the layer."""
    torch._dynamo.reset()
    compiled_fn = torch.compile(p.fn)

    def compiled() -> Any:
        outs = results(compiled_fn(*p.leaves))
        return torch.autograd.grad(outs, p.differentiated, p.drs, allow_unused=True)

    start = time.perf_counter()
    try:
        with contextlib.redirect_stderr(io.StringIO()), contextlib.redirect_stdout(io.StringIO()):
            compiled()
    except Exception as err:  # torch's failure is a result, not ours
        row["torch_compile_error"] = error_line(err)
        return None
    row["torch_compile_first_s"] = time.perf_counter() - start
    return compiled


class _Steps:
    """The step a layer is at (named in its row when it fails), shown on the progress bar."""

    def __init__(self, show: Callable[[str], None]) -> None:
        self.now = "build"
        self.show = show

    def __call__(self, step: str) -> None:
        self.now = step
        self.show(step)


def _measure(
    name: str, size: str, caps: Caps, torch_compile: bool, folder: Path, row: dict[str, Any], step: _Steps
) -> None:
    """The steps of one layer, each filling ``row`` as it finishes (an exception stops them)."""
    step("build")
    p = Problem(name, size)
    row["shapes"] = [list(x.shape) for x in p.xs]
    step("translate")
    program = folder / "layer.kso"
    front, measured = call_capped(_front(p, program), caps.step, "translate")
    row.update(measured, **front)
    step("optimise")
    opt = _optimise(program, caps.seconds, (DEFAULT_LIMIT if caps.seconds is None else caps.seconds) + caps.step)
    row.update({k: v for k, v in opt.items() if k != "file"})
    compiled: dict[str, Callable[..., Any]] = {}
    for key, path in (("written", program), ("optimised", opt["file"])):
        step(f"compile_{key}")
        compiled[key], row[f"compile_{key}_s"] = _compiled(
            path, folder / f"cache-{key}", caps.compile, f"compile_{key}"
        )
    row["end_to_end_s"] = row["translate_s"] + row["grad_s"] + row["optimise_s"] + row["compile_optimised_s"]
    first: dict[str, float] = {}
    for key, gradient in compiled.items():
        step(f"call_{key}")
        got, first[f"{key}_s"] = _first_call(gradient, p, caps.call, f"call_{key}")
        row[f"error_{key}"] = p.error_of(got)
    timed: dict[str, Callable[[], Any]] = {
        "written_s": lambda: compiled["written"](*p.arrays, p.dr),
        "optimised_s": lambda: compiled["optimised"](*p.arrays, p.dr),
        "eager_s": p.eager,
    }
    if torch_compile:
        step("torch_compile")
        torch_compiled = _torch_compiled(p, row)
        if torch_compiled is not None:
            timed["torch_compile_s"] = torch_compiled
    step("time")
    row.update(_times(timed, first, caps))


def run_layer(
    name: str, size: str, caps: Caps, torch_compile: bool, folder: Path, show: Callable[[str], None] = lambda _: None
) -> dict[str, Any]:
    """One layer's row: every measurement, and ``status``: "ok", or ``<step>_timed_out`` /
    ``<step>_failed`` with the ``reason`` (what was measured before that step stays in the row)."""
    layer = SUITE[name]
    row: dict[str, Any] = {"layer": name, "size": size, "repo": layer.repo, "path": layer.path, "symbol": layer.symbol}
    row.update(seconds_limit=caps.seconds, caps=caps.as_row())
    step = _Steps(show)
    try:
        _measure(name, size, caps, torch_compile, folder, row, step)
    except StepFailed as failed:
        row.update(failed.measured, status=failed.status, reason=failed.reason)
    except Exception as err:  # a layer that breaks a step is a row saying so, not a lost run
        row.update(status=f"{step.now}_failed", reason=error_line(err))
    else:
        row["status"] = "ok"
    return row


def _machine() -> dict[str, Any]:
    return {
        "machine": f"{platform.machine()} {platform.processor() or ''}".strip(),
        "cores": len(os.sched_getaffinity(0)),
        "torch": torch.__version__,
        "torch_threads": torch.get_num_threads(),
    }


def _ratio(row: dict[str, Any], key: str) -> str:
    return f"{row[key] / row['eager_s']:.3g}x" if key in row and "eager_s" in row else "-"


def _report(row: dict[str, Any]) -> str:
    if row["status"] != "ok":
        return f"{row['layer']}: {row['status']}: {row['reason']}"
    calls = row["calls"]
    slow = [k.removesuffix("_s") for k, n in calls.items() if n == 1]
    return (
        f"{row['layer']}: compiled gradient / eager {_ratio(row, 'written_s')} as written, "
        f"{_ratio(row, 'optimised_s')} optimised; torch.compile {_ratio(row, 'torch_compile_s')}; "
        f"error {max(row['error_written'], row['error_optimised']):.1e}"
        + (f" (timed by one call: {', '.join(slow)})" if slow else "")
    )


def _show(bar: Any, name: str, step: str) -> None:
    bar.set_postfix_str(f"{name}: {step}")


def _arguments(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    default = Caps()
    parser.add_argument("--quick", action="store_true", help="the suite's fast shapes, 1 s of optimisation")
    parser.add_argument("--layers", nargs="+", default=None, metavar="NAME", help="only these layers")
    parser.add_argument(
        "--seconds",
        type=float,
        default=None,
        help="optimize.py's --seconds (none: its default pipeline's own limit; quick: 1)",
    )
    parser.add_argument(
        "--step-limit",
        type=float,
        default=default.step,
        help="cap of translate + grad and of optimize.py beyond --seconds",
    )
    parser.add_argument("--compile-limit", type=float, default=default.compile, help="cap of one compilation")
    parser.add_argument("--call-limit", type=float, default=default.call, help="cap of one gradient call")
    parser.add_argument(
        "--slow-call", type=float, default=default.slow_call, help="a gradient slower than this is timed by one call"
    )
    parser.add_argument("--redo-failed", action="store_true", help="measure again the layers whose rows failed")
    parser.add_argument("--no-torch-compile", action="store_true", help="leave torch.compile out (CI)")
    parser.add_argument("--out", default=None, help="the results file (default: by --quick)")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = _arguments(argv)
    torch.set_num_threads(1)
    names = args.layers or list(LAYERS)
    unknown = [n for n in names if n not in SUITE]
    if unknown:
        print(f"error: no layer named {', '.join(map(repr, unknown))} (ksdata.torch_suite.SUITE)", file=sys.stderr)
        return 2
    size = "fast" if args.quick else "realistic"
    seconds = args.seconds if args.seconds is not None else (1.0 if args.quick else None)
    caps = Caps(seconds, args.step_limit, args.compile_limit, args.call_limit, args.slow_call)
    out = Path(args.out) if args.out else (QUICK if args.quick else RESULTS) / "layers" / "results.jsonl"
    rows = ResultsFile(out, ("layer", "size", "seconds_limit"), defaults={"status": "ok"})
    done = {(r["layer"], r["size"], r["seconds_limit"]): r for r in rows}
    todo = []
    for name in names:
        old = done.get((name, size, seconds))
        if not available(SUITE[name]):
            print(f"{name}: skipped ({SUITE[name].package} is not installed)", file=sys.stderr)
        elif old is not None and (old["status"] == "ok" or not args.redo_failed):
            print(f"{name}: already in {out} ({old['status']})", file=sys.stderr)
        else:
            todo.append(name)
    machine = _machine()
    with tempfile.TemporaryDirectory(prefix="bench_layers") as tmp, _cache_settings_restored():
        machine["runtime_precompile_s"] = _precompile_runtime(Path(tmp)) if todo else None
        bar = tqdm(todo, desc="layers", unit="layer", file=sys.stderr)
        for k, name in enumerate(bar):
            folder = Path(tmp) / str(k)
            folder.mkdir()
            start = time.perf_counter()
            show = functools.partial(_show, bar, name)
            row = run_layer(name, size, caps, not args.no_torch_compile, folder, show)
            row.update(machine, load_average=os.getloadavg()[0], wall_s=time.perf_counter() - start)
            row["date"] = datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")
            rows.add(row)
            tqdm.write(f"{_report(row)} [{row['wall_s']:.0f} s]", file=sys.stderr)
    print(f"wrote {out}")
    mine = [r for r in rows if r["size"] == size and r["seconds_limit"] == seconds and r["layer"] in names]
    bad = [r["layer"] for r in mine if r["status"] == "ok" and max(r["error_written"], r["error_optimised"]) > 1e-8]
    if bad:
        print(f"error: gradients differ from torch.autograd by more than 1e-8: {', '.join(bad)}", file=sys.stderr)
    failed = [f"{r['layer']} ({r['status']})" for r in mine if r["status"] != "ok"]
    if failed:
        print(f"error: not measured to the end: {', '.join(failed)}", file=sys.stderr)
    return 1 if bad or failed else 0


if __name__ == "__main__":
    sys.exit(main())
