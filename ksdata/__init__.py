"""The data files (expression sets, programs, best-known costs, gradient programs) and their loader.

Below every layer that reads them: :mod:`ksdata.loader` imports only the language core.  What each
file holds is in ``README.md`` here.
"""
