"""Builds the optional C loop of knossos/_climb.c; everything else is configured in pyproject.toml.

The extension is optional: where it cannot be compiled the package installs without it and
knossos.rebuild uses its Python loop, which builds the same nodes.
"""

from setuptools import Extension, setup

setup(ext_modules=[Extension("knossos._climb", ["knossos/_climb.c"], optional=True)])
