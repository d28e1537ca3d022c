"""The background GPU sampler of ``gpuwhy run`` and ``gpuwhy watch``: NVML readings at
10 Hz in a daemon thread, turned into one :class:`~gpuwhy.facts.GpuSeries` per GPU.

The sampler reads through a *source*: :class:`gpuwhy.collect.nvml.NvmlSource` on a
machine with a driver, :class:`ReplaySource` for a recording. A source only reads; every
conversion is done here, so that it runs in tests on machines without a GPU:

- PCIe traffic: NVML's cumulative byte counters, differenced between ticks. A counter that
  goes down wrapped (at the width of its NVML value type) when the wrapped difference is a
  plausible rate, and was reset otherwise (no rate for that tick).
- GPM activities (Hopper and newer): NVML computes them from two samples; the value of a
  tick covers the time since the previous tick, so the first tick has none. They
  integrate hardware counters over that time: ``graphics_util`` is the share of time the
  engine was active, the others the share of SMs busy and kind of work. A dcgm-exporter's
  profiling fields fill the same series where GPM is not read.
- The driver's own utilisation samples (``nvmlDeviceGetSamples``): every one, each
  counted once, with the interval between them measured (200 ms on an H100). The point
  reading (``nvmlDeviceGetUtilizationRates``) is only the latest of them, read again at
  every tick: it is kept as ``utilization`` for older readers.
- GPU memory of the watched processes versus the others', from the process list, which is
  read at most once a second (it is the slowest NVML call); the pids to watch are asked
  for on those ticks only, so ``watch`` can follow a changing process tree.
- Percentages become fractions 0-1, milliwatts watts; a value NVML could not give is None.
- Clock-event reasons: per bit, the share of each window's samples with it set (counted
  on the samples that have it, so a bit never set costs nothing per sample), and
  ``throttled`` (0/1) for any slowdown bit; the clocks, the link
  and the slowdowns are also kept on busy samples alone (utilisation >= 50%), since an
  idle GPU drops its clocks and its link's generation by design. The replay counter is
  differenced between process ticks (a counter that went down was reset: no value).

Recording format (JSON lines, what ``record_path`` writes and :class:`ReplaySource` reads):

- line 1, the header: ``{"kind": "header", "format": "gpuwhy-nvml-recording",
  "version": 1, "constructed": false, "hz": 10.0, "process_hz": 1.0, "source": "nvml",
  "error": null | "LibraryNotFound" ..., "driver_version", "nvml_version",
  "devices": [{"index", "name", "uuid", "pci_bus_id", "compute_capability",
  "memory_total_bytes", "gpm": bool, and, each optional (absent in recordings made
  before the clocks were sampled; None where NVML does not say): "max_sm_clock_mhz",
  "power_default_limit_mw", "pcie_max_gen", "pcie_max_width" (the link's maxima: what
  both the GPU and its slot support), "gpu_pcie_max_gen" (the GPU's own)}],
  "description": "...", and from ``gpuwhy watch --record``: "command": [argv],
  "devices_before": [the GPUs as the start-of-run snapshot read them (facts'
  GpuDevice)]}``; ``watch`` ends the file with ``{"kind": "end", "ended", "exit_code",
  "error", "seconds"}`` (the program's outcome). ``constructed: true`` marks a file written by hand (tests),
  not by NVML.
- one line per tick: ``{"kind": "tick", "t": seconds since t0, "dcgm_error": the
  dcgm-exporter's one-line error (on the tick it appears or changes; null: it cleared), "read_s": seconds the NVML
  calls took, "pids": [watched pids] (process ticks only), "gpus": [{"index",
  "util": percent, "mem_used": bytes, "pcie_tx": [value, NVML value type, NVML timestamp
  µs] | null, "pcie_rx": (same), "sm_clock_mhz", "power_mw",
  "gpm": {"sm_activity", "sm_occupancy", "tensor_activity", "graphics_util": percent |
  null} | null, "util_samples": [[timestamp µs, percent], ...] (every sample of the
  driver's own utilisation buffer taken since the previous tick; none from before the
  recording started) | null, "mem_reserved": bytes (the driver's reservation, where the
  header's device says "memory_v2": true, and then "mem_used" leaves it out), "dcgm":
  {"gr_engine_active", "sm_active", "sm_occupancy", "tensor_active": fraction} (a
  dcgm-exporter's profiling fields, on the tick after a scrape whose values changed),
  "procs": [[pid, used bytes | null, command line | null], ...] (process ticks only),
  and, each optional as above: "clocks_event_reasons": NVML's bitmask
  (``nvmlClocksEventReason*``: 0x1 GPU idle, 0x2 applications clocks, 0x4 SW power cap,
  0x8 HW slowdown, 0x10 sync boost, 0x20 SW thermal, 0x40 HW thermal, 0x80 HW power
  brake, 0x100 display clocks), "temp_c", "pcie_gen", "pcie_width" (the link now),
  "power_limit_mw" (enforced) and "pcie_replays" (NVML's cumulative replay counter), these
  two on process ticks only}]}``. Version 1 still: every key added since is optional.

Cost: the thread's work per tick is a handful of ctypes calls per GPU (the GIL is released
during each) and a few hundred Python operations; :attr:`GpuSampler.ticks`,
and ``tick_total_s`` keep their count and time.

Memory: bounded, whatever the run's length. Each GPU's series folds into at most
``windows`` windows (512; collect/windows.py): a run of under 52 s at 10 Hz keeps every
sample as read, a longer one windows of 2, 4, 8 ... samples that cover it from the first
sample to the last (24 h: 422 windows of 2,048 samples, 205 s each).
"""

from __future__ import annotations

import json
import math
import os
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol, TextIO

from gpuwhy.collect.inprocess.base import Collector, Gathering, Option, RunOptions
from gpuwhy.collect.nvml import NvmlSource
from gpuwhy.collect.process_tree import descendants
from gpuwhy.collect.windows import CAPACITY, Batch, Windows
from gpuwhy.derived.stage import derived
from gpuwhy.facts import (
    CLOCK_REASONS,
    SLOWDOWN_BITS,
    ClockReasonSeries,
    Facts,
    GpuBusy,
    GpuLatest,
    GpuProcess,
    GpuSamplesFacts,
    GpuSeries,
    WindowSpread,
)
from gpuwhy.formatting import MiB
from gpuwhy.json_input import TooDeep, loads
from gpuwhy.tfapi.memory import tf_peak_memory
from gpuwhy.version import __version__

FORMAT = "gpuwhy-nvml-recording"
VERSION = 1
# Width of each NVML value type (nvmlValueType_t) that can hold a wrapping counter.
COUNTER_BITS = {
    1: 32,
    2: 64,
    3: 64,
    6: 16,
}  # unsigned int, unsigned long, unsigned long long, short
# Above any PCIe link (PCIe 6.0 x16 is ~128 GB/s per direction): a "wrap" this fast was a reset.
MAX_PCIE_BYTES_PER_S = 256e9
MAX_PIDS = 256  # processes remembered per GPU (others) and watched, whatever the churn
GPM_KEYS = ("sm_activity", "sm_occupancy", "tensor_activity")
# a reading's activity keys -> the series they fill: GPM's percents, DCGM's fractions
GPM_SERIES = {**{key: key for key in GPM_KEYS}, "graphics_util": "graphics_activity"}
DCGM_SERIES = {
    "gr_engine_active": "graphics_activity",
    "sm_active": "sm_activity",
    "sm_occupancy": "sm_occupancy",
    "tensor_active": "tensor_activity",
}
ACTIVITIES = ("sm_activity", "sm_occupancy", "tensor_activity", "graphics_activity")
MAX_INTERVALS = 64  # distinct driver-sample intervals (ms) counted: the period is their mode
BUSY_PERCENT = 50  # utilisation from which a sample is busy: clocks and link judged then


class Source(Protocol):
    """Where readings come from. ``paced`` sources are read at the sampler's rate."""

    paced: bool

    def open(self, t0: float) -> dict[str, Any]: ...

    def read(self, processes: bool) -> dict[str, Any] | None: ...

    def close(self) -> None: ...


class RecordingError(ValueError):
    """A file that is not a gpuwhy NVML recording."""


def _recording_lines(path: Path) -> list[dict[str, Any]]:
    """The recording's lines, parsed. A last line cut short (the recorder killed while
    writing it: an OOM kill, a node taken away) is left out, as the readings before it
    stand; any other line that is not a JSON object is a :class:`RecordingError`."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise RecordingError(f"{path}: cannot be read ({e})") from None
    rows = [(n, line) for n, line in enumerate(text.splitlines(), 1) if line.strip()]
    lines = []
    for i, (n, line) in enumerate(rows):
        try:
            value = loads(line, f"{path}: line {n}")
        except TooDeep as e:
            raise RecordingError(str(e)) from None
        except ValueError as e:
            if i == len(rows) - 1 and i > 0:
                break  # torn last line
            raise RecordingError(f"{path}: line {n} is not JSON ({e})") from None
        if not isinstance(value, dict):
            raise RecordingError(f"{path}: line {n} is not a JSON object")
        lines.append(value)
    return lines


class ReplaySource:
    """A recording, tick after tick, as fast as the sampler asks (not paced).

    :meth:`watched_pids` returns the pids recorded with the last process tick, so that a
    replay attributes memory exactly as the live run did:
    ``GpuSampler(source=replay, pids=replay.watched_pids)``.
    """

    paced = False

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        lines = _recording_lines(self.path)
        if not lines or lines[0].get("kind") != "header" or lines[0].get("format") != FORMAT:
            raise RecordingError(f"{self.path}: not a {FORMAT} file (no header line)")
        if lines[0].get("version") != VERSION:
            raise RecordingError(
                f"{self.path}: recording version {lines[0].get('version')!r}, expected {VERSION}"
            )
        self.header = lines[0]
        self.ticks = [line for line in lines[1:] if line.get("kind") == "tick"]
        self.position = 0
        self._pids: frozenset[int] = frozenset(self.header.get("watched_pids", ()))

    def open(self, t0: float) -> dict[str, Any]:
        self.position = 0
        return dict(self.header)

    def read(self, processes: bool) -> dict[str, Any] | None:
        if self.position >= len(self.ticks):
            return None
        tick = self.ticks[self.position]
        self.position += 1
        if "pids" in tick:
            self._pids = frozenset(tick["pids"])
        return tick

    def watched_pids(self) -> frozenset[int]:
        return self._pids

    def close(self) -> None:
        pass


# ---------------------------------------------------------------------------
# Conversion of raw readings, one builder per GPU.


def counter_rate(previous: list | None, current: list | None, dt: float) -> float | None:
    """Bytes per second between two ``[value, value type, timestamp µs]`` counter readings.

    NVML's own timestamps give the interval where both exist; an unchanged timestamp means
    the driver has not refreshed the counter, which says nothing (None). ``dt`` (the ticks'
    interval) is used otherwise.
    """
    if not previous or not current:
        return None
    (v0, _, ts0), (v1, vtype, ts1) = previous[:3], current[:3]
    if ts0 and ts1:
        if ts1 == ts0:
            return None
        if ts1 > ts0:
            dt = (ts1 - ts0) / 1e6
    if dt <= 0:
        return None
    delta = v1 - v0
    if delta < 0:
        bits = COUNTER_BITS.get(vtype)
        wrapped = (1 << bits) - v0 + v1 if bits else None
        if wrapped is None or wrapped / dt > MAX_PCIE_BYTES_PER_S:
            return None  # reset (driver reload, GPU reset), not a wrap
        delta = wrapped
    return delta / dt


def _fraction(percent: Any) -> float | None:
    return None if percent is None else float(percent) / 100.0


SERIES = (
    "utilization",
    "memory_used_bytes",
    "own_memory_bytes",
    "pcie_tx_bytes_per_s",
    "pcie_rx_bytes_per_s",
    "sm_clock_mhz",
    "power_w",
    *ACTIVITIES,
    "driver_utilization",
    "temperature_c",
    "power_limit_w",
    "throttled",
    "throttled_busy",
    "sm_clock_busy_mhz",
    "sm_clock_throttled_mhz",
    "pcie_gen_busy",
    "pcie_width_busy",
    "pcie_degraded_busy",
    "pcie_replays",
    "others_memory_bytes",
)
# The last reading's keys -> GpuLatest's fields (milliwatts become watts)
LATEST_KEYS = {
    "sm_clock_mhz": "sm_clock_mhz",
    "power_mw": "power_w",
    "temp_c": "temperature_c",
    "clocks_event_reasons": "clocks_event_reasons",
    "pcie_gen": "pcie_gen",
    "pcie_width": "pcie_width",
    "pcie_replays": "pcie_replay_counter",
}
PROCESS_TICK_KEYS = frozenset({"pcie_replays"})  # kept from the last tick that read them
# means kept in whole bytes
BYTES = frozenset({"memory_used_bytes", "own_memory_bytes", "others_memory_bytes"})


class _SeriesBuilder:
    """One GPU's readings folded into bounded windows as they come (collect/windows.py)."""

    def __init__(self, device: dict[str, Any], capacity: int = CAPACITY) -> None:
        self.device = device
        self.index = int(device["index"])
        self.name = device.get("name") or f"GPU {self.index}"
        self.memory_total = device.get("memory_total_bytes")
        self.max_gen = device.get("pcie_max_gen")
        self.max_width = device.get("pcie_max_width")
        # one 0/1 column per clock-event reason after SERIES' columns
        self.windows = Windows(len(SERIES) + len(CLOCK_REASONS), capacity)
        self.previous: dict[str, Any] | None = None
        self.previous_t: float | None = None
        self.others: dict[int, GpuProcess] = {}
        self.gpm_seen = False
        self.activity_source: str | None = None
        self.reserved: int | None = None
        self.last_sample_us: int | None = None  # the driver's last utilisation sample
        self.intervals: dict[int, int] = {}  # ms between driver samples -> how often
        self.replays_before: int | None = None  # the replay counter at the last process tick
        # per reason bit: [samples, busy samples, seconds, first t, first busy t]
        self.reasons: dict[int, list[Any]] = {}
        self.latest: dict[str, Any] = {}

    def add(self, t: float, reading: dict[str, Any], pids: frozenset[int]) -> None:
        dt = t - self.previous_t if self.previous_t is not None else 0.0
        prev = self.previous or {}
        clock = reading.get("sm_clock_mhz")
        power = reading.get("power_mw")
        activities = self._activities(reading)
        util = reading.get("util")
        busy = util is not None and util >= BUSY_PERCENT
        reasons = reading.get("clocks_event_reasons")
        throttled = None if reasons is None else float(bool(int(reasons) & SLOWDOWN_BITS))
        gen, width = reading.get("pcie_gen"), reading.get("pcie_width")
        limit = reading.get("power_limit_mw")
        own, others = self._memory(reading, pids)
        self.windows.add(
            round(t, 4),
            (
                _fraction(util),
                reading.get("mem_used"),
                own,
                counter_rate(prev.get("pcie_tx"), reading.get("pcie_tx"), dt),
                counter_rate(prev.get("pcie_rx"), reading.get("pcie_rx"), dt),
                None if clock is None else float(clock),
                None if power is None else power / 1000.0,
                *(activities.get(name) for name in ACTIVITIES),
                self._driver_samples(reading.get("util_samples")),
                reading.get("temp_c"),
                None if limit is None else limit / 1000.0,
                throttled,
                throttled if busy else None,
                None if clock is None or not busy else float(clock),
                float(clock) if clock is not None and busy and throttled else None,
                gen if busy else None,
                width if busy else None,
                self._degraded(gen, width) if busy else None,
                self._replays(reading.get("pcie_replays")),
                others,
                # a reason's column holds its set bits only: its known count is its
                # samples, and a bit not set costs nothing here (series() divides)
                *(
                    1 if reasons is not None and int(reasons) & r.bit else None
                    for r in CLOCK_REASONS
                ),
            ),
        )
        if reading.get("mem_reserved") is not None:
            self.reserved = int(reading["mem_reserved"])
        if reasons:
            self._count_reasons(int(reasons), t, dt, busy)
        self._keep_latest(t, reading)
        self.previous, self.previous_t = reading, t

    def _activities(self, reading: dict[str, Any]) -> dict[str, float | None]:
        """The activity series of one reading: GPM's (percents) where read, else a
        dcgm-exporter's (fractions) for the GPU; the first source seen stays the
        source, so a series never mixes the two."""
        gpm = reading.get("gpm") or {}
        dcgm = reading.get("dcgm") or {}
        if self.activity_source != "dcgm" and any(gpm.get(k) is not None for k in GPM_SERIES):
            self.gpm_seen = True
            self.activity_source = "gpm"
            return {name: _fraction(gpm.get(key)) for key, name in GPM_SERIES.items()}
        if self.activity_source != "gpm" and any(dcgm.get(k) is not None for k in DCGM_SERIES):
            self.activity_source = "dcgm"
            return {
                name: None if dcgm.get(key) is None else float(dcgm[key])
                for key, name in DCGM_SERIES.items()
            }
        return {}

    def _driver_samples(self, samples: Any) -> Batch | None:
        """The driver's utilisation samples read at this tick (those it took since the
        previous one), as fractions, each once (a timestamp seen before is skipped), and
        the intervals between them counted: the driver's sample period is measured, not
        assumed."""
        if not samples:
            return None
        values = []
        for timestamp, percent in sorted((int(a), b) for a, b in samples):
            if self.last_sample_us is not None and timestamp <= self.last_sample_us:
                continue
            if self.last_sample_us is not None:
                ms = round((timestamp - self.last_sample_us) / 1000)
                if ms in self.intervals or len(self.intervals) < MAX_INTERVALS:
                    self.intervals[ms] = self.intervals.get(ms, 0) + 1
            self.last_sample_us = timestamp
            values.append(float(percent) / 100.0)
        return Batch.of(values)

    def sample_period_s(self) -> float | None:
        """The driver's sample period: the interval seen most often between its samples
        (a late read doubles one now and then)."""
        if sum(self.intervals.values()) < 3:
            return None
        ms = max(self.intervals.items(), key=lambda kv: (kv[1], -kv[0]))[0]
        return ms / 1000.0 if ms > 0 else None

    def _degraded(self, gen: int | None, width: int | None) -> float | None:
        """1 for a link below the generation or width it can reach, 0 at it; None where
        either side is unknown."""
        below = []
        if gen is not None and self.max_gen:
            below.append(gen < self.max_gen)
        if width is not None and self.max_width:
            below.append(width < self.max_width)
        return float(any(below)) if below else None

    def _replays(self, counter: int | None) -> int | None:
        """Replays since the last process tick; None on other ticks, on the first and
        after a reset (the counter went down)."""
        if counter is None:
            return None
        before, self.replays_before = self.replays_before, int(counter)
        return None if before is None or counter < before else int(counter) - before

    def _count_reasons(self, reasons: int, t: float, dt: float, busy: bool) -> None:
        for reason in CLOCK_REASONS:
            if reasons & reason.bit:
                seen = self.reasons.setdefault(reason.bit, [0, 0, 0.0, t, None])
                seen[0] += 1
                seen[2] += dt
                if busy:
                    seen[1] += 1
                    if seen[4] is None:
                        seen[4] = t

    def _keep_latest(self, t: float, reading: dict[str, Any]) -> None:
        latest = self.latest
        latest["t"] = t
        for key, name in LATEST_KEYS.items():
            value = reading.get(key)
            if key == "power_mw" and value is not None:
                value = value / 1000.0
            if value is not None or key not in PROCESS_TICK_KEYS:
                latest[name] = value

    def _memory(
        self, reading: dict[str, Any], pids: frozenset[int]
    ) -> tuple[int | None, int | None]:
        """Bytes held by the watched pids and by the others on a process tick (the
        others': what NVML gave for them); None on other ticks."""
        procs = reading.get("procs")
        if procs is None:
            return None, None
        own, unknown, others = 0, 0, 0
        for entry in procs:
            pid, used = int(entry[0]), entry[1]
            name = entry[2] if len(entry) > 2 else None
            if pid in pids:
                if used is None:
                    unknown += 1
                else:
                    own += int(used)
                continue
            others += int(used) if used is not None else 0
            seen = self.others.get(pid)
            if seen is None and len(self.others) >= MAX_PIDS:
                continue  # processes that come and go without end: the first ones tell
            peak = max(
                (x for x in (used, seen.used_bytes if seen else None) if x is not None),
                default=None,
            )
            self.others[pid] = GpuProcess(
                pid=pid, name=name or (seen.name if seen else None), used_bytes=peak
            )
        return (None if unknown and not own else own), others

    def series(self) -> GpuSeries:
        w = self.windows
        means: dict[str, Any] = {
            name: tuple(_whole(name, w.means(c))) for c, name in enumerate(SERIES)
        }
        windowed = w.samples_per_window > 1
        reasons = []
        read = w.known[SERIES.index("throttled")]  # samples whose reasons were read
        for c, reason in enumerate(CLOCK_REASONS, start=len(SERIES)):
            seen = self.reasons.get(reason.bit)
            if seen is None:
                continue
            reasons.append(
                ClockReasonSeries(
                    name=reason.name,
                    bit=reason.bit,
                    slowdown=reason.slowdown,
                    share=tuple(round(k / n, 4) if n else None for k, n in zip(w.known[c], read)),
                    samples=seen[0],
                    busy_samples=seen[1],
                    seconds=round(seen[2], 3),
                    first_s=seen[3],
                    first_busy_s=seen[4],
                )
            )
        limit = self.device.get("power_default_limit_mw")
        max_clock = self.device.get("max_sm_clock_mhz")
        latest = GpuLatest(**self.latest) if self.latest else None
        return GpuSeries(
            index=self.index,
            name=self.name,
            memory_total_bytes=self.memory_total,
            others=tuple(sorted(self.others.values(), key=lambda p: p.pid)),
            t=tuple(w.t_first),
            **means,
            samples_per_window=w.samples_per_window,
            counts=tuple(w.count) if windowed else (),
            t_last=tuple(w.t_last) if windowed else (),
            spread=tuple(
                WindowSpread(
                    name=name,
                    known=tuple(w.known[c]),
                    low=tuple(_whole(name, w.low[c])),
                    high=tuple(_whole(name, w.high[c])),
                )
                for c, name in enumerate(SERIES)
            )
            if windowed
            else self._driver_spread(w),
            clock_reasons=tuple(reasons),
            pci_bus_id=self.device.get("pci_bus_id"),
            max_sm_clock_mhz=None if max_clock is None else float(max_clock),
            power_default_limit_w=None if limit is None else limit / 1000.0,
            pcie_max_gen=self.max_gen,
            pcie_max_width=self.max_width,
            gpu_pcie_max_gen=self.device.get("gpu_pcie_max_gen"),
            latest=latest,
            activity_source=self.activity_source,
            memory_reserved_bytes=self.reserved,
            driver_sample_period_s=self.sample_period_s(),
        )

    @staticmethod
    def _driver_spread(w: Windows) -> tuple[WindowSpread, ...]:
        """Raw entries (one tick each) may still hold several driver samples: their
        counts are kept, so that every reader weighs each sample once."""
        c = SERIES.index("driver_utilization")
        if all(k <= 1 for k in w.known[c]):
            return ()
        return (
            WindowSpread(
                name="driver_utilization",
                known=tuple(w.known[c]),
                low=tuple(w.low[c]),
                high=tuple(w.high[c]),
            ),
        )


def _whole(name: str, values: list) -> list:
    """Byte counts stay whole numbers when they are means."""
    if name not in BYTES:
        return values
    return [v if v is None or isinstance(v, int) else round(v) for v in values]


# ---------------------------------------------------------------------------


def _not_a_rate(hz: float) -> str | None:
    if math.isfinite(hz) and 0 < hz <= 100:
        return None
    return "--hz must be between 0 and 100 samples per second"


SAMPLES_PER_S: Option[float] = Option(
    "hz",
    "--hz",
    10.0,
    "GPU samples per second (10; GPM metrics are read at most at 10)",
    type=float,
    metavar="N",
    refuse=_not_a_rate,
)


DCGM_EXPORTER: Option[str | None] = Option(
    "dcgm_exporter",
    "--dcgm-exporter",
    None,
    "a dcgm-exporter to read DCGM's profiling fields from (URL or host:port; the usual "
    "case on Kubernetes GPU nodes): GPU busy from GR_ENGINE_ACTIVE where GPM is not read",
    type=str,
    metavar="URL",
)


class GpuSampler(Collector):
    """Samples every GPU in a daemon thread from :meth:`start` until :meth:`stop`.

    ``pids`` returns the pids whose GPU memory counts as the program's own (default: this
    process). ``record_path`` writes the raw readings as a recording (see module doc),
    ``record_header`` what its header says beside them (``watch``: the command, the GPUs
    before it started).
    ``windows`` bounds each GPU's series (see module doc).
    Never raises into the watched program: a failure ends sampling and is kept in
    ``facts().error``.
    """

    name = section = "gpu_samples"
    options = (SAMPLES_PER_S, DCGM_EXPORTER)
    shown = 80
    what = "GPU samples"
    live = True

    @classmethod
    def report_rows(cls, facts: Facts, html: bool) -> list[tuple[str, str]]:
        if facts.gpu_samples is None:
            return []
        return [("GPU samples", gpu_line(facts.gpu_samples, derived(facts).gpu_busy))]

    @classmethod
    def create(cls, options: RunOptions, made: Sequence[Collector]) -> GpuSampler:
        """A watched run's: the GPU memory of the processes it starts counts as its own."""
        return cls(
            hz=options[SAMPLES_PER_S],
            pids=own_process_tree,
            dcgm_exporter=options[DCGM_EXPORTER],
        )

    def __init__(
        self,
        hz: float = 10.0,
        pids: Callable[[], Iterable[int]] | None = None,
        source: Source | None = None,
        record_path: str | Path | None = None,
        record_header: dict[str, Any] | None = None,
        process_hz: float = 1.0,
        join_timeout_s: float = 10.0,
        windows: int = CAPACITY,
        dcgm_exporter: str | None = None,
    ) -> None:
        self.hz = float(hz) if hz and hz > 0 else 10.0
        self.process_hz = min(float(process_hz), self.hz) if process_hz and process_hz > 0 else 1.0
        self.pids = pids or (lambda: (os.getpid(),))
        self.source = source
        self.record_path = Path(record_path) if record_path else None
        self.record_header = dict(record_header or {})
        self.join_timeout_s = join_timeout_s
        self.t0 = 0.0
        self.error: str | None = "not started"
        self.header: dict[str, Any] = {}
        self.windows = windows
        self.dcgm_exporter = dcgm_exporter
        self.dcgm_error: str | None = None  # the exporter's, as the last tick said
        self.ticks = 0
        self.tick_total_s = 0.0
        self.tf_peak_memory_bytes: dict[str, int] = {}
        self._builders: dict[int, _SeriesBuilder] = {}
        self._watched: set[int] = set()
        self._tensorflow = False
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None
        self._record: TextIO | None = None

    # -- life cycle (Collector) ------------------------------------------------------
    def start(self, t0: float) -> None:
        self.t0 = t0
        self.error = None
        try:
            self._thread = threading.Thread(
                target=self._run, name="gpuwhy-gpu-sampler", daemon=True
            )
            self._thread.start()
        except Exception as e:  # noqa: BLE001 - never into the program
            self._thread = None
            self.error = f"sampler not started: {type(e).__name__}: {e}"

    def on_tensorflow(self) -> None:
        self._tensorflow = True

    def stop(self) -> None:
        try:
            self._stopping.set()
            if self._thread is not None:
                self._thread.join(self.join_timeout_s)
                if self._thread.is_alive() and self.error is None:
                    self.error = f"an NVML call did not return within {self.join_timeout_s:g} s"
            if self._tensorflow:
                self.tf_peak_memory_bytes = tf_peak_memory()
        except Exception as e:  # noqa: BLE001
            self.error = self.error or f"sampler stop failed: {type(e).__name__}: {e}"

    def wait(self, timeout: float | None = None) -> bool:
        """Until a source that ends (a replay) is exhausted; True when the thread ended."""
        if self._thread is None:
            return True
        self._thread.join(timeout)
        return not self._thread.is_alive()

    # -- the thread --------------------------------------------------------------------
    def _run(self) -> None:
        source = self.source
        try:
            if source is None:
                source = self.source = NvmlSource(self.dcgm_exporter)
            header = source.open(self.t0)
            with self._lock:
                self.header = header
                self.error = header.get("error")
                self._builders = {
                    int(d["index"]): _SeriesBuilder(d, self.windows)
                    for d in header.get("devices", ())
                }
            self._open_record(header)
            if header.get("error"):
                return
            self._loop(source)
        except Exception as e:  # noqa: BLE001 - a sampler failure is a fact, not a crash
            self.error = f"sampler failed: {type(e).__name__}: {e}"
        finally:
            for close in (getattr(source, "close", None), getattr(self._record, "close", None)):
                try:
                    if close:
                        close()
                except Exception:  # noqa: BLE001
                    pass

    def _loop(self, source: Source) -> None:
        period = 1.0 / self.hz
        every = max(1, round(self.hz / self.process_hz))
        paced = getattr(source, "paced", True)
        tick_number = 0
        due = time.perf_counter()
        while not self._stopping.is_set():
            started = time.perf_counter()
            tick = source.read(tick_number % every == 0)
            if tick is None:
                return
            self._add(tick)
            took = time.perf_counter() - started
            self.ticks += 1
            self.tick_total_s += took
            tick_number += 1
            if not paced:
                continue
            due += period
            delay = due - time.perf_counter()
            if delay < 0:  # fell behind (a slow call): no burst to catch up
                due, delay = time.perf_counter(), 0.0
            self._stopping.wait(delay)

    def _add(self, tick: dict[str, Any]) -> None:
        readings = tick.get("gpus") or ()
        pids: frozenset[int] = frozenset()
        if any("procs" in r for r in readings):
            try:
                pids = frozenset(int(p) for p in self.pids())
            except Exception:  # noqa: BLE001 - a vanished process tree is no reason to stop
                pids = frozenset()
            tick = {**tick, "pids": sorted(pids)}
        t = float(tick["t"])
        if "dcgm_error" in tick:
            self.dcgm_error = tick["dcgm_error"]
        with self._lock:
            if len(self._watched) < MAX_PIDS:  # a job that starts worker after worker
                self._watched |= pids
            for reading in readings:
                builder = self._builders.get(int(reading.get("index", -1)))
                if builder is not None:
                    builder.add(t, reading, pids)
        if self._record is not None:
            self._record.write(json.dumps({"kind": "tick", **tick}, separators=(",", ":")) + "\n")

    def _open_record(self, header: dict[str, Any]) -> None:
        if self.record_path is None:
            return
        self.record_path.parent.mkdir(parents=True, exist_ok=True)
        self._record = open(self.record_path, "w", encoding="utf-8")
        full = {
            "kind": "header",
            "format": FORMAT,
            "version": VERSION,
            "constructed": False,
            "recorded_by": f"gpuwhy {__version__}",
            "hz": self.hz,
            "process_hz": self.process_hz,
            **self.record_header,
            **header,
        }
        self._record.write(json.dumps(full) + "\n")

    # -- result ------------------------------------------------------------------------
    def fill(self, gathering: Gathering) -> GpuSamplesFacts:
        return self.facts()

    def facts(self) -> GpuSamplesFacts:
        """The series so far (complete after :meth:`stop`), times in seconds since t0."""
        with self._lock:
            gpus = tuple(b.series() for _, b in sorted(self._builders.items()))
            return GpuSamplesFacts(
                hz=float(self.header.get("hz", self.hz))
                if not getattr(self.source, "paced", True)
                else self.hz,
                gpus=gpus,
                error=self.error,
                gpm=any(b.gpm_seen for b in self._builders.values()),
                tf_peak_memory_bytes=dict(self.tf_peak_memory_bytes),
                watched_pids=tuple(sorted(self._watched)),
                dcgm_error=self.dcgm_error,
            )


def own_process_tree() -> set[int]:
    """This process and every process it started."""
    return {os.getpid(), *descendants(os.getpid())}


# -- its rows in the reports ------------------------------------------------------
def gpu_line(samples: GpuSamplesFacts, busy: Mapping[int, GpuBusy]) -> str:
    if samples.error in ("LibraryNotFound", "DriverNotLoaded"):
        return f"none: no NVIDIA driver here (NVML: {samples.error})"
    if samples.error:
        return f"none: {samples.error}"
    if not samples.gpus:
        return "none (no GPU)"
    parts = []
    for gpu in samples.gpus:
        text = f"GPU {gpu.index} {gpu.name}: {gpu.sample_count()} samples at {samples.hz:g} Hz"
        block = busy.get(gpu.index)
        if block is not None and block.share is not None:
            text += (
                f", busy {block.share:.0%} while the program used it ({block.measure})"
                if block.reliable
                else f", busy unknown ({block.measure}: {block.why})"
            )
        sm = gpu.mean("sm_activity")
        if sm is not None and (block is None or block.measure != "SM activity"):
            text += f", SM activity {sm:.0%}"
        peak = gpu.peak("memory_used_bytes")
        if peak is not None and gpu.memory_total_bytes:
            text += f", peak memory {peak / MiB:,.0f} of {gpu.memory_total_bytes / MiB:,.0f} MiB"
        parts.append(text)
    for device, peak in samples.tf_peak_memory_bytes.items():
        parts.append(f"TensorFlow's peak on {device}: {peak / MiB:,.0f} MiB")
    if samples.dcgm_error:
        parts.append(f"dcgm-exporter not read: {samples.dcgm_error}")
    return "; ".join(parts)
