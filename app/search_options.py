"""optimize.py's search options, each mapped onto a field of :class:`search.settings.SearchSettings`:
its flag, its argparse keywords, and the settings a command line gives (:func:`search.plan.choose_plan`
decides what they win over)."""

from __future__ import annotations

import argparse
from typing import Any

from app.models import value_scale
from knossos.cli import whole_number
from knossos.cost_models import COST_MODELS
from search.limits import MAX_BUDGET, MAX_DEPTH
from search.plan import ARITHMETIC_PLAN, PROGRAM_PLAN, REVERSE_PLAN
from search.registry import SEARCHES
from search.settings import PRECISIONS


def _options() -> dict[str, tuple[str, dict[str, Any]]]:
    """Each setting optimize.py takes on its command line: its flag and argparse keywords (the
    argparse destination is the flag's name).  None, an option not given: the model's setting."""
    return {
        "cost": (
            "--cost",
            dict(
                choices=tuple(COST_MODELS),
                default=None,
                help="the cost model to minimise: reference (the paper's) or alloc (also charges every element a "
                "vector op writes, as compiled code does; docs/cost.md) (reference; alloc for reverse-mode code, rev$f, "
                "with no --model; or the model's)",
            ),
        ),
        "algorithm": (
            "--search",
            dict(
                default=None,
                metavar="NAME",
                help=f"search ({', '.join(SEARCHES)}; without --model, {PROGRAM_PLAN.search.algorithm} for a program (loops, "
                f"vectors, calls), {REVERSE_PLAN.search.algorithm} for reverse-mode code (rev$f) and {ARITHMETIC_PLAN.search.algorithm} for scalar "
                "arithmetic; or the one the model was trained for)",
            ),
        ),
        "depth": (
            "--depth",
            dict(
                type=whole_number(MAX_DEPTH),
                default=None,
                metavar="H",
                help=f"most rewrites in a sequence (10, or the depth the model was trained for; <= {MAX_DEPTH})",
            ),
        ),
        "prune_commutes": (
            "--prune-commutes",
            dict(
                action=argparse.BooleanOptionalAction,
                default=None,
                help="drop commutations (commute_add, commute_mul) that enable no other rule where they swap "
                "(off, or as the model was trained)",
            ),
        ),
        "prune_inlines": (
            "--prune-inlines",
            dict(
                action=argparse.BooleanOptionalAction,
                default=None,
                help="drop inlines (inline_let) that raise the cost and let no other rule match where they land "
                "(off, or as the model was trained)",
            ),
        ),
        "budget": (
            "--budget",
            dict(
                type=whole_number(MAX_BUDGET),
                default=None,
                metavar="N",
                help=f"value-function evaluations (the model's; without --model {PROGRAM_PLAN.search.budget} for a program, "
                f"{ARITHMETIC_PLAN.search.budget} for arithmetic); exhaustive: most distinct expressions; egraph: most e-nodes",
            ),
        ),
        "precision": (
            "--precision",
            dict(
                choices=PRECISIONS,
                default="float32",
                help="the model's inference arithmetic: bfloat16 is about twice as fast on CPUs with AMX/AVX512-BF16",
            ),
        ),
        "value_scale": (
            "--value-scale",
            dict(
                type=value_scale,
                default=None,
                metavar="S",
                help="multiply the model's values by S (default: the model's own, chosen when it was exported)",
            ),
        ),
    }


#: Setting -> (flag, argparse keywords); every key is a field of SearchSettings (tests check it).
OPTIONS = _options()


def dest(setting: str) -> str:
    """Where argparse keeps the option of ``setting`` (``algorithm``: ``search``)."""
    return OPTIONS[setting][0].removeprefix("--").replace("-", "_")


def add_search_option(parser: argparse.ArgumentParser, setting: str) -> None:
    """Add the option of ``setting`` to ``parser`` (one at a time: --help keeps its order of options)."""
    flag, keywords = OPTIONS[setting]
    parser.add_argument(flag, **keywords)


def given_settings(args: argparse.Namespace) -> dict[str, object]:
    """The settings whose options the command line gave (not None), by setting name."""
    return {s: getattr(args, dest(s)) for s in OPTIONS if getattr(args, dest(s), None) is not None}
