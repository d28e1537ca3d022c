"""launch.small-kernels: measured in a capture, the GPU idles between many short kernels."""

from __future__ import annotations

from typing import Any

from gpuwhy.derived import capture as capture_facts
from gpuwhy.facts import CaptureFacts, Facts
from gpuwhy.finding import Finding
from gpuwhy.formatting import duration
from gpuwhy.rules.base import Rule

_FIX_TENSORFLOW = "\n".join(
    [
        "model.compile(..., jit_compile=True,      # XLA fuses the small ops into few kernels",
        "              steps_per_execution=32)     # one launch of the step per 32 batches",
        "# a custom loop: @tf.function(jit_compile=True) on the train step;",
        "# and a larger batch: the same launches then do more work each",
    ]
)
_FIX_JAX = "\n".join(
    [
        "# one jitted call per step is already one executable: give each kernel more work",
        "# (a larger batch), or run several steps per call:",
        "@jax.jit",
        "def train_steps(state, batches):          # batches: [k, batch, ...]",
        "    return jax.lax.scan(train_step, state, batches)",
        "# Keras on JAX: model.compile(..., steps_per_execution=32)",
    ]
)


class SmallKernels(Rule):
    """The GPU runs many short kernels with idle gaps between them: the step is bound by
    launching kernels, not by computing them (measured in a profiler capture).

    ## What it detects
    In a profiler capture's steps (`gpuwhy report CAPTURE`, `gpuwhy run --capture N`),
    the GPU is busy (the union of its kernels) less than `max_busy` of the time, a step
    runs at least `min_kernels` kernels whose median is shorter than
    `max_kernel_us` microseconds, and the host was not waiting for input for most of
    the GPU's idle time (that is `input.bound`). High below half of `max_busy`.

    ## Why is this slow?
    Each kernel costs the host a few microseconds to launch and the GPU a few to start,
    whatever it computes. Kernels of a few microseconds (a small model, a small batch,
    optimizer updates of many small variables, unfused elementwise ops) finish before
    the next one is issued: the GPU idles between them, its utilisation stays low and a
    faster GPU makes the step no faster. nvidia-smi reads such a GPU as partly busy;
    only the kernels' own timeline shows the gaps.

    ## Example
    ```python
    model.compile("adam", loss)                  # 400 kernels of 3 µs a step, batch 32
    model.fit(ds)
    ```

    Use instead:
    ```python
    model.compile("adam", loss, jit_compile=True, steps_per_execution=32)
    model.fit(ds.rebatch(256))                   # or a larger batch where it fits
    ```

    ## Options
    - `max_busy`: the GPU's busy share of the captured steps below which the pattern
      counts (0.5).
    - `max_kernel_us`: the median kernel length, in microseconds, below which kernels
      are small (20).
    - `min_kernels`: kernels a step at least (50).
    """

    id = "launch.small-kernels"
    severity = "high"
    status = "preview"
    since = "0.3.0"
    needs = ("capture",)
    options = {"max_busy": 0.5, "max_kernel_us": 20.0, "min_kernels": 50}
    question = "Why is the GPU idle between kernels?"

    def check(self, facts: Facts, options: dict[str, Any]) -> list[Finding]:
        capture = facts.capture
        assert capture is not None  # in `needs`
        pattern = capture_facts.kernel_pattern(capture)
        if (
            pattern is None
            or pattern.busy_share >= options["max_busy"]
            or pattern.kernels_per_step < options["min_kernels"]
            or pattern.median_kernel_s * 1e6 >= options["max_kernel_us"]
        ):
            return []
        idle = 1.0 - pattern.busy_share
        if capture_facts.activity_share(capture, "input") >= 0.5 * idle:
            return []  # the GPU waits for input: input.bound says so
        return [self._finding(capture, pattern, options)]

    def _finding(
        self, capture: CaptureFacts, pattern: capture_facts.KernelPattern, options: dict
    ) -> Finding:
        gap = (
            f", {duration(pattern.median_gap_s, microseconds=True)} idle between them"
            if pattern.median_gap_s is not None
            else ""
        )
        title = (
            f"The GPU runs {pattern.kernels_per_step:,} kernels a step of "
            f"{duration(pattern.median_kernel_s, microseconds=True)} median{gap}: busy "
            f"{pattern.busy_share:.0%} of {len(capture.steps)} captured steps, bound by "
            "launching kernels, not computing them"
        )
        evidence: dict[str, Any] = {
            "gpu_busy_fraction": round(pattern.busy_share, 3),
            "kernels_per_step": pattern.kernels_per_step,
            "median_kernel_us": round(pattern.median_kernel_s * 1e6, 2),
            "median_gap_us": (
                round(pattern.median_gap_s * 1e6, 2) if pattern.median_gap_s is not None else None
            ),
            "steps_measured": len(capture.steps),
            "measured_at": f"profiler capture {capture.path}",
        }
        host = [s for s in capture.idle if s.share >= 0.05]
        if host:
            evidence["host_in_the_gaps"] = ", ".join(f"{s.activity} {s.share:.0%}" for s in host)
        return self.finding(
            title,
            severity="high" if pattern.busy_share < 0.5 * options["max_busy"] else "medium",
            evidence=evidence,
            fix=_FIX_JAX if capture.producer == "jax" else _FIX_TENSORFLOW,
            estimated_gain=(
                f"up to {1 - pattern.busy_share:.0%} of step time, as fused kernels fill the gaps"
            ),
            gain_value=round(1 - pattern.busy_share, 4),
        )
