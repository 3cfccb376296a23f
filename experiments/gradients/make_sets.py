"""The gradient benchmark sets: ``rev$`` of every def of blas_train.kso and blas_test.kso, and of
conv1d, made by ``autodiff`` (issue 32), with their start costs.

Run:  python experiments/gradients/make_sets.py [--check]

Writes, under ksdata/gradients/:

* ``rev_blas_train.kso``: blas_train.kso with ``rev$f`` of each of its defs (training only);
* ``rev_blas_test.kso``: blas_test.kso with ``rev$f`` of each of its defs (tests only; the 18 defs
  that blas_train.kso lacks are the unseen ones, ``test_only`` in the costs);
* ``rev_conv1d.kso``: conv1d (from conv1d_rev_template.kso) with its ``rev$conv1d``;
* ``start_costs.json``: per file, each ``rev$`` def's start cost (the reference cost model, as
  ``knossos cost`` gives it) and node count.

The ``rev$`` defs are the targets; the defs they call come first in each file.  ``--check`` writes
nothing and fails if the files differ from what would be written (the tests run it).
"""

from __future__ import annotations

import argparse
import json
import sys

from autodiff import grad_program, without_derivatives
from knossos.atomic import atomic_write_text
from knossos.parser import load_program, parse_program
from knossos.printer import format_program
from knossos.program import Program
from ksdata.loader import DATA

PROGRAMS = DATA / "programs"
OUT = DATA / "gradients"
HEADER = "; Made by experiments/gradients/make_sets.py from {source} (autodiff): do not edit.\n"


def only(program: Program, names: list[str]) -> Program:
    """``program`` with the defs ``names`` and what they call, in file order."""
    keep = {d.name for n in names for d in program.closure(n)}
    out = Program()
    for item in program.items:
        if item.name in keep or item.name in program.edefs or item.name.startswith("cost$"):
            out.add(item, program.callees[item.name])
    return out


def sets() -> dict[str, tuple[str, Program, list[str]]]:
    """File name -> (source, program with rev$ defs, its rev$ targets)."""
    out = {}
    for name in ("blas_train", "blas_test"):
        base = load_program(PROGRAMS / f"{name}.kso")
        defs = [d.name for d in base.targets]
        out[f"rev_{name}.kso"] = (f"{name}.kso", grad_program(base, defs, "rev"), [f"rev${d}" for d in defs])
    template = without_derivatives(load_program(PROGRAMS / "conv1d_rev_template.kso"))
    conv = grad_program(only(template, ["conv1d"]), ["conv1d"], "rev")
    out["rev_conv1d.kso"] = ("conv1d in conv1d_rev_template.kso", conv, ["rev$conv1d"])
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="write nothing; fail if a file is out of date")
    args = parser.parse_args(argv)
    train = {d.name for d in load_program(PROGRAMS / "blas_train.kso").targets}
    files: dict[str, str] = {}
    costs: dict[str, dict[str, dict[str, object]]] = {}
    for file, (source, program, targets) in sets().items():
        files[file] = HEADER.format(source=source) + format_program(program)
        program = parse_program(files[file], file)  # costed as written (pow reads back as the edef's call)
        costs[file] = {}
        for t in targets:
            row: dict[str, object] = {"start": round(program.def_cost(t), 6), "nodes": program.defs[t].body.size}
            if file == "rev_blas_test.kso":
                row["test_only"] = t.removeprefix("rev$") not in train
            costs[file][t] = row
    files["start_costs.json"] = json.dumps(costs, indent=1) + "\n"
    stale = [f for f, text in files.items() if not (OUT / f).is_file() or (OUT / f).read_text() != text]
    if args.check:
        for f in stale:
            print(f"{OUT / f}: out of date (python experiments/gradients/make_sets.py)", file=sys.stderr)
        return 1 if stale else 0
    OUT.mkdir(parents=True, exist_ok=True)
    for f in stale:
        atomic_write_text(OUT / f, files[f])
        print(f"wrote {OUT / f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
