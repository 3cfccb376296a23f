"""Value functions by name, for the command line: ``none`` (zero) or a trained model checkpoint."""

from __future__ import annotations

from pathlib import Path

from knossos.errors import KsUsageError
from search.value import ValueFunction, ZeroValue


def load_value_function(spec: str) -> ValueFunction:
    if spec in ("none", "zero"):
        return ZeroValue()
    path = Path(spec)
    if not path.is_file():
        raise KsUsageError(f"no model file '{spec}' (give a checkpoint written by train.py, or 'none')")
    try:
        from gnn.checkpoint import load_value_function as load_checkpoint  # type: ignore[import-not-found]
    except ImportError:
        raise KsUsageError(f"{spec}: loading a trained model needs the gnn package, which is not built yet") from None
    loaded: ValueFunction = load_checkpoint(path)
    return loaded
