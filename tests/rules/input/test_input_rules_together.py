"""All rules over one run's facts: the input findings agree with each other."""

from dataclasses import replace

from gpuwhy.rules import run_rules
from tests import builders_tfdata as t

INPUT_RULES = {
    "input.bound",
    "input.python-function",
    "input.sequential-map",
    "input.no-prefetch",
    "input.no-cache",
    "compression.cpu-codec",
    "distribute.cpu-starved-input",
}


def input_findings(facts):
    findings, not_checked = run_rules(facts)
    assert not INPUT_RULES & set(not_checked), not_checked
    return {f.id: f for f in findings if f.id in INPUT_RULES}


def test_the_example_pipeline_gets_each_of_its_problems_once():
    found = input_findings(t.facts(t.example_pipeline(), steps=t.fit_steps(0.40)))
    assert set(found) == {
        "input.bound",
        "input.sequential-map",
        "input.no-cache",
        "compression.cpu-codec",
    }
    # the same stage, the same wait; the stage's code where the fix is in it, the line
    # the fix changes where that is a call of the pipeline's (its .map(), its cache)
    assert found["input.bound"].location == "train.py:47"  # augment's def
    assert found["input.sequential-map"].location == "train.py:62"  # its .map()
    assert found["compression.cpu-codec"].location == "train.py:41"  # parse's def
    assert found["input.no-cache"].location == "train.py:61"  # the map the cache follows
    assert {f.evidence.get("input_wait_fraction") for f in found.values()} == {0.4}
    # no stage gain is larger than the whole wait
    assert all(f.gain_value <= found["input.bound"].gain_value for f in found.values())


def test_a_healthy_pipeline_gets_none():
    pipeline = t.example_pipeline()
    stages = list(pipeline.stages)
    stages[2] = replace(stages[2], name="ParallelMapV2", parallelism=8, stateful=False)
    healthy = replace(pipeline, stages=tuple(stages), cache_written=True, wait_per_element_s=0.0002)
    assert input_findings(t.facts(healthy, steps=t.fit_steps(0.01))) == {}


def test_python_loop_over_a_py_function_with_busy_cores():
    pipeline = t.py_function_pipeline(consumer="python-loop")
    found = input_findings(
        t.facts(
            pipeline,
            steps=t.loop_steps(0.30),
            host_cpu_busy_fraction=0.95,
            process_cpu_fraction=0.93,
        )
    )
    # The Python map is sequential because it is Python: one cause, python-function's.
    assert set(found) == {
        "input.bound",
        "input.python-function",
        "distribute.cpu-starved-input",
    }
    assert found["input.python-function"].severity == "high"
