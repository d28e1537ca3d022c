"""The tf.functions line: a function only ever run inside another's graph says so."""

from gpuwhy.collect.inprocess.functions import calls_column, calls_text, tracing_line
from gpuwhy.facts import TracedFunction, TracingFacts

OUTER = TracedFunction(name="multi_step_on_iterator", location="train.py:15", calls=10, traces=1)
INNER = TracedFunction(
    name="one_step_on_data",
    location="train.py:15",
    calls=0,
    traces=2,
    inside=("multi_step_on_iterator",),
)


def test_a_function_run_inside_another_says_where_instead_of_zero_calls():
    line = tracing_line(TracingFacts(functions=(OUTER, INNER)))
    assert "one_step_on_data (train.py:15): runs inside multi_step_on_iterator, 2 traces" in line
    assert "multi_step_on_iterator (train.py:15): 10 calls, 1 trace" in line
    assert ": 0 calls" not in line


def test_a_function_never_called_nor_nested_still_says_zero_calls():
    traced_only = TracedFunction(name="export", calls=0, traces=1)
    assert calls_text(traced_only) == "0 calls"


def test_one_call_is_said_in_the_singular():
    once = TracedFunction(name="one_step_on_data_distributed", calls=1, traces=1)
    assert calls_text(once) == "1 call"
    assert calls_column(once) == "1"
