"""Performance knobs for long runs.

Expression nodes form no reference cycles, but every node is a GC-tracked object, so with CPython's
default thresholds the cyclic collector re-scans young nodes every 700 allocations; search builds
millions.  :func:`fewer_gc_pauses` makes those scans rarer for the duration of a block (the
collector still runs; nothing is switched off).
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def fewer_gc_pauses(young_threshold: int = 50_000) -> Iterator[None]:
    """Raise the collector's first threshold inside the block, restoring it afterwards.

    The objects alive on entry (modules, tables, the start of the search) are moved out of the
    collector's generations for the block (``gc.freeze``), so that a collection scans only what the
    block made: how long one takes then no longer depends on what was imported before.  They are
    put back on the way out (outermost block only).
    """
    old = gc.get_threshold()
    gc.set_threshold(max(young_threshold, old[0]), *old[1:])
    outermost = gc.get_freeze_count() == 0
    if outermost:
        gc.freeze()
    try:
        yield
    finally:
        if outermost:
            gc.unfreeze()
        gc.set_threshold(*old)
