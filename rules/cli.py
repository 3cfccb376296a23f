"""The rules' commands for ``knossos``: rules, actions, rewrite, simplify.

Registered through the ``knossos.commands`` entry point (see pyproject.toml), so the language core
does not depend on the rules.
"""

from __future__ import annotations

import argparse
import json
from functools import partial
from typing import Any

from knossos.cli import ArgumentParser, Source, find_def, load_source, located
from knossos.errors import KsUsageError
from knossos.expr import Expr
from knossos.printer import format_def, format_expr
from knossos.program import Def
from rules.actions import Action, actions, apply
from rules.rule import Rule
from rules.sets import RULE_SETS, get_rule_set


def register(sub: argparse._SubParsersAction[ArgumentParser]) -> None:
    """Add the rules' subcommands to the ``knossos`` command line."""

    def target_options(p: argparse.ArgumentParser) -> None:
        p.add_argument("file", nargs="?", metavar="FILE")
        p.add_argument("--def", dest="def_name", metavar="NAME", help="the def to work on")
        p.add_argument(
            "--expr", metavar="'(...)'", help="a bare expression instead of FILE/--def (free variables are Floats)"
        )

    p = sub.add_parser("rules", help="list rule sets and their rules")
    p.add_argument(
        "--set",
        dest="rule_set",
        metavar="NAME",
        help=f"one rule set ({', '.join(RULE_SETS)}; join with +, strict:SET, unsafe-int:SET as --rules reads them)",
    )
    p.add_argument("--json", action="store_true")
    p.set_defaults(run=cmd_rules)

    p = sub.add_parser("actions", help="every (node, rule) rewrite site of a def, with the cost after it")
    target_options(p)
    p.add_argument(
        "--rules",
        default="ml_rules",
        metavar="SET",
        help="rule set (default ml_rules; unsafe-int:SET lets the rules that may overflow an Integer rewrite Integers)",
    )
    p.add_argument("--json", action="store_true", help='a list of {"node": N, "rule": NAME, "cost": C}')
    p.set_defaults(run=cmd_actions)

    p = sub.add_parser("rewrite", help="apply rewrites NODE:RULE in order and print the result")
    target_options(p)
    p.add_argument("--rules", default="ml_rules", metavar="SET", help="rule set the rules come from (default ml_rules)")
    p.add_argument(
        "--apply", action="append", default=[], metavar="NODE:RULE", help="a rewrite; repeatable, applied in order"
    )
    p.add_argument("--json", action="store_true", help='{"cost": C, "expr": TEXT, "steps": [...]}')
    p.set_defaults(run=cmd_rewrite)

    p = sub.add_parser("simplify", help="the ksc-style baseline simplifier (deterministic, to a fixed point)")
    target_options(p)
    p.add_argument("--json", action="store_true", help='{"defs": {NAME: {"start_cost": C0, "cost": C}}}')
    p.set_defaults(run=cmd_simplify)


# -- commands ----------------------------------------------------------------------------------------
def cmd_rules(args: argparse.Namespace) -> int:
    sets = [get_rule_set(args.rule_set)] if args.rule_set else list(RULE_SETS.values())
    if args.json:
        print(json.dumps({s.name: [_describe(r) for r in s] for s in sets}, indent=1))
        return 0
    for s in sets:
        print(f"{s.name} ({len(s)} rules)")
        if args.rule_set:
            for r in s:
                cond = f"   if {', '.join(r.conditions_text)}" if r.conditions_text else ""
                print(f"  {r.name:<24} {r.lhs_text}  ->  {r.rhs_text}{cond}")
    return 0


def _describe(r: Rule) -> dict[str, Any]:
    return {
        "name": r.name,
        "lhs": r.lhs_text,
        "rhs": r.rhs_text,
        "conditions": list(r.conditions_text),
        "domain": r.domain,
        "strict": r.strict,
        "int_overflow": r.int_overflow,
    }


def _target(args: argparse.Namespace) -> tuple[Source, Expr, Def | None]:
    if args.expr is not None and args.def_name:
        raise KsUsageError("give either FILE --def NAME or --expr, not both")
    src = load_source(args)
    if src.expr is not None:
        return src, src.expr, None
    assert src.program is not None
    if not args.def_name:
        raise KsUsageError("give the def to work on with --def NAME", None, src.label)
    d = find_def(src.program, args.def_name, src.label)
    return src, d.body, d


def cmd_actions(args: argparse.Namespace) -> int:
    rule_set = get_rule_set(args.rules)
    _, e, _ = _target(args)
    found = [(a, apply(e, a).cost) for a in actions(e, rule_set)]
    if args.json:
        print(json.dumps([{"node": a.node, "rule": a.rule.name, "cost": round(c, 6)} for a, c in found]))
    else:
        print(f"{len(found)} actions (cost now {round(e.cost, 6)})")
        for a, c in found:
            print(f"  {a.node:>5}  {a.rule.name:<24} {round(c, 6)}")
    return 0


def parse_step(text: str) -> tuple[int, str]:
    node, sep, name = text.partition(":")
    if not sep or not node.strip().isdigit() or not name:
        raise KsUsageError(f"bad rewrite '{text}': expected NODE:RULE, e.g. 12:inline_let")
    return int(node), name.strip()


def cmd_rewrite(args: argparse.Namespace) -> int:
    rule_set = get_rule_set(args.rules)
    src, e, d = _target(args)
    if not args.apply:
        raise KsUsageError("give at least one --apply NODE:RULE")
    steps = []
    for text in args.apply:
        node, name = parse_step(text)
        if name not in rule_set:
            raise KsUsageError(f"unknown rule '{name}' in rule set {rule_set.name}")
        action = Action(node, rule_set.rule(name))
        e = located(partial(apply, e, action), src.label)
        steps.append({"node": node, "rule": name, "cost": round(e.cost, 6)})
    if args.json:
        print(json.dumps({"cost": round(e.cost, 6), "expr": format_expr(e), "steps": steps}))
    elif d is not None:
        print(format_def(Def(d.name, d.ret_type, d.params, e, d.ret_sizes)))
    else:
        print(format_expr(e))
    return 0


def cmd_simplify(args: argparse.Namespace) -> int:
    from rules.baseline import simplify, simplify_def

    if args.expr is not None:
        _, e, _ = _target(args)
        out = simplify(e)
        if args.json:
            print(json.dumps({"start_cost": round(e.cost, 6), "cost": round(out.cost, 6), "expr": format_expr(out)}))
        else:
            print(format_expr(out))
        return 0
    src = load_source(args)
    assert src.program is not None
    defs = [find_def(src.program, args.def_name, src.label)] if args.def_name else src.program.targets
    results = {d.name: (d, simplify_def(d)) for d in defs}
    if args.json:
        print(
            json.dumps(
                {
                    "defs": {
                        n: {"start_cost": round(d.body.cost, 6), "cost": round(s.body.cost, 6)}
                        for n, (d, s) in results.items()
                    }
                }
            )
        )
    else:
        print("\n\n".join(format_def(s) for _, s in results.values()))
    return 0
