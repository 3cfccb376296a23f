"""Front ends: programs written in other languages, translated to Knossos.

:mod:`frontends.torch` translates PyTorch functions (it imports torch; this package does not).
"""
