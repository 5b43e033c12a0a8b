"""Files that other processes read: written whole, or not at all."""

from __future__ import annotations

import contextlib
import os
import threading
from pathlib import Path


def write_atomically(path: Path, data: str | bytes, *, private: bool = False) -> Path:
    """Write ``path`` so that a reader sees either its old content or all of the new.

    ``path.write_text`` creates the file first and fills it after: a process that waits
    for the file to exist (the CLI after ``shoal up``, ``kubectl`` after ``shoal sim``)
    can read it empty, and a crash in between leaves it so (a secrets key, a token list).
    Here the data goes to a temporary file beside it, reaches the disk, and is renamed
    over ``path`` in one step. ``private``: mode 0600 from the start (keys, tokens).
    """
    content = data.encode() if isinstance(data, str) else data
    # beside it (a rename within one file system); one per writing thread
    temporary = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    mode = 0o600 if private else 0o644
    descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    try:
        if private:  # even over a temporary that a crash left with another mode
            os.fchmod(descriptor, mode)
        with os.fdopen(descriptor, "wb") as out:
            out.write(content)
            out.flush()
            os.fsync(out.fileno())
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(OSError):
            temporary.unlink()
        raise
    return path
