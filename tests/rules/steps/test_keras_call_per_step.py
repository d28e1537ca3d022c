"""steps.keras-call-per-step from small hand-built timelines: a predict() or evaluate() a
step is named at its line with its one-batch form in the program's names; an evaluation
now and then, fit's validation, a handful of steps or a cheap call are not."""

from __future__ import annotations

from dataclasses import replace

import pytest

from gpuwhy.facts import (
    Activity,
    Facts,
    RunTimeline,
    RunWindow,
    StallFacts,
    StepFacts,
    StepLoop,
    StepSpan,
    StepTimeline,
)
from gpuwhy.rules.steps.keras_call_per_step import KerasCallPerStep, one_batch_call

STEP_S = 0.2  # each step 0.2 s: 5 a window


def facts(
    calls_per_window=5,
    call_s=0.1,
    windows=10,
    detail="Model.predict",
    code=None,
    step=STEP_S,
    per_window=5,
):
    """A loop of one-second windows of 5 steps of ``step`` seconds; each window holds
    ``calls_per_window`` Keras calls of ``call_s`` seconds each."""
    spans, rows = [], []
    for i in range(windows):
        spans.append(
            StepSpan(
                start_s=float(i),
                steps=per_window,
                p50_s=step,
                p90_s=step,
                max_s=step,
                step_s=per_window * step,
            )
        )
        rows.append(
            RunWindow(
                start_s=float(i),
                steps=per_window,
                keras_calls=calls_per_window,
                keras_call_s=calls_per_window * call_s,
            )
        )
    count = windows * per_window
    steps = StepFacts(
        source="tf-function",
        marker="calls of one_step_on_data",
        count=count,
        run_s=float(windows),
        loops=(StepLoop("tf-function", "one_step_on_data", count, 0.0, last_s=windows - 0.2),),
        timeline=StepTimeline(width_s=1.0, windows=tuple(spans)),
    )
    activity = Activity(
        kind="evaluate",
        count=calls_per_window * windows,
        seconds=calls_per_window * windows * call_s,
        max_s=call_s,
        location="gan.py:103",
        detail=detail,
        code=code or "generated_images = generator.predict(random_latent_vectors, verbose=0)",
    )
    return Facts(
        steps=steps,
        timeline=RunTimeline(width_s=1.0, run_s=float(windows), windows=tuple(rows)),
        stalls=StallFacts(activities=(activity,)),
    )


def check(f):
    return KerasCallPerStep().check(f, dict(KerasCallPerStep.options))


def test_a_predict_each_step_is_named_at_its_line_with_its_one_batch_form():
    (finding,) = check(facts())
    assert finding.severity == "high"  # half of each step
    assert finding.location == "gan.py:103"
    assert "generator.predict() every step" in finding.title
    assert "100.0 ms a call, 50% of a 200.0 ms step" in finding.title
    assert finding.evidence["calls_per_step"] == 1.0
    # the program's own line, its loop-only argument dropped
    assert "generated_images = generator.predict_on_batch(random_latent_vectors)" in finding.fix
    assert "verbose" not in finding.fix.splitlines()[2]
    assert "generator(..., training=False)" in finding.fix


def test_an_evaluate_each_step_becomes_test_on_batch_and_a_smaller_share_is_medium():
    f = facts(call_s=0.03, detail="Model.evaluate", code="scores = model.evaluate(x, y, verbose=0)")
    (finding,) = check(f)
    assert finding.severity == "medium"  # 15 % of the step
    assert "scores = model.test_on_batch(x, y)" in finding.fix


@pytest.mark.parametrize(
    "changes",
    [
        {"calls_per_window": 1},  # one call in five steps: an evaluation now and then
        {"call_s": 0.01},  # 5 % of the step
        {"windows": 3},  # 15 steps: too few to judge
    ],
)
def test_no_finding_from_occasional_or_cheap_calls_or_a_handful_of_steps(changes):
    assert check(facts(**changes)) == []


def test_an_unreadable_line_still_gets_the_one_batch_forms():
    (finding,) = check(facts(code="fake = run(generator.predict, z)"))
    assert "Model.predict()" in finding.title
    assert "model.predict_on_batch(x)" in finding.fix


@pytest.mark.parametrize(
    ("code", "expected"),
    [
        ("y = m.predict(x)", "m.predict_on_batch(x)"),
        ("y = self.model.predict(x, batch_size=32, verbose=0)", "self.model.predict_on_batch(x)"),
        (
            "r = m.evaluate(x, y, sample_weight=w, verbose=0)",
            "m.test_on_batch(x, y, sample_weight=w)",
        ),
        ("r = m.evaluate(x, y, return_dict=True)", "m.test_on_batch(x, y, return_dict=True)"),
        ("m.fit(s, t, epochs=1, verbose=0)", "m.train_on_batch(s, t)"),
        ("m.fit(x=s, y=t, verbose=0)", "m.train_on_batch(x=s, y=t)"),
        ("m.fit(s, t, epochs=5, verbose=0)", None),  # five updates: no one-batch call
        ("m.fit(s, t, 32, 1)", None),  # batch_size and epochs by position: left alone
        ("y = m.predict()", None),  # no batch given
        ("y = m.call(x)", None),
        ("not python (", None),
    ],
)
def test_the_one_batch_form_keeps_the_program_s_names(code, expected):
    found = one_batch_call(code)
    assert (found[1] if found else None) == expected


def between_facts(**changes):
    """A step of 0.2 s and a predict() of 0.6 s after it, one of each a window: 0.8 s of
    the loop's work in each second (a window holds no more than the loop ran through)."""
    return facts(call_s=0.6, per_window=1, calls_per_window=1, windows=25, **changes)


def test_a_callback_s_predict_between_fit_s_steps_is_a_share_of_the_loop_s_time():
    """fit's steps leave out what its callbacks run between them: a predict() at each
    batch's end takes longer than the steps themselves, and its share is of the windows
    the loop ran through."""
    (finding,) = check(between_facts(code="self.last = self.model.predict(x_val, verbose=0)"))
    assert finding.evidence["between_steps"] is True
    assert "600.0 ms a call, between steps of 200.0 ms: 60% of the loop's time" in finding.title
    assert "self.last = self.model.predict_on_batch(x_val)" in finding.fix


def test_between_steps_the_share_is_of_the_windows_the_loop_ran_through():
    """A DQN's loop of one-batch fits: 5 ms steps, two 80 ms predicts between each, and
    fit's own set-up besides: the share is of the loop's wall time, not of the steps and
    the calls alone."""
    (finding,) = check(facts(calls_per_window=10, call_s=0.08, step=0.005))
    assert finding.evidence["between_steps"] is True
    assert "2.0 times a step: 80.0 ms a call, between steps of 5.0 ms: 80% of the loop's time" in (
        finding.title
    )


def test_periodic_stall_leaves_a_predict_every_step_to_this_rule():
    from gpuwhy.facts import LoopStalls, StallBeat, StallCause
    from gpuwhy.rules.steps.periodic_stall import PeriodicStall

    beat = StallBeat("evaluate", 50, 30.0, 29.0, 0.75, 0.6, every_steps=1, period_fit=1.0)
    cause = StallCause("evaluate", 30.0, 1.0, "gan.py:103", "Model.predict")
    loop = LoopStalls(
        "keras-fit", "Model.fit", True, 50, 50, 40.0, 0.2, 30.0, 29.0, 0.75, (beat,), (cause,)
    )
    f = between_facts()
    f = replace(f, stalls=replace(f.stalls, loops=(loop,)))
    assert [x.id for x in PeriodicStall().check(f, dict(PeriodicStall.options))] == []
    assert [x.id for x in check(f)] == ["steps.keras-call-per-step"]
    # a predict() every 10 steps is a stall's beat, this rule's no more
    slower = replace(
        f, stalls=replace(f.stalls, loops=(replace(loop, beats=(replace(beat, every_steps=10),)),))
    )
    assert [x.id for x in PeriodicStall().check(slower, dict(PeriodicStall.options))] == [
        "steps.periodic-stall"
    ]


def fit_facts(
    fit_s=0.08,
    fits_per_window=5,
    step=0.005,
    code="model.fit(state, target_f, epochs=1, verbose=0)",
):
    """The loop of one-batch fits of a DQN's replay: 5 fits a one-second window, each
    holding its one 5 ms step."""
    f = facts(calls_per_window=0, step=step)
    rows = tuple(
        replace(r, keras_fits=fits_per_window, keras_fit_s=fits_per_window * fit_s)
        for r in f.timeline.windows
    )
    fit = Activity(
        kind="fit", count=50, seconds=50 * fit_s, max_s=fit_s, location="dqn.py:27",
        detail="Model.fit", code=code,
    )  # fmt: skip
    return replace(
        f,
        timeline=replace(f.timeline, windows=rows),
        stalls=StallFacts(activities=(fit,)),
        steps=replace(f.steps, source="keras-fit", marker="Model.fit at dqn.py:27"),
    )


def test_a_fit_of_one_batch_every_step_becomes_train_on_batch():
    (finding,) = check(fit_facts())
    assert finding.severity == "high"
    assert finding.location == "dqn.py:27"
    # 75 ms of the 80 ms call around the 5 ms step, 5 a second: 37.5% of the loop's time
    assert finding.title == (
        "The loop calls model.fit() every step, one batch each: 80.0 ms a call, 75.0 ms of "
        "it around each 5.0 ms step: 37% of the loop's time"
    )
    assert "model.train_on_batch(state, target_f)" in finding.fix
    assert "not a History" in finding.fix


def test_fits_of_several_batches_are_their_own_loops():
    assert check(fit_facts(fits_per_window=1)) == []  # five steps a fit: fit's own batches


def test_windows_of_a_couple_of_slow_steps_each_are_read_too():
    """A GAN's 460 ms iterations, two a one-second window: no window has a median, all
    hold their steps and calls (a bounded run of 48 steps read no finding)."""
    (finding,) = check(facts(calls_per_window=2, call_s=0.2, windows=12, step=0.46, per_window=2))
    assert finding.evidence["steps"] == 24 and finding.evidence["calls_per_step"] == 1.0
    assert "43% of a 460.0 ms step" in finding.title


def grid_facts(calls=64, elements=64, seconds=4.5, run_s=15.0, kind_calls=65, steps=True):
    """keras-io's VAE: fit, then ``vae.decoder.predict(z_sample)`` for each point of an
    8x8 grid (64 calls, one batch each: each call's dataset read one element), and one
    predict over the whole data (188 batches) at another line."""
    from gpuwhy.facts import PipelineFacts, ProgramFacts, TfDataFacts

    grid = PipelineFacts(
        id=2, location="vae.py:128", consumer="keras-predict", iterators=calls, elements=elements
    )
    whole = PipelineFacts(
        id=3, location="vae.py:154", consumer="keras-predict", iterators=1, elements=188
    )
    activity = Activity(
        kind="evaluate",
        count=kind_calls,
        seconds=seconds,
        max_s=0.7,
        location="vae.py:128",
        detail="Model.predict",
        code="x_decoded = vae.decoder.predict(z_sample)",
    )
    fit = facts(calls_per_window=0) if steps else Facts()
    return replace(
        fit,
        stalls=StallFacts(activities=(activity,)),
        tfdata=TfDataFacts(pipelines=(grid, whole)),
        program=ProgramFacts(command=("vae.py",), ended="completed", seconds=run_s),
    )


def test_one_batch_predicts_after_training_are_named_with_their_one_batch_form():
    (found,) = KerasCallPerStep().check(grid_facts(), dict(KerasCallPerStep.options))
    assert found.severity == "high" and found.location == "vae.py:128"
    assert found.title.startswith(
        "The program calls vae.decoder.predict() 64 times on one batch each: "
    )
    assert "its 65 predict() calls took 4.5 s, 30% of the run" in found.title
    assert "x_decoded = vae.decoder.predict_on_batch(z_sample)" in (found.fix or "")
    # an inference script with no training loop at all: the same calls, the same finding
    (alone,) = KerasCallPerStep().check(grid_facts(steps=False), dict(KerasCallPerStep.options))
    assert alone.location == "vae.py:128"


@pytest.mark.parametrize(
    "changed",
    [
        {"elements": 640},  # each call predicts 10 batches: its own loop does work
        {"calls": 12, "elements": 12, "kind_calls": 12},  # a dozen calls
        {"seconds": 0.9},  # 6 % of the run
    ],
)
def test_predicts_of_several_batches_few_calls_or_little_time_are_not_one_batch_calls(changed):
    assert KerasCallPerStep().check(grid_facts(**changed), dict(KerasCallPerStep.options)) == []


def test_calls_after_the_loop_in_its_last_window_are_not_the_loop_s():
    """25 predict() calls after a short fit: 17 of them (1 s) began in the window of
    fit's last steps, which the loop ran 40 ms into. Counted as the loop's they read
    "The loop calls model.predict() every step ... of the loop's time" (one run of six:
    where the window's edge fell). Only what fits in the part of the window the loop ran
    through is its own, and one call running on past it; the same calls in a window the
    loop ran through to its end stay the loop's."""
    f = facts(calls_per_window=0, windows=3, per_window=11, step=0.001)
    rows = list(f.timeline.windows)
    rows[-1] = replace(rows[-1], keras_calls=17, keras_call_s=17 * 0.0576)
    f = replace(f, timeline=replace(f.timeline, windows=tuple(rows)))

    def ending_at(last_s):
        loop = replace(f.steps.loops[0], last_s=last_s)
        return replace(f, steps=replace(f.steps, loops=(loop,)))

    assert check(ending_at(2.04)) == []
    (finding,) = check(ending_at(2.999))
    assert finding.evidence["calls_per_step"] == pytest.approx(17 / 33, abs=0.01)


def test_a_callback_s_predict_under_steps_per_execution_is_one_a_step():
    """fit with steps_per_execution=8 calls a callback's on_train_batch_end once every 8
    batches: its predict() there read as one every 8 steps (0.125 a step, under the
    threshold), and only steps.periodic-stall spoke, of a third of what the calls took.
    A step is a call of the step function: one predict a step."""
    f = facts(calls_per_window=5, call_s=0.05, per_window=40, step=0.001, windows=30)
    f = replace(f, steps=replace(f.steps, steps_per_call=8))
    (finding,) = check(f)
    assert finding.evidence["calls_per_step"] == 1.0 and finding.evidence["steps"] == 150
    assert "every step (a step of 8 batches: steps_per_execution=8)" in finding.title
    assert check(replace(f, steps=replace(f.steps, steps_per_call=1))) == []
