"""steps.periodic-stall from small hand-built stalls facts."""

from __future__ import annotations

from dataclasses import replace

from gpuwhy.facts import Facts, LoopStalls, Stall, StallBeat, StallCause, StallFacts
from gpuwhy.rules import run_rules
from gpuwhy.rules.steps.periodic_stall import PeriodicStall
from tests import builders_tfdata as t

CHECKPOINT = StallCause(
    kind="checkpoint", seconds=16.2, share=0.97, location="train.py:57",
    detail="tf.train.Checkpoint.write", code='ckpt.write(f"{out}/ckpt")',
)  # fmt: skip


def run(facts, **options):
    return PeriodicStall().check(facts, {**PeriodicStall.options, **options})


def beat(**changes) -> StallBeat:
    base = dict(
        kind="checkpoint", count=9, stall_s=16.2, lost_s=16.2, lost_share=0.09,
        typical_stall_s=1.8, every_steps=200, period_fit=1.0, every_s=21.8,
    )  # fmt: skip
    return StallBeat(**{**base, **changes})


def stalls(causes=(CHECKPOINT,), **changes) -> LoopStalls:
    """9 checkpoint stalls of 1.8 s every 200 steps of a 0.1 s loop: 9 % of its time."""
    kind = causes[0].kind if causes else None
    base = dict(
        source="tf-data", name="train.py:40", between_steps=False, count=9, loop_steps=1800,
        loop_s=180.0, typical_step_s=0.1, stall_s=16.2, lost_s=16.2, lost_share=0.09,
        beats=(beat(kind=kind, **changes.pop("beat", {})),), causes=causes,
        first=(Stall(step=199, start_s=21.0, seconds=1.8),),
    )  # fmt: skip
    return LoopStalls(**{**base, **changes})


def facts(*loops: LoopStalls) -> Facts:
    return Facts(stalls=StallFacts(loops=loops))


def test_regular_checkpoint_stalls_are_named_with_period_place_and_a_pasteable_fix():
    (finding,) = run(facts(stalls()))
    assert finding.title == (
        "Every 200 steps training stalls for 1.8 s (a checkpoint write "
        "(tf.train.Checkpoint.write) at train.py:57): 9% of the loop's time"
    )
    assert finding.severity == "medium" and finding.location == "train.py:57"
    assert 'ckpt.write(f"{out}/ckpt", options=options)' in finding.fix
    assert "tf.train.CheckpointOptions(enable_async=True)" in finding.fix
    assert "every 2000 steps" in finding.fix
    assert finding.evidence["every_steps"] == 200 and finding.gain_value == 0.09


def test_a_checkpoint_that_covered_a_small_part_of_the_stalls_is_said_as_a_part():
    small = replace(CHECKPOINT, seconds=3.2, share=0.2)
    (finding,) = run(facts(stalls(causes=(small,))))
    assert finding.title == (
        "Every 200 steps training stalls for 1.8 s (a checkpoint write "
        "(tf.train.Checkpoint.write) at train.py:57, 20% of their time; nothing timed in "
        "the rest): 9% of the loop's time"
    )


def test_a_handful_of_stalls_or_a_small_loss_is_no_finding():
    assert run(facts(stalls(beat=dict(count=2)))) == []
    assert run(facts(stalls(beat=dict(lost_share=0.005)))) == []
    # irregular: 40 % of the intervals fit; needs 5 % of the loop's time
    assert run(facts(stalls(beat=dict(period_fit=0.4, lost_share=0.03)))) == []
    (finding,) = run(facts(stalls(beat=dict(period_fit=0.4, lost_share=0.06))))
    assert finding.title.startswith("Training stalled 9 times for 1.8 s each")
    # every 60 s, whatever the steps did
    every_minute = dict(period_fit=0.4, lost_share=0.03, regular_in_time=True, every_s=60.0)
    (finding,) = run(facts(stalls(beat=every_minute)))
    assert finding.title.startswith("Every 60.0 s training stalls for 1.8 s")


def test_severity_follows_the_share_of_time_lost():
    assert run(facts(stalls(beat=dict(lost_share=0.25))))[0].severity == "high"
    assert run(facts(stalls(beat=dict(lost_share=0.02))))[0].severity == "low"


def test_time_between_steps_counts_the_named_activity_and_fit_s_validation_needs_more():
    validation = StallCause(kind="evaluate", seconds=48.0, share=0.9, location="train.py:80",
                            detail="fit's validation")  # fmt: skip
    between = stalls(between_steps=True, causes=(validation,), beat=dict(stall_s=54.0))
    assert run(facts(between)) == []  # 27 % of the time validating: the program's choice
    longer = replace(validation, seconds=108.0)
    (finding,) = run(facts(stalls(between_steps=True, causes=(longer,),
                                  beat=dict(stall_s=120.0))))  # fmt: skip
    assert "fit's validation at train.py:80" in finding.title
    assert finding.title.endswith("60% of the loop's time")  # 108 s of 180 s
    assert "validation_freq=5" in finding.fix
    assert run(facts(stalls(between_steps=True, causes=(), beat=dict(stall_s=90.0)))) == []
    # an epoch's end: 5 s between steps, 2 s of it a checkpoint (the rest the loop's own)
    at_epoch_end = replace(CHECKPOINT, share=0.4, seconds=18.0)
    epoch_ends = stalls(between_steps=True, causes=(at_epoch_end,), beat=dict(stall_s=45.0),
                        source="keras-fit", name="Model.fit at train.py:90")  # fmt: skip
    (finding,) = run(facts(epoch_ends))
    assert finding.title.startswith("Every 200 steps training stalls between steps for 2.0 s")
    assert finding.title.endswith("10% of the loop's time")
    custom_loop = replace(epoch_ends, source="tf-function", name="train_step (train.py:12)")
    (finding,) = run(facts(custom_loop))  # its step was cut at its call's end
    assert finding.title.startswith("Every 200 steps training stalls for 2.0 s")
    smaller = replace(at_epoch_end, seconds=16.2)  # 9 %: below between_share
    assert run(facts(replace(epoch_ends, causes=(smaller,)))) == []


def test_stalls_with_nothing_timed_in_them_need_a_regular_beat_and_a_large_share():
    assert run(facts(stalls(causes=(), beat=dict(lost_share=0.03)))) == []
    assert run(facts(stalls(causes=(), beat=dict(period_fit=0.3, lost_share=0.2)))) == []
    (finding,) = run(facts(stalls(causes=(), beat=dict(lost_share=0.06))))
    assert finding.title.startswith("Every 200 steps training stalls for 1.8 s")
    assert "nothing gpuwhy times ran in them" in finding.title


def test_slow_steps_in_a_row_with_nothing_timed_in_them_are_no_beat():
    """A loaded host stretched steps in runs (a growing heap's GC-set-off test, in a
    full suite beside other work): "Every 1 steps training stalls for 21.7 ms (nothing
    gpuwhy times ran in them)" beside the GC's own finding."""
    every_step = dict(every_steps=1, period_fit=0.9, lost_share=0.19, typical_stall_s=0.0217)
    assert run(facts(stalls(causes=(), beat=every_step))) == []
    (finding,) = run(facts(stalls(causes=(), beat={**every_step, "every_steps": 2})))
    assert finding.title.startswith("Every 2 steps training stalls")


def test_fit_s_steps_that_wait_for_input_on_a_beat_are_the_input_s():
    """A PyDataset whose two workers each make a batch in 10 ms feeds 2 ms steps: every
    second step waits 8 ms, a beat with nothing timed in it. Fit's measured wait covers
    it: input.bound's, not a stall of the program's own Python."""
    beat = dict(count=48, stall_s=0.43, lost_s=0.33, lost_share=0.32, every_steps=2)
    loop = stalls(causes=(), source="keras-fit", beat=beat)
    waits = t.fit_steps(0.72, total_s=0.6, input_wait_source="generator timing")
    assert run(Facts(steps=waits, stalls=StallFacts(loops=(loop,)))) == []
    # a wait that covers a small part of the beat's time leaves the beat the program's
    less = replace(waits, input_wait_fraction=0.2)
    (finding,) = run(Facts(steps=less, stalls=StallFacts(loops=(loop,))))
    assert "nothing gpuwhy times ran in them" in finding.title
    # a wait timed read by read (a loop's next()) does not stand for the beat's steps
    timed = t.loop_steps(0.72, total_s=0.6)
    tf_data_loop = replace(loop, source="tf-data")
    assert run(Facts(steps=timed, stalls=StallFacts(loops=(tf_data_loop,))))


def test_a_checkpoint_beat_keeps_its_period_beside_other_stalls():
    noise = beat(kind=None, count=40, lost_share=0.02, every_steps=3, period_fit=0.2)
    loop = replace(stalls(), count=49, beats=(beat(), noise))
    (finding,) = run(facts(loop))
    assert finding.title.startswith("Every 200 steps training stalls for 1.8 s (a checkpoint")
    assert finding.evidence["stalls"] == 9 and finding.evidence["stalls_in_the_loop"] == 49


def test_each_cause_has_its_own_fix():
    gc = StallCause(kind="gc", seconds=5.0, share=0.9, location="train.py:12",
                    detail="generation 2", code="batch = make_batch(i)")  # fmt: skip
    (finding,) = run(facts(stalls(causes=(gc,))))
    assert "Python's garbage collector (generation 2) triggered at train.py:12" in finding.title
    assert "gc.freeze()" in finding.fix and "gc.set_threshold" in finding.fix
    explicit = replace(gc, code="gc.collect()")
    assert "drop it from the loop" in run(facts(stalls(causes=(explicit,))))[0].fix
    summary = StallCause(kind="summary", seconds=5.0, share=0.9, detail="tf.summary writer flush")
    assert "flush_millis" in run(facts(stalls(causes=(summary,))))[0].fix
    keras = replace(CHECKPOINT, detail="keras.callbacks.ModelCheckpoint(save_freq=200)")
    assert "save_freq=2000, save_weights_only=True" in run(facts(stalls(causes=(keras,))))[0].fix
    predict = StallCause(kind="evaluate", seconds=5.0, share=0.9, detail="Model.predict",
                         code="preds = model.predict(x_val)")  # fmt: skip
    assert run(facts(stalls(causes=(predict,))))[0].fix.endswith(
        "\npreds = model.predict_on_batch(x_val)"
    )
    trace = StallCause(kind="trace", seconds=5.0, share=0.9, location="train.py:30")
    assert run(facts(stalls(causes=(trace,)))) == []  # launch.retracing's
    (unknown,) = run(facts(stalls(causes=())))
    assert "nothing gpuwhy times ran in them" in unknown.title and unknown.location is None


def test_registered_and_run_on_the_stalls_section():
    findings, not_checked = run_rules(facts(stalls()))
    assert [f.id for f in findings] == ["steps.periodic-stall"]
    assert run_rules(Facts())[1]["steps.periodic-stall"] == "needs stalls"
    assert "steps.periodic-stall" not in not_checked


VALIDATION_PROGRAM = """import tensorflow as tf

for epoch in range(5):
    for features, labels in train:
        loss = train_step(features, labels)
    for features, labels in val:
        logits = model(features, training=False)
        val_accuracy.update_state(labels, logits)
    print(float(val_accuracy.result()))
"""


def _validation_loop(tmp_path, body_calls: str | None = None):
    """Facts of a loop whose stalls between steps a loop over another dataset (the
    validation pass at line 6 of a real file) filled: 108 s of a 180 s loop."""
    from gpuwhy.facts import TracedFunction, TracingFacts
    from gpuwhy.source_calls import loop_code

    source = VALIDATION_PROGRAM
    if body_calls:
        source = source.replace("logits = model(features, training=False)", body_calls)
    path = tmp_path / "train.py"
    path.write_text(source)
    cause = StallCause(
        kind="loop", seconds=108.0, share=0.9, location=f"{path}:6",
        detail="a loop over another tf.data dataset", code="for features, labels in val:",
        step_code=loop_code(str(path), str(path), 6),
    )  # fmt: skip
    loop = stalls(between_steps=True, causes=(cause,), beat=dict(stall_s=120.0))
    tracing = TracingFacts(
        functions=(TracedFunction("train_step", calls=900), TracedFunction("eval_step", calls=9))
    )
    return Facts(stalls=StallFacts(loops=(loop,)), tracing=tracing)


def test_an_eager_validation_loop_between_epochs_is_named_with_its_body_traced(tmp_path):
    (finding,) = run(_validation_loop(tmp_path))
    assert "a loop over another tf.data dataset at" in finding.title
    assert finding.title.endswith(":6): 60% of the loop's time")
    assert finding.severity == "high" and finding.location.endswith("train.py:6")
    lines = finding.fix.splitlines()
    start = lines.index("def eval_step(features, labels):")
    assert lines[start - 1] == "@tf.function"
    assert lines[start + 1 : start + 3] == [
        "    logits = model(features, training=False)",
        "    val_accuracy.update_state(labels, logits)",
    ]
    assert "# and the loop's body becomes: eval_step(features, labels)" in lines
    # a sample changes the metric: said as an option, never pasted with the fix
    assert "#   for features, labels in val.take(50):)" in lines
    assert not any(line.startswith("for ") for line in lines)


def test_a_validation_loop_that_calls_a_tf_function_is_the_program_s_choice(tmp_path):
    """Its batches run as a graph already: as fit's validation, named only when it
    takes half the loop, and then to run it less often."""
    facts_ = _validation_loop(tmp_path, "logits = eval_step(features)")
    (finding,) = run(facts_)  # 60 %: above validation_share
    assert "runs as a traced function already" in finding.fix
    assert "@tf.function" not in finding.fix
    cause = facts_.stalls.loops[0].causes[0]
    smaller = replace(cause, seconds=54.0)  # 30 % of the loop
    loop = replace(facts_.stalls.loops[0], causes=(smaller,))
    assert run(replace(facts_, stalls=StallFacts(loops=(loop,)))) == []


def test_a_loop_of_sample_images_is_the_program_s_choice(tmp_path):
    """A loop whose body calls the program's plotting function (``.numpy()`` in it)
    cannot run as a graph: no traced body, named only when it takes half the loop."""
    helper = (
        "def generate_and_save_images(model, x):\n"
        "    image = model(x, training=False)\n"
        "    _ = image.numpy()\n\n"
    )
    facts_ = _validation_loop(tmp_path, "generate_and_save_images(model, features)")
    path = tmp_path / "train.py"
    path.write_text(helper + path.read_text())
    from gpuwhy.source_calls import loop_code

    assert loop_code(str(path), str(path), 10) is None
    assert loop_code(str(path), str(path), 8) is not None  # the training loop's body
    cause = replace(facts_.stalls.loops[0].causes[0], step_code=None)
    loop = replace(facts_.stalls.loops[0], causes=(cause,))
    (finding,) = run(replace(facts_, stalls=StallFacts(loops=(loop,))))  # 60 %
    assert "reads tensors' values into Python or draws" in finding.fix
    smaller = replace(loop, causes=(replace(cause, seconds=54.0),))
    assert run(replace(facts_, stalls=StallFacts(loops=(smaller,)))) == []


def test_epoch_ends_that_overlap_an_iterator_s_teardown_stay_no_finding():
    """The teardown of each epoch's iterator is timed (the Stalls line names it); epoch
    ends between steps that it dominates were stalls with nothing timed in them before,
    which this rule never reported: still none, however large."""
    teardown = StallCause(kind="teardown", seconds=40.0, share=0.9, location="train.py:60",
                          detail="the end of a tf.data iterator (TF stopping its pipeline's threads)")  # fmt: skip
    ends = stalls(between_steps=True, causes=(teardown,), beat=dict(stall_s=45.0, lost_share=0.25))
    assert run(facts(ends)) == []
    assert run(facts(replace(ends, between_steps=False))) == []


def test_a_callback_s_predict_is_fixed_on_its_own_line_in_its_own_names():
    """A callback's ``preds = self.model.predict(self.probe, verbose=0)`` at each batch's
    end: the fix was "outputs = model(x, training=False)", and pasted it raised NameError
    (no x there) and gave a Tensor where the next line read ``preds.mean()``. Now its own
    line, in the one-batch form that returns NumPy as predict() does."""
    predict = StallCause(
        kind="evaluate", seconds=5.0, share=0.9, location="cb.py:31", detail="Model.predict",
        code="        preds = self.model.predict(self.probe, verbose=0)",
    )  # fmt: skip
    (finding,) = run(facts(stalls(causes=(predict,))))
    assert finding.fix.splitlines()[0].startswith("# cb.py:31: predict() builds a dataset")
    assert finding.fix.splitlines()[-1] == "preds = self.model.predict_on_batch(self.probe)"
    assert " x" not in finding.fix.replace("x_val", "")
