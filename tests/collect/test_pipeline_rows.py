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
