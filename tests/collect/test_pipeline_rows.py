"""The Run block's Input rows: the pipeline the steps read comes first."""

from __future__ import annotations

from gpuwhy.collect.inprocess.pipelines import PipelineCollector
from tests import builders_tfdata as t


def test_the_input_row_is_the_pipeline_the_steps_read_not_the_one_read_most():
    """Fit's 60 batches, then an evaluation loop over a test set of 80: the Input row is
    fit's pipeline (it read the evaluation loop's, the larger, where fit's came after)."""
    fit = t.example_pipeline(id=3, elements=60, location="train.py:12")
    loop = t.in_memory_pipeline(id=5, elements=80, location="train.py:13")
    evaluate = t.in_memory_pipeline(id=4, elements=40, consumer="keras-evaluate")
    facts = t.facts(loop, evaluate, fit, steps=t.fit_steps(0.0))
    rows = PipelineCollector.report_rows(facts, html=False)
    assert [name for name, _ in rows] == ["Input", "", ""]
    assert rows[0][1].startswith("tf.data pipeline built at train.py:12, read by Model.fit: 60")
    assert rows[1][1].startswith("tf.data pipeline built at train.py:13, read by the loop")
    assert "read by Model.evaluate: 40" in rows[2][1]


def test_fit_s_validation_is_shown_before_a_loop_that_looked_at_one_batch():
    """keras-io's weather forecasting: fit over one helper's pipeline, its validation
    over another's, and two loops that look at 1 and 5 batches. The validation (156
    batches) is a row; the peeks are named on one line below the rows, not dropped."""
    fit = t.example_pipeline(id=2, elements=436, location="weather.py:55")
    validation = t.in_memory_pipeline(
        id=3, elements=156, location="weather.py:69", consumer="keras-evaluate"
    )
    peek = t.in_memory_pipeline(id=1, elements=1, location="weather.py:77", read_at="weather.py:77")
    sample = t.in_memory_pipeline(
        id=4, elements=5, location="weather.py:112", read_at="weather.py:112"
    )
    predict = t.in_memory_pipeline(
        id=5, elements=40, location="weather.py:113", consumer="keras-predict"
    )
    facts = t.facts(peek, fit, validation, sample, predict, steps=t.fit_steps(0.0))
    rows = PipelineCollector.report_rows(facts, html=False)
    assert [name for name, _ in rows] == ["Input", "", "", ""]
    assert "read by Model.fit: 436" in rows[0][1]
    assert "read by Model.evaluate: 156" in rows[1][1]
    assert "read by Model.predict: 40" in rows[2][1]
    assert rows[3][1] == (
        "2 more pipelines: built at weather.py:112, read by the loop at weather.py:112 "
        "(5 elements); built at weather.py:77, read by the loop at weather.py:77 "
        "(1 element) (the JSON record's tfdata section has each)"
    )


def test_no_line_of_more_pipelines_where_every_one_is_a_row():
    fit = t.example_pipeline(id=1, elements=60, location="train.py:12")
    facts = t.facts(fit, steps=t.fit_steps(0.0))
    rows = PipelineCollector.report_rows(facts, html=False)
    assert len(rows) == 1
