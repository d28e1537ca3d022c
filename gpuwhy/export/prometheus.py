"""The metrics through the official ``prometheus_client``: a registry of our own (no
process collectors of the interpreter), served on ``/metrics`` and/or pushed to a
Pushgateway. Failing to serve or push is one line on stderr, never an error: the run
goes on without metrics."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import gpuwhy.forked as forked
import gpuwhy.report_stream as report_stream
from gpuwhy.collect.identity import JOB_LABELS
from gpuwhy.collect.step_histogram import STEP_BUCKETS, StepHistogram
from gpuwhy.export.metrics import METRICS, Values
from gpuwhy.export.metrics_options import ALL_INTERFACES


class PrometheusMetrics:
    """The series of ``METRICS`` for one job, updated from :class:`Values`."""

    def __init__(self, job: dict[str, str], info: dict[str, str]) -> None:
        import prometheus_client
        from prometheus_client import CollectorRegistry, Counter, Gauge

        # no *_created series: they are not in the documented list, and nobody graphs them
        prometheus_client.disable_created_metrics()
        self.registry = CollectorRegistry(auto_describe=True)
        self.job = {name: job.get(name, "") for name in JOB_LABELS}
        self._series: dict[str, Any] = {}
        for m in METRICS:
            labels = (*JOB_LABELS, *m.labels)
            # prometheus_client adds _total to a counter's name itself
            name = m.name.removesuffix("_total") if m.kind == "counter" else m.name
            if m.kind == "counter":
                series: Any = Counter(name, m.help, labels, registry=self.registry)
            elif m.kind == "histogram":
                series = _Totals(name, m.help, labels, tuple(self.job.values()))
                self.registry.register(series)
            else:
                series = Gauge(name, m.help, labels, registry=self.registry)
            self._series[m.name] = series
        self._counted: dict[tuple[str, ...], float] = {}  # counter label set -> value so far
        self._findings: set[tuple[str, str]] = set()
        self._lock = threading.Lock()
        self._labels("gpuwhy_run_info", **info).set(1)

    def _labels(self, name: str, **extra: str) -> Any:
        return self._series[name].labels(**self.job, **extra)

    def _count_to(self, name: str, total: float, **extra: str) -> None:
        """Counters only go up: add what ``total`` grew by since the last update."""
        key = (name, *extra.values())
        grown = total - self._counted.get(key, 0.0)
        if grown > 0:
            self._labels(name, **extra).inc(grown)
            self._counted[key] = total

    def update(self, values: Values) -> None:
        with self._lock:
            self._labels("gpuwhy_run_seconds").set(round(values.run_s, 3))
            if values.steps is not None:
                self._count_to("gpuwhy_steps_total", values.steps)
            self._series["gpuwhy_step_seconds"].set(values.step_seconds)
            for name, value in (
                ("gpuwhy_input_wait_ratio", values.input_wait_ratio),
                ("gpuwhy_eager_ops_per_step", values.eager_ops_per_step),
                ("gpuwhy_host_device_copies_per_step", values.copies_per_step),
                ("gpuwhy_collective_ratio", values.collective_ratio),
            ):
                if value is not None:
                    self._labels(name).set(value)
            for gpu, busy in values.gpu_busy:
                self._labels("gpuwhy_gpu_busy_ratio", **gpu).set(busy)
            for name, gpu, value in values.gpu_now:
                self._labels(name, **gpu).set(value)
            for function, traces in values.traces:
                self._count_to("gpuwhy_tf_function_traces_total", traces, function=function)
            self._set_findings(set(values.findings))

    def _set_findings(self, active: set[tuple[str, str]]) -> None:
        gauge = self._series["gpuwhy_finding"]
        for finding_id, severity in self._findings - active:
            gauge.remove(*self.job.values(), finding_id, severity)
        for finding_id, severity in active:
            self._labels("gpuwhy_finding", id=finding_id, severity=severity).set(1)
        self._findings = active

    def exposition(self) -> bytes:
        from prometheus_client import generate_latest

        return generate_latest(self.registry)


class _Totals:
    """A histogram set from its totals (a collector of the registry): the live step
    histogram's counts per bucket come from the step collector, which counts every step
    as it records it; prometheus_client's ``Histogram`` only takes one value at a time.
    Nothing is exposed before the first update, as a labelled ``Histogram`` does."""

    def __init__(self, name: str, help: str, labels: tuple[str, ...], job: tuple[str, ...]):
        self.name, self.help, self.labels, self.job = name, help, list(labels), list(job)
        self._totals: StepHistogram | None = None

    def set(self, totals: StepHistogram) -> None:
        self._totals = totals.copy()

    def describe(self) -> list[Any]:
        from prometheus_client.core import HistogramMetricFamily

        return [HistogramMetricFamily(self.name, self.help, labels=self.labels)]

    def collect(self) -> list[Any]:
        from prometheus_client.core import HistogramMetricFamily
        from prometheus_client.utils import floatToGoString

        family = HistogramMetricFamily(self.name, self.help, labels=self.labels)
        totals = self._totals  # one reference, replaced whole by set()
        if totals is not None:
            bounds = [floatToGoString(b) for b in STEP_BUCKETS] + ["+Inf"]
            buckets = list(zip(bounds, totals.cumulative()))
            family.add_metric(self.job, buckets, totals.sum_s)
        return [family]


class Endpoint:
    """``/metrics`` on ``port`` at ``addr`` (``--metrics-addr``: all interfaces by
    default, as exporters are scraped from another host; ``127.0.0.1`` keeps the job's
    series to this host), served from a daemon thread. A child the program forks closes
    its copy of the listening socket (gpuwhy.forked): the port is free once the run
    ends."""

    def __init__(self, metrics: PrometheusMetrics, port: int, addr: str = ALL_INTERFACES) -> None:
        self.metrics, self.port, self.addr = metrics, port, addr
        self._server: Any = None
        self._forget_in_child: Callable[[], None] = lambda: None

    def start(self) -> bool:
        from prometheus_client import start_http_server

        try:
            started = start_http_server(self.port, addr=self.addr, registry=self.metrics.registry)
        except OSError as e:
            reason = (
                "in use" if getattr(e, "errno", None) == 98 else f"unusable ({e.strerror or e})"
            )
            where = (
                f"port {self.port}" if self.addr == ALL_INTERFACES else f"{self.addr}:{self.port}"
            )
            _say(f"metrics: {where} is {reason}: the run goes on without /metrics")
            return False
        self._server = started[0] if isinstance(started, tuple) else None
        if self._server is not None:
            self._forget_in_child = forked.undo_in_child(self._server.socket.close)
        return True

    def stop(self) -> None:
        self._forget_in_child()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None


class Pusher:
    """Pushes to a Pushgateway (short batch jobs that end before a scrape), grouped by
    the job's host and run id so that concurrent jobs do not overwrite each other."""

    def __init__(self, metrics: PrometheusMetrics, url: str) -> None:
        self.metrics, self.url = metrics, url
        self._failed = False

    def push(self) -> None:
        from prometheus_client import push_to_gateway

        grouping = {k: v for k, v in self.metrics.job.items() if k in ("Hostname", "run_id") and v}
        try:
            push_to_gateway(
                self.url,
                job="gpuwhy",
                registry=self.metrics.registry,
                grouping_key=grouping,
                timeout=5,
            )
            self._failed = False
        except Exception as e:  # noqa: BLE001 - a gateway down never stops the run
            if not self._failed:
                _say(f"metrics: cannot push to {self.url}: {type(e).__name__}: {e}")
            self._failed = True


def _say(line: str) -> None:
    report_stream.say(f"gpuwhy: {line}")
