"""gpu.underutilized: measured GPU activity during steps is low."""

from __future__ import annotations

from typing import Any

from gpuwhy.derived.gpu_activity import (
    MIN_SAMPLES,
    Activity,
    Window,
    activity,
    program_gpus,
    usable,
    windows_for,
)
from gpuwhy.derived.gpu_busy import steady_windows
from gpuwhy.derived.stage import derived
from gpuwhy.facts import Facts, GpuBusy, GpuSeries
from gpuwhy.finding import Finding
from gpuwhy.fixes.gpu_evidence import percent
from gpuwhy.rules.base import Rule

IDLE = 0.05  # a GPU below this is idle, not underused: distribute.idle-gpus speaks for it
SMALL_KERNELS = 0.6  # while a kernel runs, fewer of the SMs than this busy: kernels too small
EXPLAINED_BY = {  # the findings that name the cause, by kind of idle
    "kernels too small": "launch.eager-ops, launch.retracing, memory.underused",
    "copies, not compute": "placement.host-transfers, input.bound",
    "unknown": "input.bound, launch.eager-ops, launch.retracing, placement.host-transfers, "
    "memory.underused",
}


def _explained_by(facts: Facts, kind: str) -> str:
    """The findings that name this kind of idle, and where the record cannot hold them
    (a recording of the GPU alone: no steps, no eager ops, no traces), that it cannot."""
    names = EXPLAINED_BY.get(kind, EXPLAINED_BY["unknown"])
    if facts.steps is None and facts.eager is None and facts.tracing is None:
        return f"{names} (found by `gpuwhy run` on the program; a GPU recording cannot tell)"
    return names


COMPUTING = 0.05  # SMs busy less than this while the GPU is engaged: it is copying

TF_FIX = """\
<dataset>.map(<your preprocessing>, num_parallel_calls=tf.data.AUTOTUNE).prefetch(tf.data.AUTOTUNE)
<model>.compile(..., steps_per_execution=32)   # fewer host round trips per step
# and a larger batch where memory allows"""
WATCH_FIX = """\
# The GPU waits for the host. For a TensorFlow/Keras program, `gpuwhy run train.py`
# names the cause (input pipeline, eager ops, retracing, host copies, batch size).
# Elsewhere: overlap input with compute (prefetch, more loader workers), batch more
# work per kernel launch, keep tensors on the GPU between steps."""
TF_SMALL_FIX = """\
<model>.compile(..., jit_compile=True, steps_per_execution=32)   # XLA fuses the small ops
# and a larger batch where memory allows: each kernel then fills more of the GPU"""
WATCH_SMALL_FIX = """\
# Kernels too small to fill the GPU, launched one by one: give each more work and
# launch fewer. Larger batch; fuse ops: TensorFlow `jit_compile=True` (XLA) and
# `steps_per_execution`, PyTorch `torch.compile(model)` or CUDA graphs
# (`torch.cuda.graphs` / `mode="reduce-overhead"`), JAX `jax.jit` over the whole step."""
COPIES_FIX = """\
# The GPU moves data more than it computes: keep tensors on the GPU between steps (no
# .numpy()/.cpu() per step), move each batch once and early (tf.data: .prefetch to the
# device with tf.data.experimental.prefetch_to_device; PyTorch: pin_memory=True and
# .to(device, non_blocking=True)), and batch small copies into larger ones."""
UNKNOWN_KIND = """\
# Either the GPU waits for the host (input, Python, synchronisation: overlap input with
# compute, prefetch) or its kernels are too small to fill it (larger batch, fuse ops:
# XLA / torch.compile / CUDA graphs). Telling them apart takes how many SMs its kernels
# keep busy beside a reliable time share: GPM reads both on Hopper and newer; elsewhere
# a dcgm-exporter's SM_ACTIVE does (`gpuwhy watch --dcgm-exporter URL -- ...`). For a
# TensorFlow/Keras program, `gpuwhy run train.py` names the cause."""


class GpuUnderutilized(Rule):
    """The GPU is measured idle for much of the program's steady work, and why: waiting
    for its host, or running kernels too small to fill it.

    ## What it detects
    The one busy figure of each GPU (derived/gpu_busy.py: GPM graphics utilisation, a
    dcgm-exporter's GR engine activity, SM activity in older recordings, else the
    driver's own samples behind an aliasing guard) over the steady work: the steps after
    warm-up in `gpuwhy run`, the stretches of sustained activity in `gpuwhy watch`
    (start-up, compilation and autotuning are the verdict's, not this finding's). It
    fires below `max_busy`, high below half of it; a figure that cannot resolve the
    program (point readings, a load beating with the driver's sampling) is never
    judged. Where a reliable time share exists beside SM activity it tells the kind of
    idle: a GPU that runs kernels with few of its SMs busy (below 60%) runs kernels too
    small to fill it, and the host cannot launch them fast enough; one whose kernels
    fill it but that runs them little of the time waits for its host (input, Python,
    synchronisation); one engaged most of the time with its SMs idle is copying
    between host and GPU. The fix follows the kind. At least 5 samples must count, and a GPU
    that stays below 5% is left to distribute.idle-gpus when another one works.

    ## Why is this slow?
    A GPU runs the program's work only while a kernel runs on it. Between kernels it
    waits: for the input pipeline, for Python to issue the next op, for a copy or a
    synchronisation. Kernels too small to fill the SMs (a small batch, unfused
    element-wise ops) waste the GPU twice: most SMs idle while each runs, and each is
    over before the host has launched the next.

    ## Example
    ```python
    ds = tf.data.Dataset.from_tensor_slices((x, y)).map(augment).batch(32)
    model.compile(optimizer="adam", loss="sparse_categorical_crossentropy")
    model.fit(ds, epochs=10)                   # nvidia-smi: 20-30%
    ```

    Use instead:
    ```python
    ds = (tf.data.Dataset.from_tensor_slices((x, y))
          .map(augment, num_parallel_calls=tf.data.AUTOTUNE)
          .batch(256)
          .prefetch(tf.data.AUTOTUNE))
    model.compile(optimizer="adam", loss="sparse_categorical_crossentropy",
                  steps_per_execution=32, jit_compile=True)
    model.fit(ds, epochs=10)
    ```

    ## Options
    - `max_busy`: the busy share of the steady work (0-1) below which the finding
      fires (0.50).
    """

    id = "gpu.underutilized"
    measured_thresholds = {"max_busy": "ceiling"}
    severity = "medium"
    status = "stable"
    needs = ("gpu_samples",)  # and steps, when the run has them
    options = {"max_busy": 0.50}
    question = "Is the GPU busy?"

    def check(self, facts: Facts, options: dict[str, Any]) -> list[Finding]:
        samples = facts.gpu_samples
        if not usable(samples):
            return []
        # (series, windows, what they are, activity, busy block, the share judged)
        measured: list[tuple[GpuSeries, list[Window], str, Activity, GpuBusy, float]] = []
        for series in program_gpus(samples):
            block = derived(facts).busy_of(series)
            if block is None or block.share is None or not block.reliable:
                continue  # nothing rests on a figure that cannot resolve the program
            windows, basis = windows_for(facts, series)
            if facts.steps is None and block.steady_share is not None:
                windows, basis = steady_windows(series, block), "in its steady work"
            act = activity(series, windows)
            share = block.steady_share if block.steady_share is not None else block.share
            if act.samples >= MIN_SAMPLES:
                measured.append((series, windows, basis, act, block, share))
        if len(measured) > 1 and any(m[5] >= IDLE for m in measured):
            measured = [m for m in measured if m[5] >= IDLE]
        findings = []
        for series, windows, basis, act, block, busy in measured:
            limit = options["max_busy"]
            small = block.space_share is not None and block.space_share < SMALL_KERNELS
            if busy >= limit and not small:
                continue
            high = busy < limit / 2
            seconds = sum(b - a for a, b in windows)
            title, fix, kind = self._kind(facts, series, block, busy, basis, small)
            findings.append(
                self.finding(
                    title + f" ({block.measure}, {act.samples} samples)",
                    severity="high" if high else self.severity,
                    evidence={
                        "gpu": series.index,
                        "measured": basis,
                        "kind": kind,
                        "samples": act.samples,
                        "window_s": round(seconds, 1),
                        "busy_percent": percent(busy),
                        "busy_source": block.source,
                        "busy_measure": block.measure,
                        "time_share_percent": percent(block.time_share),
                        "space_share_percent": percent(block.space_share),
                        "utilization_percent": percent(act.utilization),
                        "sm_activity_percent": percent(act.sm_activity),
                        "sm_occupancy_percent": percent(act.sm_occupancy),
                        "tensor_activity_percent": percent(act.tensor_activity),
                        "pcie_to_gpu_mb_s": _mb(act.pcie_rx_bytes_per_s),
                        "pcie_from_gpu_mb_s": _mb(act.pcie_tx_bytes_per_s),
                        "sm_clock_mhz": None
                        if act.sm_clock_mhz is None
                        else round(act.sm_clock_mhz),
                        "power_w": None if act.power_w is None else round(act.power_w),
                        "explained_by": _explained_by(facts, kind),
                    },
                    fix=fix,
                    gain_value=round(1.0 - busy, 3),
                    estimated_gain=_gain(block, busy, basis),
                )
            )
        return findings

    @staticmethod
    def _kind(
        facts: Facts, series: GpuSeries, block: GpuBusy, busy: float, basis: str, small: bool
    ) -> tuple[str, str, str]:
        """(title, fix, kind): time idle (waits for its host), space idle (kernels too
        small to fill it), or which of the two this run cannot tell."""
        gpu = f"GPU {series.index} ({series.name})"
        tf = facts.steps is not None
        if small and block.time_share is not None and busy < COMPUTING:
            # engaged most of the time, its SMs idle: what it runs is copies, not kernels
            return (
                f"{gpu} computes only {busy:.0%} of the time {basis}, though it is engaged "
                f"{block.time_share:.0%} of it: copies between host and GPU, not kernels",
                COPIES_FIX,
                "copies, not compute",
            )
        if small:
            assert block.space_share is not None and block.time_share is not None  # small
            return (
                f"{gpu} runs kernels too small to fill it {basis}: while one runs only "
                f"{block.space_share:.0%} of its SMs are busy, and it runs one "
                f"{block.time_share:.0%} of the time",
                TF_SMALL_FIX if tf else WATCH_SMALL_FIX,
                "kernels too small",
            )
        if block.space_share is not None:
            return (
                f"{gpu} is busy only {busy:.0%} of the time {basis}: it waits for its host "
                f"(its kernels fill {block.space_share:.0%} of the SMs while they run)",
                TF_FIX if tf else WATCH_FIX,
                "waits for the host",
            )
        return (
            f"{gpu} is busy only {busy:.0%} of the time {basis}",
            TF_FIX if tf else UNKNOWN_KIND,
            "unknown",
        )


def _gain(block: GpuBusy, busy: float, basis: str) -> str:
    """What stands unused, in the terms the finding measured: time, and SMs where known."""
    if block.time_share is not None and block.space_share is not None:
        return (
            f"{1 - busy:.0%} of the GPU unused {basis}: no kernel {1 - block.time_share:.0%} "
            f"of the time, {1 - block.space_share:.0%} of its SMs idle while one runs"
        )
    return f"the GPU idles {1 - busy:.0%} of the time {basis}"


def _mb(rate):
    # NVML's RX counter is what the GPU receives (host -> GPU), TX what it sends.
    return None if rate is None else round(rate / 1e6, 1)
