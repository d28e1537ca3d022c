"""launch.host-bound: measured in a capture, the GPU waits for its host (many short
kernels launched one by one, or the host's own work each step)."""

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
_FIX_SYNC = "\n".join(
    [
        "# the host waits for the GPU's results every step (a loss read with .numpy() or",
        "# float(), metrics logged per batch): read them every N steps, not every step",
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


# what the host's own events show it doing (time no event covers is not counted: a
# capture without the host's events says nothing of it)
HOST_WORK = ("python", "dispatch", "synchronisation", "compute")


class HostBound(Rule):
    """The GPU waits for its host between kernels or between steps: many short kernels
    launched one by one, or the host's own work each step (Python, dispatch, waiting on
    results), not the input pipeline (measured in a profiler capture).

    ## What it detects
    In a profiler capture's steps (`gpuwhy report CAPTURE`, `gpuwhy run --capture N`),
    the GPU is busy (the union of its kernels) less than `max_busy` of the time and the
    host was not waiting for input in most of the GPU's idle time (that is
    `input.bound`). Two kinds, said apart:
    - launch-bound: a step runs at least `min_kernels` kernels whose median is shorter
      than `max_kernel_us` microseconds: the GPU idles between them;
    - host-bound: the host's own work fills the GPU's idle time (Python, op dispatch,
      ops on the host, waiting for the GPU's results: `.numpy()`, metrics read back each
      step), each named with its share.
    High below half of `max_busy`.

    ## Why is this slow?
    Each kernel costs the host a few microseconds to launch and the GPU a few to start,
    whatever it computes. Kernels of a few microseconds (a small model, a small batch,
    optimizer updates of many small variables, unfused elementwise ops) finish before
    the next one is issued, and a step whose host work (a Python loop, reading a loss
    back, logging) takes longer than its kernels leaves the GPU idle for the difference:
    utilisation stays low and a faster GPU makes the step no faster. nvidia-smi reads
    such a GPU as partly busy; only the kernels' own timeline shows the gaps.

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
    - `max_busy`: the GPU's busy share of the captured steps below which the finding
      fires (0.5).
    - `max_kernel_us`: the median kernel length, in microseconds, below which kernels
      are small (20).
    - `min_kernels`: kernels a step at least, for launch-bound (50).
    """

    id = "launch.host-bound"
    measured_thresholds = {"max_busy": "ceiling"}
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
        if pattern is None or pattern.busy_share >= options["max_busy"]:
            return []
        idle = 1.0 - pattern.busy_share
        if capture_facts.activity_share(capture, "input") >= 0.5 * idle:
            return []  # the GPU waits for input: input.bound says so
        launch_bound = (
            pattern.kernels_per_step >= options["min_kernels"]
            and pattern.median_kernel_s * 1e6 < options["max_kernel_us"]
        )
        host = {a: capture_facts.activity_share(capture, a) for a in HOST_WORK}
        if not launch_bound and sum(host.values()) < 0.5 * idle:
            return []  # the idle time is neither launches nor the host's work
        return [self._finding(capture, pattern, launch_bound, host, options)]

    def _finding(
        self,
        capture: CaptureFacts,
        pattern: capture_facts.KernelPattern,
        launch_bound: bool,
        host: dict[str, float],
        options: dict[str, Any],
    ) -> Finding:
        steps = len(capture.steps)
        named = sorted(((a, v) for a, v in host.items() if v >= 0.05), key=lambda av: -av[1])
        work = ", ".join(f"{a} {v:.0%}" for a, v in named)
        if launch_bound:
            gap = (
                f", {duration(pattern.median_gap_s, microseconds=True)} idle between them"
                if pattern.median_gap_s is not None
                else ""
            )
            title = (
                f"The GPU runs {pattern.kernels_per_step:,} kernels a step of "
                f"{duration(pattern.median_kernel_s, microseconds=True)} median{gap}: busy "
                f"{pattern.busy_share:.0%} of {steps} captured steps, bound by launching "
                "kernels, not computing them"
            )
        else:
            title = (
                f"The GPU idles {1 - pattern.busy_share:.0%} of each "
                f"{duration(capture.median_step_s)} step while its host works"
                + (f" ({work} of the step)" if work else "")
                + f": the step is bound by its host, not by the GPU (measured in {steps} "
                "captured steps)"
            )
        evidence: dict[str, Any] = {
            "gpu_busy_fraction": round(pattern.busy_share, 3),
            "kernels_per_step": pattern.kernels_per_step,
            "median_kernel_us": round(pattern.median_kernel_s * 1e6, 2),
            "median_gap_us": (
                round(pattern.median_gap_s * 1e6, 2) if pattern.median_gap_s is not None else None
            ),
            "steps_measured": steps,
            "measured_at": f"profiler capture {capture.path}",
            "kind": "launch-bound" if launch_bound else "host-bound",
        }
        if work:
            evidence["host_in_the_gpus_idle_time"] = work
        jax = capture.producer == "jax"
        fix = _FIX_JAX if jax else _FIX_TENSORFLOW
        if not launch_bound and host.get("synchronisation", 0.0) >= 0.2:
            fix = _FIX_SYNC + "\n" + fix
        return self.finding(
            title,
            severity="high" if pattern.busy_share < 0.5 * options["max_busy"] else "medium",
            evidence=evidence,
            fix=fix,
            estimated_gain=(
                f"up to {1 - pattern.busy_share:.0%} of step time, as the GPU's work fills the gaps"
            ),
            gain_value=round(1 - pattern.busy_share, 4),
        )
