"""Ctrl-C held back while gpuwhy's hooks go in or come out of the kernel.

In a notebook, Ctrl-C (the kernel's interrupt: SIGINT) comes at any moment, also while
the session installs its hooks or takes them out, and a KeyboardInterrupt between two
of them would leave the rest in the process for every later cell. So the interrupt that
arrives meanwhile waits until they are all in (or out), then goes to the handler it was
meant for, as if it had come a moment later. Only the main thread can hold a signal;
anywhere else nothing is held.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator
from types import FrameType


@contextlib.contextmanager
def interrupts_held() -> Iterator[None]:
    """SIGINT held for the block, delivered to its handler once the block has run."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    arrived: list[FrameType | None] = []
    previous = signal.signal(signal.SIGINT, lambda _signum, frame: arrived.append(frame))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
    if arrived:
        if callable(previous):
            previous(signal.SIGINT, arrived[0])  # IPython's: raises KeyboardInterrupt
        elif previous != signal.SIG_IGN:
            raise KeyboardInterrupt
