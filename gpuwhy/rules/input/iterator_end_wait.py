"""input.iterator-end-wait: training waits at each epoch's end while TF frees the
epoch's tf.data iterator."""

from __future__ import annotations

from typing import Any

from gpuwhy.derived.stage import derived
from gpuwhy.facts import Facts, LoopStalls, PipelineFacts, StallCause
from gpuwhy.finding import Finding
from gpuwhy.fixes.epoch_iterator_code import epochs_per_pass_fix, per_pass
from gpuwhy.formatting import FIT_VALIDATION, duration
from gpuwhy.rules.base import Rule

TEARDOWN = "teardown"
KERAS_CALLS = ("Model.predict", "Model.evaluate")  # the evaluate activities' details
KERAS_CONSUMERS = ("keras-predict", "keras-evaluate")  # their pipelines' consumers


class IteratorEndWait(Rule):
    """Training waits at each epoch's end while TensorFlow frees the epoch's tf.data iterator.

    ## What it detects
    The time a training loop's thread spent inside the end of a tf.data iterator, timed
    as gpuwhy lets go of it (TF's teardown of the pipeline), in the loop's stalls, at
    least `min_share` of the loop's time and `min_wait_s` in all. A loop that reads its
    dataset afresh each epoch (`for x, y in train_ds:` inside the epochs' loop; `fit`
    over a dataset that ends) makes a new iterator at each epoch's start and frees it
    at its end; the Stalls row of the report lists each end that held the program.
    The ends of a Keras call's own iterators are not counted: a `model.predict(...)`
    or `model.evaluate(...)`, or a `model.fit(...)` called once an epoch, makes and
    frees one at each call whatever the epochs do (steps.keras-call-per-step names a
    call of one batch each step, whose one-batch form makes none).

    ## Why is this slow?
    Freeing an iterator stops the pipeline's threads and waits for them: the map calls
    in flight finish, and tf.data's autotune thread, which sleeps between two
    optimisations for a period that doubles up to a minute, is woken to end. TF marks
    the iterator cancelled only after it has woken that thread, and a thread woken in
    between reads "not cancelled" and sleeps out the rest of its period (TensorFlow's
    own race, under plain `python` as well: docs/speed.md). The program's thread waits
    all that time at the epoch's end with nothing to run: on a quiet host about one
    iterator in forty, on a loaded one most of them, for up to the iterator's age. A
    MirroredStrategy loop lost 54 % of its loop time there, a tutorial's eager loop 20-31 %.

    ## How to fix it
    Make one iterator for the run and let each epoch take one pass of batches from it:
    the dataset repeated, its iterator made once before the epochs' loop, each epoch
    reading as many batches as a pass holds. The elements and their order are those of
    an iterator per epoch (`repeat()` makes each pass as a new iterator would, a
    shuffle's reshuffling included); no iterator ends until the run does. For `fit`:
    the dataset repeated and `steps_per_epoch` (Keras keeps one iterator for the run
    where it is given); each epoch reads the same batches, though a seeded shuffle's
    later epochs come in another order (Keras draws one shuffle order more per epoch).
    A `validation_data=` dataset the same, repeated with `validation_steps` (Keras makes
    a new iterator over it at each epoch's validation where none is given).

    ## Example
    ```python
    for epoch in range(12):
        for x, y in train_ds:                     # a new iterator each epoch
            train_step(x, y)
    ```

    Use instead:
    ```python
    import itertools
    train_ds_batches = iter(train_ds.repeat())    # once, before the epochs' loop
    for epoch in range(12):
        for x, y in itertools.islice(train_ds_batches, 128):   # 128 batches a pass
            train_step(x, y)
    ```
    or, for Keras: `model.fit(train_ds.repeat(), steps_per_epoch=128, epochs=12)`.

    A loop over a strategy's distributed dataset, which has no `repeat()`, gets the
    strategy's `experimental_distribute_dataset` call over the dataset repeated. A
    function that loops over its parameter, called once an epoch
    (`train_one_epoch(model, train_ds)`), is left as written: its call is given the
    epoch's pass, `train_one_epoch(model, itertools.islice(train_ds_batches, 128))`
    (not where it is a tf.function: an iterator is a Python value there). A progress
    bar around the dataset (`tqdm(train_ds)`) keeps its call, the pass inside it. No
    code where the epochs' loop reads the same dataset elsewhere too (a seeded shuffle
    draws each iterator's order in turn: one iterator for this loop changes the
    other's). A loop
    that breaks out of a pass early is not rewritten (the next epoch would go on where
    it stopped), nor one whose dataset is built again each epoch. How long an end
    waits is the race's: the same program may lose seconds in one run and none in the
    next, so the gain is what this run lost.

    ## Options
    - `min_share`: share of the loop's time the iterators' ends took, below which the
      finding does not fire (0.05).
    - `high_share`: the share from which it is high (0.2).
    - `others_busy_at`: share of the host's cores other processes kept busy over the
      run from which the finding says so (0.25, input.bound's): under two CPU-bound
      processes 21 of 30 ends lost the race, on the quiet host none of 30
      (docs/speed.md). The loss is the run's all the same: the finding stands.
    - `min_wait_s`: seconds the ends took in all, below which it does not fire (0.2):
      a teardown of a millisecond an epoch is what freeing an iterator costs.
    """

    id = "input.iterator-end-wait"
    measured_thresholds = {"min_share": "floor", "min_wait_s": "floor", "high_share": "floor"}
    severity = "medium"
    status = "preview"
    since = "0.5.0"
    needs = ("stalls",)
    options = {"min_share": 0.05, "min_wait_s": 0.2, "high_share": 0.2, "others_busy_at": 0.25}
    question = "Why does training pause at every epoch's end?"

    def check(self, facts: Facts, options: dict[str, Any]) -> list[Finding]:
        assert facts.stalls is not None  # in `needs`
        findings = []
        per_call = _per_call_places(facts)
        ends_by_loop = _ends_by_loop(facts.stalls.loops, per_call)
        for (source, name), (loop, cause, seconds) in ends_by_loop.items():
            share = seconds / loop.loop_s if loop.loop_s > 0 else 0.0
            if seconds < options["min_wait_s"] or share < options["min_share"]:
                continue
            where = cause.location or name
            pipeline = _pipeline_of(facts, source, where)
            validation = _validation_of(facts) if source == "keras-fit" else None
            # the run's ends, where no Keras call's own are among them
            ends = None if per_call else _activity(facts, TEARDOWN)
            reads = "fit's epochs" if source == "keras-fit" else f"the loop at {name}"
            count = f"{ends.count:,} ended" if ends is not None else "ends"
            longest = f", the longest {duration(ends.max_s)}" if ends is not None else ""
            load = derived(facts).host_load
            loaded = load is not None and load.others >= options["others_busy_at"]
            beside = (
                f"; {load.text}: TF loses this race far more often on a loaded host"
                if loaded and load is not None
                else ""
            )
            findings.append(
                self.finding(
                    f"Training waited {seconds:,.2f} s ({share:.0%} of {reads}) at the ends "
                    f"of its tf.data iterators, a new one each epoch ({count}{longest}): "
                    f"TF stopping the pipeline's threads{beside}",
                    severity="high" if share >= options["high_share"] else "medium",
                    location=where,
                    evidence={
                        "loop_source": source,
                        **_evidence(loop, cause, seconds, share, pipeline, ends),
                        **(
                            {"validation_batches_per_pass": per_pass(validation)}
                            if validation is not None
                            else {}
                        ),
                        **(load.evidence() if loaded and load is not None else {}),
                    },
                    fix="\n".join(epochs_per_pass_fix(source, where, pipeline, validation)),
                    estimated_gain=(
                        f"up to {share:.0%} of the loop's time (what this run lost at the "
                        "iterators' ends; the race TF loses there varies from run to run)"
                    ),
                    gain_value=round(share, 4),
                )
            )
        return findings


def _activity(facts: Facts, kind: str) -> Any:
    stalls = facts.stalls
    return next((a for a in stalls.activities if a.kind == kind), None) if stalls else None


def _per_call_places(facts: Facts) -> set[str]:
    """The program's lines whose iterators are a Keras call's own, one a call, not an
    epoch's: a ``model.predict(state)`` or ``model.evaluate(...)`` there, or a
    ``model.fit(...)`` called as often as fit made iterators (one epoch a call, its
    dataset built there or elsewhere). Each call makes and frees its iterator whatever
    the epochs do, so one iterator for the run cannot be written there: a DQN's predict
    and fit of one batch each step ended 114 iterators in its stalls,
    steps.keras-call-per-step's (their one-batch forms make none)."""
    if facts.tfdata is None or facts.stalls is None:
        return set()
    places = set()
    fits, fit_calls = [], 0
    for activity in facts.stalls.activities:
        if activity.location is None:
            continue
        if activity.kind == "fit":
            fits.append(activity.location)
            fit_calls += activity.count
        elif activity.kind == "evaluate" and activity.detail in KERAS_CALLS:
            places.add(activity.location)  # a dataset built elsewhere, read by the call
    fit_iterators = 0
    for pipeline in facts.tfdata.pipelines:
        if pipeline.consumer == "keras-fit":
            fit_iterators += pipeline.iterators
        elif pipeline.consumer in KERAS_CONSUMERS and not pipeline.read_via:
            if pipeline.location is not None:  # the dataset the call built of its arrays
                places.add(pipeline.location)
    if fit_iterators and fit_calls >= fit_iterators:  # unknown iterators: an epoch's, as before
        places.update(fits)
    return places


def _ends_by_loop(
    loops: tuple[LoopStalls, ...], per_call: set[str]
) -> dict[tuple[str, str], tuple[LoopStalls, StallCause, float]]:
    """Per loop (its stalls inside steps and between them, kept apart in the facts), the
    iterators' ends in its stalls that an epoch's iterator made (not a Keras call's own,
    at ``per_call``): the loop, the end with most time (its place) and the seconds of all
    of them."""
    found: dict[tuple[str, str], tuple[LoopStalls, StallCause, float]] = {}
    for loop in loops:
        for cause in loop.causes:
            if cause.kind != TEARDOWN or cause.location in per_call:
                continue
            key = (loop.source, loop.name)
            if key in found:
                before, main, seconds = found[key]
                main = cause if cause.seconds > main.seconds else main
                found[key] = (before, main, seconds + cause.seconds)
            else:
                found[key] = (loop, cause, cause.seconds)
    return found


def _pipeline_of(facts: Facts, source: str, where: str) -> PipelineFacts | None:
    """The pipeline whose iterators ended: read by the Python loop at ``where`` (the
    training loop's own, or a validation loop's inside its epochs); in fit, the one
    pipeline fit read (None where several were)."""
    if facts.tfdata is None:
        return None
    if source == "keras-fit":
        fitted = [p for p in facts.tfdata.pipelines if p.consumer == "keras-fit"]
        return fitted[0] if len(fitted) == 1 else None
    return next(
        (
            p
            for p in facts.tfdata.pipelines
            if p.consumer == "python-loop" and p.read_at == where and not p.read_via
        ),
        None,
    )


def _validation_of(facts: Facts) -> PipelineFacts | None:
    """fit's validation pipeline (the one Keras' validation read; None where several
    were, or none)."""
    if facts.tfdata is None:
        return None
    read = [
        p
        for p in facts.tfdata.pipelines
        if p.consumer == "keras-evaluate" and p.read_via == FIT_VALIDATION
    ]
    return read[0] if len(read) == 1 else None


def _evidence(
    loop: LoopStalls,
    cause: StallCause,
    seconds: float,
    share: float,
    pipeline: PipelineFacts | None,
    ends: Any,
) -> dict[str, Any]:
    evidence: dict[str, Any] = {
        "loop": loop.name,
        "waited_s": round(seconds, 3),
        "share_of_loop": round(share, 4),
        "loop_s": round(loop.loop_s, 3),
        "code": cause.code,
    }
    if ends is not None:
        evidence |= {"iterators_ended": ends.count, "longest_end_s": round(ends.max_s, 3)}
    if pipeline is not None:
        evidence["iterators_made"] = pipeline.iterators
        evidence["batches_per_pass"] = per_pass(pipeline)
    return evidence
