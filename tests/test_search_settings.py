"""The search settings (search/settings.py): one frozen value, read and written as a config section,
turned into a search's spec, and set from optimize.py's options."""

from __future__ import annotations

import dataclasses
import typing

import pytest

from app.optimize_cli import build_parser
from app.search_options import OPTIONS, dest, given_settings
from knossos.cost_models import COST_MODELS, alloc_cost
from rules.sets import get_rule_set
from search.plan import Plan
from search.registry import SEARCHES, TRAINING_SEARCHES
from search.settings import CostName, SearchName, SearchSettings, SettingError, TrainingSearchName
from search.spec import SearchSpec
from search.value import ZeroValue

RULES = get_rule_set("binding_simplify_rules")


def test_the_names_are_the_registries_keys() -> None:
    assert typing.get_args(SearchName) == tuple(SEARCHES)
    assert typing.get_args(TrainingSearchName) == TRAINING_SEARCHES
    assert set(TRAINING_SEARCHES) <= set(SEARCHES)
    assert typing.get_args(CostName) == tuple(COST_MODELS)


def test_the_settings_are_frozen_and_round_trip_as_a_section() -> None:
    s = SearchSettings(algorithm="beam", depth=30, budget=700, prune_inlines=True, cost="alloc")
    with pytest.raises(dataclasses.FrozenInstanceError):
        s.depth = 3  # type: ignore[misc]
    assert SearchSettings.from_dict(s.to_dict()) == s
    assert list(s.to_dict()) == list(SearchSettings.names())
    assert SearchSettings.from_dict({}) == SearchSettings()
    assert SearchSettings.from_dict({"value_scale": 1}).value_scale == 1.0  # a whole number is a number


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ({"depht": 3}, "search depht: unknown setting (known: algorithm, test_algorithm, depth,"),
        ({"depth": 0}, "search depth: must be at least 1, not 0"),
        ({"depth": 5000}, "search depth: must be at most 1000 (each state keeps a value per step left), not 5000"),
        ({"depth": "ten"}, "search depth: expected a whole number, not 'ten'"),
        ({"budget": True}, "search budget: expected a whole number, not True"),
        ({"algorithm": "nope"}, "search algorithm: 'nope' is not one of astar, lazy-astar, greedy,"),
        ({"precision": "float16"}, "search precision: 'float16' is not one of float32, bfloat16"),
        ({"value_scale": 500}, "search value scale: the value scale must be in [0, 100], not 500.0"),
        ({"prune_commutes": "yes"}, "search prune commutes: expected true or false, not 'yes'"),
        ({"test_budget": 10**10}, "search test budget: must be at most 1000000000 (no memory holds more states)"),
    ],
)
def test_bad_settings_are_one_line_errors(raw: dict[str, object], message: str) -> None:
    with pytest.raises(SettingError) as err:
        SearchSettings.from_dict(raw)
    assert str(err.value).startswith(message)
    assert "\n" not in str(err.value)


def test_a_plans_spec_takes_the_settings_and_the_runtime_objects() -> None:
    s = SearchSettings(depth=7, budget=300, batch_size=4, prune_commutes=True, prune_inlines=True, cost="alloc")
    value = ZeroValue()
    plan = Plan(rules=RULES.name, search=s, seed=3, seconds=2.0)
    spec = plan.spec(value)
    assert isinstance(spec, SearchSpec)
    assert (spec.rules.name, spec.value, spec.cost, spec.seed, spec.seconds) == (RULES.name, value, alloc_cost, 3, 2.0)
    assert (spec.depth, spec.budget, spec.batch_size, spec.prune_commutes, spec.prune_inlines) == (
        7,
        300,
        4,
        True,
        True,
    )
    assert plan.overridden(budget=20).spec().budget == 20  # a job's own budget
    assert isinstance(plan.spec().value, ZeroValue)
    assert plan.spec().first_phase_rules.name == "phase1"  # two-phase's first rule set, resolved by the plan


def test_every_setting_a_spec_has_is_passed_on() -> None:
    """A setting that is also a field of SearchSpec reaches it without code of its own."""
    shared = set(SearchSettings.names()) & {f.name for f in dataclasses.fields(SearchSpec)}
    assert shared == {"depth", "budget", "batch_size", "prune_commutes", "prune_inlines", "cost"}


def test_optimize_options_map_onto_the_settings() -> None:
    assert set(OPTIONS) <= set(SearchSettings.names())
    parser = build_parser()
    args = parser.parse_args(["--expr", "x", "--search", "beam", "--depth", "4", "--no-prune-inlines"])
    base = Plan(search=SearchSettings(prune_inlines=True, budget=77))
    s = base.overridden(**given_settings(args)).search
    assert (s.algorithm, s.depth, s.prune_inlines, s.budget) == ("beam", 4, False, 77)
    assert dest("algorithm") == "search" and dest("value_scale") == "value_scale"
