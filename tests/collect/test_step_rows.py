"""The Run block's Steps row where no loop of steps was found: why, in the program's terms."""

from __future__ import annotations

from gpuwhy.collect.inprocess.steps import StepCollector
from gpuwhy.facts import Facts, ProgramFacts, TracedFunction, TracingFacts

PROGRAM = ProgramFacts(command=("gan.py",), seconds=20.0, tensorflow_imported=True)


def test_a_step_called_too_few_times_is_named_with_its_calls():
    step = TracedFunction(name="train_step", location="gan.py:111", calls=2, call_s=3.1, traces=2)
    helper = TracedFunction(name="sample", location="gan.py:140", calls=1, call_s=0.2, traces=1)
    facts = Facts(program=PROGRAM, tracing=TracingFacts(functions=(helper, step)))
    ((name, text),) = StepCollector.report_rows(facts, html=False)
    assert name == "Steps"
    assert text.startswith("none found: train_step (gan.py:111) was called 2 times, too few")


def test_a_program_that_ran_no_step_function_says_what_was_looked_for():
    ((_, text),) = StepCollector.report_rows(Facts(program=PROGRAM), html=False)
    assert text.startswith("none found (no Keras fit, no loop over a tf.data iterator")
