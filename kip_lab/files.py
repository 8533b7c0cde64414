"""Writing files whole: every file kip_lab writes goes to a temporary name beside it, then is renamed.

A rename within one folder is atomic, so a reader — or a run that was killed mid-write — sees
the old file or the new one, never half of one (an empty trace that was a good one a moment
ago). Traces, run summaries, shrunk scenarios, the scenario schema and a sweep's metadata are
all written through ``write_atomically`` or ``atomic_path``.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from io import BufferedReader
from pathlib import Path

from kip_lab.errors import KipLabError


class OutputError(KipLabError, OSError):
    """A file kip_lab cannot write (a folder given as the file, a missing folder, no permission,
    a full disk); an ``OSError`` too, with its ``filename`` and ``strerror``."""


@contextmanager
def atomic_path(path: str | Path) -> Iterator[Path]:
    """A temporary path beside ``path`` to write to; renamed onto ``path`` when the block ends
    without an error, removed otherwise. ``OutputError`` names ``path`` if it cannot be written."""
    path = Path(path)
    if path.is_dir():
        raise OutputError(21, "is a folder; give a file name", str(path))
    temporary = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        yield temporary
        os.replace(temporary, path)
    except (OSError, ValueError) as exc:  # ValueError: a path with a NUL in it
        reason = getattr(exc, "strerror", None) or exc
        raise OutputError(getattr(exc, "errno", None) or 22, f"cannot write: {reason}", str(path)) from None
    finally:
        temporary.unlink(missing_ok=True)


def open_without_waiting(path: str | Path) -> BufferedReader:
    """``path`` opened for reading in binary. A FIFO no one writes to would make ``open`` wait for a
    writer forever: it is opened without waiting, and then reads as empty (or as what a writer sends)."""
    descriptor = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    os.set_blocking(descriptor, True)
    return os.fdopen(descriptor, "rb")


def write_atomically(path: str | Path, data: str | bytes) -> None:
    """Write ``data`` (text as UTF-8) to ``path`` whole: a temporary file, then a rename."""
    with atomic_path(path) as temporary:
        if isinstance(data, str):
            temporary.write_text(data, encoding="utf-8")
        else:
            temporary.write_bytes(data)
