"""Section ``gpu_samples``: what the background NVML sampler read of each GPU over a
watched run.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from gpuwhy.facts.environment import GpuProcess

Value = float | None  # ints (bytes) included


@dataclass(frozen=True)
class ClockReason:
    """One bit of NVML's clock-event reasons (``nvmlClocksEventReason*``, formerly
    ``nvmlClocksThrottleReason*``; dcgm-exporter's ``DCGM_FI_DEV_CLOCKS_EVENT_REASONS``).
    ``slowdown``: the bit means the clocks are held below what the load asks for; the
    others (the GPU is idle, clocks set by the user or for a display) are no slowdown."""

    bit: int
    name: str
    slowdown: bool


CLOCK_REASONS = (
    ClockReason(0x1, "gpu_idle", False),
    ClockReason(0x2, "applications_clocks_setting", False),
    ClockReason(0x4, "sw_power_cap", True),
    ClockReason(0x8, "hw_slowdown", True),
    ClockReason(0x10, "sync_boost", True),
    ClockReason(0x20, "sw_thermal_slowdown", True),
    ClockReason(0x40, "hw_thermal_slowdown", True),
    ClockReason(0x80, "hw_power_brake_slowdown", True),
    ClockReason(0x100, "display_clock_setting", False),
    ClockReason(0x200, "board_limit", True),  # nvmlClocksThrottleReasonBoardLimit
    ClockReason(0x400, "reliability", True),  # nvmlClocksThrottleReasonReliability
)
SLOWDOWN_BITS = sum(r.bit for r in CLOCK_REASONS if r.slowdown)


@dataclass(frozen=True)
class ClockReasonSeries:
    """One clock-event reason seen on a GPU during the run (reasons never seen are left
    out): the share of each entry's samples (those whose reasons were read) with its bit
    set, per entry of the GPU's ``t``, and its whole-run counts."""

    name: str  # CLOCK_REASONS' name: "sw_power_cap" ...
    bit: int
    slowdown: bool
    share: tuple[float | None, ...] = ()  # per entry of GpuSeries.t
    samples: int = 0  # samples with the bit set
    busy_samples: int = 0  # of those, samples with utilisation >= 50%
    seconds: float = 0.0  # the sampling intervals that ended in those samples
    first_s: float | None = None  # the first sample with the bit set
    first_busy_s: float | None = None


@dataclass(frozen=True)
class GpuLatest:
    """The last reading of one GPU (what live metrics publish as "now"; None: not read)."""

    t: float
    sm_clock_mhz: float | None = None
    power_w: float | None = None
    temperature_c: float | None = None
    clocks_event_reasons: int | None = None  # NVML's bitmask
    pcie_gen: int | None = None
    pcie_width: int | None = None
    pcie_replay_counter: int | None = None  # NVML's cumulative count (last process tick)


@dataclass(frozen=True)
class WindowSpread:
    """One series of a windowed :class:`GpuSeries`, inside each window: how many samples
    had a value, and the lowest and highest of them (None: no value in that window)."""

    name: str  # the GpuSeries field: "utilization", "memory_used_bytes" ...
    known: tuple[int, ...] = ()
    low: tuple[float | None, ...] = ()
    high: tuple[float | None, ...] = ()


@dataclass(frozen=True)
class GpuBusy:
    """How busy one GPU was: the one figure every report, finding and metric gives.

    ``share`` is the share of time the GPU executed the program's work over the span in
    which the program used it (``start_s``..``end_s``), from the best integrating source
    the run had (``source``; ``measure`` names the figure): GPM's graphics utilisation
    (Hopper and newer) or DCGM's GR_ENGINE_ACTIVE, which integrate hardware counters;
    else every sample of the driver's own utilisation buffer, which does not cover all
    of its period and aliases with a periodic load. ``reliable`` is False where the figure
    cannot resolve the program (the aliasing guard, too few samples), and ``why`` says
    so; nothing rests on an unreliable figure alone.

    ``steady_*``: the same over the steady work alone (steps after warm-up in ``run``; in
    ``watch`` the stretches of sustained activity), ``startup_s`` the program's time outside it,
    from its start (imports, compilation, autotuning) and in the pauses between. ``time_share``: the share of time any
    kernel ran, where a reliable time figure exists; ``space_share``: the share of SMs
    busy while one did (SM activity over the time share), which tells kernels too small
    to fill the GPU from a GPU waiting for its host."""

    share: float | None
    source: str  # "gpm" | "dcgm" | "nvml-samples" | "nvml-point" | "kernels"
    measure: str  # "graphics utilisation", "SM activity", "driver samples" ...
    reliable: bool
    why: str
    samples: int = 0
    start_s: float | None = None
    end_s: float | None = None
    span_s: float = 0.0
    steady_share: float | None = None
    steady_span_s: float = 0.0
    steady_start_s: float | None = None
    startup_s: float = 0.0
    time_share: float | None = None
    space_share: float | None = None
    # gpuwhy run --capture: the share of the captured steps this GPU's kernels ran (the
    # union of their intervals): a direct measurement of those steps, trusted over the
    # sampled figure for them where the two differ
    kernels_share: float | None = None
    kernels_steps: int = 0


@dataclass(frozen=True)
class GpuSeries:
    """NVML samples of one GPU over the run (None: not supported on this GPU/driver).

    Utilisation and activities are fractions 0-1. PCIe rates come from NVML's cumulative
    byte counters, differenced between samples. The GPM activities exist on Hopper and
    newer only.

    Clocks, power, heat and the PCIe link: ``throttled`` is 1 for a sample
    whose clock-event reasons hold a slowdown bit (:data:`SLOWDOWN_BITS`), 0 for one
    without, None where the reasons were not read; the ``*_busy`` series hold a value only
    on busy samples (utilisation >= 50%: a link downshifts and the clocks drop when idle,
    so those are judged under load only), so their known count is the busy samples;
    ``pcie_degraded_busy`` is 1 for a busy sample whose link ran below the link's maximum
    generation or width (``pcie_max_gen``/``pcie_max_width``). ``pcie_replays`` is the
    growth of NVML's replay counter since the previous process tick (a counter that went
    down was reset: no value). ``others_memory_bytes``: other processes' GPU memory, on
    process ticks.

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
    graphics_activity: tuple[float | None, ...] = ()  # GPM graphics util / DCGM GR engine
    driver_utilization: tuple[float | None, ...] = ()  # the driver's own samples (mean)
    temperature_c: tuple[float | None, ...] = ()
    power_limit_w: tuple[float | None, ...] = ()  # enforced (process ticks)
    throttled: tuple[float | None, ...] = ()  # 0/1: a slowdown reason set
    throttled_busy: tuple[float | None, ...] = ()  # the same, busy samples only
    sm_clock_busy_mhz: tuple[float | None, ...] = ()  # busy samples only
    sm_clock_throttled_mhz: tuple[float | None, ...] = ()  # busy samples with a slowdown
    pcie_gen_busy: tuple[float | None, ...] = ()  # current link generation, busy samples
    pcie_width_busy: tuple[float | None, ...] = ()  # current link width, busy samples
    pcie_degraded_busy: tuple[float | None, ...] = ()  # 0/1, busy samples
    pcie_replays: tuple[float | None, ...] = ()  # replay counter growth (process ticks)
    others_memory_bytes: tuple[int | None, ...] = ()  # other processes' (process ticks)
    others: tuple[GpuProcess, ...] = ()  # other processes seen on this GPU during the run
    samples_per_window: int = 1  # samples in every window but the last (1: raw samples)
    counts: tuple[int, ...] = ()  # samples in each window; () when each is one sample
    t_last: tuple[float, ...] = ()  # each window's last sample's time; () when t is
    spread: tuple[WindowSpread, ...] = ()  # per series; () when each window is one sample
    clock_reasons: tuple[ClockReasonSeries, ...] = ()  # the reasons seen, in bit order
    pci_bus_id: str | None = None  # NVML's: "00000000:01:00.0"
    max_sm_clock_mhz: float | None = None  # nvmlDeviceGetMaxClockInfo(SM)
    power_default_limit_w: float | None = None  # the board's default power limit
    pcie_max_gen: int | None = None  # the link's: what both the GPU and its slot support
    pcie_max_width: int | None = None
    gpu_pcie_max_gen: int | None = None  # the GPU's own (a slot may allow less)
    latest: GpuLatest | None = None
    activity_source: str | None = None  # "gpm" | "dcgm": where the activities came from
    memory_reserved_bytes: int | None = None  # the driver's reservation (memory info v2)
    driver_sample_period_s: float | None = None  # between the driver's samples, measured

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

    def total(self, name: str, inside: Sequence[bool] | None = None) -> float | None:
        """Sum of every sample of series ``name`` (of the entries ``inside`` marks);
        None when none was read."""
        values: tuple[Value, ...] = getattr(self, name)
        known = self.column(name).known
        flags = inside if inside is not None else (True,) * len(values)
        sums = [v * k for v, k, keep in zip(values, known, flags) if keep and k and v is not None]
        return sum(sums) if sums else None

    def known(self, name: str, inside: Sequence[bool] | None = None) -> int:
        """How many samples of series ``name`` had a value (in the entries ``inside``)."""
        flags = inside if inside is not None else (True,) * len(self.t)
        return sum(k for k, keep in zip(self.column(name).known, flags) if keep)

    def low(self, name: str) -> Value:
        """Lowest sample of series ``name``; None when it was never read."""
        return min((v for v in self.column(name).low if v is not None), default=None)

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
    dcgm_error: str | None = None  # why a dcgm-exporter named (--dcgm-exporter) was not read
