"""The input wait of Keras ``fit`` steps, from tf.data's own consumer timer.

Keras reads each batch inside its compiled train function (``next(iterator)`` in a
``tf.function``), so no Python call can be timed around the read. tf.data's iterator
model times its consumer instead: ``gap_times`` are the intervals between the end of one
``GetNext`` and the start of the next, i.e. what the model did with an element (the
latest 100, gaps over 10 s dropped: tensorflow/core/framework/model.cc). A Keras step
lasts from one batch's begin to the next, so in the steady state

    step = wait for the batch + gap,   wait = step - gap

Both are medians over the steady state (warm-up steps are already left out of the step
median, and the gap window holds the latest elements), taken per step, so
``steps_per_execution`` does not change the sum.
"""

from __future__ import annotations

import dataclasses
from typing import Optional

from gpuwhy.facts import PipelineFacts, StepFacts, TfDataFacts

SOURCE = "tf.data gap timer"


def with_keras_input_wait(steps: Optional[StepFacts],
                          tfdata: Optional[TfDataFacts]) -> Optional[StepFacts]:
    """``steps`` with its input wait filled from the fit pipeline's gap timer, where
    the wait was not already measured around ``next()``."""
    if steps is None or tfdata is None or steps.input_wait_fraction is not None:
        return steps
    if steps.source != "keras-fit" or not steps.median_s:
        return steps
    pipeline = fit_pipeline(tfdata)
    if pipeline is None or pipeline.gap_median_s is None:
        return steps
    wait = max(0.0, steps.median_s - pipeline.gap_median_s)
    return dataclasses.replace(steps, input_wait_fraction=round(wait / steps.median_s, 4),
                               input_wait_median_s=round(wait, 6),
                               input_wait_source=SOURCE)


def fit_pipeline(tfdata: TfDataFacts) -> Optional[PipelineFacts]:
    """The pipeline ``fit`` trained on: the keras-fit one that gave the most elements."""
    fit = [p for p in tfdata.pipelines if p.consumer == "keras-fit"]
    return max(fit, key=lambda p: p.elements, default=None)
