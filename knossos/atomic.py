"""Files written atomically: into a temporary file in the same folder, flushed to disk, then renamed
over the target, so that the file is always either the old one or the new one, never half written
(by an interrupted run, a full disk or a crash), and a reader never sees it being written.

Every file the package and its scripts rewrite goes through :func:`atomic_write`: programs and C++
written by optimize.py, the C++ compile cache, checkpoints and metrics, experiment results and the
tables in the documentation; a file that another program writes (the compiler's executable) goes
through :func:`atomic_output`.  (The plots' PNGs are matplotlib's to write: they are drawn again
from the results at any time.)
"""

from __future__ import annotations

import errno
import os
import secrets
import stat
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO

#: How many fresh temporary names to try before giving up (a clash needs 48 random bits to repeat).
_TRIES = 8


class NotARegularFile(OSError):
    """The target exists and is a device, FIFO, socket or folder: it is never replaced by a file."""


def atomic_write(path: str | os.PathLike[str], write: Callable[[BinaryIO], object], replace: bool = True) -> None:
    """Replace ``path`` with what ``write(f)`` writes to ``f``, a binary file.

    ``f`` is a new file next to the target; once ``write`` returns it is flushed to disk and renamed
    over the target.  The file keeps the mode of the one it replaces (a new file gets the ordinary
    mode, 0o666 less the umask), and a symbolic link is followed: the file it points to is replaced.
    Only a regular file is ever replaced (:class:`NotARegularFile` otherwise).  With ``replace=False``
    the file must not exist when it is put in place (:class:`FileExistsError` if one has appeared
    since the caller looked: the new file is linked in, which fails rather than overwrite).  If
    anything fails (``write`` included) the temporary file is removed, the old file is left as it was
    and the error propagates (an :class:`OSError` for the file system's refusals).
    """
    target = Path(os.path.realpath(path))
    mode = _regular_mode(target)
    if mode is not None and not replace:
        raise FileExistsError(errno.EEXIST, "the file exists", str(target))
    fd, tmp = _create_beside(target)
    try:
        with os.fdopen(fd, "wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        if mode is not None:
            os.chmod(tmp, mode)
        if replace:
            _regular_mode(target)  # not replaced by a special file meanwhile
            os.replace(tmp, target)
        else:
            _link_new(tmp, target)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def _regular_mode(target: Path) -> int | None:
    """The permission bits of ``target``, None if there is none; NotARegularFile if it is not a file."""
    try:
        st = target.stat()
    except FileNotFoundError:
        return None
    if not stat.S_ISREG(st.st_mode):
        raise NotARegularFile(errno.EINVAL, "not a regular file; refusing to replace it", str(target))
    return stat.S_IMODE(st.st_mode)


def _link_new(tmp: Path, target: Path) -> None:
    """Put ``tmp`` in place as ``target`` only if no ``target`` exists (a hard link fails if one does)."""
    try:
        os.link(tmp, target)
    except FileExistsError:
        raise FileExistsError(errno.EEXIST, "the file appeared while it was being made", str(target)) from None
    except OSError:  # a file system without hard links: check, then rename (a narrow race remains)
        if target.exists():
            raise FileExistsError(errno.EEXIST, "the file appeared while it was being made", str(target)) from None
        os.replace(tmp, target)
        return
    tmp.unlink()


def atomic_write_bytes(path: str | os.PathLike[str], data: bytes, replace: bool = True) -> None:
    """Replace ``path`` with ``data`` (see :func:`atomic_write`)."""
    atomic_write(path, lambda f: f.write(data), replace)


def atomic_write_text(path: str | os.PathLike[str], text: str, replace: bool = True) -> None:
    """Replace ``path`` with ``text`` in UTF-8 (see :func:`atomic_write`)."""
    atomic_write_bytes(path, text.encode("utf-8"), replace)


@contextmanager
def atomic_output(path: str | os.PathLike[str]) -> Iterator[Path]:
    """A fresh name beside ``path`` for another program to write (``cc -o NAME``): when the block ends
    the file is flushed to disk and renamed over ``path``; if the block raises (or writes nothing) the
    file is removed, the old ``path`` is left as it was and the error propagates."""
    target = Path(os.path.realpath(path))
    tmp = _temporary_name(target)
    try:
        yield tmp
        fd = os.open(tmp, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, target)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def _temporary_name(target: Path) -> Path:
    """A hidden name in the folder of ``target`` (48 random bits: a clash is as good as impossible)."""
    return target.with_name(f".{target.name}.{secrets.token_hex(6)}.tmp")


def _create_beside(target: Path) -> tuple[int, Path]:
    """A new, empty, hidden file in the folder of ``target``, open for writing, with the mode a new file
    gets (the umask applies: unlike :func:`tempfile.mkstemp`, which makes it private)."""
    for _ in range(_TRIES):
        tmp = _temporary_name(target)
        try:
            return os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0), 0o666), tmp
        except FileExistsError:
            continue
    raise FileExistsError(f"no free temporary name beside {target}")
