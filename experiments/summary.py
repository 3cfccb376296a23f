"""The measured tables of the documentation, made from the committed results files.

Run:  python -m experiments.summary           print every table
      python -m experiments.summary --write   rewrite the tables in every file of READMES

Each table sits in one of the READMES between ``<!-- table:NAME -->`` and ``<!-- /table -->``;
--write replaces only what is between those markers.  Each folder's ``figure.py`` owns its tables
(experiments.figures walks them).  tests/test_experiments_readme.py checks that the tables are what
this module makes of the results, so the numbers there are measured ones.
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Callable

from experiments.figures import figures
from knossos.atomic import atomic_write_text
from ksbench.results import RESULTS, ROOT

README = ROOT / "experiments" / "README.md"
#: The files that hold marked tables (each table in exactly one of them).
READMES = (
    ROOT / "README.md",
    README,
    ROOT / "docs" / "default_model.md",
    ROOT / "docs" / "egraph.md",
    ROOT / "docs" / "programs.md",
    ROOT / "docs" / "torch.md",
    ROOT / "docs" / "layers.md",
    ROOT / "docs" / "autodiff.md",
    RESULTS / "training" / "README.md",
)
MARKER = re.compile(r"(<!-- table:(?P<figure>[\w]+) -->\n)(?P<body>.*?)(<!-- /table -->)", re.S)
#: Every figure's tables by name, in the registry's order.
TABLES: dict[str, Callable[[], str]] = {name: make for f in figures().values() for name, make in f.tables.items()}


def rewrite(text: str) -> str:
    """``text`` with every marked table replaced by the current one."""

    def table(m: re.Match[str]) -> str:
        make = TABLES.get(m["figure"])
        if make is None:
            raise SystemExit(f"error: no table named {m['figure']} (known: {', '.join(TABLES)})")
        return m.group(1) + make() + m.group(4)

    return MARKER.sub(table, text)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--write", action="store_true", help="rewrite the tables in every file that holds them")
    args = ap.parse_args()
    if args.write:
        for readme in READMES:
            text = readme.read_text()
            new = rewrite(text)
            if new != text:
                atomic_write_text(readme, new)
            print(f"{readme}: tables up to date")
        return
    for figure, make in TABLES.items():
        print(f"## {figure}\n\n{make()}")


if __name__ == "__main__":
    main()
