"""Section ``timeline``: the whole run in windows of equal width, its first second to
its last, whatever its length.

A slowdown that comes late (steps slower as the run goes on, a GPU that throttles, a
stall every N minutes) is invisible in the run's first minute and blurred in its
means. Each window says what the steps, the host and every GPU did in it; the windows
merge in pairs as the run grows (at most a few hundred), so a day's run is 256 windows
of 512 s and a minute's is 60 of 1 s.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class GpuWindow:
    """One GPU in one window: the NVML samples read in it (None: not read then)."""

    index: int
    samples: int
    utilization: float | None = None  # mean, 0-1
    utilization_max: float | None = None
    sm_activity: float | None = None  # GPM, mean
    memory_used_max_bytes: int | None = None
    sm_clock_mhz: float | None = None  # mean
    sm_clock_min_mhz: float | None = None
    power_w: float | None = None  # mean
    power_max_w: float | None = None
    pcie_tx_bytes_per_s: float | None = None  # mean
    pcie_rx_bytes_per_s: float | None = None


@dataclass(frozen=True)
class RunWindow:
    """What happened in one window of the run (from ``start_s``, ``width_s`` long)."""

    start_s: float
    steps: int = 0  # steps that started in it
    step_p50_s: float | None = None  # time per step, within 1 %
    step_p90_s: float | None = None
    step_max_s: float | None = None
    input_wait_share: float | None = None  # of those steps' time (None: not timed)
    eager_ops_per_step: float | None = None  # in the steps the eager counter sampled
    eager_sampled_steps: int = 0
    traces: int = 0  # tf.function traces (and so graph builds, XLA compiles) begun in it
    trace_s: float = 0.0  # seconds those traces took (counted when each one ended)
    host_rss_max_bytes: int | None = None  # the program's resident memory, highest read
    gc_pause_s: float = 0.0  # Python garbage collection (gc.callbacks), seconds in it
    gc_collections: int = 0
    checkpoint_s: float = 0.0  # checkpoint writes (tf.train.Checkpoint, Keras saves)
    stalls: int = 0  # stalled steps that started in it (section stalls)
    gpus: tuple[GpuWindow, ...] = ()


@dataclass(frozen=True)
class RunTimeline:
    """Section ``timeline``: windows of ``width_s`` seconds from the run's start
    (windows in which nothing was read are left out)."""

    width_s: float
    run_s: float  # the run it covers: 0 to run_s
    windows: tuple[RunWindow, ...] = ()
