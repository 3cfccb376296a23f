"""Training configs: YAML files loaded into typed dataclasses.

Every key is checked: an unknown key, a missing required one or a value of the wrong type is a
one-line error naming the file, the key (dotted, e.g. ``search.depth``) and, where YAML knows it,
the line.  ``--set key=value`` overrides go through the same checks (the value is parsed as YAML).
"""

from __future__ import annotations

import copy
import dataclasses
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import yaml

from gnn.model_config import FILLED_FROM, ModelConfig
from knossos.errors import KsUsageError, Pos
from knossos.user_files import read_regular_file
from ksdata.loader import DataSource
from search.plan import Plan
from search.settings import SearchSettings, SettingError, TrainingSearchName

# -- the enumerated options (checked when a config is read: one of these, or a one-line error) ------------
#: Which states of a search are fitted (``training.targets``; :func:`training.trainer.samples_of`).
TargetScheme = Literal["reached", "explored", "explored_and_reached"]
TARGET_SCHEMES: tuple[str, ...] = typing.get_args(TargetScheme)
#: Where an epoch's searches run (``training.executor``; :mod:`training.executors`).
ExecutorName = Literal["local", "processes", "ray"]
EXECUTORS: tuple[str, ...] = typing.get_args(ExecutorName)


@dataclass
class DataConfig:
    train: DataSource
    test: DataSource


#: The largest ``training.seed``: numpy takes any non-negative seed and torch any below 2**64; 32 bits
#: is what every seeding API takes (numpy's legacy RandomState among them) and seeds enough runs.
MAX_SEED = 2**32 - 1
#: The longest run name, in UTF-8 bytes: the run's folder is named after it (most file systems' limit).
MAX_NAME_BYTES = 255


def check_run_name(name: str) -> None:
    """A ValueError unless ``name`` can be the folder ``runs/<name>``: one plain path component, not
    hidden (no leading dot, so never ``.`` or ``..``), without separators or control characters."""
    if not name:
        raise ValueError("must not be empty (it names the run's folder under runs/)")
    if "/" in name or "\\" in name or name.startswith(".") or not name.isprintable():
        raise ValueError(
            f"'{name}' is not a plain folder name (it names the run's folder under runs/: no '/', '\\', "
            "leading '.' or control characters)"
        )
    if len(name.encode("utf-8", "surrogatepass")) > MAX_NAME_BYTES:
        raise ValueError(f"longer than {MAX_NAME_BYTES} bytes (it names the run's folder under runs/)")


#: Keys whose values a training config takes from fewer options than their settings' types allow:
#: a network trains only with the searches that record the states they reach.
NARROWED: dict[str, Any] = {"search.algorithm": TrainingSearchName, "search.test_algorithm": TrainingSearchName}


@dataclass
class TrainingConfig:
    epochs: int = 30
    #: Training expressions searched per epoch (Table 1's "k").
    exprs_per_epoch: int = 6
    #: Passes over an epoch's samples when fitting.
    fit_passes: int = 1
    #: 0: fit exactly fit_passes passes.  N > 0: fit to a plateau, at most fit_passes passes, until
    #: the loss on a tenth of the samples held back has not improved for N passes, keeping the best
    #: weights (the reference fits each generation up to 150 epochs with patience 50).
    fit_patience: int = 0
    #: Keep the samples of this many recent epochs for fitting (a replay buffer; 1 = this epoch's only).
    replay_epochs: int = 1
    lr: float = 1e-4
    batch_size: int = 16
    #: 0 .. MAX_SEED (with --repetitions N, seed + N - 1 at most MAX_SEED).
    seed: int = 0
    #: Evaluate on the train and test sets every this many epochs (and after the last).
    eval_every: int = 1
    #: Fit every sample to the best target any search so far has found for its expression and steps
    #: left (targets are lower bounds of the optimal value), so that a discovery is not unlearnt.
    best_targets: bool = False
    #: Which states of a search are fitted: "reached" (every state reached, at its steps left: the
    #: paper's Algorithm 2) or "explored" (every expanded state, at each number of steps up to how
    #: deep the search looked below it: how the reference implementation builds its datasets), or
    #: "explored_and_reached" (those, and the states reached but never expanded, as "reached").
    targets: TargetScheme = "reached"
    #: With best_targets: also fit, each epoch, up to this many remembered states that this epoch's
    #: searches did not visit, those whose best known target the network underestimates most.
    replay_best: int = 0
    #: Keep each epoch's weights as weights/epoch_NNN.pt (loadable by optimize.py --model), so
    #: that any epoch can be evaluated later, at other budgets or with other searches.
    keep_weights: bool = False
    #: Evaluate on the training set too (the test set always).
    eval_train: bool = True
    #: The first this many epochs search the training expressions with the zero value function
    #: instead of the network: an untrained network guides search worse than none, and plain A*
    #: is faster, so the first targets are better and come sooner.
    warmup_epochs: int = 0
    #: Evaluations of the warm-up searches (0: search.budget): plain A* is cheap, and a larger
    #: search finds better targets.
    warmup_budget: int = 0
    #: A curriculum: the training expressions named here are not searched before epoch
    #: ``later_from_epoch`` (GEMM after its stepping stones and the primitives, say); the others are
    #: drawn from the first epoch on.
    later_defs: list[str] = field(default_factory=list)
    later_from_epoch: int = 1
    #: At most this many samples from each training search, drawn at random, half of them expanded
    #: states and half passed over where there are enough of both (0: all).
    samples_per_search: int = 0
    #: Where each epoch's searches run: "local" (one after another in this process), "processes"
    #: (a pool of training.workers processes) or "ray" (Ray tasks: pip install -e '.[ray]').  The
    #: same seed gives the same numbers under each (training/executors.py).
    executor: ExecutorName = "local"
    #: processes: how many (0: one per CPU).
    workers: int = 0
    #: ray: the address of the cluster (null: Ray started on this machine, or RAY_ADDRESS's).
    ray_address: str | None = None


@dataclass
class TrainConfig:
    name: str
    rules: str
    data: DataConfig
    search: SearchSettings = field(default_factory=SearchSettings)
    #: Its depth is search.depth (filled in here).
    model: ModelConfig = field(default_factory=ModelConfig)
    training: TrainingConfig = field(default_factory=TrainingConfig)

    @property
    def plan(self) -> Plan:
        """What every search of the run is planned with (each job gives its own search, budget and seed)."""
        return Plan(rules=self.rules, search=self.search)

    def __post_init__(self) -> None:
        try:
            self.model = dataclasses.replace(self.model, depth=self.search.depth, cost_model=self.search.cost)
        except SettingError as err:
            raise SettingError("search.depth", err.reason) from None

    def to_dict(self) -> dict[str, Any]:
        """The config as nested dicts of its YAML keys (as checkpoints keep it)."""
        return config_dict(self)

    def validate(self, where: str | _Where) -> None:
        """Check what the types do not (ranges, keys that go together); ``where``: the config's file,
        or where each key's value came from (:func:`load_config`)."""
        at = _Where(where) if isinstance(where, str) else where

        def bad(key: str, msg: str) -> KsUsageError:
            return at.error(key, f"{key}: {msg}", with_line=False)  # checked after overrides: no line

        try:
            check_run_name(self.name)
        except ValueError as err:
            raise bad("name", str(err)) from None
        if not 0 <= self.training.seed <= MAX_SEED:
            raise bad("training.seed", f"must be at least 0 and at most {MAX_SEED}, not {self.training.seed}")

        # the enumerated options were checked when they were read (their Literal types), and the
        # search settings by SearchSettings
        if self.training.ray_address is not None and self.training.executor != "ray":
            raise bad(
                "training.ray_address",
                f"(train.py --ray-address) is for training.executor: ray, not {self.training.executor}",
            )
        for key, count in (
            ("training.warmup_epochs", self.training.warmup_epochs),
            ("training.warmup_budget", self.training.warmup_budget),
            ("training.samples_per_search", self.training.samples_per_search),
            ("training.fit_patience", self.training.fit_patience),
            ("training.workers", self.training.workers),
        ):
            if count < 0:
                raise bad(key, f"must be at least 0, not {count}")
        if self.training.replay_best < 0:
            raise bad("training.replay_best", f"must be at least 0, not {self.training.replay_best}")
        if self.training.replay_best and not self.training.best_targets:
            raise bad("training.replay_best", "needs training.best_targets: true (it replays the best targets)")
        for key, value in (
            ("training.epochs", self.training.epochs),
            ("training.exprs_per_epoch", self.training.exprs_per_epoch),
            ("training.fit_passes", self.training.fit_passes),
            ("training.replay_epochs", self.training.replay_epochs),
            ("training.batch_size", self.training.batch_size),
            ("training.eval_every", self.training.eval_every),
            ("training.later_from_epoch", self.training.later_from_epoch),
        ):
            if value < 1:
                raise bad(key, f"must be at least 1, not {value}")
        # the model's own checks are ModelConfig's (made when the section is read)
        if self.model.kind == "tree" and self.search.precision != "float32":
            raise bad("search.precision", "the tree network runs in float32 only")
        from search.limits import MAX_BUDGET

        # (the model's sizes and the search settings are ModelConfig's and SearchSettings' to check)
        for key, value, most, why in (  # values no machine can run: refused rather than left to run out of memory
            ("training.warmup_budget", self.training.warmup_budget, MAX_BUDGET, "no memory holds more states"),
            ("training.batch_size", self.training.batch_size, 100_000, "a batch is one graph in memory"),
            ("training.workers", self.training.workers, 1024, "a process each"),
        ):
            if value > most:
                raise bad(key, f"must be at most {most} ({why}), not {value}")
        if not 0 < self.training.lr < float("inf"):
            raise bad("training.lr", f"must be positive and finite, not {self.training.lr}")
        for key, src in (("data.train", self.data.train), ("data.test", self.data.test)):
            if (src.set is None) == (src.file is None):
                raise bad(key, "give exactly one of 'set' or 'file'")


def config_dict(section: object) -> dict[str, Any]:
    """A config section (a dataclass) as nested dicts of its YAML keys: fields filled from
    elsewhere (:data:`FILLED_FROM`) are left out."""
    out: dict[str, Any] = {}
    for f in dataclasses.fields(section):  # type: ignore[arg-type]
        if FILLED_FROM in f.metadata:
            continue
        value = getattr(section, f.name)
        out[f.name] = config_dict(value) if dataclasses.is_dataclass(value) else copy.copy(value)
    return out


def check_stored_config(raw: object) -> None:
    """A ValueError (``key: what is wrong``) unless ``raw``, a checkpoint's ``config`` (the
    :meth:`TrainConfig.to_dict` of its run), is None or a mapping of sections whose keys known here
    have values of the types they have here, and a search depth and value scale a search takes.
    Keys it lacks or that are unknown here are let be: a checkpoint outlives the code that wrote it."""
    if raw is None:
        return
    _check_stored(TrainConfig, raw, "")
    from search.limits import MAX_DEPTH
    from search.value import check_value_scale

    search = raw.get("search", {}) if isinstance(raw, dict) else {}
    depth = search.get("depth", 1)
    if not 1 <= depth <= MAX_DEPTH:
        raise ValueError(f"search.depth: must be at least 1 and at most {MAX_DEPTH}, not {depth}")
    try:
        check_value_scale(float(search.get("value_scale", 1.0)))
    except ValueError as err:
        raise ValueError(f"search.value_scale: {err}") from None


def _check_stored(cls: type, raw: object, prefix: str) -> None:
    if not isinstance(raw, dict):
        what = prefix.rstrip(".") or "config"
        raise ValueError(f"{what}: expected a mapping of keys, not {type(raw).__name__}")
    hints = typing.get_type_hints(cls)
    where = _Where("")
    for f in dataclasses.fields(cls):
        if FILLED_FROM in f.metadata or f.name not in raw:
            continue
        key = prefix + f.name
        hint = NARROWED.get(key, hints[f.name])
        if dataclasses.is_dataclass(hint):
            _check_stored(hint, raw[f.name], key + ".")  # type: ignore[arg-type]
            continue
        try:
            _convert(hint, raw[f.name], key, where)
        except KsUsageError as err:
            raise ValueError(err.message) from None


def flatten_keys(config: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """A nested config (:func:`config_dict`) as dotted keys: ``{"search.depth": 10, "data.train.set": ...}``."""
    out: dict[str, Any] = {}
    for key, value in config.items():
        if isinstance(value, dict):
            out.update(flatten_keys(value, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = value
    return out


#: The deepest nesting of lists and mappings a config may have (configs need 3 levels): deeper YAML is
#: refused while it is read, before Python's recursion limit is reached.
MAX_NESTING = 50


class _ConfigYAMLError(yaml.MarkedYAMLError):  # type: ignore[misc]  # yaml is untyped
    """YAML that parses but that no config may hold: a duplicate key, nesting beyond MAX_NESTING."""


class _Loader(yaml.SafeLoader):  # type: ignore[misc]
    """PyYAML's safe loader, refusing a key given twice in one mapping (PyYAML keeps the last one
    silently) and nesting deeper than :data:`MAX_NESTING` (its composer recurses once per level)."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self.nesting = 0

    def compose_node(self, parent: yaml.Node | None, index: object) -> yaml.Node | None:
        self.nesting += 1
        try:
            if self.nesting > MAX_NESTING:
                mark = self.peek_event().start_mark
                raise _ConfigYAMLError(problem=f"nested more than {MAX_NESTING} levels deep", problem_mark=mark)
            return super().compose_node(parent, index)
        finally:
            self.nesting -= 1

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: dict[object, yaml.Node] = {}
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge" or not isinstance(key_node, yaml.ScalarNode):
                continue  # a merge (<<) may be overridden by the mapping's own keys
            key = self.construct_object(key_node)
            if key in seen:
                first = seen[key].start_mark
                raise _ConfigYAMLError(
                    problem=f"duplicate key '{key_node.value}' (first given at line {first.line + 1})",
                    problem_mark=key_node.start_mark,
                )
            seen[key] = key_node
        mapping: dict[Any, Any] = super().construct_mapping(node, deep)
        return mapping


def _load_yaml(text: str) -> tuple[yaml.Node | None, object]:
    """The YAML document of ``text``: its node tree (for the keys' lines) and its value."""
    loader = _Loader(text)
    try:
        node = loader.get_single_node()
        return node, loader.construct_document(node) if node is not None else None
    finally:
        loader.dispose()


def _yaml_error(err: yaml.YAMLError, file: str) -> KsUsageError:
    mark = getattr(err, "problem_mark", None)
    pos = Pos(mark.line + 1, mark.column + 1) if mark is not None else None
    return KsUsageError(f"not valid YAML: {getattr(err, 'problem', None) or err}", pos, file)


#: The largest config file read: the shipped ones are a few KiB, and a device never ends.
MAX_CONFIG_BYTES = 2**20


def _read_text(path: str | Path) -> str:
    """The config file's text (UTF-8; a leading BOM is dropped), or a one-line error naming it."""
    file = str(path)
    data = read_regular_file(path, MAX_CONFIG_BYTES, "YAML config file")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        line = data.count(b"\n", 0, err.start) + 1
        col = err.start - (data.rfind(b"\n", 0, err.start) + 1) + 1
        byte = data[err.start]
        raise KsUsageError(
            f"not UTF-8 text (byte 0x{byte:02x}): a config is UTF-8 YAML", Pos(line, col), file
        ) from None


def load_config(
    path: str | Path, overrides: list[str] | None = None, labels: dict[str, str] | None = None
) -> TrainConfig:
    """Read ``path`` and apply ``key=value`` overrides; a KsUsageError on any problem.  An error in
    an override's value is labelled ``--set KEY=VALUE`` (``labels`` gives others: an override that a
    command-line option made)."""
    file = str(path)
    text = _read_text(path)
    try:
        node, raw = _load_yaml(text)
    except yaml.YAMLError as err:
        raise _yaml_error(err, file) from None
    if not isinstance(raw, dict):
        raise KsUsageError("a config is a mapping of keys to values", None, file)
    where = _Where(file, _key_lines(node))
    for item in overrides or []:
        label = (labels or {}).get(item) or _override_label(item)
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise KsUsageError(f"bad override '{item}': expected KEY=VALUE, e.g. training.epochs=5", None, label)
        try:
            _, parsed = _load_yaml(value)
        except _ConfigYAMLError as err:
            raise KsUsageError(f"not valid YAML: {err.problem}", None, label) from None
        except yaml.YAMLError:
            parsed = value  # text YAML cannot read (``a: b``) is taken as it is
        _set_dotted(raw, key.strip(), parsed, label)
        where.overridden[key.strip()] = label
    config: TrainConfig = _build(TrainConfig, raw, "", where)
    config.validate(where)
    return config


def _override_label(item: str, most: int = 60) -> str:
    """``--set KEY=VALUE``, where errors in the override are said to be; a long value is cut short."""
    return f"--set {item if len(item) <= most else item[: most - 3] + '...'}"


def _set_dotted(raw: dict[str, Any], key: str, value: object, label: str) -> None:
    parts = key.split(".")
    here = raw
    for p in parts[:-1]:
        nxt = here.setdefault(p, {})
        if not isinstance(nxt, dict):
            raise KsUsageError(f"override {key}: '{p}' is not a section", None, label)
        here = nxt
    here[parts[-1]] = value


@dataclass
class _Where:
    """Where a key's value came from: a line of the file, or a --set override."""

    file: str
    lines: dict[str, Pos] = field(default_factory=dict)
    #: Each overridden key (dotted) and the override's label (``--set KEY=VALUE``); the last one wins.
    overridden: dict[str, str] = field(default_factory=dict)

    def error(self, key: str, message: str, with_line: bool = True) -> KsUsageError:
        """An error in ``key``, labelled with the override that set it (or one below it: it made
        the section what it is), else with the file (and the key's line, ``with_line``)."""
        for o, label in reversed(self.overridden.items()):
            if key == o or key.startswith(o + ".") or o.startswith(key + "."):
                return KsUsageError(message, None, label)
        return KsUsageError(message, self.lines.get(key) if with_line else None, self.file)


def _key_lines(node: yaml.Node | None, prefix: str = "", levels: int = 3) -> dict[str, Pos]:
    """Line and column of every (dotted) key of a YAML mapping, down to ``levels`` levels (the
    deepest config key, ``data.train.set``; an alias may make a mapping contain itself)."""
    out: dict[str, Pos] = {}
    if isinstance(node, yaml.MappingNode) and levels > 0:
        for k, v in node.value:
            key = f"{prefix}{k.value}"
            out[key] = Pos(k.start_mark.line + 1, k.start_mark.column + 1)
            out.update(_key_lines(v, key + ".", levels - 1))
    return out


def _build(cls: type, raw: object, prefix: str, where: _Where) -> Any:
    section = prefix.rstrip(".") or "the config"
    if not isinstance(raw, dict):
        raise where.error(section, f"{section}: expected a mapping of keys, not {raw!r}")
    hints = typing.get_type_hints(cls)
    fields = {f.name: f for f in dataclasses.fields(cls) if FILLED_FROM not in f.metadata}
    for key in raw:
        if key not in fields:
            known = ", ".join(fields)
            raise where.error(f"{prefix}{key}", f"unknown key '{prefix}{key}' (known here: {known})")
    values: dict[str, Any] = {}
    for name, f in fields.items():
        key = f"{prefix}{name}"
        if name not in raw:
            if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
                raise where.error(key, f"missing key '{key}'", with_line=False)
            continue
        values[name] = _convert(NARROWED.get(key, hints[name]), raw[name], key, where)
    try:
        return cls(**values)
    except SettingError as err:  # a section's own check (ModelConfig's, SearchSettings')
        key = f"{prefix}{err.key}"
        raise where.error(key, f"{key}: {err.reason}", with_line=False) from None


def _convert(hint: Any, value: object, key: str, where: _Where) -> Any:
    origin = typing.get_origin(hint)
    if dataclasses.is_dataclass(hint):
        return _build(hint, value, key + ".", where)  # type: ignore[arg-type]
    if origin in (types.UnionType, typing.Union):
        options = typing.get_args(hint)
        if value is None and type(None) in options:
            return None
        inner = [o for o in options if o is not type(None)]
        return _convert(inner[0], value, key, where)
    if origin is list:
        (item,) = typing.get_args(hint)
        if not isinstance(value, list):
            raise where.error(key, f"{key}: expected a list, not {value!r}")
        return [_convert(item, v, key, where) for v in value]
    if origin is Literal:  # one of a few names: said as validate() says what is out of range
        options = typing.get_args(hint)
        if not isinstance(value, str):
            raise where.error(key, f"{key}: expected text, not {value!r}")
        if value not in options:
            raise where.error(key, f"{key}: '{value}' is not one of {', '.join(options)}", with_line=False)
        return value
    if hint is bool:
        if not isinstance(value, bool):
            raise where.error(key, f"{key}: expected true or false, not {value!r}")
        return value
    if hint is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise where.error(key, f"{key}: expected a whole number, not {value!r}")
        return value
    if hint is float:
        if isinstance(value, str):  # YAML 1.1 reads 1e-4 (no dot) as text
            try:
                return float(value)
            except ValueError:
                pass
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise where.error(key, f"{key}: expected a number, not {value!r}")
        return float(value)
    if hint is str:
        if not isinstance(value, str):
            raise where.error(key, f"{key}: expected text, not {value!r}")
        return value
    raise TypeError(f"unsupported config type {hint} for {key}")
