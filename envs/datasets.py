"""Benchmarks and datasets, named by URIs as CompilerGym names them.

A *dataset* is one expression set of ``ksdata`` (``arithmetic_sets.json``,
``generated_sets.json``) or one program file of ``ksdata/programs`` (templates left out);
a *benchmark* is one start expression of it::

    benchmark://bindgen_test-v0/3          expression 3 of the set bindgen_test (bindgen_test[3])
    benchmark://blas_test-v0/dot           the def dot of programs/blas_test.kso (its body)
    benchmark://bindgen_test-v0            the dataset itself (an environment draws from it)

Two more forms name starts outside the datasets, so that every start of an environment has a
benchmark string that :func:`load_benchmark` turns back into the same expression (a replayable
state needs one): ``file:///abs/path.ks#f`` (the def ``f`` of a file) and an expression in
parentheses, ``(add x 1.0)``.

:data:`DATASETS` lists the datasets (``for d in DATASETS``, ``DATASETS["bindgen_test-v0"]``,
``DATASETS.benchmark(uri)``, ``DATASETS.random_benchmark(rng)``); an environment offers it as
``env.unwrapped.datasets``.  Everything is read once, when first asked for.  Every bad URI is a
one-line :class:`BenchmarkError`.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Final, Literal

import numpy as np

from knossos.cli import find_def
from knossos.errors import KsUsageError, one_line
from knossos.expr import Expr
from knossos.parser import load_program, parse_expr
from knossos.printer import format_expr
from ksdata.loader import DATA, PROGRAMS_ROOT, SET_FILES, DataSource, load_targets

SCHEME: Final = "benchmark://"
FILE_SCHEME: Final = "file://"
#: Every dataset's version: a dataset whose expressions change gets a new one.
VERSION: Final = "v0"
#: The rule set the programs were written for (ksdata/README.md).
PROGRAM_RULES: Final = "ml_rules"


class BenchmarkError(KsUsageError, ValueError):
    """A benchmark or dataset that does not exist, or a malformed URI: a usage error, and a ValueError."""


@dataclass(frozen=True)
class Benchmark:
    """One start expression: its URI (or file URI, or expression text), its name and its best-known cost."""

    uri: str
    #: What ``info["start"]`` shows: ``bindgen_test[3]``, a def's name, ``<expr>``.
    name: str
    expr: Expr
    #: The reference's best cost for it where known (ksdata), else None.
    best_known: float | None = None


@dataclass(frozen=True)
class Dataset:
    """An expression set or a program file of ``ksdata`` (see the module's docstring)."""

    #: ``bindgen_test-v0``
    name: str
    kind: Literal["expressions", "programs"]
    #: The set's name, or the program file relative to the repository root.
    source: str
    #: The rule set the dataset was made for (``rule_set`` of the set; ml_rules for programs).
    rules: str

    @property
    def uri(self) -> str:
        return SCHEME + self.name

    def benchmarks(self) -> list[Benchmark]:
        """Every benchmark, in the dataset's order."""
        return list(_benchmarks(self))

    def benchmark_uris(self) -> list[str]:
        return [b.uri for b in _benchmarks(self)]

    def __len__(self) -> int:
        return len(_benchmarks(self))

    def benchmark(self, key: str | int) -> Benchmark:
        """The benchmark with this URI, or this id (an index of a set, a def name of a program file)."""
        key = str(key)
        if key.startswith(SCHEME):
            name, _, rest = key[len(SCHEME) :].partition("/")
            if name != self.name:
                raise BenchmarkError(f"{one_line(key)!r} is not a benchmark of {self.uri}")
            key = rest
        found = _by_id(self).get(key)
        if found is None:
            ids = list(_by_id(self))
            hint = f"0 to {len(ids) - 1}" if self.kind == "expressions" else _few(ids)
            raise BenchmarkError(f"no benchmark '{one_line(key)}' in {self.uri} (its ids: {hint})")
        return found

    def random_benchmark(self, rng: np.random.Generator) -> Benchmark:
        """A benchmark drawn uniformly with ``rng`` (an environment passes its seeded ``np_random``)."""
        items = _benchmarks(self)
        return items[int(rng.integers(len(items)))]


class Datasets:
    """Every dataset, by name: iterate, index (``DATASETS["bindgen_test-v0"]``), find a benchmark by URI."""

    def __iter__(self) -> Iterator[Dataset]:
        return iter(_datasets().values())

    def __len__(self) -> int:
        return len(_datasets())

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and _dataset_name(name) in _datasets()

    def __getitem__(self, name: str) -> Dataset:
        """The dataset ``bindgen_test-v0`` or ``benchmark://bindgen_test-v0``."""
        found = _datasets().get(_dataset_name(name))
        if found is None:
            raise BenchmarkError(f"no dataset '{one_line(str(name))}' (known: {', '.join(_datasets())})")
        return found

    def benchmark(self, uri: str) -> Benchmark:
        """The benchmark of a ``benchmark://``/``file://`` URI or an expression in parentheses."""
        return load_benchmark(uri)

    def benchmark_uris(self) -> Iterator[str]:
        for d in self:
            yield from d.benchmark_uris()

    def random_benchmark(self, rng: np.random.Generator, datasets: Sequence[str] | None = None) -> Benchmark:
        """A benchmark drawn uniformly with ``rng`` from ``datasets`` (names or URIs; all of them if None),
        each benchmark equally likely."""
        chosen = [self[n] for n in datasets] if datasets is not None else list(self)
        sizes = np.array([len(d) for d in chosen])
        k = int(rng.integers(sizes.sum()))
        i = int(np.searchsorted(np.cumsum(sizes), k, side="right"))
        return _benchmarks(chosen[i])[k - int(sizes[:i].sum())]


DATASETS: Final = Datasets()


def load_benchmark(text: str) -> Benchmark:
    """The benchmark named by ``text``: ``benchmark://DATASET/ID``, ``file://PATH#DEF`` or ``(expr ...)``."""
    if not isinstance(text, str):
        raise BenchmarkError(f"a benchmark must be a string, not {type(text).__name__}")
    stripped = text.strip()
    if stripped.startswith("("):
        e = parse_expr(stripped, "<benchmark>")[0]
        return Benchmark(expression_uri(e), "<expr>", e)
    if stripped.startswith(FILE_SCHEME):
        path, _, def_name = stripped[len(FILE_SCHEME) :].partition("#")
        if not def_name:
            raise BenchmarkError(f"a file benchmark names its def after '#': file://PATH#DEF, not {one_line(text)!r}")
        d = find_def(load_program(path), def_name, path)
        return Benchmark(file_uri(path, def_name), d.name, d.body)
    dataset, key = split_uri(stripped)
    if key is None:
        raise BenchmarkError(
            f"{one_line(text)!r} names a dataset, not a benchmark: add /ID, e.g. {DATASETS[dataset].benchmark_uris()[0]}"
        )
    return DATASETS[dataset].benchmark(key)


def split_uri(text: str) -> tuple[str, str | None]:
    """(dataset name, benchmark id or None) of ``benchmark://DATASET[/ID]``."""
    if not text.startswith(SCHEME):
        raise BenchmarkError(
            f"a benchmark is benchmark://DATASET/ID, file://PATH#DEF or an expression in parentheses, "
            f"not {one_line(repr(text))[:200]}"
        )
    name, slash, key = text[len(SCHEME) :].partition("/")
    DATASETS[name]  # an unknown dataset is an error here, with the known names
    return name, key if slash else None


def expression_uri(e: Expr) -> str:
    """The benchmark string of a bare expression: its text on one line."""
    return format_expr(e, width=1 << 30)


def file_uri(path: str | Path, def_name: str) -> str:
    return f"{FILE_SCHEME}{Path(path).resolve()}#{def_name}"


# -- the datasets, read once ----------------------------------------------------------------------------
def _dataset_name(name: str) -> str:
    return name[len(SCHEME) :] if isinstance(name, str) and name.startswith(SCHEME) else name


@cache
def _datasets() -> dict[str, Dataset]:
    out: dict[str, Dataset] = {}
    for file in SET_FILES:
        if (DATA / file).is_file():
            for set_name, spec in json.loads((DATA / file).read_text())["sets"].items():
                name = f"{set_name}-{VERSION}"
                out[name] = Dataset(name, "expressions", set_name, str(spec.get("rule_set", "binding_simplify_rules")))
    for path in sorted((DATA / "programs").glob("*.kso")):
        if not path.stem.endswith("_template"):  # prefixes that the train and test files build on
            name = f"{path.stem}-{VERSION}"
            out[name] = Dataset(name, "programs", str(path.relative_to(PROGRAMS_ROOT)), PROGRAM_RULES)
    return out


@cache
def _benchmarks(d: Dataset) -> tuple[Benchmark, ...]:
    if d.kind == "expressions":
        targets = load_targets(DataSource(set=d.source), d.uri)
        return tuple(Benchmark(f"{d.uri}/{i}", t.name, t.expr, t.best_known) for i, t in enumerate(targets))
    targets = load_targets(DataSource(file=d.source), d.uri)
    return tuple(Benchmark(f"{d.uri}/{t.name}", t.name, t.expr, t.best_known) for t in targets)


@cache
def _by_id(d: Dataset) -> dict[str, Benchmark]:
    return {b.uri.rpartition("/")[2] if d.kind == "expressions" else b.name: b for b in _benchmarks(d)}


def _few(names: list[str]) -> str:
    return ", ".join(names[:8]) + (" ..." if len(names) > 8 else "")
