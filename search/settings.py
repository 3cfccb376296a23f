"""What a search is configured with, as one frozen value: which search, its depth, budgets and batch
size, how its value function runs (precision, scale), the prunings and the cost model.

A training config's ``search:`` section is these settings (its keys are their fields), a training
checkpoint stores them (in its config), a model loaded from a checkpoint carries the ones it is
searched with, and optimize.py's options map onto them (:mod:`app.search_options`).  A
:class:`~search.plan.Plan` holds them with the rule set, sizes, limits and tidying, and makes a
search's :class:`~search.spec.SearchSpec` of them.
"""

from __future__ import annotations

import dataclasses
import typing
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from knossos.cost_models import COST_MODELS
from search.limits import MAX_BUDGET, MAX_DEPTH
from search.registry import SEARCHES, TRAINING_SEARCHES
from search.value import check_value_scale

#: The network's inference arithmetic in searches (gnn/value.py).
Precision = Literal["float32", "bfloat16"]
PRECISIONS: tuple[str, ...] = typing.get_args(Precision)

# The names of searches and cost models are their registries' keys; at run time these are Literal
# types of those keys (what the config loader checks a value against), to mypy plain text.
if TYPE_CHECKING:
    SearchName = str
    TrainingSearchName = str
    CostName = str
else:
    #: Every search (search.registry.SEARCHES).
    SearchName = Literal[tuple(SEARCHES)]
    #: The searches a network trains with (search.registry.TRAINING_SEARCHES).
    TrainingSearchName = Literal[TRAINING_SEARCHES]
    #: The cost models (knossos.cost_models.COST_MODELS).
    CostName = Literal[tuple(COST_MODELS)]


class SettingError(ValueError):
    """A bad value of one setting: ``key`` (dotted within its section) and ``reason``, what is wrong
    with it.  The config loader reports ``section.key: reason``; the message alone reads
    ``section key in words: reason`` (``model cost normalization: 'sqrt' is not one of none, log``)."""

    def __init__(self, key: str, reason: str, section: str = "") -> None:
        words = key.replace("_", " ")
        super().__init__(f"{section} {words}: {reason}" if section else f"{words}: {reason}")
        self.key = key
        self.reason = reason


def has_type(value: object, hint: Any) -> bool:
    """Whether ``value`` is of the type ``hint`` of a setting: a whole number (not a bool), a bool,
    a number, text, or one of a Literal's names."""
    if typing.get_origin(hint) is Literal:
        return isinstance(value, str) and value in typing.get_args(hint)
    if hint is float:
        return isinstance(value, int | float) and not isinstance(value, bool)
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool)
    return isinstance(value, hint)


def wrong_type(value: object, hint: Any) -> str:
    """What is wrong with ``value``, which is not of the type ``hint`` (:func:`has_type`)."""
    if typing.get_origin(hint) is Literal:
        if isinstance(value, str):
            return f"'{value}' is not one of {', '.join(typing.get_args(hint))}"
        return f"expected text, not {value!r}"
    words = {int: "a whole number", bool: "true or false", float: "a number", str: "text"}
    return f"expected {words.get(hint, str(hint))}, not {value!r}"


def check_types(settings: object, section: str) -> None:
    """A SettingError unless every field of the dataclass ``settings`` has a value of its type."""
    hints = typing.get_type_hints(type(settings))
    for f in dataclasses.fields(settings):  # type: ignore[arg-type]
        value = getattr(settings, f.name)
        if not has_type(value, hints[f.name]):
            raise SettingError(f.name, wrong_type(value, hints[f.name]), section)


@dataclass(frozen=True)
class SearchSettings:
    """The settings of a search: a training config's ``search:`` section (each field a key)."""

    algorithm: SearchName = "astar"
    #: The search that evaluates a model (on a training run's train and test sets; optimize.py's
    #: search with a model loaded from a checkpoint).
    test_algorithm: SearchName = "astar"
    #: H: the most rewrites in a sequence.
    depth: int = 10
    #: Value-function evaluations per search (while training).
    budget: int = 5000
    #: ... and when evaluating on the train and test sets.
    test_budget: int = 5000
    #: New states go to the value function in batches of at least this many (Table 1: 16).
    batch_size: int = 16
    #: The network's inference arithmetic in searches (gnn/value.py): float32, or bfloat16 (about
    #: twice as fast on CPUs with AMX/AVX512-BF16; fitting stays in float32).
    precision: Precision = "float32"
    #: Every value of the network is multiplied by this in the searches (gnn/value.py): 1 is the
    #: paper's A*; less shrinks a noisy network's estimates towards greedy search's order.
    value_scale: float = 1.0
    #: Drop commutations that enable no other rule where they swap (search/symmetry.py).
    prune_commutes: bool = False
    #: Drop inlines that raise the cost and open nothing where they land (search/idle_inlines.py).
    prune_inlines: bool = False
    #: The cost model the searches minimise (knossos.cost_models.COST_MODELS): "reference" (the
    #: paper's) or "alloc" (also charges every element a vector op writes; knossos/alloc_cost.py).
    cost: CostName = "reference"

    def __post_init__(self) -> None:
        check_types(self, "search")
        object.__setattr__(self, "value_scale", float(self.value_scale))  # YAML and JSON may give a whole number

        def bad(key: str, reason: str) -> SettingError:
            return SettingError(key, reason, "search")

        try:
            check_value_scale(self.value_scale)
        except ValueError as err:
            raise bad("value_scale", str(err)) from None
        for key in ("depth", "budget", "test_budget", "batch_size"):
            value = getattr(self, key)
            if value < 1:
                raise bad(key, f"must be at least 1, not {value}")
        for key, most, why in (  # values no machine can run: refused rather than left to run out of memory
            ("depth", MAX_DEPTH, "each state keeps a value per step left"),
            ("budget", MAX_BUDGET, "no memory holds more states"),
            ("test_budget", MAX_BUDGET, "no memory holds more states"),
            ("batch_size", MAX_BUDGET, "no memory holds more states"),
        ):
            value = getattr(self, key)
            if value > most:
                raise bad(key, f"must be at most {most} ({why}), not {value}")

    @classmethod
    def names(cls) -> tuple[str, ...]:
        """The settings' names (a config section's keys)."""
        return tuple(f.name for f in dataclasses.fields(cls))

    def to_dict(self) -> dict[str, Any]:
        """The settings as a config section: each field by name."""
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, raw: Mapping[str, object]) -> SearchSettings:
        """The settings of a config section; a one-line SettingError (a ValueError) on a key that is
        not a setting or a value a setting cannot take.  Keys it lacks take their defaults."""
        if not isinstance(raw, Mapping):
            raise SettingError("settings", f"expected a mapping of keys, not {type(raw).__name__}", "search")
        known = cls.names()
        for key in raw:
            if key not in known:
                raise SettingError(str(key), f"unknown setting (known: {', '.join(known)})", "search")
        return cls(**raw)  # type: ignore[arg-type]
