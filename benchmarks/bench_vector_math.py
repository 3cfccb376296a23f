"""Glibc's vector math in compiled gradients: each layer's ``rev$layer`` compiled with the default flags
(exp, log, tanh... vectorised: docs/cpp.md) and without (libm's scalar calls, g++'s call sinking on),
timed interleaved against PyTorch eager in one process, one thread, float64.

Run:  python benchmarks/bench_vector_math.py [LAYER ...]   (default: the layers with element-wise
      exp/log/tanh: Mish, BCEWithLogitsLoss, CrossEntropyLoss (label_smoothing), GRUCell, Llama MLP)

Prints, per layer, both compiled gradients' time over eager's (min over rounds), and the largest
relative difference of the vectorised gradient from torch.autograd's.
"""

from __future__ import annotations

from ksbench.harness import pin_threads

pin_threads()  # before numpy and torch load: everything on one thread

import argparse  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
from collections.abc import Callable, Sequence  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

import torch  # noqa: E402
from tqdm import tqdm  # noqa: E402

from autodiff import grad_program  # noqa: E402
from benchmarks.bench_layers import Problem  # noqa: E402
from cpp_backend.bench import time_python  # noqa: E402
from cpp_backend.callable import compile_def  # noqa: E402
from frontends.torch import translate  # noqa: E402
from knossos.printer import format_program  # noqa: E402

LAYERS = ("Mish", "BCEWithLogitsLoss", "CrossEntropyLoss (label_smoothing)", "GRUCell", "Llama MLP (SwiGLU)")
#: Flags that undo the default's vector math: libm's scalar calls, g++'s sinking of calls into branches
#: and its jump threading.
SCALAR_FLAGS = ("-UKS_VECTOR_MATH", "-ftree-sink", "-fthread-jumps")
ROUNDS = 7
#: Each round calls each function for at least this long (the min per call is kept).
SECONDS_PER_ROUND = 0.05


def _best(f: Callable[[], Any]) -> float:
    return time_python(f, SECONDS_PER_ROUND)[0]


def measure(name: str) -> str:
    p = Problem(name, "realistic")
    program = grad_program(translate(p.fn, *p.examples, name="layer", check=False), defs=["layer"], mode="rev")
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "layer.kso"
        path.write_text(format_program(program))
        vector = compile_def(path, "rev$layer", threads=1)
        scalar = compile_def(path, "rev$layer", threads=1, extra_flags=SCALAR_FLAGS)
    times: dict[str, list[float]] = {"vector": [], "scalar": [], "eager": []}
    for _ in range(ROUNDS):
        times["vector"].append(_best(lambda: vector(*p.arrays, p.dr)))
        times["scalar"].append(_best(lambda: scalar(*p.arrays, p.dr)))
        times["eager"].append(_best(p.eager))
    best = {k: min(v) for k, v in times.items()}
    return (
        f"{name}: vector math {best['vector'] / best['eager']:.2f}x eager, libm {best['scalar'] / best['eager']:.2f}x"
        f" eager (vector / libm {best['vector'] / best['scalar']:.2f}x); error {p.error_of(vector(*p.arrays, p.dr)):.1e}"
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("layers", nargs="*", default=list(LAYERS), help="layers of ksdata.torch_suite.SUITE")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    for name in tqdm(args.layers, desc="layers", unit="layer", file=sys.stderr):
        tqdm.write(measure(name))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
