"""Section ``gpu_samples``: what the background NVML sampler read of each GPU over a
watched run.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from gpuwhy.facts.environment import GpuProcess


@dataclass(frozen=True)
class GpuSeries:
    """NVML samples of one GPU over the run (None: not supported on this GPU/driver).

    Utilisation and activities are fractions 0-1. PCIe rates come from NVML's cumulative
    byte counters, differenced between samples. The GPM activities exist on Hopper and
    newer only.
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


@dataclass(frozen=True)
class GpuSamplesFacts:
    """Section ``gpu_samples``: the background NVML sampler's series, per GPU."""

    hz: float
    gpus: tuple[GpuSeries, ...] = ()
    error: str | None = None  # why there are no samples (no driver ...)
    gpm: bool = False  # GPM metrics were read
    tf_peak_memory_bytes: dict[str, int] = field(default_factory=dict)  # "GPU:0" -> peak
    watched_pids: tuple[int, ...] = ()
