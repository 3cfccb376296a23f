"""optimize.py's default on every program def (benchmarks/bench_default_programs.py's rows): a table of
docs/egraph.md."""

from __future__ import annotations

from experiments.figures import Figure
from ksbench.results import RESULTS, ResultsFile


def default_programs_table() -> str:
    """benchmarks/bench_default_programs.py's rows: the default against plain A* and pruned pseudo-beam."""
    path = RESULTS / "engines" / "programs.jsonl"
    if not path.is_file():
        return "_No results yet: run benchmarks/bench_default_programs.py._\n"
    from ksbench.default_programs import summary

    return summary(list(ResultsFile(path, ("program", "def_", "engine"))))


FIGURE = Figure(
    "default_programs",
    "the default pipeline on the program defs (benchmarks/bench_default_programs.py)",
    {"default_programs": default_programs_table},
)
