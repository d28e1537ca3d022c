"""What the stage's steps' wait says of one pipeline, and the wait a reader with its own
threshold reads: asked by every input rule (so their findings agree with input.bound),
the codec and cpu-starved rules, the fixes' evidence and the verdict, which states the
same wait in its headline. Each reads the derivation stage (stage.py), never derives
again.
"""

from __future__ import annotations

from gpuwhy.derived.input_wait import InputWait, StepsWait, pipeline_wait
from gpuwhy.derived.stage import derived
from gpuwhy.facts import Facts, PipelineFacts


def steps_wait_at(facts: Facts, medium_at: float) -> StepsWait | None:
    """The steps' wait and what it is, for a reader whose threshold is ``medium_at``
    (:meth:`StepsWait.judged`); None where not measured, or where the share is not
    resolved from no wait (a Keras fit's difference of two means within its
    uncertainty: :attr:`StepFacts.input_wait_resolved`): no reader judges it a wait."""
    measured = derived(facts).steps_wait
    if measured is None or (facts.steps is not None and not facts.steps.input_wait_resolved):
        return None
    return measured.judged(medium_at)


def input_wait(facts: Facts, pipeline: PipelineFacts) -> InputWait | None:
    """The steps' measured wait for the pipeline they read (what input.bound reports),
    else the pipeline's own timers, else None (not measured). None too for the steps'
    pipeline where their wait is not resolved from none (a Keras fit's difference of two
    means within its uncertainty): a review's RNN classifier had "no wait for input
    shown (measured 6%, ±18.7%: not told from none)" in its verdict and a HIGH
    input.sequential-map "steps wait for input 6% of the time" under it."""
    result = derived(facts)
    if result.steps_wait is not None and result.steps_pipeline is pipeline:
        if facts.steps is not None and not facts.steps.input_wait_resolved:
            return None
        return result.steps_wait.wait
    return pipeline_wait(pipeline)


# Consumers that read a pipeline beside the training steps: fit's validation_data,
# a predict call.
_BESIDE_STEPS = ("keras-evaluate", "keras-predict")


def beside_steps(facts: Facts, pipeline: PipelineFacts) -> bool:
    """The pipeline is read beside the training steps (Keras fit's validation_data, an
    evaluate or predict call, a loop of the program's own that is not a training loop:
    an evaluation written by hand, a sample taken with ``take(1)``), while the steps
    read another one: its wait is not the steps' wait, and a finding on it takes no
    figure from the steps."""
    if facts.steps is None:
        return False
    feeding = derived(facts).steps_pipeline
    if feeding is None or feeding is pipeline:
        return False
    if pipeline.consumer in _BESIDE_STEPS:
        return True
    return pipeline.consumer == "python-loop" and _own_side_loop(facts, pipeline)


def _own_side_loop(facts: Facts, pipeline: PipelineFacts) -> bool:
    """A Python loop read at a place none of the training loops reads at, where the
    training loops are loops over tf.data (their places known). Where their places are
    not known (Keras fit's steps, a tf.function's calls), one whose reads waited less
    than ``SIDE_LOOP_SHARE`` of the run in all: a test set gathered once after fit
    (``[x.numpy() for x, _ in test_ds]``) read as "steps wait for input 67 % of the
    time", a MEDIUM with a gain on the steps, where it waited 62 ms of a 4.4 s run.
    One that waited longer may be what the steps read through a generator of the
    program's (fit on ``ds.as_numpy_iterator()``): it stays the steps'."""
    assert facts.steps is not None
    sites = {loop.name for loop in facts.steps.loops if loop.source == "tf-data"}
    if sites:
        return pipeline.read_at is not None and pipeline.read_at not in sites
    wait = pipeline_wait(pipeline)
    share = side_loop_share(facts, pipeline, wait) if wait is not None else None
    return share is not None and share < SIDE_LOOP_SHARE


# A loop beside the steps whose reads waited less than this share of the run in all,
# its place unknown to the steps, is no part of them (a twentieth: input.bound's medium)
SIDE_LOOP_SHARE = 0.05


def side_loop_share(facts: Facts, pipeline: PipelineFacts, wait: InputWait) -> float | None:
    """For a pipeline the training steps do not read (a loop beside them: an evaluation
    written by hand, a test set gathered once after fit, a few images plotted), the
    share of the run its loop spent waiting for it, in all: what a faster pipeline can
    save there. Its own share (``wait.fraction``) is of its own loop, which may be a
    pass of a fraction of a second. None for the steps' own pipeline, or where no steps
    or no pipeline of theirs were found (the pipeline's loop is then the run's).

    The run is the program's time, at least the steps' (a record without it: the
    steps'): a side loop's 62 ms against 40 short steps of fit (0.36 s in all) was 17 %
    of them, in a 4.4 s program."""
    steps = facts.steps
    if steps is None:
        return None
    feeding = derived(facts).steps_pipeline
    if feeding is None or feeding is pipeline:
        return None
    run_s = max(steps.total_s, facts.program.seconds if facts.program is not None else 0.0)
    if run_s <= 0:
        return None
    return (wait.per_element_s or 0.0) * pipeline.elements / run_s
