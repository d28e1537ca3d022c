"""A loop that makes a new iterator each epoch (derived/epoch_starts.py's
loop_epoch_starts): its reads timed one by one wait in each iterator's first read, which
the fix pays once with one repeated iterator for the run (fixes/epoch_start_code.py)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from gpuwhy.derived.epoch_starts import epoch_starts, filled_elements, shuffle_refill
from gpuwhy.facts import StepFacts
from gpuwhy.fixes.epoch_start_code import epoch_start_fix, refilled_shuffle
from tests import builders_tfdata as t


def loop_steps(epochs: int, per_epoch: int, first_wait: float, wait: float) -> StepFacts:
    """``epochs`` epochs of ``per_epoch`` 19 ms steps, each epoch's first read waiting
    ``first_wait`` and the others ``wait`` (tensorflow/docs' custom training walkthrough:
    201 epochs of 4 steps over make_csv_dataset, 18 ms then 0.4 ms)."""
    waits = [first_wait if i % per_epoch == 0 else wait for i in range(epochs * per_epoch)]
    starts = [0.02 * i for i in range(len(waits))]
    return StepFacts(
        source="tf-data",
        marker="next() on a tf.data iterator at train.py:119",
        count=len(waits),
        median_s=0.019,
        total_s=0.02 * len(waits),
        input_wait_fraction=sum(waits) / (0.02 * len(waits)),
        input_wait_median_s=wait,
        input_wait_source="next() timing",
        starts=tuple(starts),
        durations=tuple(0.019 for _ in waits),
        input_waits=tuple(waits),
    )


def loop_pipeline(iterators: int, cardinality: int | None = None):
    return replace(
        t.in_memory_pipeline(),
        iterators=iterators,
        consumer="python-loop",
        cardinality=cardinality,
    )


def test_a_loop_whose_wait_is_each_new_iterator_s_first_read_is_epoch_starts():
    starts = epoch_starts(loop_steps(201, 4, 0.018, 0.0004), loop_pipeline(201))
    assert starts is not None
    assert starts.epochs == 201 and starts.steps_per_epoch == 4 and starts.over == "wait"
    assert abs(starts.excess_s - 0.0176) < 1e-6 and starts.share > 0.9
    assert "17.6 ms over the median wait in 201 epochs of 4 steps" in starts.text


def test_a_loop_whose_every_read_waits_is_not_epoch_starts():
    assert epoch_starts(loop_steps(201, 4, 0.004, 0.004), loop_pipeline(201)) is None
    # one iterator for the run: no epochs to tell apart
    assert epoch_starts(loop_steps(1, 800, 0.5, 0.0004), loop_pipeline(1)) is None
    # two reads an iterator: every read is some iterator's first or next to it
    assert epoch_starts(loop_steps(400, 2, 0.018, 0.0004), loop_pipeline(400)) is None
    # without the pipeline the iterators are not known
    assert epoch_starts(loop_steps(201, 4, 0.018, 0.0004)) is None


def test_the_loop_s_fix_is_one_repeated_iterator_taken_a_epoch_at_a_time(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(
        "for epoch in range(201):\n  for x, y in train_dataset:\n    train_step(x, y)\n"
    )
    starts = epoch_starts(loop_steps(201, 4, 0.018, 0.0004), loop_pipeline(201))
    assert starts is not None
    fix = epoch_start_fix(starts, loop_pipeline(201), f"{script}:2")
    assert fix[-5:] == [
        "import itertools",
        "train_dataset_batches = iter(train_dataset.repeat())   # before the epochs' loop at line 1",
        "# 4: the batches each epoch read on this run (TF does not know the size)",
        f"# {script}:2: in place of: for x, y in train_dataset:",
        "  for x, y in itertools.islice(train_dataset_batches, 4):",
    ]
    # the dataset's own batches a pass, where TF knows them, not the reads counted
    known = epoch_start_fix(starts, loop_pipeline(201, cardinality=5), f"{script}:2")
    assert known[-1] == "  for x, y in itertools.islice(train_dataset_batches, 5):"


def test_the_loop_s_fix_pasted_reads_every_epoch_s_batches_from_one_iterator(tmp_path):
    """The fix's own lines pasted into a real loop over a tf.data dataset of 4 batches a
    pass (the setup before the epochs' loop, the for line in place of the loop's): 3
    epochs read the same 12 batches the loop read with an iterator an epoch."""
    import pytest

    tf = pytest.importorskip("tensorflow")
    script = tmp_path / "train.py"
    loop = "for epoch in range(3):\n    for (x, y) in train_dataset:  # each epoch\n"
    body = "        seen.append(int(x[0]))\n"
    script.write_text(loop + body)
    starts = epoch_starts(loop_steps(3, 4, 0.018, 0.0004), loop_pipeline(3))
    assert starts is not None
    fix = epoch_start_fix(starts, loop_pipeline(3, cardinality=4), f"{script}:2")
    setup, replaced = fix[-4:-2], fix[-1]
    assert fix[-2] == f"# {script}:2: in place of: for x, y in train_dataset:"
    pasted = "\n".join([*setup, loop.splitlines()[0], replaced]) + "\n" + body

    def read(code: str) -> list[int]:
        scope = {"train_dataset": tf.data.Dataset.range(8).map(lambda v: (v, -v)).batch(2)}
        scope["seen"] = []
        exec(compile(code, "train.py", "exec"), scope)  # the program, as written or pasted
        return scope["seen"]

    assert read(pasted) == read(script.read_text()) == [0, 2, 4, 6] * 3


def test_a_loop_the_rewrite_would_change_is_told_the_fix_in_words(tmp_path):
    script = tmp_path / "train.py"
    starts = epoch_starts(loop_steps(201, 4, 0.018, 0.0004), loop_pipeline(201))
    assert starts is not None
    # over zip(...) (no dataset by its form), or one that breaks out of a pass (the next
    # epoch would go on where it stopped): said in words, nothing to paste wrongly
    for loop in ("for i, b in zip(ds, ds):\n    pass", "for b in ds:\n    if b:\n      break"):
        script.write_text(f"for epoch in range(2):\n  {loop}\n")
        words = epoch_start_fix(starts, loop_pipeline(201), f"{script}:2")
        assert all(line.startswith("#") for line in words), words
    # enumerate(ds) is written, the dataset read inside it
    script.write_text("for epoch in range(2):\n  for i, b in enumerate(ds):\n    pass\n")
    code = epoch_start_fix(starts, loop_pipeline(201), f"{script}:2")
    assert code[-1] == "  for i, b in enumerate(itertools.islice(ds_batches, 4)):"


def test_a_shuffle_the_repeat_comes_after_is_said_to_refill_at_every_pass(tmp_path):
    """``from_generator(...).shuffle(6000).batch(32)`` read through ``ds.repeat()``: the
    repeat makes a new shuffle iterator each pass, whose buffer refills all the same
    (a new user's trial of TF's CVAE tutorial read "a shuffle then fills once"); a
    repeat written before the shuffle is what fills it once."""
    script = tmp_path / "train.py"
    script.write_text("for epoch in range(4):\n  for x in train_dataset:\n    step(x)\n")
    starts = epoch_starts(loop_steps(4, 188, 0.8, 0.0005), loop_pipeline(4))
    assert starts is not None
    source, *rest = loop_pipeline(4).stages
    shuffled = (source, t.shuffle(buffer_size=6000, written_calls=("ds.shuffle(train_size)",)))
    # 4 passes of 188 batches of 32: 6,016 elements a pass, more than the buffer
    pipeline = replace(loop_pipeline(4), stages=shuffled + tuple(rest), elements=4 * 188)
    fix = "\n".join(epoch_start_fix(starts, pipeline, f"{script}:2"))
    assert "fills once" not in fix.replace("fills it once", "")
    assert "still refills its buffer (6,000 elements) at every pass" in fix
    assert "(.repeat().shuffle(train_size)) fills it once for the run" in fix


def test_a_buffer_larger_than_the_pass_fills_with_the_pass_and_the_last_shuffle_is_named(
    tmp_path,
):
    """A review's text classifier: shuffle(10000) over 3,000 texts fills with 3,000 (the
    fix said 10,000 elements); an image pipeline that shuffles its file names, decodes
    them and shuffles the images fills the second buffer through the decode (the fix
    named the file names' shuffle, milliseconds, beside half a second of images)."""
    starts = epoch_starts(loop_steps(4, 188, 0.8, 0.0005), loop_pipeline(4))
    assert starts is not None
    source, *rest = loop_pipeline(4).stages
    names = t.shuffle(buffer_size=900, written_calls=("list_ds.shuffle(image_count)",))
    images = t.shuffle(buffer_size=10000, written_calls=("train_ds.shuffle(buffer_size=10000)",))
    pipeline = replace(
        loop_pipeline(4), stages=(source, names, images, *rest), elements=4 * 94
    )  # 94 batches of 32 a pass: 3,008 elements
    assert refilled_shuffle(pipeline) is images
    assert filled_elements(pipeline, images) == 3008
    fix = "\n".join(epoch_start_fix(starts, pipeline, f"{tmp_path}/train.py:2"))
    assert "its 3,008 elements (the whole pass; a buffer of 10,000)" in fix
    assert "train_ds.shuffle(buffer_size=10000)" in fix and "list_ds" not in fix


def refilling_pipeline(iterators: int):
    """A loop's TFRecord reader and a parallel decode under ``shuffle(1000)``, batched by
    32 (a new user's trial: JPEG records read for 3 epochs of 50 steps)."""
    reader = t.tfrecord(root_elements_per_s=9600.0)
    decode = t.parse(root_elements_per_s=1200.0, parallelism=2)
    shuffle = t.shuffle(buffer_size=1000, written_calls=("dataset.shuffle(1000, seed=7)",))
    stages = (reader, decode, shuffle, t.batch(elements=150), t.prefetch(elements=150))
    return replace(
        t.pipeline(*stages, bottleneck=1),
        iterators=iterators,
        consumer="python-loop",
        cardinality=None,
        elements=150,
    )


def test_a_refilled_shuffle_is_estimated_from_the_slowest_stage_under_it():
    pipeline = refilling_pipeline(3)
    refill = shuffle_refill(pipeline, pipeline.stages[2])
    assert refill is not None and refill.slowest is pipeline.stages[1]
    # 1,000 elements at 1,200 batches of 32 a second
    assert refill.seconds == pytest.approx(1000 / (1200 * 32))
    # a stage under it of unknown rate: no estimate (part of the stages would be too short)
    unknown = replace(pipeline.stages[0], root_elements_per_s=None)
    blind = replace(pipeline, stages=(unknown, *pipeline.stages[1:]))
    assert shuffle_refill(blind, blind.stages[2]) is None
    assert shuffle_refill(pipeline, pipeline.stages[3]) is None  # no buffer: not a shuffle


def test_the_one_iterator_fix_promises_the_wait_less_the_shuffle_s_refill(tmp_path):
    """One iterator for the run, ``iter(dataset.repeat())``, starts once, but the shuffle
    the repeat comes after still refills its buffer at every pass: a new user pasted it
    and the wait went from 27 % to 21 %, the epochs' first reads still 33-43 ms, where the
    gain read "up to 27 %, 56.3 ms each". The gain is the wait less the refill, which is
    said to stay until a .repeat() goes before the shuffle."""
    from gpuwhy.rules.input.bound import InputBound

    script = tmp_path / "train.py"
    script.write_text("for epoch in range(3):\n  for x, y in dataset:\n    train_step(x, y)\n")
    steps = replace(
        loop_steps(3, 50, 0.06, 0.0004), marker=f"next() on a tf.data iterator at {script}:2"
    )
    pipeline = refilling_pipeline(3)
    (finding,) = InputBound().check(t.facts(pipeline, steps=steps), dict(InputBound.options))
    assert "each epoch's first step" in finding.title
    refill = 1000 / (1200 * 32)
    excess = 0.06 - 0.0004
    assert finding.estimated_gain.startswith(
        f"up to {steps.input_wait_fraction * (1 - refill / excess):.0%} of step time with "
        "the code below, paid once an epoch: 33.6 ms of its 59.6 ms; about 26.0 ms of it is "
        "the shuffle's refill (1,000 elements at the rate of ParallelMapV2(parse at "
        "train.py:41)), which stays until a .repeat() goes before the shuffle"
    )
    assert "still refills its buffer (1,000 elements, about 26.0 ms at the rate of" in finding.fix
    # no shuffle: the whole wait, as before
    plain = replace(pipeline, stages=(*pipeline.stages[:2], *pipeline.stages[3:]))
    (whole,) = InputBound().check(t.facts(plain, steps=steps), dict(InputBound.options))
    assert whole.estimated_gain.endswith("paid once an epoch: 59.6 ms each")
    # the gain kept for ranking is the whole wait's, less the refill's part
    assert whole.gain_value is not None and finding.gain_value is not None
    assert finding.gain_value == pytest.approx(whole.gain_value * (1 - refill / excess), abs=2e-4)
    # only prefetches under the shuffle: no stage to time the refill by
    bare = replace(pipeline, stages=(t.prefetch(), *pipeline.stages[2:]))
    assert shuffle_refill(bare, bare.stages[1]) is None
