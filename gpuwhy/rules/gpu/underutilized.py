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
from gpuwhy.facts import Facts, GpuSeries
from gpuwhy.finding import Finding
from gpuwhy.fixes.gpu_evidence import percent
from gpuwhy.rules.base import Rule

IDLE = 0.05  # a GPU below this is idle, not underused: distribute.idle-gpus speaks for it

TF_FIX = """\
<dataset>.map(<your preprocessing>, num_parallel_calls=tf.data.AUTOTUNE).prefetch(tf.data.AUTOTUNE)
<model>.compile(..., steps_per_execution=32)   # fewer host round trips per step
# and a larger batch where memory allows"""
WATCH_FIX = """\
# The GPU waits for the host. For a TensorFlow/Keras program, `gpuwhy run train.py`
# names the cause (input pipeline, eager ops, retracing, host copies, batch size).
# Elsewhere: overlap input with compute (prefetch, more loader workers), batch more
# work per kernel launch, keep tensors on the GPU between steps."""


class GpuUnderutilized(Rule):
    """The GPU is measured idle for much of each training step.

    ## What it detects
    NVML samples taken during steps (not during start-up, compilation or evaluation)
    show a mean GPU utilisation below `max_utilization`, or, on Hopper and newer where
    GPM metrics exist, a mean SM activity below `max_sm_activity`; high below half of
    either. Without steps (`gpuwhy watch`) the samples taken while the program held the
    GPU count. At least 5 samples must fall in those windows, and a GPU that stays
    below 5% is left to distribute.idle-gpus when another one works. The finding gives
    the measured values (utilisation, SM activity and occupancy, tensor-pipe activity,
    PCIe traffic, clocks, power) and points to the findings that explain them (input,
    launch overhead, placement, batch size).

    ## Why is this slow?
    NVML's "GPU utilisation" is the share of time in which at least one kernel was
    running, so a low value means the GPU had nothing queued: it was waiting for input,
    for the host to launch the next kernel, or for a copy. A high value is not proof of
    a busy GPU either: one tiny kernel at a time reads 100% while most SMs are idle,
    which is why SM activity (GPM) is the better measure where available.

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
                  steps_per_execution=32)
    model.fit(ds, epochs=10)
    ```

    ## Options
    - `max_sm_activity`: GPM SM activity during steps (0-1) below which the finding
      fires, where GPM is available (0.30).
    - `max_utilization`: NVML GPU utilisation during steps (0-1) below which the
      finding fires (0.50).
    """

    id = "gpu.underutilized"
    severity = "medium"
    status = "stable"
    needs = ("gpu_samples",)  # and steps, when the run has them
    options = {"max_sm_activity": 0.30, "max_utilization": 0.50}
    question = "Is the GPU busy?"

    def check(self, facts: Facts, options: dict[str, Any]) -> list[Finding]:
        samples = facts.gpu_samples
        if not usable(samples):
            return []
        # (series, windows, what they are, activity, its busy share: known with utilisation)
        measured: list[tuple[GpuSeries, list[Window], str, Activity, float]] = []
        for series in program_gpus(samples):
            windows, basis = windows_for(facts, series)
            act = activity(series, windows)
            share = act.busy()
            if act.samples >= MIN_SAMPLES and act.utilization is not None and share is not None:
                measured.append((series, windows, basis, act, share))
        if len(measured) > 1 and any(m[4] >= IDLE for m in measured):
            measured = [m for m in measured if m[4] >= IDLE]
        findings = []
        for series, windows, basis, act, busy in measured:
            low_util = act.utilization < options["max_utilization"]
            low_sm = act.sm_activity is not None and act.sm_activity < options["max_sm_activity"]
            if not (low_util or low_sm):
                continue
            high = act.utilization < options["max_utilization"] / 2 or (
                act.sm_activity is not None and act.sm_activity < options["max_sm_activity"] / 2
            )
            measure = "SM activity" if act.sm_activity is not None else "utilisation"
            seconds = sum(b - a for a, b in windows)
            findings.append(
                self.finding(
                    f"GPU {series.index} ({series.name}) is busy only {busy:.0%} of the time "
                    f"{basis} ({measure}, {act.samples} samples)",
                    severity="high" if high else self.severity,
                    evidence={
                        "gpu": series.index,
                        "measured": basis,
                        "samples": act.samples,
                        "window_s": round(seconds, 1),
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
                        "explained_by": "input.bound, launch.eager-ops, launch.retracing, "
                        "placement.host-transfers, memory.underused",
                    },
                    fix=TF_FIX if facts.steps is not None else WATCH_FIX,
                    gain_value=round(1.0 - busy, 3),
                    estimated_gain=f"the GPU idles {1 - busy:.0%} of the time {basis}",
                )
            )
        return findings


def _mb(rate):
    # NVML's RX counter is what the GPU receives (host -> GPU), TX what it sends.
    return None if rate is None else round(rate / 1e6, 1)
