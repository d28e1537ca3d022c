"""steps.keras-call-per-step: a loop calls Keras' predict(), evaluate() or fit() on one
batch every step, paying for a whole Keras loop around each batch."""

from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import Any

from gpuwhy.derived.stage import derived
from gpuwhy.derived.step_windows import main_loop_span
from gpuwhy.facts import Activity, Facts
from gpuwhy.finding import Finding
from gpuwhy.formatting import duration
from gpuwhy.rules.base import Rule

# keyword arguments that only the loop over a dataset takes, not the one-batch calls
_LOOP_KEYWORDS = (
    "batch_size", "verbose", "steps", "callbacks", "max_queue_size", "workers",
    "use_multiprocessing", "shuffle", "initial_epoch", "steps_per_epoch",
    "validation_split", "validation_data", "validation_steps", "validation_batch_size",
    "validation_freq",
)  # fmt: skip
_ON_BATCH = {"predict": "predict_on_batch", "evaluate": "test_on_batch", "fit": "train_on_batch"}
_POSITIONAL = {"predict": 1, "evaluate": 2, "fit": 2}  # x (, y) kept in their places
_DETAILS = {"predict": "Model.predict", "evaluate": "Model.evaluate", "fit": "Model.fit"}
# fits a step, near one: each fit call runs one batch (train_on_batch does the same)
ONE_FIT_A_STEP = (0.9, 1.1)


@dataclass(frozen=True)
class CallsInSteps:
    """The program's own Keras calls of one kind (predict/evaluate, or fit) begun in the
    main loop's windows after its warm-up, against the steps begun there."""

    kind: str  # "evaluate" (predict and evaluate) | "fit"
    steps: int
    step_s: float
    calls: int
    call_s: float
    wall_s: float = 0.0  # the windows' time: the loop ran through them
    # batches a step runs (Keras' steps_per_execution): ``steps`` counts calls of the
    # step function, as a callback's on_train_batch_end is called once a call
    batches: int = 1

    @property
    def per_step(self) -> float:
        return self.calls / self.steps if self.steps else 0.0

    @property
    def between(self) -> bool:
        """The calls ran between the steps, not inside them: fit's own calls hold its
        steps; a predict() that took longer than the steps ran beside them (a callback's
        at each batch's end, which fit's steps leave out)."""
        return self.kind == "fit" or self.call_s > self.step_s

    @property
    def lost_s(self) -> float:
        """The seconds the calls cost: a fit's own time around the step it runs."""
        return max(0.0, self.call_s - self.step_s) if self.kind == "fit" else self.call_s

    @property
    def share(self) -> float:
        """Of the loop's time: the steps' where the calls ran inside them; where they
        ran between them, the time the loop ran through (the steps, the calls and what
        else ran between: a fit's own set-up)."""
        loop_s = self.step_s
        if self.between:
            loop_s = max(self.step_s + self.lost_s, self.wall_s)
        return min(1.0, self.lost_s / loop_s) if loop_s > 0 else 0.0


def calls_in_steps(facts: Facts, kind: str = "evaluate") -> CallsInSteps | None:
    """The Keras calls of ``kind`` in the training windows (None: no steps or no
    timeline)."""
    steps = facts.steps
    if steps is None or steps.timeline is None:
        return None
    rows = derived(facts).timeline_rows
    width = steps.timeline.width_s
    begin, end = main_loop_span(steps)
    count = 0
    calls = step_s = call_s = wall_s = 0.0  # calls: an edge window's may be a part
    # every window of the main loop, however few steps it holds (the training spans
    # keep those with a median: a GAN's 460 ms steps, two a window, left none)
    for span in steps.timeline.windows:
        if not begin - width - 1e-9 < span.start_s <= end:
            continue
        row = rows.get(round(span.start_s / width))
        if row is None:  # the loop's first window: its row holds the warm-up's calls
            continue
        count += span.steps
        step_s += span.step_s
        n, seconds = (
            (float(row.keras_fits), row.keras_fit_s)
            if kind == "fit"
            else (float(row.keras_calls), row.keras_call_s)
        )
        # an edge window of the loop (it began or ended inside it) holds calls made before
        # it began or after it ended too: no more of them than fits in the part the loop
        # ran through, and one call running on past it (25 predict() calls after fit, 1 s
        # of them in the window of fit's last 36 ms of steps, read "The loop calls
        # model.predict() every step ... 96% of the loop's time")
        inside = max(0.0, min(span.start_s + width, end) - max(span.start_s, begin))
        if inside < width and n and seconds > inside + seconds / n:
            kept = (inside + seconds / n) / seconds
            n, seconds = n * kept, seconds * kept
        calls += n
        call_s += seconds
        wall_s += width
    # with steps_per_execution N, Keras calls its step function (and a callback's
    # on_train_batch_end) once every N batches: a predict() there is one a step, which
    # read as one every 8 steps went to steps.periodic-stall, its share a third of its own
    batches = max(1, steps.steps_per_call)
    return CallsInSteps(kind, round(count / batches), step_s, round(calls), call_s, wall_s, batches)


def judged(
    facts: Facts, kind: str = "evaluate", options: dict[str, Any] | None = None
) -> CallsInSteps | None:
    """The calls of ``kind`` where they make a finding (the rule's default options
    unless given): steps.periodic-stall leaves a predict() every step to this rule."""
    options = options or KerasCallPerStep.options
    found = calls_in_steps(facts, kind)
    if found is None or found.steps < options["min_steps"]:
        return None
    if kind == "fit":
        low, high = ONE_FIT_A_STEP
        if not low <= found.per_step <= high:  # fits of several batches: their own loops
            return None
    elif found.per_step < options["min_calls_per_step"]:
        return None
    return found if found.share >= options["min_share"] else None


def _activity(facts: Facts, kind: str) -> Activity | None:
    """The run's activity of ``kind`` (its busiest place), the program's own calls."""
    stalls = facts.stalls
    details = ("Model.fit",) if kind == "fit" else ("Model.predict", "Model.evaluate")
    for activity in stalls.activities if stalls is not None else ():
        if activity.kind == kind and activity.detail in details:
            return activity
    return None


# a Keras predict()/evaluate() call given one batch reads one element of its dataset;
# iterators that read a little more on average still hold a few calls of several
ONE_BATCH_READS = 1.1
_CONSUMERS = {"Model.predict": "keras-predict", "Model.evaluate": "keras-evaluate"}


@dataclass(frozen=True)
class OneBatchCalls:
    """The program's own predict()/evaluate() calls at one line, each on one batch (the
    dataset TF built for each call read one element), many of them, wherever they ran:
    a VAE's ``decoder.predict(z)`` per point of a grid after ``fit``."""

    activity: Activity  # every call of that kind: its count and its time
    calls: int  # those at the line, one batch each (the datasets' iterators)
    share: float  # of the program's run: the calls' time

    @property
    def per_call(self) -> float:
        return self.activity.seconds / self.activity.count


def one_batch_calls(facts: Facts, options: dict[str, Any]) -> OneBatchCalls | None:
    """The program's predict()/evaluate() calls on one batch each at their busiest line,
    where they are at least ``min_calls`` and cost ``min_share`` of the run (None
    otherwise): a loop that calls them outside the training steps, which the per-step
    reading never sees."""
    activity = _activity(facts, "evaluate")
    program, tfdata = facts.program, facts.tfdata
    if activity is None or activity.location is None or not activity.count:
        return None
    if program is None or program.seconds <= 0 or tfdata is None:
        return None
    consumer = _CONSUMERS.get(activity.detail or "")
    read = [
        p for p in tfdata.pipelines if p.location == activity.location and p.consumer == consumer
    ]
    calls = sum(p.iterators for p in read)
    elements = sum(p.elements for p in read)
    if calls < options["min_calls"] or elements > calls * ONE_BATCH_READS:
        return None
    share = min(1.0, activity.seconds / program.seconds)
    return OneBatchCalls(activity, calls, share) if share >= options["min_share"] else None


def _segment(text: str, node: ast.AST) -> str | None:
    return ast.get_source_segment(text, node)


def one_batch_call(code: str | None) -> tuple[str, str, str] | None:
    """(the call as written, its one-batch form, the method) for a line calling
    ``X.predict(...)``, ``X.evaluate(...)`` or ``X.fit(...)``: ``generator.predict(z,
    verbose=0)`` -> ``generator.predict_on_batch(z)``, ``model.fit(s, t, epochs=1,
    verbose=0)`` -> ``model.train_on_batch(s, t)``; None where the line holds no such
    call, or one no one-batch call can stand for (a fit of several epochs)."""
    if not code:
        return None
    text = code.strip()
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return None
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
            continue
        method = node.func.attr
        if method not in _ON_BATCH:
            continue
        kept = [_segment(text, a) for a in node.args[: _POSITIONAL[method]]]
        named = {k.arg for k in node.keywords}
        if not kept and "x" not in named:
            continue  # no batch given
        several = any(
            k.arg == "epochs" and not (isinstance(k.value, ast.Constant) and k.value.value == 1)
            for k in node.keywords
        )
        if several or len(node.args) > _POSITIONAL[method]:
            continue
        kept += [
            f"{k.arg}={_segment(text, k.value)}"
            for k in node.keywords
            if k.arg is not None and k.arg not in _LOOP_KEYWORDS and k.arg != "epochs"
        ]
        owner, written = _segment(text, node.func.value), _segment(text, node)
        if owner is None or written is None or any(part is None for part in kept):
            continue
        return written, f"{owner}.{_ON_BATCH[method]}({', '.join(str(k) for k in kept)})", method
    return None


def _called(activity: Activity | None, kind: str) -> str:
    """``generator.predict()`` as the program calls it, else ``Model.predict()``."""
    call = one_batch_call(activity.code if activity is not None else None)
    if call is not None:
        return call[0].split("(", 1)[0] + "()"
    if activity is not None:
        return f"{activity.detail}()"
    return "Model.fit()" if kind == "fit" else "Model.predict()/evaluate()"


_WHAT_IT_BUILDS = {
    "predict": "predict() builds a dataset, an iterator, callbacks and a progress bar",
    "evaluate": "evaluate() builds a dataset, an iterator, callbacks and a progress bar",
    "fit": "fit() builds a dataset, an iterator, callbacks and a History",
}


def one_batch_line(code: str | None) -> tuple[str, str, str] | None:
    """(the line as written, the line with its call in the one-batch form, the method):
    ``preds = self.model.predict(self.probe, verbose=0)`` -> ``preds =
    self.model.predict_on_batch(self.probe)``; None where the line holds no such call."""
    call = one_batch_call(code)
    if call is None or code is None:
        return None
    written, one_batch, method = call
    line = code.strip()
    return line, line.replace(written, one_batch, 1), method


def fix_text(activity: Activity | None, kind: str) -> str:
    """The call at its line in its one-batch form, in the program's names."""
    call = one_batch_call(activity.code if activity is not None else None)
    if call is None or activity is None or activity.code is None:
        if kind == "fit":
            return "\n".join(
                [
                    "# fit() builds a dataset, an iterator and callbacks at each call: on one",
                    "# batch in memory call its one-batch form instead (one update, as fit's)",
                    "loss = model.train_on_batch(x, y)        # was: model.fit(x, y, epochs=1)",
                ]
            )
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
        f"# {activity.location}: {_WHAT_IT_BUILDS[method]} at each call;",
        "# the one-batch form runs the same compiled function on the same batch",
        line,
    ]
    if method == "predict":
        owner = one_batch.split(".predict_on_batch(", 1)[0]
        lines.append(f"# or, a tensor rather than a NumPy array: {owner}(..., training=False)")
    if method == "fit":
        lines.append(
            "# (it returns the loss, not a History: a line that reads fit's History reads it)"
        )
    return "\n".join(lines)


class KerasCallPerStep(Rule):
    """A loop calls Keras' `predict()`, `evaluate()` or `fit()` every step, on one batch.

    ## What it detects
    The program's own `Model.predict`/`Model.evaluate` calls (not fit's validation)
    begun in the main training loop's windows after its warm-up, at least
    `min_calls_per_step` calls per step; or its `Model.fit` calls, one per step (each
    fit runs one batch: a reinforcement-learning agent's replay, `model.fit(state,
    target, epochs=1)` per sample). Reported where what they cost takes at least
    `min_share` of the loop's time, over at least `min_steps` steps: a predict's whole
    call, a fit's time around the step it runs. The finding names the call's file:line
    (its busiest place) and its share. Loops written by hand: a GAN trained with
    `train_on_batch` that makes its fake images with `generator.predict(z)`, a DQN that
    picks each action with `model.predict(state)`, a callback that predicts at each
    batch's end.

    The same calls outside the training steps are found too: at least `min_calls`
    of them at one line, each on one batch (the dataset Keras builds for each call
    read one element), costing `min_share` of the whole run: a VAE that decodes a grid
    of latent points with `decoder.predict(z)` after its `fit`.

    ## Why is this slow?
    `predict()`, `evaluate()` and `fit()` are loops over a dataset: each call wraps its
    arrays in a new `tf.data` pipeline and iterator, builds callbacks (a progress bar,
    a History), runs its compiled function once per batch and stops the pipeline's
    threads at the end. On one batch all of that is overhead, paid every step on the
    host while the GPU waits: tens of milliseconds a call, half of a DCGAN's step on a
    CPU machine and nearly all of a DQN's.

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
    `generator(z, training=False)` is as fast and returns a tensor; `test_on_batch(x,
    y)` is `evaluate()`'s one-batch form and `train_on_batch(x, y)` `fit()`'s (one
    update of one batch, as a fit of one batch and one epoch makes; it returns the
    loss, not a History). Results are the same: the same function runs on the same
    batch. `gpuwhy fix` tries the one-batch form on the program.

    Severity: high from 25 % of the loop's time, medium below.

    ## Options
    - `min_calls_per_step`: predict/evaluate calls per training step (0.5).
    - `min_share`: share of the loop's time the calls cost (0.10).
    - `min_steps`: training steps after warm-up in the windows read (20).
    - `min_calls`: one-batch calls at one line, outside the loop's steps (20); their
      `min_share` is of the whole run.
    """

    id = "steps.keras-call-per-step"
    severity = "medium"
    status = "preview"
    since = "0.5.0"
    needs = ("stalls",)  # the steps and their timeline where the calls are in a loop
    options = {"min_calls_per_step": 0.5, "min_share": 0.10, "min_steps": 20, "min_calls": 20}
    measured_thresholds = {"min_share": "floor"}
    question = "Why is model.predict / model.fit slow in my loop?"

    def check(self, facts: Facts, options: dict[str, Any]) -> list[Finding]:
        out = []
        for kind in ("evaluate", "fit"):
            found = judged(facts, kind, options)
            if found is not None:
                out.append(self._finding(found, _activity(facts, kind), kind))
            elif kind == "evaluate":
                calls = one_batch_calls(facts, options)
                if calls is not None:
                    out.append(self._calls_finding(calls))
        return out

    def _calls_finding(self, found: OneBatchCalls) -> Finding:
        activity = found.activity
        kind = "predict" if activity.detail == "Model.predict" else "evaluate"
        all_of = (
            f"its {activity.count} {kind}() calls took"
            if activity.count != found.calls
            else "they took"
        )
        title = (
            f"The program calls {_called(activity, 'evaluate')} {found.calls} times on one "
            f"batch each: {duration(found.per_call)} a call; {all_of} "
            f"{activity.seconds:.1f} s, {found.share:.0%} of the run"
        )
        evidence = {
            "calls": found.calls,
            "calls_of_the_kind": activity.count,
            "seconds": round(activity.seconds, 6),
            "seconds_per_call": round(found.per_call, 6),
            "share_of_run": round(found.share, 4),
            "one_batch_each": True,
            "call": activity.code,
        }
        return self.finding(
            title,
            severity="high" if found.share >= 0.25 else "medium",
            evidence=evidence,
            fix=fix_text(activity, "evaluate"),
            estimated_gain=(
                f"up to {found.share:.0%} of the run (most of each call is the loop "
                "around one batch; the batch's own work stays)"
            ),
            location=activity.location,
            gain_value=found.share,
        )

    def _finding(self, found: CallsInSteps, activity: Activity | None, kind: str) -> Finding:
        per_call = found.call_s / found.calls
        step = found.step_s / found.steps
        often = "every step" if found.per_step < 1.5 else f"{found.per_step:.1f} times a step"
        if found.batches > 1:
            often += f" (a step of {found.batches} batches: steps_per_execution={found.batches})"
        if kind == "fit":
            cost = (
                f"{duration(found.lost_s / found.calls)} of it around each "
                f"{duration(step)} step: {found.share:.0%} of the loop's time"
            )
        elif found.between:  # fit's steps leave out what its callbacks run between them
            cost = f"between steps of {duration(step)}: {found.share:.0%} of the loop's time"
        else:
            cost = f"{found.share:.0%} of a {duration(step)} step"
        title = (
            f"The loop calls {_called(activity, kind)} {often}"
            + (", one batch each" if kind == "fit" else "")
            + f": {duration(per_call)} a call, {cost}"
        )
        evidence = {
            "calls": found.calls,
            "steps": found.steps,
            "calls_per_step": round(found.per_step, 2),
            "seconds_per_call": round(per_call, 6),
            "share_of_loop_time": round(found.share, 4),
            "between_steps": found.between,
            "call": activity.code if activity is not None else None,
        }
        return self.finding(
            title,
            severity="high" if found.share >= 0.25 else "medium",
            evidence=evidence,
            fix=fix_text(activity, kind),
            estimated_gain=(
                f"up to {found.share:.0%} of the loop's time (most of each call is the "
                "loop around one batch; the batch's own work stays)"
            ),
            location=activity.location if activity is not None else None,
            gain_value=found.share,
        )
