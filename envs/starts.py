"""The start expressions of an environment: one program (a bare expression, or a def of a file), a set,
or benchmarks and datasets by URI (:mod:`envs.datasets`).  Each start is a
:class:`~envs.datasets.Benchmark`, whose ``uri`` :func:`~envs.datasets.load_benchmark` turns back into it.

Every bad setting is a :class:`~knossos.errors.KsUsageError` (or the parser's own error) of one line.
"""

from __future__ import annotations

from collections.abc import Sequence

from envs.datasets import DATASETS, SCHEME, VERSION, Benchmark, expression_uri, file_uri, split_uri
from knossos.cli import find_def
from knossos.errors import KsUsageError
from knossos.expr import Expr
from knossos.parser import load_program, parse_expr
from ksdata.loader import DataSource, load_targets

#: What an environment starts from.
Start = Benchmark


def load_starts(
    program: str | Expr | None,
    def_name: str | None,
    expressions: str | Sequence[str | Expr] | None,
    benchmark: str | Sequence[str] | None = None,
) -> list[Start]:
    """The starts named by exactly one of ``program`` (with ``def_name`` for a file), ``expressions`` and
    ``benchmark``."""
    given = [
        k for k, v in (("program", program), ("expressions", expressions), ("benchmark", benchmark)) if v is not None
    ]
    if len(given) > 1:
        raise KsUsageError(f"give one of program=, expressions= and benchmark=, not {'= and '.join(given)}=")
    if not given:
        raise KsUsageError(
            "give program= (an expression, or a .ks/.kso file and def_name=), expressions= "
            "(a set name such as 'generated_train', or a list of expressions) or benchmark= "
            "(a URI such as 'benchmark://bindgen_test-v0/3', or a dataset's, 'benchmark://bindgen_test-v0')"
        )
    if def_name is not None and program is None:
        raise KsUsageError(f"def_name= goes with program= (a file), not with {given[0]}=")
    if benchmark is not None:
        return benchmarks(benchmark)
    if expressions is not None:
        return _set(expressions)
    assert program is not None
    if isinstance(program, Expr):
        return [Start(expression_uri(program), "<expr>", program)]
    if not isinstance(program, str):
        raise KsUsageError(f"program= must be a string or an expression, not {type(program).__name__}")
    # A leaf alone has no rewrites, so every start worth having begins with "("; anything else is a file.
    if program.lstrip().startswith("("):
        if def_name is not None:
            raise KsUsageError("def_name= needs program= to be a file, not an expression")
        e = parse_expr(program)[0]
        return [Start(expression_uri(e), "<expr>", e)]
    return [_def(program, def_name)]


def benchmarks(names: str | Sequence[str]) -> list[Start]:
    """The benchmarks named: each a benchmark (``benchmark://bindgen_test-v0/3``, ``file://PATH#DEF``,
    ``(expr ...)``) or a whole dataset (``benchmark://bindgen_test-v0``)."""
    items = [names] if isinstance(names, str) else names
    if not isinstance(items, Sequence):
        raise KsUsageError(f"benchmark= must be a URI or a list of URIs, not {type(names).__name__}")
    if not items:
        raise KsUsageError("benchmark= is an empty list")
    out: list[Start] = []
    for item in items:
        if isinstance(item, str) and item.startswith(SCHEME) and split_uri(item)[1] is None:
            out.extend(DATASETS[item].benchmarks())
        else:
            out.append(DATASETS.benchmark(item))
    return out


def _def(path: str, def_name: str | None) -> Start:
    prog = load_program(path)
    if def_name is not None:
        d = find_def(prog, def_name, path)
        return Start(file_uri(path, d.name), d.name, d.body)
    targets = prog.targets
    if len(targets) != 1:
        names = ", ".join(t.name for t in targets[:8]) + (" ..." if len(targets) > 8 else "")
        raise KsUsageError(f"the file has {len(targets)} defs; pick one with def_name= ({names})", None, path)
    return Start(file_uri(path, targets[0].name), targets[0].name, targets[0].body)


def _set(expressions: str | Sequence[str | Expr]) -> list[Start]:
    if isinstance(expressions, str):  # set names, joined by + as in configs
        targets = load_targets(DataSource(set=expressions), "expressions=")
        return [Start(_set_uri(t.name), t.name, t.expr, t.best_known) for t in targets]
    if not isinstance(expressions, Sequence):
        raise KsUsageError(f"expressions= must be a set name or a list, not {type(expressions).__name__}")
    if not expressions:
        raise KsUsageError("expressions= is an empty list")
    out = []
    for i, item in enumerate(expressions):
        name = f"expressions[{i}]"
        if isinstance(item, Expr):
            out.append(Start(expression_uri(item), name, item))
        elif isinstance(item, str):
            e = parse_expr(item, name)[0]
            out.append(Start(expression_uri(e), name, e))
        else:
            raise KsUsageError(f"{name} must be a string or an expression, not {type(item).__name__}")
    return out


def _set_uri(name: str) -> str:
    """``benchmark://bindgen_test-v0/3`` of the target ``bindgen_test[3]``."""
    set_name, _, index = name.rstrip("]").rpartition("[")
    return f"{SCHEME}{set_name}-{VERSION}/{index}"
