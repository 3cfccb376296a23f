"""Rewrite rules as tables, grouped by family, and the named rule sets (the MDP's actions).

Depends on :mod:`knossos` only.  Filled in by the rules issue.
"""
