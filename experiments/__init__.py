"""One folder per paper figure, each in the registry (figures.py): ``python -m experiments FIGURE run|plot``."""
