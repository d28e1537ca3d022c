"""The projection as one derivation of the stage: derived from the ``target`` section
(what --target asked, the profiled steps, NVML's reading) and the other sections,
wherever a record is read; a record written before that section keeps the projection
it holds; a projection that cannot be made says why in the run's notes."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from gpuwhy.derived.stage import derived
from gpuwhy.facts import Facts, NvmlReading, ProgramFacts, TargetFacts, TracingFacts
from gpuwhy.projection.step import projection_facts
from gpuwhy.record import Record
from gpuwhy.report.run.summary import program_notes
from gpuwhy.rules import run_rules
from tests import builders as b
from tests.builders_tfdata import fit_steps
from tests.projection.test_cost import TRAIN, placement
from tests.projection.test_derive import UNKNOWN
from tests.projection.test_host import _profile, train_step

# a training step whose matmuls take 2.6 ms on an A100 (integer FLOPs: a record's schema)
BIG = placement(tensor_ops=[b.tensor_op(flops=800_000_000_000, function=TRAIN, gradient=True)])
PROGRAM = ProgramFacts(command=("python3", "train.py"))


def _run(target: TargetFacts | None, **sections) -> Facts:
    tracing = TracingFacts(functions=(train_step(),))
    return Facts(program=PROGRAM, placement=BIG, tracing=tracing, target=target, **sections)


def test_the_stage_projects_what_the_collector_measured_as_the_projection_would():
    profile = _profile(0.0004)
    facts = _run(TargetFacts("A100", profile=profile), steps=fit_steps())
    expected = projection_facts(facts, "A100", None, facts.steps, None, profile=profile)
    assert derived(facts).projection == expected
    assert derived(facts).projection_refused is None


def test_the_input_side_joins_the_pipeline_the_stage_found():
    from tests import builders_tfdata as t

    facts = t.facts(t.example_pipeline(), steps=t.fit_steps(0.9))
    facts = replace(facts, placement=BIG, target=TargetFacts("A100"))
    found = derived(facts)
    assert found.steps_pipeline is not None and found.projection is not None
    assert found.projection == projection_facts(
        facts, "A100", found.steps_pipeline, facts.steps, facts.eager
    )
    assert found.projection.input_batch_measured_s is not None


def test_auto_on_a_gpu_the_table_lacks_is_projected_from_the_reading_the_run_kept():
    devices = (b.gpu(0, name=UNKNOWN["name"]),)
    kept = _run(TargetFacts("auto", peaks=NvmlReading(**UNKNOWN)), devices=devices)
    assert derived(kept).projection is not None
    assert derived(kept).projection.gpu == "NVIDIA RTX A4000"
    unread = _run(TargetFacts("auto"), devices=devices)  # NVML could not be read
    assert derived(unread).projection is None
    refused = derived(unread).projection_refused
    assert refused is not None and refused.startswith("no projection onto auto: ")
    assert "name a GPU with --target" in refused
    assert program_notes(unread)[-1] == refused


def test_nothing_to_cost_is_said_and_no_projected_rule_runs():
    facts = Facts(program=PROGRAM, target=TargetFacts("A100"))
    assert derived(facts).projection is None
    assert "nothing to cost" in (derived(facts).projection_refused or "")
    _, not_checked = run_rules(facts)
    assert not_checked["input.projected-bound"] == "needs projection"
    assert not_checked["launch.projected-bound"] == "needs projection"


def test_a_record_writes_the_derived_projection_and_loading_derives_it_again(tmp_path):
    facts = _run(TargetFacts("A100", profile=_profile(0.0004)), steps=fit_steps())
    record = Record.diagnose("run", facts)
    data = record.to_dict()
    assert data["projection"]["gpu"] == "A100"  # where readers of the file find it
    assert data["target"]["profile"]["function"] == "train_step"
    # a changed copy in the file is not read back: the stage derives it from the target
    data["projection"]["step_s"] = 99.0
    path = tmp_path / "run.json"
    path.write_text(json.dumps(data))
    loaded = Record.load(path)
    assert loaded.facts.projection is None and loaded.facts.target == facts.target
    assert loaded.derived.projection == record.derived.projection
    assert loaded.verdict == record.verdict


def test_a_record_from_before_the_target_section_keeps_its_projection(tmp_path):
    projected = projection_facts(_run(None), "A100")
    data = Record.diagnose("run", Facts(program=PROGRAM, projection=projected)).to_dict()
    del data["target"]
    path = tmp_path / "older.json"
    path.write_text(json.dumps(data))
    loaded = Record.load(path)
    assert loaded.derived.projection == projected
    assert "input.projected-bound" not in loaded.recheck().not_checked


@pytest.mark.parametrize("requested", ["A100", "auto"])
def test_an_audit_of_a_model_file_projects_through_the_stage(requested):
    facts = Facts(placement=BIG, target=TargetFacts(requested))
    if requested == "auto":  # no GPU here and none named
        assert "the machine the program ran on, and it had none" in (
            derived(facts).projection_refused or ""
        )
    else:
        assert derived(facts).projection == projection_facts(Facts(placement=BIG), "A100")
