"""DCGM's profiling fields, read from a dcgm-exporter endpoint the user names.

Why an exporter and not DCGM itself: the GPU's profiling counters (DCGM's ``DCGM_FI_PROF_*``
fields, NVML's GPM metrics) admit one reader at a time. On a Kubernetes GPU node (the GPU
operator's default) dcgm-exporter already holds them, so gpuwhy reads what it publishes
rather than compete with it. The fields are counters that integrate: GR_ENGINE_ACTIVE is
the share of time the graphics/compute engine was busy, not a point reading.

What a value covers: dcgm-exporter asks DCGM for its fields once per collect interval
(``-c``/``DCGM_EXPORTER_INTERVAL``, default 30000 ms) and serves the latest on every
scrape, so each value is an average over the exporter's last interval, whenever gpuwhy
reads it; scraping more often than the interval reads the same value again. The
exposition carries no timestamp (a Prometheus federation's does): :attr:`Scrape.time_s`
is the exporter's own timestamp where one is given, else the time of the scrape
(:attr:`Scrape.time_source` says which).

The exposition, as dcgm-exporter prints it (internal/pkg/rendermetrics/render_metrics.go)::

    DCGM_FI_PROF_GR_ENGINE_ACTIVE{gpu="0",UUID="GPU-...",pci_bus_id="00000000:19:00.0",
        device="nvidia0",modelName="NVIDIA H100 80GB HBM3",Hostname="node-1",
        DCGM_FI_DRIVER_VERSION="...",container="...",namespace="...",pod="..."} 0.912345

``gpu`` is DCGM's index of the GPU on the node (a container's NVML numbers its GPUs from 0,
so the index is a fallback only); ``UUID`` is ``uuid`` under ``--use-old-namespace``;
``Hostname`` is ``hostname`` on dcgm-exporter's main branch since May 2026 (after release
4.5.3-4.8.2), absent under ``-n``, and on Kubernetes the node's name (NODE_NAME), not the
pod's host name. A GPU shared by several pods is printed once per pod (the same value); a
MIG GPU's profiling rows are per GPU instance (``GPU_I_ID``), not the whole GPU, and are
left out here.

Nothing here raises: a failure is a one-line :attr:`Scrape.error`.
"""

from __future__ import annotations

import math
import os
import socket
import threading
import time
import urllib.parse
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Literal

from gpuwhy.facts import GpuDevice
from gpuwhy.version import __version__

# DCGM field -> the key gpuwhy records (fractions 0-1, as DCGM gives them).
FIELDS: dict[str, str] = {
    "DCGM_FI_PROF_GR_ENGINE_ACTIVE": "gr_engine_active",
    "DCGM_FI_PROF_SM_ACTIVE": "sm_active",
    "DCGM_FI_PROF_SM_OCCUPANCY": "sm_occupancy",
    "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE": "tensor_active",
}
DEFAULT_PATH = "/metrics"
MAX_BYTES = 32 * 1024 * 1024  # a federation of many nodes stays far below
_UUID_LABELS = ("UUID", "uuid")
_HOST_LABELS = ("Hostname", "hostname")
_MIG_LABEL = "GPU_I_ID"
_OVERSHOOT = 0.01  # a ratio DCGM rounds a hair past 0 or 1 is clamped; further is not a ratio

ENABLE_HINT = (
    "start dcgm-exporter with a collectors file that lists them "
    "(-f /etc/dcgm-exporter/dcp-metrics-included.csv, or DCGM_EXPORTER_COLLECTORS; "
    "SM_ACTIVE and SM_OCCUPANCY are commented out in both shipped files)"
)


@dataclass(frozen=True)
class GpuReading:
    """One whole GPU's profiling fields in one exposition."""

    uuid: str | None  # the UUID label, "GPU-..." as NVML writes it
    index: int | None  # the ``gpu`` label: DCGM's index on the exporter's node
    hostname: str | None  # the Hostname label (absent under the exporter's -n)
    values: Mapping[str, float] = field(default_factory=dict)  # FIELDS' keys, 0-1
    pci_bus_id: str | None = None
    model_name: str | None = None


@dataclass(frozen=True)
class Scrape:
    """One read of an exporter: its GPUs' readings, or why there are none."""

    url: str
    gpus: tuple[GpuReading, ...] = ()
    error: str | None = None  # one line; None when at least one GPU has a reading
    time_s: float = 0.0  # wall-clock seconds (time.time()) the values stand for
    time_source: Literal["exporter", "scrape"] = "scrape"
    elapsed_s: float = 0.0  # the HTTP round trip and parse
    notes: tuple[str, ...] = ()  # what was left out and why (missing fields, MIG rows)

    @property
    def ok(self) -> bool:
        return self.error is None


def metrics_url(url: str) -> str:
    """``host:9400`` -> ``http://host:9400/metrics``; a URL with a path keeps it."""
    text = url.strip()
    if "://" not in text:
        text = "http://" + text
    parts = urllib.parse.urlsplit(text)
    if parts.path in ("", "/"):
        parts = parts._replace(path=DEFAULT_PATH)
    return urllib.parse.urlunsplit(parts)


def scrape(url: str, timeout_s: float = 0.5) -> Scrape:
    """One HTTP GET of the exporter's metrics, parsed. Never raises."""
    start = time.monotonic()
    target = url
    try:
        target = metrics_url(url)
        body = _get(target, timeout_s)
    except _Failure as failure:
        return Scrape(
            url=target,
            error=f"dcgm-exporter at {target}: {failure}",
            time_s=time.time(),
            elapsed_s=time.monotonic() - start,
        )
    except Exception as error:  # noqa: BLE001 - a scrape failing is a fact, never a crash
        return Scrape(
            url=target,
            error=f"dcgm-exporter at {target}: {_reason(error)}",
            time_s=time.time(),
            elapsed_s=time.monotonic() - start,
        )
    scraped_at = time.time()
    try:
        result = parse(body, url=target, scraped_at=scraped_at)
    except Exception as error:  # noqa: BLE001 - the parser of untrusted text may raise anything
        result = Scrape(
            url=target,
            error=f"dcgm-exporter at {target}: not Prometheus text ({_reason(error)})",
            time_s=scraped_at,
        )
    return replace(result, elapsed_s=time.monotonic() - start)


def parse(text: str, url: str = "", scraped_at: float | None = None) -> Scrape:
    """An exposition's text -> its GPUs' profiling fields (raises ValueError on text that is
    not Prometheus' format: :func:`scrape` turns that into its error)."""
    # deferred as gpuwhy/export/prometheus.py defers it: tens of ms, paid by a scrape only
    from prometheus_client.parser import text_string_to_metric_families

    scraped_at = time.time() if scraped_at is None else scraped_at
    Key = tuple[str | None, int | None, str | None]
    rows: dict[Key, GpuReading] = {}
    values: dict[Key, dict[str, float]] = {}
    seen_dcgm = False
    mig_rows = 0
    dropped: list[str] = []
    stamps: list[float] = []
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            name = sample.name
            if name.startswith("DCGM_"):
                seen_dcgm = True
            key = FIELDS.get(name)
            if key is None:
                continue
            labels = sample.labels
            if labels.get(_MIG_LABEL):
                mig_rows += 1
                continue
            value = _fraction(sample.value)
            if value is None:
                dropped.append(f"{name}={sample.value!r}")
                continue
            uuid = _first(labels, _UUID_LABELS)
            index = _int(labels.get("gpu"))
            host = _first(labels, _HOST_LABELS)
            rows.setdefault(
                (uuid, index, host),
                GpuReading(
                    uuid=uuid,
                    index=index,
                    hostname=host,
                    pci_bus_id=labels.get("pci_bus_id") or None,
                    model_name=labels.get("modelName") or None,
                ),
            )
            # a GPU shared by several pods is printed once per pod, with the same value
            values.setdefault((uuid, index, host), {}).setdefault(key, value)
            if sample.timestamp is not None:
                stamps.append(float(sample.timestamp))
    gpus = tuple(replace(row, values=values[key]) for key, row in rows.items())
    notes = []
    if gpus:
        absent = [key for key in FIELDS.values() if not any(key in g.values for g in gpus)]
        if absent:
            notes.append(f"not exported: {', '.join(absent)} ({ENABLE_HINT})")
    if mig_rows:
        notes.append(
            f"{mig_rows} MIG instance row(s) left out: a GPU instance's share, not the GPU's"
        )
    if dropped:
        notes.append(f"not a 0-1 ratio, left out: {', '.join(dropped[:4])}")
    error = None
    if not gpus:
        error = _empty_reason(text, seen_dcgm, mig_rows, dropped)
        error = f"dcgm-exporter at {url}: {error}" if url else error
    return Scrape(
        url=url,
        gpus=gpus,
        error=error,
        # the newest of the exposition's own timestamps (a federation's), else the scrape's
        time_s=max(stamps) if stamps else scraped_at,
        time_source="exporter" if stamps else "scrape",
        notes=tuple(notes),
    )


def match(scrape: Scrape, devices: Sequence[GpuDevice]) -> dict[int, dict[str, float]]:
    """Each NVML device's readings, by NVML index: matched by UUID (unique across nodes,
    so a central exporter or a federation needs no host filter), else, where UUIDs are
    absent (the device's or every row's), by the ``gpu`` label among this host's rows
    (rows from one host, or those whose Hostname is this machine's or NODE_NAME)."""
    if not scrape.gpus:
        return {}
    by_uuid: dict[str, GpuReading] = {}
    for reading in scrape.gpus:
        if reading.uuid:
            by_uuid.setdefault(reading.uuid.lower(), reading)
    by_index: dict[int, GpuReading] = {}
    for reading in _this_host(scrape.gpus):
        if reading.index is not None:
            by_index.setdefault(reading.index, reading)
    out = {}
    for device in devices:
        found = None
        if device.uuid and by_uuid:
            found = by_uuid.get(device.uuid.lower())
        else:
            found = by_index.get(device.index)
        if found is not None and found.values:
            out[device.index] = dict(found.values)
    return out


# -- the HTTP read ------------------------------------------------------------------------


class _Failure(Exception):
    """A failed read, already worded."""


def _get(url: str, timeout_s: float) -> str:
    # imported at the first read: with ssl, 6 ms of each run's start, where few runs read one
    import http.client
    import urllib.error
    import urllib.request

    if urllib.parse.urlsplit(url).scheme not in ("http", "https"):
        raise _Failure("not an http(s) URL")
    request = urllib.request.Request(
        url,
        headers={
            # the text format, not OpenMetrics or protobuf (a Prometheus federation asks)
            "Accept": "text/plain;version=0.0.4;q=1.0, */*;q=0.1",
            "User-Agent": f"gpuwhy/{__version__}",
        },
    )
    # the exporter is on the node or in the cluster: an HTTP proxy from the environment
    # would only stand in the way
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    deadline = time.monotonic() + timeout_s
    try:
        with opener.open(request, timeout=timeout_s) as response:
            chunks = []
            size = 0
            while True:
                chunk = response.read(65536)
                if not chunk:
                    break
                size += len(chunk)
                if size > MAX_BYTES:
                    raise _Failure(f"answer larger than {MAX_BYTES // (1024 * 1024)} MiB")
                chunks.append(chunk)
                if time.monotonic() > deadline:
                    raise _Failure(f"no whole answer within {timeout_s:g} s")
            charset = response.headers.get_content_charset() or "utf-8"
    except urllib.error.HTTPError as error:
        raise _Failure(f"HTTP {error.code} {error.reason}") from None
    except urllib.error.URLError as error:
        raise _Failure(_reason(error.reason, timeout_s)) from None
    except TimeoutError:
        raise _Failure(f"no answer within {timeout_s:g} s") from None
    except (OSError, http.client.HTTPException) as error:
        raise _Failure(_reason(error, timeout_s)) from None
    return b"".join(chunks).decode(charset, errors="replace")


def _reason(error: object, timeout_s: float | None = None) -> str:
    if isinstance(error, TimeoutError) and timeout_s is not None:
        return f"no answer within {timeout_s:g} s"
    if isinstance(error, ConnectionRefusedError):
        return "connection refused (is dcgm-exporter running and listening there?)"
    if isinstance(error, socket.gaierror):
        return f"host not found ({error.strerror or error})"
    if isinstance(error, BaseException):
        text = str(error) or type(error).__name__
        return " ".join(text.split())[:200]
    return " ".join(str(error).split())[:200]


# -- reading the exposition ---------------------------------------------------------------


def _first(labels: Mapping[str, str], names: Iterable[str]) -> str | None:
    for name in names:
        if labels.get(name):
            return labels[name]
    return None


def _int(text: str | None) -> int | None:
    try:
        return int(text) if text is not None else None
    except ValueError:
        return None


def _fraction(value: float) -> float | None:
    if not isinstance(value, (int, float)) or math.isnan(value):
        return None
    if -_OVERSHOOT <= value <= 1 + _OVERSHOOT:
        return min(1.0, max(0.0, float(value)))
    return None


def _empty_reason(text: str, seen_dcgm: bool, mig_rows: int, dropped: list[str]) -> str:
    if not text.strip():
        return "empty answer"
    if not seen_dcgm:
        return "no DCGM_* metrics in the answer (is this a dcgm-exporter's /metrics?)"
    if mig_rows:
        return (
            f"only MIG instance rows ({mig_rows}) for the profiling fields: "
            "a GPU instance's share is not the whole GPU's"
        )
    if dropped:
        return f"profiling fields that are not 0-1 ratios: {', '.join(dropped[:4])}"
    return (
        "no DCGM_FI_PROF_* profiling fields (dcgm-exporter before 4.0 leaves them out of "
        f"its default counters; {ENABLE_HINT}; they are also absent on GPUs without "
        "profiling support or while another tool holds the profiling counters)"
    )


def _this_host(readings: Sequence[GpuReading]) -> list[GpuReading]:
    hosts = {r.hostname.lower() for r in readings if r.hostname}
    if len(hosts) <= 1:
        return list(readings)
    names = _own_names()
    return [r for r in readings if r.hostname and _names(r.hostname) & names]


def _own_names() -> set[str]:
    names = _names(socket.gethostname())
    node = os.environ.get("NODE_NAME")
    if node:
        names |= _names(node)
    return names


def _names(host: str) -> set[str]:
    host = host.strip().lower()
    return {host, host.split(".", 1)[0]} if host else set()


# -- the live sampler's reader ------------------------------------------------------
POLL_S = 1.0  # a scrape a second: the exporter averages over its own interval (30 s)


class Poller:
    """The live sampler's reader (collect/nvml.py's source): the exporter read once a
    second in its own daemon thread (a slow exporter never holds up the sampler's
    ticks); each tick takes the newest reading once, and only a GPU's values that
    changed: the exporter serves the same average for its whole collect interval (30 s
    by default), which counts once, not once per scrape."""

    def __init__(self, url: str, devices: list[GpuDevice]) -> None:
        self.url, self.devices = url, devices
        self.readings: dict[int, dict[str, float]] = {}
        self.handed: dict[int, dict[str, float]] = {}  # the values last handed, per GPU
        self.error: str | None = None
        self.fresh = False
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._run, name="gpuwhy-dcgm", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            result = scrape(self.url)
            with self._lock:
                self.error = result.error
                if result.ok:
                    self.readings, self.fresh = match(result, self.devices), True
            self._stop.wait(POLL_S)

    def take(self) -> dict[int, dict[str, float]]:
        """The newest readings by NVML index, once ({} until a new scrape came)."""
        with self._lock:
            if not self.fresh:
                return {}
            self.fresh = False
            changed = {i: v for i, v in self.readings.items() if self.handed.get(i) != v}
            self.handed.update(changed)
            return changed

    def close(self) -> None:
        self._stop.set()
