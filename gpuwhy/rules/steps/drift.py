"""steps.drift: the training steps got slower during the run, and stayed slower."""

from __future__ import annotations

import re
from dataclasses import replace
from typing import Any

from gpuwhy.derived.change_points import Settings
from gpuwhy.derived.drift import Drift, drifts
from gpuwhy.facts import Facts
from gpuwhy.finding import Finding
from gpuwhy.fixes.python_arguments import retraced_call
from gpuwhy.formatting import duration, run_time
from gpuwhy.rules.base import Rule

MAX_FINDINGS = 3  # the largest changes
# a drift no measured cause explains, below this change: low (a shared host's own drift)
UNEXPLAINED_LOW_BELOW = 0.3

CAUSE_WORDS = {
    "input": "the input pipeline slowed",
    "tracing": "tf.function retraced",
    "gc": "Python's garbage collector paused the steps",
    "checkpoint": "checkpoint writes",
    "eager": "more eager ops per step",
    "python": "the Python around the step got slower",
    "host-cpu": "other processes took the host's CPU",
    "host-memory": "the program's memory grew",
    "device-memory": "TF's memory on the GPU grew",
    "gpu-clock": "the GPU's clock dropped",
    "gpu-link": "the GPU's PCIe link trained lower",
    "gpu-shared": "another process started on the GPU",
}
SEE_ALSO = {
    "input": "input.bound",
    "tracing": "launch.retracing",
    "eager": "launch.eager-ops",
    "gpu-clock": "gpu.throttled",
    "gpu-link": "gpu.pcie-degraded",
    "gpu-shared": "env.gpu-shared",
    "host-memory": "host.memory-growth",
    "gc": "steps.periodic-stall",
    "checkpoint": "steps.periodic-stall",
}
# the tracing fix's example call, the program's own where its traces name one
TRACING_EXAMPLE = "train_step(x, y, lr=tf.constant(lr, tf.float32))"
FIXES = {
    "input": """\
# the pipeline could not keep up after step {step}: overlap it with the steps, and keep
# what does not change between epochs in memory (input.bound names the slowest stage)
dataset = dataset.cache().prefetch(tf.data.AUTOTUNE)""",
    "tracing": f"""\
# a tf.function started tracing again (launch.retracing names it and the arguments that
# change): pass every Python number that changes as a tensor
{TRACING_EXAMPLE}
# or, for shapes that change, @tf.function(reduce_retracing=True)""",
    "gc": """\
import gc
gc.freeze()   # once the model and the dataset are built: the collector skips them from then on""",
    "checkpoint": """\
# write checkpoints less often, or in the background
options = tf.train.CheckpointOptions(experimental_enable_async_checkpoint=True)
checkpoint.write(path, options=options)""",
    "python": """\
# the time goes to Python between the compiled calls (work that grows with the run:
# a list walked every step, logging, metrics): profile it
python -m cProfile -s cumtime {script} | head -40""",
    "eager": """\
@tf.function   # the step's small ops, traced once instead of issued one by one from Python
def train_step(x, y): ...""",
    "host-cpu": """\
# another process took this host's CPU from then (top / htop shows which): run training
# on a quiet host, or keep the other job off its cores: taskset -c <cores> <other job>""",
    "host-memory": """\
# the program keeps something per step (a list of tensors, model.predict in a loop):
# keep Python numbers, not tensors, e.g. losses.append(float(loss))""",
    "device-memory": """\
# what the program keeps on the GPU grows: tensors kept across steps (a list of outputs,
# metrics accumulating tensors); see what holds it in TensorBoard's memory profile:
tf.profiler.experimental.start("logs/memory")   # a few steps after the change, then stop()""",
    "gpu-link": """\
nvidia-smi -q -d PCIE   # "Link Width/Generation: Current" against "Max" while training""",
    "gpu-shared": """\
nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv   # who else""",
    "gpu-clock": """\
nvidia-smi -q -d PERFORMANCE,POWER,TEMPERATURE   # why the GPU runs below its clock""",
}
# TF's own profiler: Keras' TensorBoard(profile_batch=...) needs the tensorboard package,
# which TensorFlow no longer installs (TBNotInstalledError where it is missing)
PROFILE_KERAS = """\
# nothing gpuwhy measures changed with it: profile ten steps after the change
class ProfileSteps(tf.keras.callbacks.Callback):
    steps = 0  # counted across epochs, as the step {a:,} is

    def on_train_batch_begin(self, batch, logs=None):
        if self.steps == {a}:
            tf.profiler.experimental.start("logs/drift")

    def on_train_batch_end(self, batch, logs=None):
        self.steps += 1
        if self.steps == {b}:
            tf.profiler.experimental.stop()

# and to the fit call{at}: callbacks=[ProfileSteps()]"""
PROFILE_LOOP = """\
# nothing gpuwhy measures changed with it: profile ten steps after the change
if step == {a}: tf.profiler.experimental.start("logs/drift")
if step == {b}: tf.profiler.experimental.stop()"""


def _the_host_got_busier(drift: Drift) -> bool:
    """Other processes took more of the host's CPU over the change, and nothing the
    program does (its input, tracing, Python, collector, checkpoints) accounts for half
    of it: a shared machine slowed the run, which says nothing of the program (a healthy
    fit on a CI runner read as a drift when a neighbour started)."""
    if not any(c.kind == "host-cpu" for c in drift.causes):
        return False
    return not any((c.explains or 0.0) >= 0.5 for c in drift.explained)


class StepDrift(Rule):
    """The training steps got slower during the run, and stayed slower.

    ## What it detects
    The time per step of the main training loop moved by at least `min_change`
    and held, found over the whole run's timeline (every window of the run, at any
    length) by binary segmentation on each window's time per step (all its steps, those
    only counted while the timing paused too, less its slowest): the shift must stand
    `min_score` times above the window-to-window noise, with at least `min_windows`
    windows and `min_steps` steps on each side, and most windows after it must stay at
    the new level. A steady slope (the run slows a little every minute) is called once,
    over its span. The warm-up, other loops (an evaluation, a second model) and the
    pauses between epochs are not judged, and a run that gets faster is not a finding.

    Each change is joined with what changed in the same windows: time inside the steps
    (input wait, tf.function tracing, the Python outside the tf.function calls,
    Python's garbage collector, checkpoint writes, eager ops) with the share of the change it accounts for, and conditions (another
    process on the host's CPU, the program's memory, a GPU's clock while busy). Where
    nothing measured changed, the finding says so and gives the lines that profile ten
    steps after the change; such a drift under +30% is low, as much as a shared
    machine's speed moves within one run (a slowdown of 50% or more is high). The method and its measured false-alarm rate are in
    `gpuwhy/derived/change_points.py` and `benchmarks/bench_drift.py`.

    ## Why is this slow?
    A slowdown that begins mid-run is invisible in the first minutes (where a profiler
    is usually pointed) and blurred in the run's averages, yet it can cost more than
    all the rest: a pipeline that falls behind once its cache no longer fits, a
    function that starts retracing when the data's shapes start to vary, a collector
    pausing longer as the program's heap grows, a GPU that throttles once it is hot.

    ## Example
    ```python
    for step, (x, y) in enumerate(dataset):
        loss = train_step(x, y, step)       # `step` is a Python int: from the step
                                            # where it varies, every call retraces
    ```

    Use instead:
    ```python
    for step, (x, y) in enumerate(dataset):
        loss = train_step(x, y, tf.constant(step))   # one trace for every step
    ```

    ## Options
    - `min_change`: relative change of the time per step that is reported (0.15).
    - `min_score`: z-score of the change against the windows' noise (6.0).
    - `min_windows`: timeline windows on each side of a change (3).
    - `min_steps`: steps on each side of a change (100).
    """

    id = "steps.drift"
    measured_thresholds = {"min_change": "floor", "min_score": "floor"}
    severity = "medium"
    status = "preview"
    since = "0.4.0"
    needs = ("steps", "timeline")
    options = {"min_change": 0.15, "min_score": 6.0, "min_windows": 3, "min_steps": 100}
    question = "Why did training get slower as it ran?"

    def check(self, facts: Facts, options: dict[str, Any]) -> list[Finding]:
        settings = replace(
            Settings(),
            min_change=float(options["min_change"]),
            min_score=float(options["min_score"]),
            min_windows=int(options["min_windows"]),
            min_steps=int(options["min_steps"]),
        )
        slower = [d for d in drifts(facts, settings) if d.change > 0]
        slower.sort(key=lambda d: -d.change)
        return [self._finding(facts, d) for d in slower[:MAX_FINDINGS]]

    def _finding(self, facts: Facts, drift: Drift) -> Finding:
        when = (
            f"from step {drift.step:,} (at {run_time(drift.start_s)})"
            if not drift.gradual
            else f"steadily from {run_time(drift.start_s)} to {run_time(drift.end_s)}"
        )
        size = (
            f"{drift.after_s / drift.before_s:.1f}x"
            if drift.change >= 1
            else f"{drift.change:+.0%}"
        )
        what = (
            f"the time per step went from {duration(drift.before_s)} to "
            f"{duration(drift.after_s)} ({size})"
        )
        causes = drift.explained or drift.causes
        cause = causes[0] if causes else None
        because = (
            f": {CAUSE_WORDS.get(cause.kind, cause.kind)} ({cause.text}"
            + (f", {cause.explains:.0%} of the change" if cause.explains is not None else "")
            + ")"
            if cause is not None
            else ": nothing gpuwhy measures changed with it"
        )
        title = f"{when[0].upper()}{when[1:]} {what}{because}"
        severity = "high" if drift.change >= 0.5 else self.severity
        if cause is None and drift.change < UNEXPLAINED_LOW_BELOW:
            # nothing measured moved with it, and no more than a shared machine's speed
            # moves within one run: reported, at the confidence it has
            severity = "low"
            title += (
                f"; under +{UNEXPLAINED_LOW_BELOW:.0%} with no cause measured, as much as a "
                "shared machine's speed moves within a run: run it again to tell"
            )
        if _the_host_got_busier(drift):
            severity = "low"
            title += "; the host got busier, not the program: run it again on a quieter host"
        steps = facts.steps
        after_share = 0.0
        if steps is not None and steps.run_s > 0:
            after_share = max(0.0, (steps.run_s - drift.start_s) / steps.run_s)
        return self.finding(
            title,
            severity=severity,
            evidence={
                "kind": "gradual" if drift.gradual else "change point",
                "at_s": drift.start_s,
                "until_s": drift.end_s,
                "from_step": drift.step,
                "step_before_ms": round(drift.before_s * 1000, 3),
                "step_after_ms": round(drift.after_s * 1000, 3),
                "median_before_ms": round(drift.median_before_s * 1000, 3),
                "median_after_ms": round(drift.median_after_s * 1000, 3),
                "change": round(drift.change, 4),
                "band_before_ms": [round(v * 1000, 3) for v in drift.before_band],
                "band_after_ms": [round(v * 1000, 3) for v in drift.after_band],
                "steps_before": drift.steps_before,
                "steps_after": drift.steps_after,
                "window_s": drift.width_s,
                "score": drift.score,
                "causes": [
                    {
                        "title": CAUSE_WORDS.get(c.kind, c.kind),
                        "detail": c.text
                        + (f" ({c.explains:.0%} of the change)" if c.explains is not None else "")
                        + (f"; see {SEE_ALSO[c.kind]}" if c.kind in SEE_ALSO else ""),
                        "kind": c.kind,
                        "before": c.before,
                        "after": c.after,
                        **({"explains": c.explains} if c.explains is not None else {}),
                        **({"see": SEE_ALSO[c.kind]} if c.kind in SEE_ALSO else {}),
                    }
                    for c in drift.causes
                ],
            },
            fix=self._fix(facts, drift, cause.kind if cause is not None else None),
            estimated_gain=(
                f"up to {1 - drift.before_s / drift.after_s:.0%} of each step after it"
            ),
            gain_value=round((1 - drift.before_s / drift.after_s) * after_share, 4),
        )

    @staticmethod
    def _fix(facts: Facts, drift: Drift, kind: str | None) -> str:
        if kind in FIXES:
            program = facts.program
            script = program.command[0] if program is not None and program.command else "train.py"
            fix = FIXES[kind].format(step=f"{drift.step:,}", script=script)
            call = retraced_call(facts) if kind == "tracing" else None
            return fix.replace(TRACING_EXAMPLE, call) if call is not None else fix
        a = drift.step + max(10, drift.steps_after // 10)
        keras = facts.steps is not None and facts.steps.source == "keras-fit"
        if not keras:
            return PROFILE_LOOP.format(a=a, b=a + 10)
        fit = re.search(r" at (\S+:\d+)$", facts.steps.marker) if facts.steps else None
        return PROFILE_KERAS.format(a=a, b=a + 10, at=f" at {fit.group(1)}" if fit else "")
