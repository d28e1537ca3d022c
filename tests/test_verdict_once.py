"""The run's verdict names each thing once (issue #48): the slowest stage the steps clause
named is "the slowest stage" in the worst finding's clause, not its file:line again."""

from dataclasses import replace

from gpuwhy.facts import ProgramFacts
from gpuwhy.record import Record
from tests import builders_tfdata as t


def run_record(**steps_changes):
    facts = t.facts(t.py_function_pipeline(), steps=t.fit_steps(0.60, **steps_changes))
    facts = replace(
        facts,
        program=ProgramFacts(command=("train.py",), seconds=9.0, tensorflow_imported=True),
    )
    return Record.diagnose("run", facts)


def test_the_stage_is_named_once_and_the_worst_says_what_it_does():
    record = run_record()
    text = record.verdict
    stage = "Map(<lambda> at train.py:30)"
    assert f"(slowest stage: {stage})" in text, text
    assert text.count("train.py:30") == 1, text
    assert "; also: the slowest stage runs Python" in text, text
    # the finding itself still names it in full: the shortening is the verdict's alone
    titles = [f.title for f in record.findings if f.id == "input.python-function"]
    assert titles and stage in titles[0]


def test_a_stage_the_steps_clause_did_not_name_is_named_in_the_worst_clause():
    record = run_record(input_wait_fraction=0.01, input_wait_median_s=0.00025)
    text = record.verdict
    assert "slowest stage:" not in text
    assert "the slowest stage runs Python" not in text


def test_a_long_stage_name_is_said_once_and_the_clause_after_it_stays_whole():
    """The stage is named "the slowest stage" before the head is cut to its length: cut
    first, a long name made the clause end "the slowest stage runs the…"."""
    where = "src/training/data/loaders/image_folder_pipeline.py:118"
    stages = list(t.py_function_pipeline().stages)
    stages[1] = t.py_map(function="load_image_folder_batch", function_location=where)
    facts = t.facts(t.pipeline(*stages, bottleneck=1), steps=t.fit_steps(0.60))
    facts = replace(
        facts,
        program=ProgramFacts(command=("train.py",), seconds=9.0, tensorflow_imported=True),
    )
    text = Record.diagnose("run", facts).verdict
    assert text.count(where) == 1, text
    assert text.endswith("; also: the slowest stage runs Python."), text


def test_a_sequential_slowest_stage_is_not_said_to_be_the_slowest_stage_twice():
    """input.sequential-map's title says the stage "is the slowest stage": with the
    stage said as "the slowest stage", the clause read "also: the slowest stage runs on
    one thread and is the slowest stage", and its wait, said before, again."""
    stages = (t.tfrecord(), t.augment(), t.batch())
    facts = replace(
        t.facts(t.pipeline(*stages, bottleneck=1), steps=t.fit_steps(0.60)),
        program=ProgramFacts(command=("train.py",), seconds=9.0, tensorflow_imported=True),
    )
    record = Record.diagnose("run", facts)
    assert any(f.id == "input.sequential-map" for f in record.findings)
    assert record.verdict.endswith(
        "(slowest stage: Map(augment at train.py:47)); also: the slowest stage runs on one thread."
    ), record.verdict


def test_a_fix_trial_that_could_not_time_its_fix_says_so_not_that_none_was_faster():
    """A short run's few calls give no loop of steps: the fix ran the same, untimed. A
    new user's trial read "none ... was faster" for a fix never timed."""
    from gpuwhy.facts import Facts, FixTrialFacts, FixTried
    from gpuwhy.verdict import verdict

    untimed = FixTried("placement.float64", "float32 arrays", ran=True, same_results=True)
    trial = FixTrialFacts(bound_s=30.0, runs_per_side=2, measure="step time")
    text = verdict(Facts(fixes_tried=(untimed,), fix_trial=trial), [])
    assert text.startswith("No fix held: 1 tried"), text
    assert "1 could not be timed: too few steps in each run's 30 s" in text
    assert "--bound 120" in text
    timed = replace(untimed, speedup=0.98, speedup_low=0.9, speedup_high=1.05, called="same")
    assert "could not be timed" not in verdict(Facts(fixes_tried=(timed,), fix_trial=trial), [])
