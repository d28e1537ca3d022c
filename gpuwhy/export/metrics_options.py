"""Where a run's live metrics go (``--metrics-port``, ``--metrics-addr``,
``--metrics-push``, ``--metrics-otlp``): the options alone, apart from the exporters
(:mod:`gpuwhy.export.live`), which a run imports only when one of them is asked for.
Most runs ask for none, and every module imported before a script's first line is time
the watched program pays (docs/speed.md)."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["ALL_INTERFACES", "DEFAULT_INTERVAL_S", "MetricsOptions"]

ALL_INTERFACES = "0.0.0.0"  # where /metrics listens unless --metrics-addr says otherwise
DEFAULT_INTERVAL_S = 10.0


@dataclass(frozen=True)
class MetricsOptions:
    port: int | None = None
    addr: str = ALL_INTERFACES  # the address /metrics listens on (--metrics-addr)
    push_url: str | None = None
    otlp_url: str | None = None  # the full OTLP/HTTP metrics URL (gpuwhy.export.otlp)
    interval_s: float = DEFAULT_INTERVAL_S

    @property
    def wanted(self) -> bool:
        return self.port is not None or self.push_url is not None or self.otlp_url is not None
