"""Live metrics: what a run measures, published while it runs (Prometheus, Pushgateway,
OTLP), labelled so that it joins with the GPU metrics fleets already collect.

The names below are imported at their first use, not with the package: a run that
publishes nothing (no ``--metrics-port``, ``--metrics-push`` or ``--metrics-otlp``, most
runs) reads only the options (metrics_options.py), never the exporters (3-5 ms of imports
before each run's first line, docs/speed.md).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from gpuwhy.lazy_names import names_from_modules

if TYPE_CHECKING:
    from gpuwhy.export.live import LiveMetrics
    from gpuwhy.export.otlp import BadEndpoint, endpoint

_WHERE = {"LiveMetrics": "live", "BadEndpoint": "otlp", "endpoint": "otlp"}

__all__ = ["BadEndpoint", "LiveMetrics", "endpoint"]

_from_modules = names_from_modules(__name__, _WHERE, globals())


def __getattr__(name: str) -> Any:
    """A name of ``__all__``, from its module, imported now (PEP 562)."""
    return _from_modules(name)
