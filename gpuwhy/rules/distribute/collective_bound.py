"""distribute.collective-bound: the steps spend much of their time all-reducing."""

from __future__ import annotations

from typing import Any

from gpuwhy.facts import DistributeFacts, Facts
from gpuwhy.finding import Finding
from gpuwhy.rules.base import Rule

FALLBACKS = ("ReductionToOneDevice", "HierarchicalCopyAllReduce")
MiB = 1024 * 1024


class CollectiveBound(Rule):
    """The training steps spend much of their time in the all-reduce of the gradients.

    ## What it detects
    A tf.distribute strategy whose steps, measured under TF's profiler on a few steps,
    spend at least `medium_share` of their time inside collective ops (`large_share`
    where they all-reduce `large_bytes` or more a step; high from `high_share`), and at
    least `min_collective_s` a step. Where nothing could be
    measured, the predicted all-reduce time (the step's gradient bytes over the link
    NVML's topology names, or a stated assumed bandwidth) against the median step: low,
    medium only on a link NVML measured, and always said to be predicted. On GPUs
    reduced by `ReductionToOneDevice` or `HierarchicalCopyAllReduce` the finding names
    the fallback TF takes where it has no NCCL (Windows builds, virtual GPUs).
    Where the all-reduce carries little (under `min_bytes`, and its predicted transfer
    under a quarter of the measured time) the time is the collectives' fixed latency or
    a wait for a peer, not bandwidth: low, said so, whatever the share (small models
    across processes, whose gradients are kilobytes).

    ## Why is this slow?
    Every step each replica sends and receives about 2(N-1)/N times the gradient bytes
    (parameters x 4 in float32), and no replica starts the next step before the sum
    arrives. On PCIe or a network that can take longer than the compute; more GPUs
    then add time instead of removing it. The time also holds any wait for a late peer
    (a slow input, a busy GPU): `collective_wait_s` says how much of it that was where
    the replicas are in one process.

    ## Example
    ```python
    strategy = tf.distribute.MirroredStrategy(
        cross_device_ops=tf.distribute.ReductionToOneDevice())    # copies through one GPU
    ds = ds.batch(16)                                             # 2 examples per GPU
    ```

    Use instead:
    ```python
    strategy = tf.distribute.MirroredStrategy(
        cross_device_ops=tf.distribute.NcclAllReduce())           # Windows: HierarchicalCopyAllReduce()
    ds = ds.batch(64 * strategy.num_replicas_in_sync)              # more compute per all-reduce
    ```

    ## Options
    - `medium_share`: share of the measured step in collectives that is medium (0.25).
    - `high_share`: share that is high (0.5).
    - `min_collective_s`: seconds a step in collectives below which nothing is said (0.002).
    - `predicted_share`: predicted all-reduce time over the median step that is said (0.3).
    - `large_bytes`: bytes all-reduced a step from which `large_share` of the step is
      already medium (16 MiB): tens of megabytes a step are the bandwidth case itself.
    - `large_share`: that share (0.15).
    - `min_bytes`: bytes all-reduced a step below which a measured share is latency,
      not bandwidth, unless the predicted transfer explains it (1 MiB).
    """

    id = "distribute.collective-bound"
    measured_thresholds = {"medium_share": "floor", "high_share": "floor", "large_share": "floor"}
    severity = "medium"
    status = "stable"
    since = "0.3.0"
    needs = ("distribute",)
    options = {
        "medium_share": 0.25,
        "high_share": 0.5,
        "min_collective_s": 0.002,
        "predicted_share": 0.3,
        "min_bytes": MiB,
        "large_bytes": 16 * MiB,
        "large_share": 0.15,
    }
    question = "I added GPUs and training is no faster"

    def check(self, facts: Facts, options: dict[str, Any]) -> list[Finding]:
        distribute = facts.distribute
        assert distribute is not None  # in `needs`: never run without it
        if distribute.replicas < 2:
            return []
        if distribute.collective_share is not None and distribute.collective_step_s is not None:
            return self._measured(distribute, options)
        median = facts.steps.median_s if facts.steps is not None else None
        if distribute.allreduce_expected_s and median:
            return self._predicted(distribute, median, options)
        return []

    def _measured(self, distribute: DistributeFacts, options: dict[str, Any]) -> list[Finding]:
        share, seconds = distribute.collective_share or 0.0, distribute.collective_step_s or 0.0
        heavy = (distribute.reduced_bytes or 0) >= options["large_bytes"]
        least = options["large_share"] if heavy else options["medium_share"]
        if share < least or seconds < options["min_collective_s"]:
            return []
        wait = distribute.collective_wait_s
        title = (
            f"The steps spend {share:.0%} of their time in collective ops "
            f"({seconds * 1000:.1f} ms a step, measured)"
        )
        if wait is not None and wait > seconds / 2:
            title += f", {wait * 1000:.1f} ms of it waiting for a late replica"
        if _latency_only(distribute, seconds, options):
            return [
                self.finding(
                    title + f": they carry only {_size(distribute.reduced_bytes)} a step, so "
                    "the time is the collectives' latency or a wait for a peer, not bandwidth",
                    severity="low",
                    evidence=_evidence(distribute),
                    fix=_latency_fix(distribute),
                    estimated_gain="fewer, larger steps: the all-reduce's latency is paid per step",
                    gain_value=share / 4,
                )
            ]
        return [
            self.finding(
                title + _fallback_text(distribute),
                severity="high" if share >= options["high_share"] else "medium",
                evidence=_evidence(distribute),
                fix=_fix(distribute),
                estimated_gain=f"up to {share:.0%} of the step, as the all-reduce shrinks",
                gain_value=share,
            )
        ]

    def _predicted(
        self, distribute: DistributeFacts, median: float, options: dict[str, Any]
    ) -> list[Finding]:
        expected = distribute.allreduce_expected_s or 0.0
        share = expected / median
        if share < options["predicted_share"]:
            return []
        measured_link = distribute.link_source == "NVML topology"
        return [
            self.finding(
                f"Predicted: the all-reduce of {_size(distribute.reduced_bytes)} a step over "
                f"{distribute.link} takes {expected * 1000:.1f} ms, {share:.0%} of the median "
                "step (not measured)" + _fallback_text(distribute),
                severity="medium" if measured_link else "low",
                evidence=_evidence(distribute) | {"step_median_s": median},
                fix=_fix(distribute),
                estimated_gain="predicted: up to the all-reduce's share of the step",
                gain_value=min(share, 1.0),
            )
        ]


def _latency_only(distribute: DistributeFacts, seconds: float, options: dict[str, Any]) -> bool:
    """Little is sent and its transfer explains little of the measured time."""
    sent = distribute.reduced_bytes
    if sent is None or sent >= options["min_bytes"]:
        return False
    expected = distribute.allreduce_expected_s
    return expected is None or expected < seconds / 4


def _latency_fix(distribute: DistributeFacts) -> str:
    strategy = distribute.variable or "strategy"
    return "\n".join(
        [
            "# more compute per all-reduce (the latency is paid once a step):",
            f".batch(<per-replica batch> * {strategy}.num_replicas_in_sync)",
            "# and, across workers, see whether one is late: gpuwhy run --out-dir DIR on each,",
            "# then gpuwhy merge DIR",
        ]
    )


def _is_fallback(distribute: DistributeFacts) -> bool:
    on_gpus = any("GPU" in d.upper() for d in distribute.devices)
    return on_gpus and any(f in (distribute.cross_device or "") for f in FALLBACKS)


def _fallback_text(distribute: DistributeFacts) -> str:
    if not _is_fallback(distribute):
        return ""
    return (
        f": the GPUs are reduced by {distribute.cross_device}, TF's fallback where it "
        "has no NCCL (Windows builds, virtual GPUs) or as given to the strategy"
    )


def _evidence(distribute: DistributeFacts) -> dict[str, Any]:
    return {
        "strategy": distribute.strategy,
        "replicas": distribute.replicas,
        "cross_device": distribute.cross_device,
        "cross_device_why": distribute.cross_device_why,
        "reduced_bytes": distribute.reduced_bytes,
        "reduced_values": distribute.reduced_values,
        "largest": [f"{v.name} {list(v.shape)} {v.dtype}" for v in distribute.reduced[:3]],
        "link": distribute.link,
        "link_source": distribute.link_source,
        "allreduce_expected_s (predicted)": distribute.allreduce_expected_s,
        "collective_step_s": distribute.collective_step_s,
        "collective_share": distribute.collective_share,
        "collective_wait_s": distribute.collective_wait_s,
        "measured_by": distribute.collective_measured_by,
    }


def _fix(distribute: DistributeFacts) -> str:
    strategy = distribute.variable or "strategy"
    lines = []
    on_gpus = any("GPU" in d.upper() for d in distribute.devices)
    if on_gpus and distribute.strategy == "MirroredStrategy":
        lines += [
            "# NCCL where this TF has it (Linux); on Windows HierarchicalCopyAllReduce()",
            f"{strategy} = tf.distribute.MirroredStrategy(",
            "    cross_device_ops=tf.distribute.NcclAllReduce(num_packs=1))",
        ]
    elif distribute.strategy == "MultiWorkerMirroredStrategy":
        lines += [
            "# NCCL between GPUs, gradients packed into 50 MiB all-reduces",
            f"{strategy} = tf.distribute.MultiWorkerMirroredStrategy(",
            "    communication_options=tf.distribute.experimental.CommunicationOptions(",
            "        implementation=tf.distribute.experimental.CommunicationImplementation.NCCL,",
            "        bytes_per_pack=50 * 1024 * 1024))",
        ]
    batched = next((i for i in distribute.inputs if i.global_batch), None)
    if batched is not None and batched.scaled and batched.global_batch:
        per_replica = batched.global_batch / max(distribute.replicas, 1)
        lines.append(
            f"# more compute per all-reduce: a larger per-replica batch than {per_replica:g}"
            + (f" ({batched.location}: {batched.written})" if batched.written else "")
        )
    else:
        lines.append(
            "# more compute per all-reduce: "
            f".batch(<per-replica batch> * {strategy}.num_replicas_in_sync)"
        )
    if any(v.dtype == "float32" for v in distribute.reduced):
        lines.append(
            "# the gradients are sent as float32: sending float16 halves the bytes "
            "(all-reduce tf.cast(g, tf.float16) yourself, then apply without aggregation)"
        )
    return "\n".join(lines)


def _size(value: int | None) -> str:
    if value is None:
        return "? bytes"
    return f"{value / MiB:.1f} MiB" if value >= MiB else f"{value / 1024:.0f} KiB"
