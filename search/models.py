"""Value functions by name, for the command line: ``none`` (zero), ``default`` (the model that ships
with the package) or a checkpoint written by train.py."""

from __future__ import annotations

from pathlib import Path

from knossos.errors import KsUsageError
from search.value import ValueFunction, ZeroValue


def load_value_function(spec: str, precision: str = "float32", scale: float | None = None) -> ValueFunction:
    """``precision`` (float32 or bfloat16) is the network's inference arithmetic and ``scale`` the
    factor on its values (None: the model's own); zero ignores both."""
    if spec in ("none", "zero"):
        return ZeroValue()
    if spec == "default":
        try:
            from gnn.checkpoint import DEFAULT_MODEL
        except ImportError:
            raise KsUsageError("the default model needs the gnn package (torch)") from None
        if not DEFAULT_MODEL.is_file():
            raise KsUsageError(f"the default model is missing from this installation ({DEFAULT_MODEL})")
        spec = str(DEFAULT_MODEL)
    path = Path(spec)
    if not path.is_file():
        raise KsUsageError(f"no model file '{spec}' (give a checkpoint written by train.py, or 'none')")
    try:
        from gnn.checkpoint import load_value_function as load_checkpoint
    except ImportError:
        raise KsUsageError(f"{spec}: loading a trained model needs the gnn package, which is not built yet") from None
    loaded: ValueFunction = load_checkpoint(path, precision, scale)  # type: ignore[arg-type]
    return loaded
