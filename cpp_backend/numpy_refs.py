"""Numpy versions of benchmarked defs, for context next to the compiled variants (benchmarks/).

Each takes the def's arguments, as :func:`cpp_backend.bench.make_inputs` makes them, and returns a
function of no arguments that computes the def's result with numpy (the conversion of the inputs to
arrays is done once, outside the timed function).  :func:`to_value` turns what it returns into a
Knossos value, to compare with the compiled variants' output.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np


def conv1d_rev(args: Sequence[Any]) -> Callable[[], tuple[Any, Any]]:
    """The gradient of ``rev$conv1d`` (conv1d_rev_test.kso) written with matrix products, one per
    kernel tap: ``args`` are the kernels (k x l x kn), the image (l x n) and ``d$r`` (k x n); the
    result is the pair (d kernels, d image)."""
    kernels, image, dr = (np.array(x) for x in args)
    k, channels, kn = kernels.shape
    n = image.shape[1]

    def run() -> tuple[Any, Any]:
        # noi = ni + kn // 2 - kni, taps outside the image contribute nothing
        d_kernels = np.zeros((k, channels, kn))
        d_image = np.zeros((channels, n))
        for kni in range(kn):
            off = kn // 2 - kni
            lo, hi = max(0, -off), min(n, n - off)
            if lo < hi:
                d_kernels[:, :, kni] = dr[:, lo:hi] @ image[:, lo + off : hi + off].T
                d_image[:, lo + off : hi + off] += kernels[:, :, kni].T @ dr[:, lo:hi]
        return d_kernels, d_image

    return run


def to_value(x: Any) -> Any:
    """A numpy result as a Knossos value: arrays as nested lists, tuples part by part."""
    return tuple(to_value(p) for p in x) if isinstance(x, tuple) else x.tolist()


__all__ = ["conv1d_rev", "to_value"]
