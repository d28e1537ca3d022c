"""Live metrics: what a run measures, published while it runs (Prometheus, Pushgateway,
OTLP), labelled so that it joins with the GPU metrics fleets already collect.

The names below are imported at their first use, not with the package: a run that
publishes nothing (no ``--metrics-port``, ``--metrics-push`` or ``--metrics-otlp``, most
runs) reads only the options (metrics_options.py), never the exporters (5 ms of imports
before each run's first line, docs/speed.md).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from gpuwhy.export.live import LiveMetrics
    from gpuwhy.export.otlp import BadEndpoint, endpoint

_WHERE = {"LiveMetrics": "live", "BadEndpoint": "otlp", "endpoint": "otlp"}

__all__ = ["BadEndpoint", "LiveMetrics", "endpoint"]


def __getattr__(name: str) -> Any:
    """A name of ``__all__``, from its module, imported now (PEP 562)."""
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value
