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

_kept: TextIO | None = None


def keep() -> TextIO:
    """Duplicate stderr now, before the script can change it; idempotent."""
    global _kept
    if _kept is None:
        try:
            sys.stderr.flush()
        except (AttributeError, OSError, ValueError):
            pass
        try:
            fd = os.dup(2)
        except OSError:
            return sys.__stderr__ or sys.stderr
        encoding = getattr(sys.__stderr__, "encoding", None) or "utf-8"
        _kept = io.TextIOWrapper(
            io.FileIO(fd, "w", closefd=True),
            encoding=encoding,
            errors="backslashreplace",
            line_buffering=True,
            write_through=True,
        )
    return _kept


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
