"""One folder per paper figure: a script that runs it and one that plots it.  Data lives in ``data/``."""
