"""distribute.idle-gpus: several GPUs are visible but only one does work."""

from __future__ import annotations

from typing import Any

from gpuwhy.derived.gpu_activity import (
    MIN_SAMPLES,
    Window,
    activity,
    busy_window,
    others_peak,
    own_peak,
    usable,
    windows_for,
)
from gpuwhy.facts import Facts, GpuSeries
from gpuwhy.finding import Finding
from gpuwhy.fixes.gpu_evidence import percent
from gpuwhy.formatting import MiB
from gpuwhy.rules.base import Rule

TAKEN = 0.10  # a GPU whose memory others hold this much of is another job's, not idle

FIX = """\
strategy = tf.distribute.MirroredStrategy()
with strategy.scope():                    # variables mirrored on every GPU
    model = build_model()
    model.compile(optimizer="adam", loss="sparse_categorical_crossentropy")
model.fit(ds.batch(batch_size * strategy.num_replicas_in_sync), epochs=epochs)
# or give the idle GPUs to another job: CUDA_VISIBLE_DEVICES={busy}"""


class IdleGpus(Rule):
    """Several GPUs are visible to TensorFlow but only one of them does any work, or a
    tf.distribute strategy spans fewer GPUs than TensorFlow sees.

    ## What it detects
    With a strategy (`tf.distribute`): TensorFlow created more GPUs in the program than
    the strategy's devices on this worker include (`MirroredStrategy(["/gpu:0",
    "/gpu:1"])` with four visible, `OneDeviceStrategy`, a strategy over CPU devices):
    the others hold memory TF reserved and never compute. Read from the program's own
    devices, with or without NVML samples.

    Without a strategy:
    More than one GPU is visible to the program, and during steps (for `gpuwhy watch`:
    while the program used a GPU) exactly one of them works while every other stays
    below `idle_below` activity; a strategy that spans them would keep them all busy.
    The one that works must hold the program's memory. How many GPUs are visible is
    TensorFlow's count where the program imported it; otherwise (`gpuwhy watch`) every
    GPU NVML lists counts, since the command's CUDA_VISIBLE_DEVICES is not known. GPUs
    other processes hold 10% or more of are another job's and left out. The finding
    lists the GPUs with their activity and memory in use.

    ## Why is this slow?
    TensorFlow places ops on `/GPU:0` unless a strategy or `tf.device` says otherwise;
    it does not split a model or a batch across GPUs by itself. Yet it initialises
    every visible GPU and by default reserves most of its memory, so nvidia-smi shows
    all of them "in use" while only one computes. With `tf.distribute.MirroredStrategy`
    each GPU runs a replica on its share of the global batch and gradients are
    all-reduced (NCCL), so throughput scales with the GPU count as long as the input
    pipeline keeps up.

    ## Example
    ```python
    model = build_model()
    model.compile(optimizer="adam", loss="sparse_categorical_crossentropy")
    model.fit(ds.batch(128), epochs=10)       # 4 GPUs visible, only GPU:0 busy
    ```

    Use instead:
    ```python
    strategy = tf.distribute.MirroredStrategy()
    with strategy.scope():                    # variables mirrored on every GPU
        model = build_model()
        model.compile(optimizer="adam", loss="sparse_categorical_crossentropy")
    model.fit(ds.batch(128 * strategy.num_replicas_in_sync), epochs=10)
    # or hide the unused GPUs from this job: CUDA_VISIBLE_DEVICES=0
    ```

    ## Options
    - `idle_below`: GPU activity during steps (0-1) below which a GPU counts as idle
      (0.05).
    """

    id = "distribute.idle-gpus"
    measured_thresholds = {"idle_below": "ceiling"}
    severity = "medium"
    status = "stable"
    needs_any = ("gpu_samples", "distribute")  # NVML's reading, or the strategy's devices
    options = {"idle_below": 0.05}
    question = "How do I use all GPUs?"

    def check(self, facts: Facts, options: dict[str, Any]) -> list[Finding]:
        if facts.distribute is not None:
            spans = sum("GPU" in d.upper() for d in facts.distribute.devices)
            found = self._strategy(facts)
            if found or spans >= 2:
                return found  # a strategy over the GPUs: NVML's one-busy reading is not this
        samples = facts.gpu_samples
        if samples is None or not usable(samples) or len(samples.gpus) < 2:
            return []
        program = facts.program
        seen_by_tf = len(program.gpus_seen_by_tf) if program else 0
        if program is not None and program.tensorflow_imported and seen_by_tf < 2:
            return []  # TF saw one GPU: the others are hidden from it
        held = [s for s in samples.gpus if (own_peak(s) or 0) > 0]
        if not held:
            return []
        windows, basis = _windows(facts, held)
        rows = [(s, activity(s, windows)) for s in samples.gpus]
        if any(a.samples < MIN_SAMPLES or a.busy() is None for _, a in rows):
            return []
        busy = [s for s, a in rows if a.busy() >= options["idle_below"]]
        if len(busy) != 1 or busy[0] not in held:
            return []
        worker = busy[0]
        idle = [(s, a) for s, a in rows if s is not worker and _free(s)]
        if seen_by_tf >= 2:
            idle = idle[: seen_by_tf - 1]
        if not idle:
            return []
        shown = [(s, a) for s, a in rows if s is worker or any(s is i for i, _ in idle)]
        n = len(idle) + 1
        return [
            self.finding(
                f"{n} GPUs, only GPU {worker.index} works: GPU "
                f"{', '.join(str(s.index) for s, _ in idle)} stay idle {basis}",
                evidence={
                    "gpus": [
                        {
                            "gpu": s.index,
                            "name": s.name,
                            "activity_percent": percent(a.busy()),
                            "program_memory_mib": None
                            if (peak := own_peak(s)) is None
                            else round(peak / MiB),
                            "others_memory_mib": round(others_peak(s) / MiB),
                        }
                        for s, a in shown
                    ]
                },
                fix=FIX.format(busy=worker.index),
                gain_value=round((n - 1) / n, 3),
                estimated_gain=f"up to {n}x the throughput with all {n} GPUs, "
                f"if the input pipeline keeps up",
            )
        ]

    def _strategy(self, facts: Facts) -> list[Finding]:
        """A strategy over fewer GPUs than TF created in the program."""
        distribute, program = facts.distribute, facts.program
        if distribute is None or program is None:
            return []
        visible = list(program.gpus_seen_by_tf)
        used = sorted({d for d in distribute.devices if "GPU" in d.upper()})
        if len(visible) < 2 or len(used) >= len(visible):
            return []
        strategy = distribute.variable or "strategy"
        idle = len(visible) - len(used)
        fix = [
            f"{strategy} = tf.distribute.MirroredStrategy()   # no device list: every visible GPU",
            f"# with the batch scaled: .batch(<per-replica batch> * {strategy}.num_replicas_in_sync)",
            f"# or give the {idle} other GPU(s) to another job: CUDA_VISIBLE_DEVICES="
            + ",".join(str(i) for i in range(len(used))),
        ]
        return [
            self.finding(
                f"{len(visible)} GPUs visible, {distribute.strategy} uses {len(used)}: "
                f"{idle} GPU(s) hold memory and never compute",
                evidence={
                    "gpus_seen_by_tf": visible,
                    "strategy": distribute.strategy,
                    "strategy_devices": list(distribute.devices),
                },
                fix="\n".join(fix),
                gain_value=round(idle / len(visible), 3),
                estimated_gain=f"up to {len(visible) / max(len(used), 1):.3g}x the throughput "
                "with every GPU, if the input pipeline keeps up",
            )
        ]


def _windows(facts: Facts, held: list[GpuSeries]) -> tuple[list[Window], str]:
    """The steps, or the span in which the program held any GPU: the same for every GPU."""
    if facts.steps is not None and facts.steps.starts:
        return windows_for(facts, held[0])
    spans = [w for s in held for w in busy_window(s)]
    if not spans:
        return [], "while the program ran"
    return [(min(a for a, _ in spans), max(b for _, b in spans))], "while the program used a GPU"


def _free(series: GpuSeries) -> bool:
    total = series.memory_total_bytes
    return not total or others_peak(series) < TAKEN * total
