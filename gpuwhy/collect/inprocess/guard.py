"""What one failing collector does to a watched run: nothing but a note.

A collector runs inside the user's program and reads TF's private state, so any part of
it can raise on a TF version gpuwhy never saw. One failure must never end the program
nor lose the other sections. Where it happens decides what is left of it:

- ``HOOK``: a hook while the program runs (start, TensorFlow imported, stop): noted in
  the record, never raised into the program;
- ``REPORT``: a section gathered after the program ended: noted, and raised under
  ``GPUWHY_DEBUG`` (a developer wants the traceback);
- ``LIVE``: a live metrics update: skipped silently (the final report notes it).
"""

from __future__ import annotations

import enum
import os
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


class Policy(enum.Enum):
    HOOK = "hook"
    REPORT = "report"
    LIVE = "live"


class Guard:
    """``guard(what, fn, default)``: ``fn()``, or ``default`` where it raised, with the
    note ``"{what} failed: {error}"`` appended to ``notes`` (not under ``LIVE``)."""

    def __init__(self, policy: Policy, notes: list[str] | None = None) -> None:
        self.policy = policy
        self.notes: list[str] = [] if notes is None else notes

    def __call__(self, what: str, fn: Callable[[], T], default: T) -> T:
        try:
            return fn()
        except Exception as e:
            if self.policy is Policy.REPORT and os.environ.get("GPUWHY_DEBUG"):
                raise
            self.note(f"{what} failed: {type(e).__name__}: {e}")
            return default

    def note(self, text: str) -> None:
        """A note for the record (a live update keeps none: the final report says it)."""
        if self.policy is not Policy.LIVE:
            self.notes.append(text)
