"""input.sequential-reads: a reader given many files, reading one at a time."""

from dataclasses import replace

import pytest

from gpuwhy.rules.input.sequential_reads import SequentialReads
from tests import builders_tfdata as t


def check(facts, **options):
    return SequentialReads().check(facts, {**SequentialReads.options, **options})


def reads(**changes):
    """The example pipeline with its reader given 16 files."""
    pipeline = t.example_pipeline()
    stages = (replace(pipeline.stages[0], **{"files": 16, **changes}), *pipeline.stages[1:])
    return replace(pipeline, stages=stages)


def test_a_reader_of_many_files_with_a_measured_cost_is_medium():
    # the reader: 0.4 s of the 8.58 s of work (5%): below min_share, so low
    (low,) = check(t.facts(reads(), steps=t.fit_steps(0.40)))
    assert low.severity == "low"
    assert low.title == (
        "TFRecordDataset reads its 16 files one at a time, on one thread (4.7% of the "
        "pipeline's work on this run); a GPU machine's shorter steps may wait for it (judged "
        "from the code)"
    )
    assert low.location == "train.py:60"
    assert low.evidence["num_parallel_reads"] == "not written"
    assert "input_wait_fraction" in low.evidence  # evidence, not the judge
    # GZIP, as written, kept; only num_parallel_reads added
    assert (
        "tf.data.TFRecordDataset(filenames, compression_type='GZIP', "
        "num_parallel_reads=tf.data.AUTOTUNE)"
    ) in low.fix
    (medium,) = check(t.facts(reads(self_time_s=3.0), steps=t.fit_steps(0.40)))
    assert medium.severity == "medium" and "judged from the code" not in medium.title


@pytest.mark.parametrize(
    "changes",
    [
        {"files": 1},  # nothing to read in parallel: shard it
        {"parallelism_written": -1},  # num_parallel_reads=AUTOTUNE written
        {"parallelism_written": 4},
        {"parallelism": 8},  # TF runs it as a parallel interleave
        {"files": None},  # not known
    ],
)
def test_parallel_reads_one_file_or_an_unknown_count_are_quiet(changes):
    assert check(t.facts(reads(**changes), steps=t.fit_steps(0.40))) == []


def test_num_parallel_reads_1_as_written_is_one_at_a_time():
    (f,) = check(t.facts(reads(parallelism_written=1), steps=t.fit_steps(0.40)))
    assert f.evidence["num_parallel_reads"] == 1


def test_stages_that_are_not_readers_are_never_judged():
    pipeline = t.example_pipeline()
    stages = tuple(replace(s, files=8) if s.kind == "map" else s for s in pipeline.stages)
    assert check(t.facts(replace(pipeline, stages=stages), steps=t.fit_steps(0.4))) == []


def test_the_fix_does_not_tell_a_pipeline_that_set_deterministic_false_to_set_it():
    (said,) = check(t.facts(reads(), steps=t.fit_steps(0.40)))
    assert "options.deterministic = False" in said.fix
    unordered = replace(reads(), deterministic=False)
    (f,) = check(t.facts(unordered, steps=t.fit_steps(0.40)))
    assert "deterministic" not in f.fix
    assert "num_parallel_reads=tf.data.AUTOTUNE" in f.fix


def test_of_one_reader_in_several_pipelines_the_training_s_reads_lead():
    """A batch taken once to look at (next(iter(ds)) at train.py:90, built first) and
    fit's reads of the same files: one cause, whose finding led with the look's "0.0% of
    the pipeline's work on this run" where fit's pipeline had 4.7%."""
    from gpuwhy.rules.grouping import group_by_cause

    look = replace(
        reads(self_time_s=0.0), id=1, consumer="python-loop", read_at="train.py:90", elements=1
    )
    fit = replace(reads(), id=2)
    (merged,) = group_by_cause(check(t.facts(look, fit, steps=t.fit_steps(0.40))))
    assert "(4.7% of the pipeline's work on this run)" in merged.title
    assert merged.title.endswith("(one cause, in 2 pipelines)")
