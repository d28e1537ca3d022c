"""steps.periodic-stall: every N steps training stops for a while, and what ran then."""

from __future__ import annotations

import re
from typing import Any

from gpuwhy.derived.stall_waits import PARTLY_COVERED, input_waits
from gpuwhy.facts import Facts, LoopStalls, StallBeat, StallCause
from gpuwhy.finding import Finding
from gpuwhy.fixes import traced_step
from gpuwhy.formatting import duration
from gpuwhy.rules.base import Rule
from gpuwhy.rules.steps import keras_call_per_step

MAX_FINDINGS = 3
SHOWN_STALLS = 5
_CALL = re.compile(r"([A-Za-z_][\w.]*)\.(write|save)\((.*)\)\s*(#.*)?$")
_WORDS = {
    "checkpoint": "a checkpoint write",
    "gc": "Python's garbage collector",
    "summary": "a summary flush",
    "evaluate": "evaluation",
    "trace": "a tf.function trace",
    "gpuwhy": "gpuwhy's own heap census",
    "loop": "a loop over another tf.data dataset",
}
_FOR = re.compile(r"for\s+(.+?)\s+in\s+(.+?):\s*(#.*)?$")


def _length(seconds: float) -> str:
    """A stall's length as people say it: ``1.8 s``, ``264.5 ms``."""
    return f"{seconds:,.1f} s" if seconds >= 1 else duration(seconds)


def _cause(group: LoopStalls, beat: StallBeat) -> StallCause | None:
    """What dominated the beat's stalls, at its main place (None: nothing timed)."""
    return next((c for c in group.causes if c.kind == beat.kind), None)


def _cause_words(cause: StallCause | None) -> str:
    """``a checkpoint write (tf.train.Checkpoint.write) at train.py:57``."""
    if cause is None:
        return "nothing gpuwhy times ran in them: the program's own Python"
    if cause.detail == "fit's validation":
        words = "fit's validation"
    else:
        words = _WORDS.get(cause.kind, cause.kind)
        if cause.detail and cause.kind not in ("trace", "loop"):
            words += f" ({cause.detail})"
    at = "triggered at" if cause.kind == "gc" else "at"
    return f"{words} {at} {cause.location}" if cause.location else words


def _checkpoint_fix(cause: StallCause, every: int | None) -> list[str]:
    detail = cause.detail or ""
    rarer = f"every {every * 10} steps" if every else "ten times less often"
    if detail.startswith("keras.callbacks.ModelCheckpoint"):
        freq = f"{every * 10}" if every else '"epoch"'
        per_epoch = "'epoch'" in detail
        lines = [
            f"# {detail} writes every {'epoch' if per_epoch else f'{every or 0} steps'}:"
            " write less often, and only the weights",
            "# (a smaller, faster write; restore with load_weights)",
            f"keras.callbacks.ModelCheckpoint(filepath, save_freq={freq}, save_weights_only=True)",
        ]
        if per_epoch and every:
            lines[-1] += f"  # every 10 epochs of {every} steps"
        else:
            lines.append('# (filepath ending in .weights.h5); or save_freq="epoch"')
        return lines
    if detail.startswith("Model.save"):
        return [
            f"# {cause.code or detail}: save {rarer}, and the weights only",
            "model.save_weights(path)   # path ending in .weights.h5",
        ]
    lines = [
        f"# save {rarer}, or write in the background: TF copies the values and returns,",
        "# a thread of its own writes the files",
        "options = tf.train.CheckpointOptions(enable_async=True)",
    ]
    match = _CALL.match(cause.code or "")
    if match:
        receiver, method, args = match.group(1), match.group(2), match.group(3).strip()
        lines.append(f"{receiver}.{method}({args + ', ' if args else ''}options=options)")
    else:
        lines.append(
            "ckpt.write(path, options=options)   # also Checkpoint.save, CheckpointManager.save"
        )
    return lines


def stall_loop(finding: Finding, facts: Facts) -> StallCause | None:
    """The loop over another dataset a finding of this rule names, at the finding's
    location (None: stalls of another kind)."""
    if facts.stalls is None or finding.location is None:
        return None
    return next(
        (
            cause
            for group in facts.stalls.loops
            for cause in group.causes
            if cause.kind == "loop" and cause.location == finding.location
        ),
        None,
    )


def traced_loop(cause: StallCause, facts: Facts) -> bool:
    """Whether the loop's body already calls one of the program's tf.functions (its
    batches run as a graph: a validation pass that is the program's choice)."""
    code = cause.step_code
    if code is None or not code.body or facts.tracing is None:
        return False
    names = {f.name for f in facts.tracing.functions if not f.library and f.calls}
    text = "\n".join(code.body)
    return any(re.search(rf"\b{re.escape(name)}\(", text) for name in names)


def _loop_fix(cause: StallCause, facts: Facts) -> list[str]:
    """Trace the loop's body (it runs op by op in Python between training steps), or
    where it is traced already, run it on fewer batches."""
    match = _FOR.match(cause.code or "")
    fewer = (
        [
            "# and run it on a sample, or every few epochs:",
            f"for {match.group(1)} in {match.group(2)}.take(50):",
        ]
        if match and "." not in match.group(2) and "(" not in match.group(2)
        else ["#", "# and run it on fewer batches (dataset.take(50)), or every few epochs"]
    )
    if traced_loop(cause, facts):
        return [
            f"# {cause.location}: its body runs as a traced function already; the pass",
            "# itself is the time: run it on fewer batches, or less often",
            *fewer[1:],
        ]
    code = cause.step_code
    if code is None or code.signature is None:
        return [
            f"# {cause.location}: its body reads tensors' values into Python or draws",
            "# (.numpy(), plotting), which a graph cannot run: run it less often",
            *fewer[1:],
        ]
    sample = (
        [f"#   {fewer[1]}"] if match and len(fewer) == 2 and not fewer[1].startswith("#") else []
    )
    return [
        *traced_step.wrap(code, facts, ["@tf.function"]),
        *traced_step.rebound(code),
        # the same pass, traced: a sample would change the metric it computes, so only said
        "# (a sample of the data, or a pass every few epochs, shortens it further and"
        " changes what it computes" + (":" if sample else ")"),
        *([f"{sample[0]})"] if sample else []),
    ]


def _fix(cause: StallCause | None, every: int | None, facts: Facts) -> str:
    if cause is None:
        return "\n".join(
            [
                "# no checkpoint, GC, summary, evaluation or trace ran in these stalls: time the",
                "# code that runs every few steps (logging, metrics to numpy, .numpy() calls)",
                "# and move it out of the step or run it less often",
            ]
        )
    if cause.kind == "checkpoint":
        return "\n".join(_checkpoint_fix(cause, every))
    if cause.kind == "loop":
        return "\n".join(_loop_fix(cause, facts))
    if cause.kind == "gc" and "gc.collect(" in (cause.code or ""):
        return "\n".join(
            [
                f"# {cause.code}: each call walks every object the program holds;",
                "# drop it from the loop, or freeze what setup made so it is walked no more:",
                "gc.collect()",
                "gc.freeze()   # once, after building the model and the datasets",
            ]
        )
    if cause.kind == "gc":
        kept = []
        if cause.code:
            kept = [
                f"# {cause.code}: the allocation that set the collections off; objects the",
                "# program keeps every step make each full collection walk a larger heap",
            ]
        return "\n".join(
            kept
            + [
                "import gc",
                "# after building the model and the datasets, before the training loop:",
                "gc.collect()",
                "gc.freeze()   # objects made so far leave the collector's generations for good",
                "# and collect less often (the defaults are 700, 10, 10):",
                "gc.set_threshold(50_000, 50, 100)",
            ]
        )
    if cause.kind == "summary":
        return "\n".join(
            [
                "# let the writer batch its events instead of flushing every few steps:",
                "writer = tf.summary.create_file_writer(logdir, max_queue=1000, flush_millis=60_000)",
                "# and drop the explicit writer.flush() from the loop",
            ]
        )
    if cause.kind == "evaluate":
        if cause.detail == "fit's validation":
            return "\n".join(
                [
                    "# validate every few epochs, on fewer batches:",
                    "model.fit(..., validation_freq=5, validation_steps=50)",
                ]
            )
        if cause.detail == "Model.predict":
            # the program's own line in its one-batch form: "outputs = model(x, ...)" named
            # an x a callback's predict(self.probe) did not have (a NameError, pasted)
            rewritten = keras_call_per_step.one_batch_line(cause.code)
            if rewritten is not None:
                at = f"{cause.location}: " if cause.location else ""
                return "\n".join(
                    [
                        f"# {at}predict() builds a dataset, an iterator and callbacks at each call;",
                        "# on a batch in memory its one-batch form runs the same compiled function",
                        "# and returns NumPy as predict() does (or call it less often):",
                        rewritten[1],
                    ]
                )
            return "\n".join(
                [
                    f"# {cause.code or cause.detail}: predict() builds a dataset and a loop at each"
                    " call;",
                    "# for a batch already in memory call its one-batch form (or less often):",
                    "outputs = model.predict_on_batch(<the batch>)",
                ]
            )
        return "\n".join(
            [
                f"# {cause.code or cause.detail}: evaluate less often, on fewer batches",
                "model.evaluate(val_ds, steps=50, verbose=0)   # every 10x more steps",
            ]
        )
    return "# the function is traced again in the loop: see `gpuwhy explain launch.retracing`"


class PeriodicStall(Rule):
    """Training stops for a while every N steps: a checkpoint, GC, a summary flush, evaluation.

    ## What it detects
    A loop's steps that last at least 3 times its typical step (the median of its latest
    256 steps) and at least 5 ms longer, or time between two of its steps that long (a
    Keras epoch's end, where `ModelCheckpoint` and validation run), when they recur.
    Stalls are grouped by the activity that ran in most of each (a *beat*: every
    checkpoint write, every full GC), so other stalls falling between two checkpoints
    do not hide their period. A beat is reported with at least `min_stalls` stalls:
    regular (in steps, `min_period_fit` of the intervals within 5 % of one; or in
    seconds, the 20th to the 80th percentile of the intervals within 10 % of their
    median) and losing at least `min_share` of the loop's time, or irregular and losing
    `irregular_share`. Stalls in which no timed activity ran are reported only when
    regular in steps, more than one step apart (stalls in consecutive steps are a
    stretch of slow steps, not a beat) and losing `irregular_share` (a host's noise is
    neither), and not
    where fit's measured wait for input covers their time (a producer that keeps pace
    only every few steps, as two PyDataset workers do for steps shorter than a batch
    takes them: input.bound's, with the stage); stalls that tf.function traces dominated are `launch.retracing`'s, not this rule's. Time
    between steps counts only the named activity's own time there, reported from
    `between_share` of the loop's time (fit's own validation from `validation_share`:
    a validation pass per epoch is the program's choice, named only when it dominates).

    Each stall is matched, when it is found, with what ran in it: Python's garbage
    collector (`gc.callbacks`), checkpoint writes (`tf.train.Checkpoint`,
    `CheckpointManager`, Keras `save`/`save_weights`, `ModelCheckpoint`), summary
    flushes, `evaluate`/`predict`, tf.function traces, and a loop of the program's own
    over another tf.data dataset that ran wholly inside the stall (a validation pass
    written by hand); the finding names the one that covered most of the stalls' time,
    with its file:line (and the share it covered, where under half: nothing timed ran
    in the rest). Such a loop whose body calls one of the program's
    tf.functions, or whose body reads tensors' values into Python or draws (a loop of
    sample images), is the program's choice, as fit's validation is
    (`validation_share`); one whose body runs op by op in Python is named from
    `between_share`, with its body as a traced function for the fix (`gpuwhy fix`
    tries it). A loop's first 10 calls
    (warm-up) and the first step of each epoch (a new iterator, a shuffle buffer
    refilled: the input rules judge those) are never stalls.

    ## Why is this slow?
    While a checkpoint is written, a full GC walks a large heap or validation runs, the
    training loop issues no work and the GPU idles. A median step hides it; the lost
    time is every stall's length times their number: a 1.8 s checkpoint every 200
    steps of 0.1 s is 8 % of the run.

    ## Example
    ```python
    for step, batch in enumerate(ds):
        train_step(batch)
        if step % 200 == 0:
            ckpt.write(path)            # 1.8 s, the GPU idle
    ```

    Use instead:
    ```python
    options = tf.train.CheckpointOptions(enable_async=True)
    for step, batch in enumerate(ds):
        train_step(batch)
        if step % 2000 == 0:
            ckpt.write(path, options=options)   # returns at once, written in the background
    ```
    For GC: `gc.freeze()` after setup and `gc.set_threshold(...)`; for summaries a
    larger `max_queue`/`flush_millis`; for validation `validation_freq` and fewer
    `validation_steps`. A validation loop written by hand that runs eagerly:

    ```python
    @tf.function
    def eval_step(x, y):
        logits = model(x, training=False)
        val_accuracy.update_state(y, logits)

    for epoch in range(epochs):
        for x, y in train_ds:
            train_step(x, y)
        for x, y in val_ds:
            eval_step(x, y)                 # was: the two lines above, eagerly
    ```

    Severity: high from 20 % of the loop's time lost, medium from 5 %, low below.

    ## Options
    - `min_stalls`: stalls of one beat needed before any finding (3).
    - `min_period_fit`: share of the intervals between stalls within 5 % of the most
      common one for the stalls to be regular (0.6).
    - `min_share`: share of the loop's time regular stalls must lose (0.01).
    - `irregular_share`: share of the loop's time irregular stalls, or regular ones with
      no timed activity in them, must lose (0.05).
    - `between_share`: share of the loop's time the activity that ran in the time
      between steps must take (0.10).
    - `validation_share`: the same for fit's own validation between epochs, and a
      validation loop of the program's whose body is traced already (0.50).
    """

    id = "steps.periodic-stall"
    measured_thresholds = {
        "min_share": "floor",
        "irregular_share": "floor",
        "between_share": "floor",
        "validation_share": "floor",
    }
    severity = "medium"
    status = "preview"
    since = "0.4.0"
    needs = ("stalls",)
    options = {
        "min_stalls": 3,
        "min_period_fit": 0.6,
        "min_share": 0.01,
        "irregular_share": 0.05,
        "between_share": 0.10,
        "validation_share": 0.50,
    }
    question = "Why does training stall every few hundred steps?"

    def check(self, facts: Facts, options: dict[str, Any]) -> list[Finding]:
        assert facts.stalls is not None  # in `needs`: never run without it
        flagged = [
            (group, beat, _share(group, beat))
            for group in facts.stalls.loops
            for beat in group.beats
            if _reported(group, beat, options, facts)
        ]
        flagged.sort(key=lambda item: -item[2])
        return [
            self._finding(g, b, share, options, facts) for g, b, share in flagged[:MAX_FINDINGS]
        ]

    def _finding(
        self,
        group: LoopStalls,
        beat: StallBeat,
        share: float,
        options: dict[str, Any],
        facts: Facts,
    ) -> Finding:
        cause = _cause(group, beat)
        every = beat.every_steps if _regular_steps(beat, options) else None
        typical = _length(beat.typical_stall_s or beat.stall_s / beat.count)
        lost = beat.lost_s
        if group.between_steps and cause is not None:  # only the named activity's time
            lost = min(cause.seconds, beat.stall_s)
            typical = _length(lost / beat.count)
        # Keras' steps leave an epoch's end out; another loop's gaps are its steps cut short
        where = "between steps " if group.between_steps and group.source == "keras-fit" else ""
        if every:
            head = f"Every {every:,} steps training stalls {where}for {typical}"
        elif beat.regular_in_time and beat.every_s:
            head = f"Every {_length(beat.every_s)} training stalls {where}for {typical}"
        else:
            head = f"Training stalled {where}{beat.count:,} times for {typical} each"
        words = _cause_words(cause)
        covered = beat.covered_by(cause) if cause is not None else 1.0
        if covered < PARTLY_COVERED:
            words += f", {covered:.0%} of their time; nothing timed in the rest"
        title = f"{head} ({words}): {share:.0%} of the loop's time"
        evidence: dict[str, Any] = {
            "loop": f"{group.source} {group.name}",
            "stalls": beat.count,
            "stalls_in_the_loop": group.count,
            "between_steps": group.between_steps,
            "every_steps": beat.every_steps,
            "intervals_that_fit": beat.period_fit,
            "every_seconds": beat.every_s,
            "typical_stall_seconds": beat.typical_stall_s,
            "typical_step_seconds": group.typical_step_s,
            "seconds_lost": round(lost, 3),
            "share_of_loop_time": round(share, 4),
            "what_ran": [
                {
                    "kind": c.kind,
                    "share_of_stall_time": c.share,
                    "location": c.location,
                    "what": c.detail,
                }
                for c in group.causes
            ],
            "first_stalls": [
                {"step": s.step, "at_s": round(s.start_s, 3), "seconds": round(s.seconds, 3)}
                for s in group.first[:SHOWN_STALLS]
            ],
        }
        severity = "high" if share >= 0.20 else "medium" if share >= 0.05 else "low"
        return self.finding(
            title,
            severity=severity,
            evidence=evidence,
            fix=_fix(cause, every, facts),
            estimated_gain=f"up to {lost:.2f} s ({share:.0%} of the loop's time)",
            location=cause.location if cause is not None else None,
            gain_value=share,
        )


def _share(group: LoopStalls, beat: StallBeat) -> float:
    """The share of the loop's time the beat costs: beyond a typical step for stalled
    steps; between steps, the named activity's own time there (the rest of it is the
    loop's own: a new epoch's iterator)."""
    if not group.between_steps:
        return beat.lost_share
    cause = _cause(group, beat)
    if cause is None or group.loop_s <= 0:
        return 0.0
    return min(cause.seconds, beat.stall_s) / group.loop_s


# beats of these kinds are no finding of this rule: traces are launch.retracing's, gpuwhy's
# own pauses are not the program's, and an iterator's teardown (timed since the stalls
# line names it) is part of every loop's end, a few ms most times: an epoch end that
# overlaps one was a stall with nothing timed in it before, never reported between steps
NOT_REPORTED = ("trace", "gpuwhy", "teardown")


def _regular_steps(beat: StallBeat, options: dict[str, Any]) -> bool:
    return (
        beat.every_steps is not None
        and beat.period_fit is not None
        and beat.period_fit >= options["min_period_fit"]
    )


def _reported(group: LoopStalls, beat: StallBeat, options: dict[str, Any], facts: Facts) -> bool:
    if beat.count < options["min_stalls"] or beat.kind in NOT_REPORTED:
        return False
    cause = _cause(group, beat)
    if (
        # every step, or every call of a Keras step of steps_per_execution batches
        beat.every_steps in (1, max(1, facts.steps.steps_per_call if facts.steps else 1))
        and cause is not None
        and cause.detail in ("Model.predict", "Model.evaluate")
        and keras_call_per_step.judged(facts) is not None
    ):
        return False  # a Keras call every step: steps.keras-call-per-step's, with its fix
    share = _share(group, beat)
    if beat.kind is None:  # no timed activity: only a regular beat in steps, and a large one
        return (
            not group.between_steps
            and _regular_steps(beat, options)
            # stalls one step apart are a stretch of slow steps in a row, not a beat (a
            # host's other load, a heap that grows: 13 GCs read as "every 1 steps" too)
            and (beat.every_steps or 0) > 1
            and share >= options["irregular_share"]
            and not input_waits(facts.steps, group, beat)  # input.bound's, with the stage
        )
    if group.between_steps:
        cause = _cause(group, beat)
        if cause is not None and (
            cause.detail == "fit's validation"
            or (cause.kind == "loop" and (cause.step_code is None or traced_loop(cause, facts)))
        ):
            return share >= options["validation_share"]
        return share >= options["between_share"]
    if _regular_steps(beat, options) or beat.regular_in_time:
        return share >= options["min_share"]
    return share >= options["irregular_share"]
