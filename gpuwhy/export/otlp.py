"""The metrics through the OpenTelemetry SDK to an OTLP/HTTP collector (``--metrics-otlp``,
the optional ``gpuwhy[otlp]`` extra), for fleets that collect with OpenTelemetry rather
than by scraping.

The same series as ``METRICS``, named and described the same: gauges are observable
gauges, counters observable counters reporting their cumulative totals, the step time a
cumulative histogram with the Prometheus one's buckets, set from its totals (the SDK's
histogram takes one value at a time; the steps come counted per bucket) and added to
each export beside the SDK's own series. The job's labels travel once, as resource
attributes beside ``service.name=gpuwhy``; a series' own labels are its data points'
attributes.

Exports run in a thread of their own, one at a time, so a slow collector delays neither
the program nor the next update; the last export is given ``FINAL_TIMEOUT_S`` at most,
so the end of the run waits no longer for a collector that is down. A missing extra, a
collector that is down or refuses: one line on stderr, and the run goes on.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import re
import threading
import time
import urllib.parse
from collections.abc import Iterable, Mapping
from typing import Any

import gpuwhy.report_stream as report_stream
from gpuwhy.collect.identity import JOB_LABELS
from gpuwhy.collect.step_histogram import STEP_BUCKETS
from gpuwhy.export.metrics import GPU_NOW, METRICS, Values
from gpuwhy.version import __version__

NEEDS_EXTRA = "--metrics-otlp needs: pip install 'gpuwhy[otlp]'"
FROM_ENVIRONMENT = "env"  # --metrics-otlp env: the endpoint the OTel variables name
DEFAULT_ENDPOINT = "http://localhost:4318"
METRICS_PATH = "/v1/metrics"
# One export, its retries included: a collector answers in milliseconds, and the last
# export must end (and say why it failed) before the end of the run stops waiting.
EXPORT_TIMEOUT_S = 1.5
FINAL_TIMEOUT_S = 2.0  # what the end of the run waits for its last export, at most
THREAD = "gpuwhy-otlp"


class BadEndpoint(ValueError):
    pass


def endpoint(given: str, environ: Mapping[str, str] | None = None) -> str:
    """The OTLP/HTTP metrics URL for ``--metrics-otlp given``: ``/v1/metrics`` appended
    to a URL without a path, ``http://`` put before a bare ``host:port``. ``env`` reads
    the standard variables as the SDK does: OTEL_EXPORTER_OTLP_METRICS_ENDPOINT as it
    is, else OTEL_EXPORTER_OTLP_ENDPOINT plus /v1/metrics, else localhost:4318."""
    env = os.environ if environ is None else environ
    url = given.strip()
    if url == FROM_ENVIRONMENT:
        signal = env.get("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT", "").strip()
        if signal:
            return _checked(signal)
        url = env.get("OTEL_EXPORTER_OTLP_ENDPOINT", "").strip() or DEFAULT_ENDPOINT
        return _checked(url.rstrip("/") + METRICS_PATH)
    if not url:
        raise BadEndpoint("--metrics-otlp needs the collector's URL (http://HOST:4318) or env")
    if "://" not in url:
        url = "http://" + url
    parts = urllib.parse.urlsplit(_checked(url))
    if parts.path in ("", "/"):
        url = urllib.parse.urlunsplit(parts._replace(path=METRICS_PATH))
    return url


def _checked(url: str) -> str:
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise BadEndpoint(
            f"--metrics-otlp needs an http:// or https:// URL (OTLP/HTTP), not {url!r}"
        )
    return url


class OtlpMetrics:
    """The series of ``METRICS`` for one job, updated from :class:`Values` and exported
    to ``url`` (a full OTLP/HTTP metrics URL, see :func:`endpoint`)."""

    @classmethod
    def create(cls, job: dict[str, str], info: dict[str, str], url: str) -> OtlpMetrics | None:
        """None, after one line on stderr, where the SDK is not installed or unusable."""
        try:
            return cls(job, info, url)
        except ImportError:  # the extra is not installed (or not whole)
            _say(NEEDS_EXTRA)
            return None
        except Exception as e:  # noqa: BLE001 - an SDK we cannot drive never stops the run
            _say(f"metrics: cannot export to {url} (OTLP): {type(e).__name__}: {e}")
            return None

    def __init__(self, job: dict[str, str], info: dict[str, str], url: str) -> None:
        from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
        from opentelemetry.sdk.metrics import MeterProvider
        from opentelemetry.sdk.metrics.export import InMemoryMetricReader
        from opentelemetry.sdk.resources import Resource

        self.url, self.info = url, info
        self._values: Values | None = None
        self._totals: dict[tuple[str, str], int] = {}  # counts so far: they only grow
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._failed = False
        self._log = _OwnRecords()
        attributes = {name: job[name] for name in JOB_LABELS if job.get(name)}
        # Resource.create also merges OTEL_RESOURCE_ATTRIBUTES; ours win
        resource = Resource.create(
            {**attributes, "service.name": "gpuwhy", "service.version": __version__}
        )
        self._step_metric = next(m for m in METRICS if m.kind == "histogram")
        self._started_ns = time.time_ns()  # the cumulative histogram's start
        # cumulative, whatever the exporter prefers: these are the totals of the run
        self._reader = InMemoryMetricReader()
        self._provider = MeterProvider(
            metric_readers=[self._reader],
            resource=resource,
            shutdown_on_exit=False,  # never an export at interpreter exit
        )
        meter = self._provider.get_meter("gpuwhy", __version__)
        for m in METRICS:
            if m.kind == "histogram" or m.name in GPU_NOW:
                continue  # made whole in _with_histogram (the SDK lowercases names)
            if m.kind == "counter":
                meter.create_observable_counter(
                    m.name, [self._callback(m.name)], description=m.help
                )
            else:
                meter.create_observable_gauge(m.name, [self._callback(m.name)], description=m.help)
        self._exporter = OTLPMetricExporter(endpoint=url, timeout=EXPORT_TIMEOUT_S)
        self._log.watch()

    def update(self, values: Values) -> None:
        with self._lock:
            self._values = values
            self._count_to("gpuwhy_steps_total", "", values.steps)
            for function, traces in values.traces:
                self._count_to("gpuwhy_tf_function_traces_total", function, traces)

    def _count_to(self, name: str, key: str, total: int | None) -> None:
        if total is not None:
            self._totals[name, key] = max(total, self._totals.get((name, key), 0))

    def observed(self, name: str) -> list[tuple[float, dict[str, str]]]:
        """(value, attributes) of series ``name`` now: nothing before the first update
        or where the value was not measured."""
        with self._lock:
            v = self._values
            if v is None:
                return []
            if name == "gpuwhy_run_info":
                return [(1.0, dict(self.info))]
            if name == "gpuwhy_steps_total":
                total = self._totals.get((name, ""))
                return [] if total is None else [(total, {})]
            if name == "gpuwhy_tf_function_traces_total":
                return [
                    (total, {"function": key})
                    for (series, key), total in self._totals.items()
                    if series == name
                ]
            if name == "gpuwhy_gpu_busy_ratio":
                return [(busy, dict(gpu)) for gpu, busy in v.gpu_busy]
            if name == "gpuwhy_finding":
                return [(1.0, {"id": i, "severity": s}) for i, s in v.findings]
            single = {
                "gpuwhy_run_seconds": round(v.run_s, 3),
                "gpuwhy_input_wait_ratio": v.input_wait_ratio,
                "gpuwhy_eager_ops_per_step": v.eager_ops_per_step,
                "gpuwhy_host_device_copies_per_step": v.copies_per_step,
                "gpuwhy_collective_ratio": v.collective_ratio,
            }[name]
            return [] if single is None else [(float(single), {})]

    def _callback(self, name: str):
        from opentelemetry.metrics import Observation

        def observe(_options: Any) -> Iterable[Observation]:
            return [Observation(value, attributes) for value, attributes in self.observed(name)]

        return observe

    def export(self) -> None:
        """Send what the series hold now, from a thread of its own; while an export is
        still under way this one is skipped (the next carries the same totals)."""
        if self._thread is not None and self._thread.is_alive():
            return
        self._thread = threading.Thread(target=self._send, name=THREAD, daemon=True)
        self._thread.start()

    def finish(self, timeout_s: float = FINAL_TIMEOUT_S) -> None:
        """The last export (after the one under way, if any), waited for ``timeout_s``
        at most; then the exporter is shut down, which ends the retries of one that is
        still waiting for the collector."""
        deadline = time.monotonic() + timeout_s
        if self._thread is not None:
            self._thread.join(max(0.0, deadline - time.monotonic()))
        if self._thread is None or not self._thread.is_alive():
            self.export()
            assert self._thread is not None
            self._thread.join(max(0.0, deadline - time.monotonic()))
        try:
            self._exporter.shutdown()
            self._provider.shutdown()
        except Exception:  # noqa: BLE001 - the report matters more than a clean shutdown
            pass

    def _send(self) -> None:
        from opentelemetry.sdk.metrics.export import MetricExportResult

        try:
            self._log.watch()  # loggers the last export created
            data = self._reader.get_metrics_data()
            if data is None:
                return
            data = self._with_histogram(data)
            result = self._exporter.export(data, timeout_millis=EXPORT_TIMEOUT_S * 1000)
            failure = None if result == MetricExportResult.SUCCESS else self._log.reason()
        except Exception as e:  # noqa: BLE001 - a collector down never stops the run
            failure = f"{type(e).__name__}: {e}"
        if failure is not None and not self._failed:
            _say(f"metrics: cannot export to {self.url} (OTLP): {failure}")
        self._failed = self._failed or failure is not None

    def _with_histogram(self, data: Any) -> Any:
        """``data`` (the SDK's MetricsData) with the step histogram added to gpuwhy's
        scope: cumulative since the run started, its counts per bucket (OTLP's are not
        cumulative) and sum. Min and max are left out (optional in OTLP): the steps come
        counted per bucket. Nothing before the first update. The ``DCGM_FI_DEV_*`` gauges
        are added here too, with their names as dcgm-exporter writes them: the SDK's
        instruments lowercase their names."""
        from opentelemetry.sdk.metrics.export import (
            AggregationTemporality,
            Gauge,
            Histogram,
            HistogramDataPoint,
            Metric,
            NumberDataPoint,
        )

        with self._lock:
            totals = self._values.step_seconds.copy() if self._values is not None else None
            gpu_now = self._values.gpu_now if self._values is not None else ()
        if totals is None:
            return data
        now_ns = time.time_ns()
        gauges = [
            Metric(
                name=m.name,
                description=m.help,
                unit="",
                data=Gauge(
                    [
                        NumberDataPoint(dict(gpu), self._started_ns, now_ns, value)
                        for name, gpu, value in gpu_now
                        if name == m.name
                    ]
                ),
            )
            for m in METRICS
            if m.name in GPU_NOW and any(name == m.name for name, _, _ in gpu_now)
        ]
        point = HistogramDataPoint(
            attributes={},
            start_time_unix_nano=self._started_ns,
            time_unix_nano=time.time_ns(),
            count=totals.count,
            sum=totals.sum_s,
            bucket_counts=list(totals.counts),
            explicit_bounds=list(STEP_BUCKETS),
            min=None,  # type: ignore[arg-type]  # optional in OTLP, not measured per step
            max=None,  # type: ignore[arg-type]  # as min
        )
        metric = Metric(
            name=self._step_metric.name,
            description=self._step_metric.help,
            unit="",
            data=Histogram([point], AggregationTemporality.CUMULATIVE),
        )
        resources = list(data.resource_metrics)
        if not resources or not resources[0].scope_metrics:
            return data
        first, scopes = resources[0], list(resources[0].scope_metrics)
        scopes[0] = dataclasses.replace(scopes[0], metrics=[*scopes[0].metrics, metric, *gauges])
        resources[0] = dataclasses.replace(first, scope_metrics=scopes)
        return dataclasses.replace(data, resource_metrics=resources)


class _OwnRecords(logging.Filter):
    """Keeps the SDK's log records about our exports (retries, a failure) out of the
    program's logging, and remembers their text for the one line gpuwhy prints. Only
    records made in gpuwhy's export thread are taken: a program that exports with
    OpenTelemetry itself keeps its own."""

    def __init__(self) -> None:
        super().__init__()
        self.messages: list[str] = []

    def watch(self) -> None:
        """Filter every OpenTelemetry logger there is now (a logger's filters see only
        the records made on it, not on its children)."""
        for name, logger in list(logging.root.manager.loggerDict.items()):
            if name.startswith("opentelemetry") and isinstance(logger, logging.Logger):
                if self not in logger.filters:
                    logger.addFilter(self)

    def filter(self, record: logging.LogRecord) -> bool:
        if threading.current_thread().name != THREAD:
            return True
        try:
            self.messages = [*self.messages[-9:], record.getMessage()]
        except Exception:  # noqa: BLE001 - a record that cannot be formatted
            pass
        return False

    def reason(self) -> str:
        """Why the last export failed, in a few words: the socket's error where one was
        logged (``[Errno 111] Connection refused``), else the SDK's last message."""
        for message in reversed(self.messages):
            found = re.search(r"\[Errno -?\d+\] [^'\")]+", message)
            if found:
                return found.group(0).strip()
        if self.messages:
            return self.messages[-1][:200]
        return "the collector did not accept the metrics"


def _say(line: str) -> None:
    report_stream.say(f"gpuwhy: {line}")
