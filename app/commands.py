"""``knossos optimize`` and ``knossos train``: optimize.py and train.py as subcommands of the one
``knossos`` command (registered through the ``knossos.commands`` entry points, as grad, import and
cpp are).  Each takes the same arguments as its script and runs the same code; errors name the
subcommand.  The scripts stay, so that the paper's commands keep working."""

from __future__ import annotations

import argparse

from app import optimize_cli, train_cli
from app.startup import ignore_late_interrupts, interrupt_outside_callbacks
from knossos.cli import ArgumentParser


def register(sub: argparse._SubParsersAction[ArgumentParser]) -> None:
    """Add the ``optimize`` and ``train`` subcommands to the ``knossos`` command line."""
    p = sub.add_parser(
        "optimize",
        help="search for a cheaper rewrite of a def or expression (optimize.py)",
        description=optimize_cli.__doc__,
    )
    optimize_cli.add_arguments(p)
    p.set_defaults(run=cmd_optimize)
    p = sub.add_parser(
        "train", help="train a value function on a set of expressions (train.py)", description=train_cli.__doc__
    )
    train_cli.add_arguments(p)
    p.set_defaults(run=cmd_train)


def cmd_optimize(args: argparse.Namespace) -> int:
    interrupt_outside_callbacks()  # Ctrl-C ends a search with its best so far, never inside a callback
    try:
        return optimize_cli.run_reporting_errors(args, "knossos optimize")
    finally:
        ignore_late_interrupts()


def cmd_train(args: argparse.Namespace) -> int:
    interrupt_outside_callbacks()
    try:
        return train_cli.run_reporting_errors(args, "knossos train")
    finally:
        ignore_late_interrupts()
