"""Keep C++ noise off the user's terminal without losing their output.

``TryFindKernelClass`` prints the list of registered kernels to file
descriptor 2 whenever a lookup fails, which is exactly the case gpuwhy is
looking for. The lookup runs in the user's process (``gpuwhy run``), so the
descriptor is pointed at a temporary file for the duration of a batch of
lookups, and every line that is not the registry's noise is written back
afterwards: output from the user's other threads is delayed, never lost.
"""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile
from collections.abc import Callable, Iterator

__all__ = ["stderr_set_aside"]


@contextlib.contextmanager
def stderr_set_aside(is_noise: Callable[[bytes], bool]) -> Iterator[None]:
    """Capture fd 2 while the block runs; re-emit the lines that are not noise."""
    try:
        sys.stderr.flush()
    except (AttributeError, ValueError, OSError):
        pass
    try:
        saved = os.dup(2)
    except OSError:  # no fd 2 at all: nothing to protect
        yield
        return
    with tempfile.TemporaryFile() as aside:
        os.dup2(aside.fileno(), 2)
        try:
            yield
        finally:
            os.dup2(saved, 2)
            os.close(saved)
            aside.seek(0)
            kept = []
            after_noise = False
            for line in aside.read().splitlines(keepends=True):
                if is_noise(line) or (after_noise and not line.strip()):
                    after_noise = True  # blank lines inside a noise block go with it
                    continue
                after_noise = False
                kept.append(line)
            if kept:
                with contextlib.suppress(OSError):
                    os.write(2, b"".join(kept))
