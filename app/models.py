"""Value functions by name, for the command line: ``none`` (zero), the name of a model that ships with
the package (``default``, ``ggnn``, ``tree_online``, ``blas``, ``blas_beam``, ``blas_astar``, ``cnn``: the
files of ``gnn/models/``) or a checkpoint
written by train.py or ``python -m training.export``; and the argparse type of a value scale."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from knossos.errors import KsUsageError
from search.settings import Precision
from search.value import ValueFunction, ZeroValue, check_value_scale

if TYPE_CHECKING:  # gnn (torch) is imported only for a model that needs it
    from gnn.tree_value import TreeValue
    from gnn.value import NetworkValue


def load_value_function(spec: str, precision: Precision = "float32", scale: float | None = None) -> ValueFunction:
    """``precision`` (float32 or bfloat16) is the network's inference arithmetic and ``scale`` the
    factor on its values (None: the model's own); zero ignores both."""
    if spec in ("none", "zero"):
        return ZeroValue()
    return load_model(spec, precision, scale)


def load_model(spec: str, precision: Precision = "float32", scale: float | None = None) -> NetworkValue | TreeValue:
    """The trained model ``spec``: a shipped model's name or a checkpoint file (as :func:`load_value_function`)."""
    shipped: list[str] = []
    if "/" not in spec and not spec.endswith(".pt"):
        try:
            from gnn.model_file import shipped_model, shipped_model_names
        except ImportError:
            raise KsUsageError(f"the model '{spec}' needs the gnn package (torch)") from None
        found = shipped_model(spec)
        if found is not None:
            spec = str(found)
        shipped = shipped_model_names()
    path = Path(spec)
    try:
        exists = path.is_file()
    except OSError:  # a name the file system cannot hold (too long, ...)
        exists = False
    if not exists:
        names = f"one of {', '.join(shipped)}" if shipped else "a shipped model's name"
        raise KsUsageError(f"no model file '{spec}' (give a checkpoint written by train.py, {names}, or 'none')")
    try:
        from gnn.model_file import value_function_from_file
    except ImportError:
        raise KsUsageError(f"{spec}: loading a trained model needs the gnn package (torch)") from None
    return value_function_from_file(path, precision, scale)


def value_scale(text: str) -> float:
    """An argparse type: a value scale search accepts (:func:`search.value.check_value_scale`)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{text}' is not a number") from None
    try:
        return check_value_scale(value)
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from None
