"""The derivation stage (gpuwhy/derived/stage.py): each derivation runs once per facts
object, in its order; a rule's threshold is applied to what was derived, never fed in;
the record's file writes the published part in its own section and loading derives
again from the facts."""

from __future__ import annotations

import gc
import json
from dataclasses import replace

import pytest

from gpuwhy.derived import stage
from gpuwhy.derived.stage import DERIVATIONS, derive, derived
from gpuwhy.derived.steps_input import steps_wait_at
from gpuwhy.facts import Facts, ProgramFacts
from gpuwhy.modes.recording import recording_facts
from gpuwhy.record import Record
from gpuwhy.rules.input.bound import InputBound
from tests import builders_tfdata as t
from tests.rules.input.test_bound_cache_filling import cached_pipeline, loop_passes

H100 = "tests/data/nvml/h100/duty_100_100.nvml.jsonl"


def test_each_derivation_reads_only_the_ones_before_it(monkeypatch):
    names = [d.name for d in DERIVATIONS]
    assert len(names) == len(set(names))
    seen: list[tuple[str, list[str]]] = []

    def spied(step):
        def spy(facts, earlier):
            seen.append((step.name, sorted(earlier)))
            return step.derive(facts, earlier)

        return replace(step, derive=spy)

    monkeypatch.setattr(stage, "DERIVATIONS", tuple(spied(d) for d in DERIVATIONS))
    derive(t.facts(t.example_pipeline(), steps=t.fit_steps(0.4)))
    assert seen == [(name, sorted(names[:i])) for i, name in enumerate(names)]


def test_the_stage_runs_once_per_facts_object_and_a_new_object_derives_again(monkeypatch):
    calls = []
    real = stage.derive
    monkeypatch.setattr(stage, "derive", lambda facts: calls.append(facts) or real(facts))
    facts = t.facts(t.example_pipeline(), steps=t.fit_steps(0.4))
    first = derived(facts)
    assert derived(facts) is first and len(calls) == 1  # read, not derived again
    other = replace(facts, steps=t.fit_steps(0.1))
    assert derived(other).steps_wait.wait.fraction == pytest.approx(0.1)
    assert first.steps_wait.wait.fraction == pytest.approx(0.4) and len(calls) == 2


def test_the_result_goes_with_its_facts():
    facts = t.facts(t.example_pipeline(), steps=t.fit_steps(0.4))
    derived(facts)
    key = id(facts)
    assert key in stage._RESULTS
    del facts
    gc.collect()
    assert key not in stage._RESULTS  # a long session keeps no result of facts gone


def test_a_rules_threshold_is_applied_to_the_derived_wait_not_fed_into_it():
    """The cache-filling reading is derived once, with the later passes' wait measured;
    input.bound's threshold (and a user's other one) decides whether it is the filling."""
    facts = t.facts(cached_pipeline(consumer="python-loop"), steps=loop_passes(0.004))
    measured = derived(facts).steps_wait
    assert measured is not None and measured.cache_filling is not None
    later = measured.cache_filling.later_wait
    assert later is not None and 0.3 < later < 0.5  # 4 ms of each 10 ms step
    assert steps_wait_at(facts, InputBound.options["medium_at"]).cache_filling is None
    assert steps_wait_at(facts, 0.5).cache_filling is not None
    # the rule with a looser threshold reads the same derived value and calls it low
    (strict,) = InputBound().check(facts, dict(InputBound.options))
    (loose,) = InputBound().check(facts, {**InputBound.options, "medium_at": 0.5})
    assert strict.severity == "high" and loose.severity == "low"


def test_a_record_writes_the_busy_blocks_apart_and_an_older_one_derives_them_again(tmp_path):
    facts = Facts(program=ProgramFacts(command=("python3", "duty.py")), **_samples())
    record = Record.diagnose("watch", facts)
    share = record.derived.gpu_busy[0].share
    data = record.to_dict()
    assert data["derived"]["gpu_busy"] == [
        {"index": 0, "busy": json.loads(json.dumps(data["derived"]["gpu_busy"][0]["busy"]))}
    ]
    assert data["derived"]["gpu_busy"][0]["busy"]["share"] == share
    # an older record: its block inside the samples, a figure this version would not give
    for gpu in data["gpu_samples"]["gpus"]:
        gpu["busy"] = {"share": 0.99, "source": "nvml-point", "measure": "point readings",
                       "reliable": True, "why": "kept by an older version"}  # fmt: skip
    del data["derived"]
    path = tmp_path / "older.json"
    path.write_text(json.dumps(data))
    loaded = Record.load(path)
    assert loaded.derived.gpu_busy[0].share == share
    assert loaded.verdict == record.verdict and "99%" not in loaded.verdict


def _samples() -> dict:
    samples = recording_facts(H100).gpu_samples
    assert samples is not None
    return {"gpu_samples": samples}


def test_the_hosts_load_is_derived_whole_and_each_reader_applies_its_threshold():
    facts = t.facts(
        t.example_pipeline(),
        steps=t.fit_steps(0.4),
        host_cpu_busy_fraction=0.95,
        process_cpu_fraction=0.55,
    )
    load = derived(facts).host_load
    assert load is not None and load.others == pytest.approx(0.40)
    assert load.judged(0.25, 0.9) is load
    assert load.judged(0.5, 0.9) is None and load.judged(0.25, 0.99) is None
    idle = replace(facts, tfdata=replace(facts.tfdata, host_cpu_busy_fraction=0.6))
    assert derived(idle).host_load.judged(0.25, 0.9) is None  # a core was left idle
