"""``compile_optimised``: :func:`cpp_backend.compile_def` with the def optimised first by a rule set or model.

The language core (knossos) imports no search (the layering of pyproject.toml), so the optimising
form lives here, above both; it searches as ``optimize.py FILE --def NAME`` does::

    from app.compiled import compile_optimised
    gemm = compile_optimised("ksdata/programs/blas_test.kso", "gemm", "ml_rules_no_bind")
    gemm = compile_optimised(path, "gemm", "default")          # a shipped model and its settings

``optimize`` names a rule set (``rules/sets.py``, with ``+``, ``strict:`` and ``unsafe-int:`` as
``--rules`` takes them: searched as optimize.py does without --model,
:meth:`search.plan.Plan.default_for`) or a model (``none``, a shipped model's name or a
checkpoint: its training's rules, search, depth and budget, as optimize.py --model).  ``budget``,
``depth`` and ``seconds`` override the search's (:func:`search.plan.choose_plan`); the result is
tidied, as optimize.py's is.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Sequence

from app.models import load_value_function
from app.product_guard import keep_blocked_products
from cpp_backend.callable import CompiledDef, compile_def
from knossos.errors import KsUsageError
from knossos.program import Def, Program
from rules.sets import RULE_SETS, get_rule_set
from search.plan import choose_plan, run
from search.value import ValueFunction


def optimise_def(
    program: Program,
    d: Def,
    optimize: str,
    *,
    budget: int | None = None,
    depth: int | None = None,
    seconds: float | None = None,
) -> Def:
    """``d`` with its body replaced by the best that the plan named by ``optimize`` finds (tidied)."""
    if _names_rule_set(optimize):
        model: ValueFunction | None = None
        rules: str | None = optimize
    else:
        try:
            model = load_value_function(optimize)
        except KsUsageError as err:
            raise KsUsageError(
                f"optimize='{optimize}' is neither a rule set ({', '.join(sorted(RULE_SETS))}) nor a usable model: "
                f"{err.message}"
            ) from None
        rules = None
    plan = choose_plan(d.body, d.name, model, rules=rules, budget=budget, depth=depth, seconds=seconds, tidy=True)
    result = keep_blocked_products(run(d.body, plan, model), get_rule_set(plan.rules))
    return dataclasses.replace(d, body=result.best)


def _names_rule_set(name: str) -> bool:
    """Whether ``name`` is a rule set as every ``--rules`` reads one (a union, ``strict:``, ``unsafe-int:``)."""
    try:
        get_rule_set(name)
    except KsUsageError:
        return False
    return True


def compile_optimised(
    path: str | os.PathLike[str] | Program,
    name: str,
    optimize: str,
    *,
    exact_order: bool = False,
    threads: int | None = None,
    budget: int | None = None,
    depth: int | None = None,
    seconds: float | None = None,
    extra_flags: Sequence[str] = (),
    budget_mib: int | None = None,
) -> CompiledDef:
    """:func:`cpp_backend.compile_def` of the def optimised first by the rule set or model ``optimize`` names."""

    def optimised(program: Program, d: Def) -> Def:
        return optimise_def(program, d, optimize, budget=budget, depth=depth, seconds=seconds)

    return compile_def(
        path,
        name,
        exact_order=exact_order,
        threads=threads,
        optimize=optimised,
        extra_flags=extra_flags,
        budget_mib=budget_mib,
    )


__all__ = ["compile_optimised", "optimise_def"]
