"""Rewrite rules (the MDP's actions): rule tables by family, the named rule sets, actions.

    from rules.sets import get_rule_set
    from rules.actions import actions, apply
    for action in actions(expr, get_rule_set("ml_rules")):
        child = apply(expr, action)

Depends on :mod:`knossos` only.  ``rules.baseline`` is the ksc-style simplifier.
"""
