"""steps.predict-per-step: a training loop calls Keras' predict() or evaluate() on one
batch every step, paying for a whole Keras loop each time."""

from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import Any

from gpuwhy.derived.stage import derived
from gpuwhy.facts import Activity, Facts
from gpuwhy.finding import Finding
from gpuwhy.formatting import duration
from gpuwhy.rules.base import Rule

# keyword arguments of predict()/evaluate() that the one-batch calls do not take
_LOOP_KEYWORDS = ("batch_size", "verbose", "steps", "callbacks", "max_queue_size", "workers")
_ON_BATCH = {"predict": "predict_on_batch", "evaluate": "test_on_batch"}


@dataclass(frozen=True)
class CallsInSteps:
    """The program's own evaluate()/predict() calls begun in the main loop's windows
    after its warm-up, against the steps begun there."""

    steps: int
    step_s: float
    calls: int
    call_s: float
    wall_s: float = 0.0  # the windows' time: the loop ran through them

    @property
    def per_step(self) -> float:
        return self.calls / self.steps if self.steps else 0.0

    @property
    def between(self) -> bool:
        """The calls took longer than the steps: they ran between them (a callback's
        predict() at each batch's end, which fit's steps leave out), not inside."""
        return self.call_s > self.step_s

    @property
    def share(self) -> float:
        """Of the loop's time: the steps' where the calls ran inside them, the steps'
        and the calls' where they ran between them."""
        loop_s = self.step_s
        if self.between:  # and whatever else ran between them (a fit's own set-up)
            loop_s = max(self.step_s + self.call_s, self.wall_s)
        return min(1.0, self.call_s / loop_s) if loop_s > 0 else 0.0


def calls_in_steps(facts: Facts) -> CallsInSteps | None:
    """The Keras calls in the training windows (None: no steps or no timeline)."""
    found = derived(facts)
    spans, rows = found.training_spans, found.timeline_rows
    steps = facts.steps
    if not spans or steps is None or steps.timeline is None:
        return None
    width = steps.timeline.width_s
    count = calls = 0
    step_s = call_s = wall_s = 0.0
    for span in spans:
        row = rows.get(round(span.start_s / width))
        if row is None:  # the loop's first window: its row holds the warm-up's calls
            continue
        count += span.steps
        step_s += span.step_s
        calls += row.keras_calls
        call_s += row.keras_call_s
        wall_s += width
    return CallsInSteps(count, step_s, calls, call_s, wall_s)


def judged(facts: Facts, options: dict[str, Any] | None = None) -> CallsInSteps | None:
    """The calls where they make a finding (the rule's default options unless given):
    steps.periodic-stall leaves a predict() every step to this rule."""
    options = options or PredictPerStep.options
    found = calls_in_steps(facts)
    if found is None or found.steps < options["min_steps"]:
        return None
    if found.per_step < options["min_calls_per_step"] or found.share < options["min_share"]:
        return None
    return found


def _keras_call(facts: Facts) -> Activity | None:
    """The run's evaluate/predict activity (its busiest place), where it is the
    program's own (fit's validation is not)."""
    stalls = facts.stalls
    for activity in stalls.activities if stalls is not None else ():
        if activity.kind == "evaluate" and activity.detail in ("Model.predict", "Model.evaluate"):
            return activity
    return None


def one_batch_call(code: str | None) -> tuple[str, str, str] | None:
    """(the call as written, its one-batch form, the method) for a line calling
    ``X.predict(...)`` or ``X.evaluate(...)``: ``generator.predict(z, verbose=0)`` ->
    ``generator.predict_on_batch(z)``; None where the line holds no such call."""
    if not code:
        return None
    try:
        tree = ast.parse(code.strip())
    except SyntaxError:
        return None
    text = code.strip()
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
            continue
        method = node.func.attr
        if method not in _ON_BATCH or not node.args:
            continue
        owner = ast.get_source_segment(text, node.func.value)
        kept = [
            ast.get_source_segment(text, a) for a in node.args[: 2 if method == "evaluate" else 1]
        ]
        kept += [
            f"{k.arg}={ast.get_source_segment(text, k.value)}"
            for k in node.keywords
            if k.arg is not None and k.arg not in _LOOP_KEYWORDS
        ]
        written = ast.get_source_segment(text, node)
        if owner is None or written is None or any(part is None for part in kept):
            continue
        return written, f"{owner}.{_ON_BATCH[method]}({', '.join(str(k) for k in kept)})", method
    return None


def _called(activity: Activity | None) -> str:
    """``generator.predict()`` as the program calls it, else ``Model.predict()``."""
    call = one_batch_call(activity.code if activity is not None else None)
    if call is not None:
        return call[0].split("(", 1)[0] + "()"
    return f"{activity.detail}()" if activity is not None else "Model.predict()/evaluate()"


def fix_text(activity: Activity | None) -> str:
    """The call at its line in its one-batch form, in the program's names."""
    call = one_batch_call(activity.code if activity is not None else None)
    if call is None or activity is None or activity.code is None:
        return "\n".join(
            [
                "# predict()/evaluate() build a dataset, an iterator, callbacks and a progress",
                "# bar at each call: on one batch in memory call the one-batch forms instead",
                "outputs = model.predict_on_batch(x)        # was: model.predict(x)",
                "results = model.test_on_batch(x, y)        # was: model.evaluate(x, y)",
            ]
        )
    written, one_batch, method = call
    line = activity.code.replace(written, one_batch, 1)
    lines = [
        f"# {activity.location}: {method}() builds a dataset, an iterator, callbacks and a",
        "# progress bar at each call; the one-batch form runs the same compiled function",
        line,
    ]
    if method == "predict":
        owner = one_batch.split(".predict_on_batch(", 1)[0]
        lines.append(f"# or, a tensor rather than a NumPy array: {owner}(..., training=False)")
    return "\n".join(lines)


class PredictPerStep(Rule):
    """A training loop calls Keras' `predict()` or `evaluate()` every step, on one batch.

    ## What it detects
    The program's own `Model.predict` or `Model.evaluate` calls (not fit's validation)
    begun in the main training loop's windows after its warm-up: at least
    `min_calls_per_step` calls per step, taking at least `min_share` of the steps' time,
    over at least `min_steps` steps. The finding names the call's file:line (its busiest
    place) and what share of each step it took. This is a loop written by hand: a GAN
    trained with `train_on_batch` that makes its fake images with `generator.predict(z)`,
    a loop that scores each batch with `model.evaluate(x, y)`.

    ## Why is this slow?
    `predict()` and `evaluate()` are loops over a dataset: each call wraps its arrays in
    a new `tf.data` pipeline and iterator, builds callbacks and a progress bar, runs its
    compiled function once per batch and stops the pipeline's threads at the end. On one
    batch all of that is overhead, paid every step on the host while the GPU waits:
    tens of milliseconds a call, half of a DCGAN's step on a CPU machine.

    ## Example
    ```python
    for step in range(iterations):
        z = np.random.normal(size=(batch_size, latent_dim))
        fake = generator.predict(z)             # a dataset and a loop for one batch
        d_loss = discriminator.train_on_batch(np.concatenate([fake, real]), labels)
    ```

    Use instead:
    ```python
    for step in range(iterations):
        z = np.random.normal(size=(batch_size, latent_dim))
        fake = generator.predict_on_batch(z)    # the same compiled function, no loop
        d_loss = discriminator.train_on_batch(np.concatenate([fake, real]), labels)
    ```
    `generator(z, training=False)` is as fast and returns a tensor; `test_on_batch(x, y)`
    is `evaluate()`'s one-batch form. Results are the same: the same function runs on
    the same batch. `gpuwhy fix` tries the one-batch form on the program.

    Severity: high from 25 % of the step, medium below.

    ## Options
    - `min_calls_per_step`: Keras calls per training step (0.5).
    - `min_share`: share of the steps' time the calls take (0.10).
    - `min_steps`: training steps after warm-up in the windows read (20).
    """

    id = "steps.predict-per-step"
    severity = "medium"
    status = "preview"
    since = "0.5.0"
    needs = ("steps", "stalls", "timeline")
    options = {"min_calls_per_step": 0.5, "min_share": 0.10, "min_steps": 20}
    measured_thresholds = {"min_share": "floor"}
    question = "Why is my loop with model.predict slow?"

    def check(self, facts: Facts, options: dict[str, Any]) -> list[Finding]:
        found = judged(facts, options)
        if found is None:
            return []
        activity = _keras_call(facts)
        per_call = found.call_s / found.calls
        step = found.step_s / found.steps
        often = "every step" if found.per_step < 1.5 else f"{found.per_step:.1f} times a step"
        if found.between:  # fit's steps leave out what its callbacks run between them
            cost = f"between steps of {duration(step)}: {found.share:.0%} of the loop's time"
        else:
            cost = f"{found.share:.0%} of a {duration(step)} step"
        title = f"The loop calls {_called(activity)} {often}: {duration(per_call)} a call, {cost}"
        evidence = {
            "calls": found.calls,
            "steps": found.steps,
            "calls_per_step": round(found.per_step, 2),
            "seconds_per_call": round(per_call, 6),
            "share_of_loop_time": round(found.share, 4),
            "between_steps": found.between,
            "call": activity.code if activity is not None else None,
        }
        return [
            self.finding(
                title,
                severity="high" if found.share >= 0.25 else "medium",
                evidence=evidence,
                fix=fix_text(activity),
                estimated_gain=(
                    f"up to {found.share:.0%} of the loop's time (most of each call is the "
                    "loop around one batch; the batch's own forward pass stays)"
                ),
                location=activity.location if activity is not None else None,
                gain_value=found.share,
            )
        ]
