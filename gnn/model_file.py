"""The model file: a value network's weights with what inference needs to rebuild and search with it
(its settings, node-type vocabulary, value scale, default budget and the config it was trained with),
written atomically and read back without running code from the file.  Training checkpoints are model
files with more in them (training/checkpoint.py); everything here loads without the training system."""

from __future__ import annotations

import dataclasses
import pickle
import re
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

import gnn
from gnn.graph import NODE_TYPES
from gnn.model_config import ModelConfig
from gnn.networks import Network, build_network, value_function
from gnn.tree_value import TreeValue
from gnn.value import NetworkValue
from knossos.atomic import atomic_write
from knossos.errors import KsUsageError
from search.limits import MAX_BUDGET, MAX_DEPTH
from search.settings import Precision, SearchSettings, SettingError
from search.value import check_value_scale


def save_model_file(path: Path, state: dict[str, Any]) -> None:
    """Write ``state``; one with weights gets the node-type vocabulary they were trained on."""
    if "model" in state:
        state = {**state, NODE_TYPES_KEY: list(NODE_TYPES)}
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(path, lambda f: torch.save(state, f))


def load_model_file(path: Path, check_config: Callable[[object], None] | None = None) -> dict[str, Any]:
    """A model file's state, unpickled without running code from the file: only tensors, plain data
    and the classes of :func:`model_file_globals` are built; a file that names anything else is refused with a one-line error, so a
    shared model cannot execute code.  ``check_config`` checks its training config (a ValueError; by
    default :func:`check_search_config`)."""
    try:
        with torch.serialization.safe_globals(model_file_globals()), warnings.catch_warnings():
            warnings.simplefilter("ignore")  # torch warns about pickle protocols: the error line says enough
            state: dict[str, Any] = torch.load(path, map_location="cpu", weights_only=True)
    except FileNotFoundError:
        raise KsUsageError("no such checkpoint", None, str(path)) from None
    except IsADirectoryError:
        raise KsUsageError("a folder, not a checkpoint", None, str(path)) from None
    except pickle.UnpicklingError as err:
        raise KsUsageError(_refusal(str(err)), None, str(path)) from None
    except Exception as err:  # torch raises many kinds on a file that is not a checkpoint
        raise KsUsageError(f"not a readable checkpoint ({type(err).__name__})", None, str(path)) from None
    if not isinstance(state, dict) or "model" not in state or "model_config" not in state:
        raise KsUsageError("not a checkpoint written by train.py", None, str(path))
    check_node_types(state, str(path))
    check_metadata(state, str(path), check_config or check_search_config)
    return state


def check_metadata(state: dict[str, Any], label: str, check_config: Callable[[object], None]) -> None:
    """Refuse a checkpoint whose settings are not of the types train.py writes, or beyond what a
    config may ask for, before any network is built from them (a stored ``hidden`` of 100000 would
    ask for hundreds of GB): the model's settings, the training config, the weights' container, the
    value scale and the default budget."""

    def bad(what: str, reason: str) -> KsUsageError:
        return KsUsageError(f"the checkpoint's {what} are not usable: {reason}", None, label)

    model_config_of(state, label)
    if not isinstance(state["model"], dict):
        raise bad("weights", f"expected a mapping of tensors, not {type(state['model']).__name__}")
    try:
        check_config(state.get("config"))
    except ValueError as err:
        raise bad("training settings", str(err)) from None
    scale = state.get("value_scale", 1.0)
    if isinstance(scale, bool) or not isinstance(scale, int | float):
        raise bad("search settings", f"value_scale: expected a number, not {type(scale).__name__}")
    try:
        check_value_scale(scale)
    except ValueError as err:
        raise bad("search settings", f"value_scale: {err}") from None
    budget = state.get("budget", 1)
    if isinstance(budget, bool) or not isinstance(budget, int) or not 1 <= budget <= MAX_BUDGET:
        raise bad("search settings", f"budget: expected a whole number from 1 to {MAX_BUDGET}, not {budget!r:.60}")


def check_search_config(raw: object) -> None:
    """A ValueError unless a model file's training config (``raw``) is None or a mapping whose
    ``search`` section, the part inference uses, has a depth and a value scale a search takes and
    whose ``rules`` is a rule set's name (training/checkpoint.py checks the whole of it)."""
    if raw is None:
        return
    if not isinstance(raw, dict):
        raise ValueError(f"config: expected a mapping of keys, not {type(raw).__name__}")
    search = raw.get("search", {})
    if not isinstance(search, dict):
        raise ValueError(f"search: expected a mapping of keys, not {type(search).__name__}")
    depth = search.get("depth", 1)
    if isinstance(depth, bool) or not isinstance(depth, int):
        raise ValueError(f"search.depth: expected a whole number, not {depth!r:.60}")
    if not 1 <= depth <= MAX_DEPTH:
        raise ValueError(f"search.depth: must be at least 1 and at most {MAX_DEPTH}, not {depth}")
    scale = search.get("value_scale", 1.0)
    if isinstance(scale, bool) or not isinstance(scale, int | float):
        raise ValueError(f"search.value_scale: expected a number, not {type(scale).__name__}")
    try:
        check_value_scale(float(scale))
    except ValueError as err:
        raise ValueError(f"search.value_scale: {err}") from None
    rules = raw.get("rules")
    if rules is not None and not isinstance(rules, str):
        raise ValueError(f"rules: expected text, not {rules!r:.60}")


def model_config_of(state: dict[str, Any], label: str) -> ModelConfig:
    """The checkpoint's model settings, checked as a config's ``model:`` section is (types and
    limits); settings it lacks (written before they existed) take their defaults."""
    raw = state["model_config"]

    def bad(reason: str) -> KsUsageError:
        return KsUsageError(f"the checkpoint's model settings are not usable: {reason}", None, label)

    if not isinstance(raw, dict):
        raise bad(f"expected a mapping of settings, not {type(raw).__name__}")
    known = [f.name for f in dataclasses.fields(ModelConfig)]
    unknown = [k for k in raw if k not in known]
    if unknown:
        raise bad(f"unknown setting {str(unknown[0])!r:.60} (known: {', '.join(known)})")
    try:
        return ModelConfig(**raw)
    except SettingError as err:
        raise bad(str(err)) from None


#: The key of a checkpoint's node-type vocabulary (absent from checkpoints written before it was stored).
NODE_TYPES_KEY = "node_types"
#: The vocabulary of a checkpoint that stores none (the shipped ggnn, blas_astar and tree_online among
#: them): the order of :class:`~knossos.ops.Op` they were trained with, Op's first and only order so
#: far.  Written out here, so that reordering Op refuses them as well.
UNSTORED_NODE_TYPES: tuple[str, ...] = (
    "CONST", "VAR", "LET", "LAM", "BUILD", "SUMBUILD", "IF", "ASSERT", "TUPLE", "GET", "INDEX", "SIZE", "SUM",
    "CONSTVEC", "DELTAVEC", "CALL", "APPLY", "ADD", "SUB", "MUL", "DIV", "NEG", "EXP", "LOG", "EQ", "NE", "GT",
    "GTE", "LT", "LTE", "OR", "AND", "TO_FLOAT", "ABS", "MAX", "POW", "TANH",
)  # fmt: skip


def check_node_types(state: dict[str, Any], label: str) -> None:
    """Refuse a checkpoint whose node-type vocabulary is not this code's (its weights would read other
    ops' inputs); one that stores none has :data:`UNSTORED_NODE_TYPES`.  A vocabulary that is a prefix
    of this code's (ops added since, at the end of :class:`~knossos.ops.Op`) is taken: the new types
    get zero embeddings (:func:`widen_node_types`), as the network never saw them."""
    stored = state.get(NODE_TYPES_KEY)
    if stored is None:
        stored = UNSTORED_NODE_TYPES
    if (
        isinstance(stored, list | tuple)
        and 0 < len(stored) < len(NODE_TYPES)
        and tuple(stored) == NODE_TYPES[: len(stored)]
    ):
        widen_node_types(state, len(stored))
        return
    if not isinstance(stored, list | tuple) or tuple(stored) != NODE_TYPES:
        raise KsUsageError(
            "the checkpoint's node types are not this code's ("
            + _vocabulary_difference(stored)
            + "): its weights would read the wrong ops",
            None,
            label,
        )


#: Weights with one row per node type (the tree network's type embedding); the GGNN one-hots the
#: types into its hidden width, which has room for new ones (training/config.py checks it).
NODE_TYPE_ROWS = ("embed.weight",)


def widen_node_types(state: dict[str, Any], stored: int) -> None:
    """Give the node types added after the first ``stored`` zero rows in ``state``'s weights."""
    weights = state.get("model")
    if not isinstance(weights, dict):
        return
    for key in NODE_TYPE_ROWS:
        rows = weights.get(key)
        if isinstance(rows, torch.Tensor) and rows.dim() == 2 and rows.shape[0] == stored:
            extra = torch.zeros(len(NODE_TYPES) - stored, rows.shape[1], dtype=rows.dtype)
            weights[key] = torch.cat([rows, extra])
    state[NODE_TYPES_KEY] = list(NODE_TYPES)


def _vocabulary_difference(stored: object) -> str:
    if not isinstance(stored, list | tuple) or not all(isinstance(n, str) for n in stored):
        return "not a list of op names"
    missing = [n for n in NODE_TYPES if n not in stored]
    extra = [n for n in stored if n not in NODE_TYPES]
    if extra:
        return f"unknown here: {extra}; not in the checkpoint: {missing or 'none'}"
    first = next((i for i, (a, b) in enumerate(zip(stored, NODE_TYPES, strict=False)) if a != b), None)
    if first is not None:
        return f"another order: type {first} is {stored[first]} there, {NODE_TYPES[first]} here"
    return f"{len(stored)} types there, {len(NODE_TYPES)} here"


def model_file_globals() -> list[Any]:
    """What a model file may name besides tensors and plain data: expressions (rebuilt through the
    intern table from their flat wire form), their types, the defs their calls call, replay samples
    (a training checkpoint's) and numpy arrays (best targets).  numpy 1 wrote its arrays under ``numpy.core``, numpy 2 under ``numpy._core``."""
    import importlib

    import numpy as np

    from gnn.sample import Sample
    from knossos.callee import Callee, CalleeKind
    from knossos.errors import Pos
    from knossos.program import Def, Param, TupleSizes, VecSizes
    from knossos.serialize import expr_from_wire
    from knossos.types import Kind, Type

    multiarray = importlib.import_module("numpy._core.multiarray")
    reconstruct, scalar = multiarray._reconstruct, multiarray.scalar
    return [
        expr_from_wire,
        Type,
        Kind,
        Callee,  # what a call node calls: a def (its signature and body) or an edef
        CalleeKind,
        Def,
        Param,
        VecSizes,
        TupleSizes,
        Pos,
        Sample,  # a training checkpoint's replay samples, also under the names they were pickled with before
        (Sample, "training.fit.Sample"),
        (Sample, "gnn.fit.Sample"),
        np.ndarray,
        np.dtype,
        reconstruct,
        (reconstruct, "numpy.core.multiarray._reconstruct"),
        scalar,
        (scalar, "numpy.core.multiarray.scalar"),
        *(type(np.dtype(c)) for c in "?bhilqBHILQefdgFDG"),
    ]


def _refusal(message: str) -> str:
    """The one-line reason torch's safe unpickler gave, without its advice to unpickle unsafely."""
    found = re.search(r"GLOBAL ([\w.]+)", message)
    if found:
        return (
            f"refusing to load: the file names the Python object '{found.group(1)}', which no checkpoint holds "
            "(checkpoints are loaded without running code from them)"
        )
    return "refusing to load: the file holds something other than weights and training state"


def load_weights(module: torch.nn.Module, weights: dict[str, Any], label: str) -> None:
    """``module.load_state_dict``, with a one-line error when the weights are of another network."""
    try:
        module.load_state_dict(weights)
    except (RuntimeError, KeyError, TypeError, ValueError):
        raise KsUsageError(
            "the checkpoint's weights do not fit this network (written by another version of the code?)", None, label
        ) from None


def network_from(state: dict[str, Any], label: str) -> Network:
    network = build_network(model_config_of(state, label))
    load_weights(network, state["model"], label)
    network.eval()
    return network


#: The models that ship with the package, by name (made with configs of ``configs/``; see
#: docs/default_model.md).
SHIPPED_MODELS = Path(gnn.__file__).resolve().parent / "models"
#: ``--model default``.
DEFAULT_MODEL = SHIPPED_MODELS / "default.pt"


def shipped_model(name: str) -> Path | None:
    """The file of the shipped model ``name`` (``default``, ``ggnn``, ...), None if there is none."""
    if not (name.isidentifier() and len(name) <= 100):
        return None
    path = SHIPPED_MODELS / f"{name}.pt"
    return path if path.is_file() else None


def shipped_model_names() -> list[str]:
    """The names ``--model`` takes for the models in ``gnn/models/``, sorted."""
    return sorted(p.stem for p in SHIPPED_MODELS.glob("*.pt"))


def value_scale_of(state: dict[str, Any]) -> float:
    """The value scale a checkpoint's model is searched with: its own (set on export), else the one
    its training searches used, else 1 (the paper's A*)."""
    if "value_scale" in state:
        return float(state["value_scale"])
    config = state.get("config") or {}
    return float(config.get("search", {}).get("value_scale", 1.0))


def value_function_from_file(
    path: Path, precision: Precision = "float32", scale: float | None = None
) -> NetworkValue | TreeValue:
    """The value function of a checkpoint, for ``optimize.py --model`` (``scale``: instead of its own),
    with the search settings and rule set it is searched with by default (:func:`search_settings_of`)."""
    state = load_model_file(path)
    network = network_from(state, str(path))
    try:
        return value_function(
            network,
            precision=precision,
            scale=value_scale_of(state) if scale is None else scale,
            settings=search_settings_of(state),
            rules=rules_of(state),
        )
    except ValueError as err:
        raise KsUsageError(str(err), None, str(path)) from None


#: Search settings of a training config that a search with its model does not take: it searches with
#: the training's evaluation search (test_algorithm) and the export's budget, and its batch size and
#: precision are the searcher's own.
NOT_CARRIED = ("algorithm", "budget", "test_budget", "batch_size", "precision")


def search_settings_of(state: dict[str, Any]) -> SearchSettings:
    """How a search with a checkpoint's model is set by default (optimize.py's defaults with it): its
    training's search settings but :data:`NOT_CARRIED`, with the search that evaluated it
    (``test_algorithm``) as the search, the evaluation budget chosen when it was exported (else the
    default), the network's depth where there is no training config, and the value scale of
    :func:`value_scale_of`.  Settings the config lacks (written before they existed) take their
    defaults; keys unknown here are let be (a checkpoint outlives the code that wrote it)."""
    stored = (state.get("config") or {}).get("search") or {}
    carried = {k: v for k, v in stored.items() if k in SearchSettings.names() and k not in NOT_CARRIED}
    settings = SearchSettings.from_dict(carried)
    return dataclasses.replace(
        settings,
        algorithm=settings.test_algorithm,
        depth=int(stored.get("depth", state["model_config"]["depth"])),
        budget=int(state.get("budget", SearchSettings.budget)),
        value_scale=value_scale_of(state),
    )


def rules_of(state: dict[str, Any]) -> str | None:
    """The rule set a checkpoint's model was trained with (None: its config is not there)."""
    rules = (state.get("config") or {}).get("rules")
    return str(rules) if rules else None
