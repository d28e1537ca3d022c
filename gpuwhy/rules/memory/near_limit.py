"""memory.near-limit: peak GPU memory is close to the device's capacity."""

from __future__ import annotations

from typing import Any

from gpuwhy.derived.gpu_activity import own_peak, program_gpus, tf_peaks_by_gpu, usable
from gpuwhy.facts import Facts, GpuSeries
from gpuwhy.finding import Finding
from gpuwhy.fixes.gpu_evidence import memory_evidence
from gpuwhy.formatting import MiB
from gpuwhy.rules.base import Rule

TF_SOURCE = "in TensorFlow's allocator"
TF_FIX = """\
tf.keras.mixed_precision.set_global_policy("mixed_bfloat16")  # ~half the activations
model.fit(ds.batch(batch_size * 3 // 4), epochs=epochs)      # or a smaller batch
# or recompute activations in the backward pass: tf.recompute_grad(block)"""
OTHER_FIX = """\
# Lower the peak: a smaller batch, bf16/fp16 activations (mixed precision),
# activation checkpointing; or stop the framework from reserving more than it needs."""


class MemoryNearLimit(Rule):
    """Peak GPU memory in use is close to the device's limit.

    ## What it detects
    TensorFlow's own peak allocation on a GPU (`tf.config.experimental.get_memory_info`
    "peak", not the pool that nvidia-smi shows: TF reserves most of the memory up front
    unless memory growth is on) reaches `min_peak_fraction` of the device's memory.
    Where TF's peak is not known (`gpuwhy watch`, a program of another framework) the
    most memory the watched processes held on the GPU (NVML) counts instead; that is
    the framework's pool, so it can overstate what the program needs. The finding gives
    the peak, the device's memory and where the peak was read.

    ## Why is this slow?
    TensorFlow never moves an op to the CPU because GPU memory is short: a real
    shortage is a `ResourceExhaustedError`. Before that, it slows down: cuDNN's
    autotuner skips convolution algorithms whose workspace does not fit and picks
    slower ones, TF warns "ran out of memory trying to allocate ... there could be
    performance gains if more memory were available", and a fragmented pool makes the
    next larger batch or sequence fail mid-epoch.

    ## Example
    ```python
    model = keras.applications.ResNet152(weights=None, classes=1000)
    model.compile(optimizer="sgd", loss="sparse_categorical_crossentropy")
    model.fit(ds.batch(256), epochs=90)   # peak 78.1 of 79.1 GiB
    ```

    Use instead:
    ```python
    tf.keras.mixed_precision.set_global_policy("mixed_bfloat16")  # ~half the activations
    model = keras.applications.ResNet152(weights=None, classes=1000)
    model.compile(optimizer="sgd", loss="sparse_categorical_crossentropy")
    model.fit(ds.batch(192), epochs=90)   # or recompute activations (tf.recompute_grad)
    ```

    ## Options
    - `min_peak_fraction`: peak allocation as a share of the usable device memory that
      makes the finding (0.90).
    """

    id = "memory.near-limit"
    severity = "medium"
    status = "stable"
    needs = ("gpu_samples",)
    options = {"min_peak_fraction": 0.90}
    question = "Why did it fall back / OOM?"

    def check(self, facts: Facts, options: dict[str, Any]) -> list[Finding]:
        samples = facts.gpu_samples
        if not usable(samples):
            return []
        findings = []
        for series, peak, source in peaks(facts):
            total = series.memory_total_bytes
            if not total or peak / total < options["min_peak_fraction"]:
                continue
            share = peak / total
            findings.append(
                self.finding(
                    f"GPU {series.index} ({series.name}) peaked at {peak / MiB:,.0f} of "
                    f"{total / MiB:,.0f} MiB ({share:.0%}) {source}",
                    evidence=peak_evidence(series.index, peak, total, source),
                    fix=TF_FIX if source.startswith(TF_SOURCE) else OTHER_FIX,
                    estimated_gain="room for cuDNN's fastest algorithms and no mid-run "
                    "out-of-memory errors",
                )
            )
        return findings


def peak_evidence(gpu: int, peak: int, total: int, source: str) -> dict[str, Any]:
    """A GPU's peak against its size, and where the peak was read: the evidence
    memory.near-limit and memory.underused both open with."""
    return {
        **memory_evidence(
            gpu,
            used_key="peak_mib",
            used=peak,
            total=total,
            share_key="peak_share",
            share=peak / total,
        ),
        "read_from": source,
    }


def peaks(facts: Facts) -> list[tuple[GpuSeries, int, str]]:
    """(series, peak bytes, where it was read) per GPU the program used.

    TensorFlow's own peak where known; otherwise the watched processes' memory, except in
    a TensorFlow program, where that is the pool TF reserved and says nothing."""
    samples = facts.gpu_samples
    if samples is None:  # the callers check usable() first
        return []
    tf_peaks = tf_peaks_by_gpu(samples)
    if tf_peaks:
        by_index = {s.index: s for s in samples.gpus}
        return [
            (by_index[i], peak, f"{TF_SOURCE} ({name})")
            for i, (name, peak) in sorted(tf_peaks.items())
        ]
    if facts.program is not None and facts.program.tensorflow_imported:
        return []
    return [
        (s, peak, "held by the watched processes (their framework's pool)")
        for s in program_gpus(samples)
        if (peak := own_peak(s))
    ]
