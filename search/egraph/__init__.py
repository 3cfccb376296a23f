"""An equality-saturation baseline: ``optimize.py --search egraph`` (see docs/egraph.md)."""

from search.egraph.search import egraph

__all__ = ["egraph"]
