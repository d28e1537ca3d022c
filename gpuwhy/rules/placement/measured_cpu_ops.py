"""placement.measured-cpu-ops: a capture shows TensorFlow ops running on the CPU in the step."""

from __future__ import annotations

from typing import Any

from gpuwhy.derived import capture as capture_facts
from gpuwhy.facts import CaptureFacts, Facts, HostOp, PlacementFacts
from gpuwhy.finding import Finding
from gpuwhy.formatting import duration
from gpuwhy.rules.base import Rule

MAX_LISTED = 8


class MeasuredCpuOps(Rule):
    """TensorFlow ops ran on the CPU inside the captured steps while the GPU waited:
    measured placement, not the placer's prediction.

    ## What it detects
    In a profiler capture of a TensorFlow program on a GPU (`gpuwhy report CAPTURE`,
    `gpuwhy run --capture N`), op kernels that ran on host threads during the steps and
    launched no GPU kernel (no GPU kernel carries their node name: the capture's own
    join of host ops to device kernels) take at least `min_share` of the steps' time
    (their intervals' union: ops on several threads at once count once; tf.data's own
    threads, which run ahead of the step on the CPU by design, are left out);
    each op listed takes at least `min_op_share`. Ops TF keeps on the host by design
    and GPU ops without a kernel (shape arithmetic, variable reads) take microseconds
    and stay under the thresholds. Where the program was also audited (`gpuwhy run`
    traces the step), the finding says which of these ops the placer predicted on the
    CPU, which it did not, and which it predicted there but the GPU ran: the capture is
    trusted.

    ## Why is this slow?
    An op on the CPU in a GPU step stops the GPU's stream twice: its inputs are copied
    to the host, the host computes while the GPU waits, and the result is copied back
    before the next kernel can start. `tf.debugging.set_log_device_placement` shows
    where an op was placed, not how long the GPU waited for it; the capture shows both.

    ## Example
    ```python
    @tf.function
    def train_step(x, y):
        ids = tf.strings.to_hash_bucket_fast(tokens, 1000)   # string op: CPU only
        ...
    ```

    Use instead: move the op into the input pipeline, where the CPU works ahead of the
    step (`ds.map(lambda t, y: (tf.strings.to_hash_bucket_fast(t, 1000), y))`), or
    compile the step with XLA (`jit_compile=True`) where the op has an XLA kernel.

    ## Options
    - `min_share`: the share of the captured steps' time those ops take, together,
      above which the finding fires (0.05).
    - `min_op_share`: the share one op takes to be listed (0.01).
    """

    id = "placement.measured-cpu-ops"
    measured_thresholds = {"min_share": "floor", "min_op_share": "floor"}
    severity = "medium"
    status = "preview"
    since = "0.3.0"
    needs = ("capture",)
    options = {"min_share": 0.05, "min_op_share": 0.01}
    question = "Why are my ops on the CPU?"

    def check(self, facts: Facts, options: dict[str, Any]) -> list[Finding]:
        capture = facts.capture
        assert capture is not None  # in `needs`
        if not capture.host_ops_known or not capture_facts.decides(capture):
            return []
        steps_s = capture.steps_s
        listed = [
            op
            for op in capture.host_ops
            if op.on_cpu and op.time_s >= options["min_op_share"] * steps_s
        ]
        # their time in the step counted once where they ran on several threads at once
        # (the union the capture measured; the listed ops' sum in older records)
        total = min(capture.cpu_ops_s or float("inf"), sum(op.time_s for op in listed))
        if not listed or steps_s <= 0 or total < options["min_share"] * steps_s:
            return []
        share = total / steps_s
        per_step = total / len(capture.steps)
        evidence: dict[str, Any] = {
            "measured_at": f"profiler capture {capture.path}",
            "cpu_op_share_of_steps": round(share, 3),
            "cpu_op_ms_per_step": round(per_step * 1e3, 3),
            "ops": [
                f"{op.type} ({op.name}): {duration(op.time_s / len(capture.steps), True)} a step"
                for op in listed[:MAX_LISTED]
            ],
        }
        if facts.placement is not None:
            evidence.update(_against_prediction(listed, facts.placement, capture))
        types = sorted({op.type for op in listed})
        return [
            self.finding(
                f"{', '.join(types[:4])}{' …' if len(types) > 4 else ''} ran on the CPU in "
                f"the step: {duration(per_step)} of each {duration(capture.median_step_s)} "
                f"step ({share:.0%}, measured in {len(capture.steps)} captured steps)",
                severity="high" if share >= 0.2 else self.severity,
                evidence=evidence,
                fix=_fix(listed),
                estimated_gain=f"up to {share:.0%} of step time, and the copies around them",
                gain_value=round(share, 4),
            )
        ]


def _against_prediction(
    measured: list[HostOp], placement: PlacementFacts, capture: CaptureFacts
) -> dict[str, Any]:
    """Which measured CPU ops the placer predicted there, which it missed, and which it
    predicted on the CPU though the GPU ran them (the capture is trusted)."""
    predicted_cpu = {g.op for g in placement.groups if g.device == "CPU"}
    measured_types = {op.type for op in measured}
    on_gpu = {op.type for op in capture.host_ops if op.on_cpu is False}
    found: dict[str, Any] = {
        "predicted_too": sorted(measured_types & predicted_cpu),
        "not_predicted": sorted(measured_types - predicted_cpu),
    }
    wrong = sorted((predicted_cpu & on_gpu) - measured_types)
    if wrong:
        found["predicted_on_cpu_but_ran_on_gpu"] = wrong
    return found


def _fix(ops: list[HostOp]) -> str:
    names = ", ".join(f"{op.type} ({op.name})" for op in ops[:3])
    return "\n".join(
        [
            f"# {names}: on the CPU inside the GPU step",
            "# 1. where they prepare data, move them into the input pipeline (tf.data runs",
            "#    them on the CPU ahead of the step):  ds = ds.map(prepare, num_parallel_calls=tf.data.AUTOTUNE)",
            "# 2. else compile the step with XLA, which has GPU kernels for many of them:",
            "model.compile(..., jit_compile=True)  # custom loops: @tf.function(jit_compile=True)",
            "# then `gpuwhy audit train.py` names why each one is on the CPU",
        ]
    )
