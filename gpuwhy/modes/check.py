"""``gpuwhy check`` and ``gpuwhy.check()``: is TensorFlow able to use a GPU here? The
environment doctor's record, from :class:`gpuwhy.collect.environment.EnvironmentCollector`
(TensorFlow imported in a child, so a broken CUDA setup is a finding, not a crash)."""

from __future__ import annotations

import sys

from gpuwhy.collect.environment import EnvironmentCollector
from gpuwhy.record import Record


def check(python: str | None = None, timeout: float = 120.0) -> Record:
    """The environment doctor's record (``gpuwhy.check()``)."""
    facts = EnvironmentCollector(python or sys.executable, timeout).collect()
    return Record.diagnose("check", facts)
