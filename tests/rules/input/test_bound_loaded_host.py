"""input.bound on a host whose CPUs other processes kept busy: low, about the load, with
the measured figures; the pipeline is blamed only on a host the program had to itself."""

import pytest

from gpuwhy.facts import ProgramFacts
from gpuwhy.rules.input.bound import InputBound
from gpuwhy.verdict import verdict
from tests import builders_tfdata as t


def check(facts):
    return InputBound().check(facts, dict(InputBound.options))


def loaded_facts(wait=0.12, busy=0.98, own=0.45, load=3.4):
    return t.facts(
        t.example_pipeline(),
        steps=t.fit_steps(wait),
        host_cpu_busy_fraction=busy,
        process_cpu_fraction=own,
        host_load_average=load,
        host_cores=2,
    )


def test_a_wait_while_others_held_the_cores_is_low_and_names_the_load():
    (f,) = check(loaded_facts())
    assert f.severity == "low"
    assert f.title == (
        "Steps wait for input 12% of the time (a mean 3.0 ms of a 25.0 ms step), while other "
        "processes kept 53% of the host's 2 cores busy during the run (the program itself "
        "45%, load average 3.4): the wait may be the load's, not the pipeline's"
    )
    assert "slowest stage" not in f.title
    assert f.evidence["other_processes_cpu_fraction"] == 0.53
    assert f.evidence["host_load_average"] == 3.4
    assert f.evidence["bottleneck"] == "stage Map(augment at train.py:47)"  # still shown
    assert f.fix.startswith("# other processes kept 53% of the host's 2 cores busy")
    assert "run again with the host to itself" in f.fix
    assert "unknown" in f.estimated_gain


def test_a_large_wait_under_load_stays_high_with_the_load_beside_it():
    (f,) = check(loaded_facts(wait=0.40))
    assert f.severity == "high"
    assert "; the slowest stage is Map(augment at train.py:47), while other processes kept" in (
        f.title
    )
    assert f.title.endswith("part of the wait may be the load's")
    assert f.evidence["other_processes_cpu_fraction"] == 0.53


@pytest.mark.parametrize(
    "busy, own", [(0.98, 0.80), (0.98, 0.74), (0.85, 0.30)]
)  # others under 25%, or cores left idle
def test_a_host_the_program_had_mostly_to_itself_keeps_the_pipeline_finding(busy, own):
    (f,) = check(loaded_facts(busy=busy, own=own))
    assert f.severity == "medium"
    assert "the slowest stage is Map(augment at train.py:47)" in f.title
    assert "other_processes_cpu_fraction" not in f.evidence


def test_without_cpu_figures_the_pipeline_finding_stands():
    (f,) = check(loaded_facts(busy=None, own=None, load=None))
    assert f.severity == "medium" and "other processes" not in f.title


def test_the_verdict_says_the_host_was_loaded_instead_of_naming_a_stage():
    facts = loaded_facts()
    facts = type(facts)(
        steps=facts.steps,
        tfdata=facts.tfdata,
        program=ProgramFacts(command=("train.py",), seconds=9.0, tensorflow_imported=True),
    )
    text = verdict(facts, check(facts))
    assert (
        "12% of their time waiting for input while other processes kept 53% of the host's cores busy"
        in text
    )
    assert "slowest stage" not in text


def test_the_python_call_per_step_under_load_is_low_and_names_the_load():
    cheap = t.in_memory_pipeline()
    facts = t.facts(
        cheap,
        steps=t.loop_steps(0.10),
        host_cpu_busy_fraction=0.99,
        process_cpu_fraction=0.40,
        host_cores=2,
    )
    (f,) = check(facts)
    assert f.severity == "low"
    assert "the cost is the Python call per step, while other processes kept 59%" in f.title
    assert f.fix.startswith("# other processes kept 59% of the host's 2 cores busy")
    assert f.evidence["production_ms_per_batch"] == 0.2
    # the verdict places the wait as the rule does, asked the same way (not read back)
    with_program = type(facts)(
        steps=facts.steps,
        tfdata=facts.tfdata,
        program=ProgramFacts(command=("train.py",), seconds=9.0, tensorflow_imported=True),
    )
    text = verdict(with_program, check(with_program))
    assert "of their time in next() (the Python call per step, not the pipeline)" in text
    assert "while other processes kept 59% of the host's cores busy" in text


def keeping_up_facts(augment_batch_s, busy=0.64, own=0.49):
    """Fit steps of 25 ms waiting 8%, the augmentation (the slowest stage) able to feed
    a batch in ``augment_batch_s``, other processes at 15% of a host with a core idle on
    average."""
    stages = (
        t.tfrecord("GZIP"),
        t.parse(),
        t.augment(root_elements_per_s=1 / augment_batch_s),
        t.shuffle(),
        t.batch(),
        t.repeat(),
        t.prefetch(),
    )
    return t.facts(
        t.pipeline(*stages, bottleneck=2),
        steps=t.fit_steps(0.08),
        host_cpu_busy_fraction=busy,
        process_cpu_fraction=own,
        host_load_average=1.2,
        host_cores=2,
    )


def test_a_pipeline_many_times_faster_than_the_steps_waits_for_a_core_not_for_its_work():
    """Its slowest stage makes a batch in 2 ms of a 25 ms step: a wait can only be the
    scheduling of its threads, and other processes' 15% (cores idle on average, but
    taken at moments) is named, not the stage."""
    (f,) = check(keeping_up_facts(0.002))
    assert f.severity == "low"
    assert "the slowest stage" not in f.title
    assert "other processes kept 15% of the host's 2 cores busy" in f.title
    assert f.evidence["other_processes_cpu_fraction"] == 0.15
    # the verdict judges the load as the rule does
    facts = keeping_up_facts(0.002)
    with_program = type(facts)(
        steps=facts.steps,
        tfdata=facts.tfdata,
        program=ProgramFacts(command=("train.py",), seconds=9.0, tensorflow_imported=True),
    )
    assert "while other processes kept 15% of the host's cores busy" in verdict(
        with_program, check(with_program)
    )


@pytest.mark.parametrize(
    "augment_batch_s, busy, own",
    [(0.020, 0.64, 0.49), (0.002, 0.55, 0.49)],  # a stage near the step; others at 6%
)
def test_a_pipeline_near_the_step_or_a_quiet_host_keeps_the_stage_finding(
    augment_batch_s, busy, own
):
    (f,) = check(keeping_up_facts(augment_batch_s, busy, own))
    assert f.severity == "medium"
    assert "the slowest stage is Map(augment at train.py:47)" in f.title
    assert "other_processes_cpu_fraction" not in f.evidence
