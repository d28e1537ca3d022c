"""gpuwhy's own stderr: the terminal (or file, or pipe) gpuwhy was started with.

The watched script shares the process, and may replace ``sys.stderr`` with its own log
file or close file descriptor 2. gpuwhy's report and messages must still reach the place
the user pointed stderr at, and a closed descriptor must not turn the script's exit
status into a gpuwhy failure. So :func:`keep` duplicates descriptor 2 before the script
runs (not inherited by the script's children), and :func:`stream` writes there.
"""

from __future__ import annotations

import io
import os
import sys
from typing import TextIO

try:
    import fcntl
except ImportError:  # Windows: a plain duplicate
    fcntl = None  # type: ignore[assignment]

_kept: TextIO | None = None
FIRST_OWN_FD = 100  # gpuwhy's duplicate of stderr is numbered from here up


def keep() -> TextIO:
    """Duplicate stderr now, before the script can change it; idempotent."""
    global _kept
    if _kept is None:
        try:
            sys.stderr.flush()
        except (AttributeError, OSError, ValueError):
            pass
        try:
            fd = _high_duplicate(2)
        except OSError:
            return sys.__stderr__ or sys.stderr
        encoding = getattr(sys.__stderr__, "encoding", None) or "utf-8"
        _kept = io.TextIOWrapper(
            # never closed (gpuwhy may write until the process ends): not closing it
            # is no leak to warn about under -W default or -X dev, as python's would not be
            io.FileIO(fd, "w", closefd=False),
            encoding=encoding,
            errors="backslashreplace",
            line_buffering=True,
            write_through=True,
        )
    return _kept


def _high_duplicate(fd: int) -> int:
    """A duplicate of ``fd`` numbered from ``FIRST_OWN_FD`` up, not inherited: the script's
    own first ``open`` gets descriptor 3, as under python."""
    if fcntl is None:
        return os.dup(fd)
    try:
        return fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, FIRST_OWN_FD)
    except OSError:  # a descriptor limit under FIRST_OWN_FD
        return os.dup(fd)


def stream() -> TextIO:
    """Where gpuwhy's own output to stderr goes: the kept descriptor once :func:`keep`
    ran, else the current ``sys.stderr`` (commands that run no user code)."""
    return _kept if _kept is not None else sys.stderr


def say(line: str) -> None:
    """One line on gpuwhy's stderr; a stderr that is gone is not an error of the run."""
    out = stream()
    try:
        out.write(line + "\n")
        out.flush()
    except (OSError, ValueError):
        pass


def isatty() -> bool:
    try:
        return bool(stream().isatty())
    except (AttributeError, OSError, ValueError):
        return False
