"""Section ``gpu_samples``: what the background NVML sampler read of each GPU over a
watched run.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from gpuwhy.facts.environment import GpuProcess

Value = float | None  # ints (bytes) included


@dataclass(frozen=True)
class WindowSpread:
    """One series of a windowed :class:`GpuSeries`, inside each window: how many samples
    had a value, and the lowest and highest of them (None: no value in that window)."""

    name: str  # the GpuSeries field: "utilization", "memory_used_bytes" ...
    known: tuple[int, ...] = ()
    low: tuple[float | None, ...] = ()
    high: tuple[float | None, ...] = ()


@dataclass(frozen=True)
class GpuSeries:
    """NVML samples of one GPU over the run (None: not supported on this GPU/driver).

    Utilisation and activities are fractions 0-1. PCIe rates come from NVML's cumulative
    byte counters, differenced between samples. The GPM activities exist on Hopper and
    newer only.

    A run of any length is kept in at most a few hundred windows (collect/windows.py):
    while ``samples_per_window`` is 1 each entry is one sample, as read; beyond, each entry
    is a window of samples, ``t`` its first sample's time, each series its mean, and
    ``counts``, ``t_last`` and ``spread`` say how many samples it holds, when its last was
    read, and each series' known count, minimum and maximum in it. Readers that sum,
    average, count or take peaks go through the methods below, which read both forms.
    """

    index: int
    name: str
    memory_total_bytes: int | None = None
    t: tuple[float, ...] = ()
    utilization: tuple[float | None, ...] = ()
    memory_used_bytes: tuple[int | None, ...] = ()  # by every process
    own_memory_bytes: tuple[int | None, ...] = ()  # by the watched processes (<= 1 Hz)
    pcie_tx_bytes_per_s: tuple[float | None, ...] = ()
    pcie_rx_bytes_per_s: tuple[float | None, ...] = ()
    sm_clock_mhz: tuple[float | None, ...] = ()
    power_w: tuple[float | None, ...] = ()
    sm_activity: tuple[float | None, ...] = ()  # GPM
    sm_occupancy: tuple[float | None, ...] = ()  # GPM
    tensor_activity: tuple[float | None, ...] = ()  # GPM, any tensor pipe
    others: tuple[GpuProcess, ...] = ()  # other processes seen on this GPU during the run
    samples_per_window: int = 1  # samples in every window but the last (1: raw samples)
    counts: tuple[int, ...] = ()  # samples in each window; () when each is one sample
    t_last: tuple[float, ...] = ()  # each window's last sample's time; () when t is
    spread: tuple[WindowSpread, ...] = ()  # per series; () when each window is one sample

    @property
    def windowed(self) -> bool:
        return bool(self.counts)

    def window_counts(self) -> Sequence[int]:
        """Samples in each entry of ``t``."""
        return self.counts if self.counts else (1,) * len(self.t)

    def sample_count(self) -> int:
        """Samples read in all."""
        return sum(self.counts) if self.counts else len(self.t)

    def ends(self) -> Sequence[float]:
        """Each entry's last sample's time (its own time for a raw sample)."""
        return self.t_last if self.t_last else self.t

    def centres(self) -> list[float]:
        """Each entry's time as a point: the middle of its first and last sample."""
        if not self.t_last:
            return list(self.t)
        return [(a + b) / 2 for a, b in zip(self.t, self.t_last)]

    def column(self, name: str) -> WindowSpread:
        """The known counts, minima and maxima of series ``name`` per entry."""
        for spread in self.spread:
            if spread.name == name:
                return spread
        values: tuple[Value, ...] = getattr(self, name)
        return WindowSpread(
            name=name,
            known=tuple(0 if v is None else 1 for v in values),
            low=values,
            high=values,
        )

    def mean(self, name: str, inside: Sequence[bool] | None = None) -> float | None:
        """Mean of every sample of series ``name`` (of the entries ``inside`` marks):
        each window's mean weighted by its known samples, so exactly the samples' mean."""
        values: tuple[Value, ...] = getattr(self, name)
        known = self.column(name).known
        flags = inside if inside is not None else (True,) * len(values)
        total, n = 0.0, 0
        for v, k, keep in zip(values, known, flags):
            if keep and k and v is not None:
                total += v * k
                n += k
        return total / n if n else None

    def peak(self, name: str) -> Value:
        """Highest sample of series ``name``; None when it was never read."""
        return max((v for v in self.column(name).high if v is not None), default=None)


@dataclass(frozen=True)
class GpuSamplesFacts:
    """Section ``gpu_samples``: the background NVML sampler's series, per GPU."""

    hz: float
    gpus: tuple[GpuSeries, ...] = ()
    error: str | None = None  # why there are no samples (no driver ...)
    gpm: bool = False  # GPM metrics were read
    tf_peak_memory_bytes: dict[str, int] = field(default_factory=dict)  # "GPU:0" -> peak
    watched_pids: tuple[int, ...] = ()
