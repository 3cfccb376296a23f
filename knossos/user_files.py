"""Reading files a user names: only regular files, only up to a size, each failure one line.

A device such as ``/dev/zero`` or ``/dev/urandom`` never ends and a FIFO may never answer, so they
are refused before anything is read; a file over the limit is refused after reading one byte past it.
"""

from __future__ import annotations

import stat
from pathlib import Path

from knossos.errors import KsUsageError


def read_regular_file(path: str | Path, most_bytes: int, kind: str, raise_limit: str = "") -> bytes:
    """The bytes of ``path``, or a KsUsageError naming it: not found, a folder, not a regular file
    (``kind`` says what to give instead), unreadable, or larger than ``most_bytes`` (``raise_limit``
    says how to raise the limit, where one can)."""
    p = Path(path)
    try:
        st = p.stat()
        if stat.S_ISDIR(st.st_mode):
            raise IsADirectoryError
        if not stat.S_ISREG(st.st_mode):
            raise KsUsageError(f"not a regular file (a device, FIFO or socket); give a {kind}", None, str(path))
        with p.open("rb") as f:
            data = f.read(most_bytes + 1)
    except FileNotFoundError:
        raise KsUsageError("no such file", None, str(path)) from None
    except IsADirectoryError:
        raise KsUsageError("is a directory, not a file", None, str(path)) from None
    except OSError as err:
        raise KsUsageError(f"cannot read: {err.strerror or err}", None, str(path)) from None
    if len(data) > most_bytes:
        limit = f"{most_bytes // 2**20} MiB" if most_bytes >= 2**20 else f"{most_bytes:,} bytes"
        raise KsUsageError(f"larger than {limit}, the most read{raise_limit}", None, str(path))
    return data
