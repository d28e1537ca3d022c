"""input.iterator-end-wait from small hand-built stalls facts, its fix written from a
real source file of the loop (or fit call) the stalls name."""

from __future__ import annotations

import ast
from dataclasses import replace
from pathlib import Path

from gpuwhy.facts import (
    Activity,
    Facts,
    LoopStalls,
    PipelineFacts,
    StallBeat,
    StallCause,
    StallFacts,
    TfDataFacts,
)
from gpuwhy.rules.input.iterator_end_wait import IteratorEndWait

LOOP_SOURCE = """import tensorflow as tf

train_ds = tf.data.Dataset.range(4096).batch(32)
for epoch in range(12):
    for x in train_ds:
        step(x)
"""
FIT_SOURCE = """import tensorflow as tf

train_ds = tf.data.Dataset.range(4096).batch(32)
model.fit(train_ds, epochs=12, validation_data=val_ds)
"""
TEARDOWN = "the end of a tf.data iterator (TF stopping its pipeline's threads)"


def run(facts: Facts, **options):
    return IteratorEndWait().check(facts, {**IteratorEndWait.options, **options})


def program(tmp_path: Path, text: str = LOOP_SOURCE) -> Path:
    path = tmp_path / "train.py"
    path.write_text(text)
    return path


def facts(
    where: str,
    seconds: float = 1.2,
    loop_s: float = 6.0,
    source: str = "tf-data",
    pipeline: PipelineFacts | None = None,
    host_busy: float | None = None,
    **loop_changes,
) -> Facts:
    """A loop of 6 s whose 11 epochs' ends took ``seconds`` between its steps."""
    cause = StallCause(
        kind="teardown", seconds=seconds, share=0.9, location=where, detail=TEARDOWN,
        code="for x in train_ds:",
    )  # fmt: skip
    beat = StallBeat(kind="teardown", count=9, stall_s=seconds, lost_s=seconds, lost_share=0.2)
    loop = LoopStalls(
        source=source, name=where, between_steps=True, count=11, loop_steps=1536,
        loop_s=loop_s, typical_step_s=0.002, stall_s=seconds, lost_s=seconds,
        lost_share=seconds / loop_s, beats=(beat,), causes=(cause,),
    )  # fmt: skip
    loop = replace(loop, **loop_changes)
    ends = Activity(kind="teardown", count=12, seconds=seconds + 0.01, max_s=0.29, location=where)
    if pipeline is None:
        consumer = "keras-fit" if source == "keras-fit" else "python-loop"
        pipeline = PipelineFacts(
            id=1, consumer=consumer, read_at=where if consumer == "python-loop" else None,
            iterators=12, elements=1536, cardinality=128,
        )  # fmt: skip
    return Facts(
        stalls=StallFacts(activities=(ends,), loops=(loop,)),
        tfdata=TfDataFacts(
            pipelines=(pipeline,),
            host_cpu_busy_fraction=host_busy,
            process_cpu_fraction=0.3 if host_busy is not None else None,
            host_cores=2,
        ),
    )


def epochs_loop_and(tmp_path: Path, added: str) -> tuple[Facts, LoopStalls, str, str]:
    """LOOP_SOURCE with ``added`` at its line 7, in the epochs' loop: the facts of its
    training loop's ends, that loop's stalls, the training loop's place and line 7's."""
    path = program(tmp_path, LOOP_SOURCE + added)
    train = f"{path}:5"
    base = facts(train)
    assert base.stalls is not None
    return base, base.stalls.loops[0], train, f"{path}:7"


def test_a_loop_that_waited_at_its_epochs_ends_gets_one_iterator_for_the_run(tmp_path):
    where = f"{program(tmp_path)}:5"
    (finding,) = run(facts(where, seconds=1.5))
    assert finding.title == (
        f"Training waited 1.50 s (25% of the loop at {where}) at the ends of its tf.data "
        "iterators, a new one each epoch (12 ended, the longest 290.0 ms): TF stopping the "
        "pipeline's threads"
    )
    assert finding.severity == "high" and finding.location == where
    assert finding.evidence["batches_per_pass"] == 128
    assert finding.evidence["loop_source"] == "tf-data"
    code = [line for line in finding.fix.splitlines() if not line.lstrip().startswith("#")]
    assert code == [
        "import itertools",
        "train_ds_batches = iter(train_ds.repeat())   # before the epochs' loop at line 4",
        "    for x in itertools.islice(train_ds_batches, 128):",
    ]
    ast.parse("\n".join(line.strip() + (" pass" if line.endswith(":") else "") for line in code))
    assert finding.gain_value == 0.25


def test_a_small_share_or_a_millisecond_teardown_is_no_finding(tmp_path):
    where = f"{program(tmp_path)}:5"
    assert run(facts(where, seconds=0.25)) == []  # 4 % of the loop
    assert run(facts(where, seconds=0.15, loop_s=1.0)) == []  # 15 %, but 150 ms in all
    (medium,) = run(facts(where, seconds=0.6))
    assert medium.severity == "medium"


def test_ends_within_steps_and_between_them_add_up_for_one_loop(tmp_path):
    where = f"{program(tmp_path)}:5"
    between = facts(where, seconds=0.2)
    stalls = between.stalls
    assert stalls is not None
    inside = replace(stalls.loops[0], between_steps=False)
    doubled = replace(between, stalls=replace(stalls, loops=(stalls.loops[0], inside)))
    assert run(between) == []
    (finding,) = run(doubled)
    assert finding.evidence["waited_s"] == 0.4


def test_a_pass_of_unknown_size_is_counted_from_the_run_and_said_so(tmp_path):
    where = f"{program(tmp_path)}:5"
    unknown = PipelineFacts(
        id=1, consumer="python-loop", read_at=where, iterators=12, elements=1536
    )
    (finding,) = run(facts(where, pipeline=unknown))
    assert "# 128: the batches each epoch read on this run (TF does not know the size)" in (
        finding.fix
    )
    cut = replace(unknown, elements=1530)  # the last epoch cut short: no count
    (finding,) = run(facts(where, pipeline=cut))
    assert "<batches in one pass>" in finding.fix and "islice(train_ds_batches, " in finding.fix


def test_a_loop_that_breaks_is_told_why_no_code(tmp_path):
    text = LOOP_SOURCE.replace("        step(x)\n", "        if step(x):\n            break\n")
    where = f"{program(tmp_path, text)}:5"
    (finding,) = run(facts(where))
    assert "its break at line 7 can end an epoch early" in finding.fix
    assert "iter(" not in finding.fix


def test_fit_gets_its_dataset_repeated_and_steps_per_epoch(tmp_path):
    where = f"{program(tmp_path, FIT_SOURCE)}:4"
    (finding,) = run(facts(where, source="keras-fit"))
    assert "of fit's epochs" in finding.title
    assert finding.fix.splitlines()[-1] == (
        "model.fit(train_ds.repeat(), epochs=12, validation_data=val_ds, steps_per_epoch=128)"
    )


def test_fit_s_validation_is_given_one_iterator_too(tmp_path):
    """Keras makes a new iterator over ``validation_data`` at each epoch's validation,
    and keeps one over it repeated given ``validation_steps``."""
    where = f"{program(tmp_path, FIT_SOURCE)}:4"
    base = facts(where, source="keras-fit")
    assert base.tfdata is not None
    validation = PipelineFacts(
        id=2, consumer="keras-evaluate", read_via="Model.fit", iterators=12, elements=120,
        cardinality=10,
    )  # fmt: skip
    both = replace(base.tfdata, pipelines=(*base.tfdata.pipelines, validation))
    (finding,) = run(replace(base, tfdata=both))
    assert finding.evidence["validation_batches_per_pass"] == 10
    assert finding.fix.splitlines()[-1] == (
        "model.fit(train_ds.repeat(), epochs=12, validation_data=val_ds.repeat(), "
        "steps_per_epoch=128, validation_steps=10)"
    )
    assert "# Its validation the same" in finding.fix


def test_no_iterator_end_in_the_stalls_is_no_finding(tmp_path):
    where = f"{program(tmp_path)}:5"
    base = facts(where)
    stalls = base.stalls
    assert stalls is not None
    loop = stalls.loops[0]
    gc = replace(loop.causes[0], kind="gc", detail="generation 2")
    quiet = replace(stalls, loops=(replace(loop, causes=(gc,)),))
    assert run(replace(base, stalls=quiet)) == []


def test_a_loaded_host_is_said_and_the_loss_still_reported(tmp_path):
    """TF loses the race far more often where other processes keep the cores busy: the
    finding says so, and stands (the run lost that time)."""
    where = f"{program(tmp_path)}:5"
    (loaded,) = run(facts(where, host_busy=0.95))
    assert loaded.title.endswith(
        "TF stopping the pipeline's threads; other processes kept 65% of the host's 2 cores "
        "busy during the run (the program itself 30%): TF loses this race far more often on "
        "a loaded host"
    )
    assert loaded.evidence["other_processes_cpu_fraction"] == 0.65
    (quiet,) = run(facts(where, host_busy=0.4))
    assert quiet.title.endswith("TF stopping the pipeline's threads")


def test_a_validation_loop_s_ends_in_the_training_loop_s_stalls_are_that_loop_s(tmp_path):
    """The ends of the validation pass's iterators, between the training epochs, are
    the validation loop's: its line, its pipeline's batches a pass."""
    base, loop, train, val = epochs_loop_and(tmp_path, "    for v in val_ds:\n        check(v)\n")
    cause = replace(loop.causes[0], location=val, code="for v in val_ds:")
    val_pipeline = PipelineFacts(
        id=2, consumer="python-loop", read_at=val, iterators=12, elements=120, cardinality=10
    )
    assert base.tfdata is not None and base.stalls is not None
    both = replace(base.tfdata, pipelines=(*base.tfdata.pipelines, val_pipeline))
    moved = replace(base.stalls, loops=(replace(loop, causes=(cause,)),))
    (finding,) = run(replace(base, stalls=moved, tfdata=both))
    assert finding.location == val and finding.evidence["batches_per_pass"] == 10
    assert "    for v in itertools.islice(val_ds_batches, 10):" in finding.fix


def test_a_keras_call_s_own_iterators_ending_each_step_are_not_an_epoch_s(tmp_path):
    """A DQN's model.predict(state) and model.fit of one batch each step make and free an
    iterator a call, whatever the epochs do: steps.keras-call-per-step names those calls
    (their one-batch forms make none), and one iterator for the run cannot be written
    there (the corpus' dqn_replay lost 7 % of fit's time at them on a loaded host)."""
    text = FIT_SOURCE + "target = model.predict(state, verbose=0)\n"
    path = program(tmp_path, text)
    fit_line, predict_line = f"{path}:4", f"{path}:5"
    base = facts(fit_line, source="keras-fit")
    stalls, tfdata = base.stalls, base.tfdata
    assert stalls is not None and tfdata is not None
    loop = stalls.loops[0]
    at_predict = replace(loop, causes=(replace(loop.causes[0], location=predict_line),))
    predicts = PipelineFacts(
        id=2, consumer="keras-predict", location=predict_line, iterators=64, elements=64
    )
    one_batch_fits = replace(tfdata.pipelines[0], location=fit_line, iterators=64, elements=64)
    fits = Activity(kind="fit", count=64, seconds=11.0, max_s=1.2, location=fit_line)
    dqn = replace(
        base,
        stalls=replace(stalls, loops=(at_predict,), activities=(*stalls.activities, fits)),
        tfdata=replace(tfdata, pipelines=(one_batch_fits, predicts)),
    )
    assert run(dqn) == []
    # the same ends at fit's line, fit called once an epoch: each call's own iterator
    fit_calls = replace(stalls, loops=(loop,), activities=(*stalls.activities, fits))
    at_fit = replace(dqn, stalls=fit_calls)
    assert run(at_fit) == []
    # ... over a tf.data dataset built at another line (fit's pipeline is there)
    built = replace(one_batch_fits, location=f"{path}:3", iterators=12, elements=1536)
    twelve = replace(fits, count=12)
    per_epoch = replace(
        at_fit,
        stalls=replace(fit_calls, activities=(*stalls.activities, twelve)),
        tfdata=replace(tfdata, pipelines=(built,)),
    )
    assert run(per_epoch) == []
    # fit called once for 12 epochs over a dataset that ends: an iterator an epoch
    once = replace(fits, count=1)
    fitted = replace(at_fit, stalls=replace(fit_calls, activities=(*stalls.activities, once)))
    (finding,) = run(
        replace(fitted, tfdata=replace(tfdata, pipelines=(replace(one_batch_fits, iterators=12),)))
    )
    assert "of fit's epochs" in finding.title
    # fit's pipeline not seen: its ends are an epoch's, as they were before
    (unseen,) = run(replace(fitted, tfdata=replace(tfdata, pipelines=())))
    assert "of fit's epochs" in unseen.title


def test_an_evaluate_call_reading_a_dataset_built_elsewhere_is_the_call_s(tmp_path):
    """``model.evaluate(val_ds)`` at each epoch's end of a custom loop: its iterators are
    the call's (the dataset was built at another line), told by the call's activity."""
    base, loop, train, call = epochs_loop_and(tmp_path, "    model.evaluate(val_ds, verbose=0)\n")
    stalls = base.stalls
    assert stalls is not None
    at_call = replace(loop, causes=(replace(loop.causes[0], location=call),))
    evaluates = Activity(
        kind="evaluate", count=12, seconds=3.0, max_s=0.4, location=call, detail="Model.evaluate"
    )
    calls = replace(stalls, loops=(at_call,), activities=(*stalls.activities, evaluates))
    assert run(replace(base, stalls=calls)) == []
    (finding,) = run(base)  # the training loop's own ends still are
    assert finding.location == train


def test_a_function_run_once_an_epoch_gets_its_call_given_the_batches(tmp_path):
    """``train_one_epoch(model, train_ds)`` in the epochs' loop, the function's loop over
    its parameter: the call's argument is each epoch's pass of the one iterator."""
    text = (
        "import tensorflow as tf\n\ntrain_ds = tf.data.Dataset.range(4096).batch(32)\n\n\n"
        "def train_one_epoch(model, ds):\n    for x in ds:\n        model(x)\n\n\n"
        "for epoch in range(12):\n    train_one_epoch(m, train_ds)\n"
    )
    path = program(tmp_path, text)
    (finding,) = run(facts(f"{path}:7"))
    code = [line for line in finding.fix.splitlines() if not line.lstrip().startswith("#")]
    assert code == [
        "import itertools",
        "train_ds_batches = iter(train_ds.repeat())   # before the epochs' loop at line 11",
        "    train_one_epoch(m, itertools.islice(train_ds_batches, 128))",
    ]
    assert f"# {path}:12: in place of: train_one_epoch(m, train_ds)" in finding.fix


def test_the_call_s_statement_is_printed_whole_with_the_pass_in_place(tmp_path):
    """The statement holding the call keeps its assignment and its lines; a dataset made
    by a class's constructor gets a name of its own for its iterator."""
    text = (
        "import itertools\nimport tensorflow as tf\n\n\ndef check(model, ds, w):\n"
        "    for x in ds:\n        model(x)\n\n\nfor epoch in range(12):\n"
        "    if epoch % 2:\n        scores = check(m,\n                       val_ds, w)\n"
        "    for pair in tf.data.Dataset.zip((a, b)):\n        step(pair)\n"
    )
    path = program(tmp_path, text)
    (finding,) = run(facts(f"{path}:6"))
    assert finding.fix.splitlines()[-3:] == [
        f"# {path}:12: in place of: scores = check(m, ...",
        "        scores = check(m,",
        "                       itertools.islice(val_ds_batches, 128), w)",
    ]
    assert "import itertools\n" not in finding.fix  # the module has it
    (zipped,) = run(facts(f"{path}:14"))
    assert "dataset_batches = iter(tf.data.Dataset.zip((a, b)).repeat())" in zipped.fix


def test_a_saved_fit_run_that_lost_the_race_gets_both_its_datasets_repeated(monkeypatch):
    """The corpus' saved run of fit with a validation set (its facts, read again): the
    fix written from the program's fit call repeats the training and the validation
    dataset, each with its pass (32 and 8 batches)."""
    from gpuwhy.record import Record

    root = Path(__file__).resolve().parents[3]
    monkeypatch.chdir(root)  # the record names the program relative to the checkout
    record = Record.load(root / "tests" / "data" / "records" / "fit_validation_race.gpuwhy.json")
    (finding,) = run(record.facts)
    assert finding.severity == "medium" and finding.evidence["validation_batches_per_pass"] == 8
    assert finding.fix.splitlines()[-1] == (
        "model.fit(train_ds.repeat(), epochs=20, validation_data=val_ds.repeat(), verbose=0, "
        "steps_per_epoch=32, validation_steps=8)"
    )
