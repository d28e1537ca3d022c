"""A finding's evidence as prose on its card: fields that say one thing together are one
sentence, the others one each, none said twice (the record's keys untouched)."""

from __future__ import annotations

from gpuwhy.finding import Finding
from gpuwhy.report.run.evidence_phrases import phrased
from gpuwhy.report.run.html_sections import finding_view

# input.bound's evidence from a run of examples/slow_training.py
INPUT_BOUND = {
    "input_wait_fraction": 0.742,
    "input_wait_mean_ms": 65.3,
    "step_mean_ms": 87.95,
    "input_wait_median_ms": 70.13,
    "step_median_ms": 84.54,
    "steps_measured": 95,
    "measured_at": "next() on a tf.data iterator at examples/slow_training.py:74",
    "measured_by": "next() timing",
    "pipeline": "tf.data pipeline 1 built at examples/slow_training.py:42, read by the loop over the dataset",
    "bottleneck": "stage MapAndBatch(load at examples/slow_training.py:36)",
    "bottleneck_ms_per_element": 85.403,
    "bottleneck_threads": 1,
    "bottleneck_share_of_pipeline_time": 0.997,
}


def test_the_input_wait_reads_as_sentences_of_the_step():
    sentences, said = phrased(INPUT_BOUND)
    assert sentences == [
        "Steps wait 65.3 ms for input of a mean 88.0 ms step (74%).",
        "The median step takes 84.5 ms; the median wait for input is 70.1 ms.",
        "Measured over 95 steps, at next() on a tf.data iterator at "
        "examples/slow_training.py:74, by next() timing.",
        "The slowest stage, MapAndBatch(load at examples/slow_training.py:36), takes 85.4 ms "
        "an element on 1 thread: 100% of the pipeline's time.",
    ]
    assert said == set(INPUT_BOUND) - {"pipeline"}


def test_the_card_says_each_field_once_and_keeps_the_raw_keys_folded():
    view = finding_view(1, Finding("input.bound", "high", "Steps wait", evidence=INPUT_BOUND))
    sentences = view["sentences"]
    assert sentences[0] == "Steps wait 65.3 ms for input of a mean 88.0 ms step (74%)."
    assert sentences[-1].startswith("Pipeline: tf.data pipeline 1 built at")
    assert not any("Input wait mean" in s or "Bottleneck threads" in s for s in sentences)
    assert {e["key"] for e in view["evidence"]} == set(INPUT_BOUND)  # all, under their keys


def test_a_python_stage_and_its_medians():
    evidence = {
        "stage": "MapAndBatch(load at train.py:36)",
        "slowest_stage": True,
        "elements": 96,
        "ms_per_element": 85.403,
        "threads": 4,
        "share_of_pipeline_time": 0.5,
        "input_wait_fraction": 0.742,
        "input_wait_ms_per_step": 70.127,
        "consumer_ms_per_step": 84.536,
    }
    sentences, said = phrased(evidence)
    assert sentences == [
        "Steps wait for input 74% of the time. The median step takes 84.5 ms; the median "
        "wait for input is 70.1 ms.",
        "The slowest stage, MapAndBatch(load at train.py:36), takes 85.4 ms an element on "
        "4 threads: 50% of the pipeline's time, over 96 elements.",
    ]
    assert said == set(evidence)


def test_a_capture_a_projection_and_a_retrace():
    capture = {
        "input_wait_fraction": 0.96,
        "step_median_ms": 22.7,
        "steps_measured": 20,
        "measured_at": "profiler capture run/vm.xplane.pb",
        "gpu_busy_fraction": 0.031,
    }
    assert phrased(capture)[0] == [
        "Steps wait for input 96% of the time; the median step takes 22.7 ms.",
        "Measured over 20 steps, in the profiler capture run/vm.xplane.pb.",
        "The GPU was busy 3% of the time.",
    ]
    projected = {
        "gpu": "A100",
        "projected_step_ms": 7.333,
        "projected_step_band_ms": [3.667, 11.324],
        "input_ms_per_batch_alone": 85.404,
        "input_ms_per_batch_as_delivered": 87.954,
        "projected_input_wait": 0.9154,
        "projected_input_wait_band": [0.8674, 0.9583],
    }
    assert phrased(projected)[0] == [
        "On A100 (projected), the step alone would take 7.3 ms (3.7 ms–11.3 ms).",
        "Steps would wait for input 92% of the time (87%–96%).",
        "The pipeline makes a batch in 85.4 ms by its stage timers (at most alone), and "
        "delivered one every 88.0 ms "
        "beside the model.",
    ]
    retrace = {
        "function": "train_step",
        "location": "train.py:55",
        "traces": 12,
        "trace_seconds": 0.733,
        "call_seconds": 1.652,
        "tracing_share_of_call_time": 0.444,
    }
    assert phrased(retrace)[0] == [
        "train_step (train.py:55) was traced 12 times: 733.0 ms of tracing in 1,652.0 ms "
        "of calls (44%)."
    ]


def test_a_phrase_whose_fields_are_not_all_there_leaves_them_to_their_own_sentences():
    sentences, said = phrased({"input_wait_mean_ms": 65.3, "steps_measured": 95})
    assert sentences == [] and said == set()
    sentences, said = phrased(
        {"input_wait_fraction": "74%", "input_wait_mean_ms": 65.3, "step_mean_ms": 88.0}
    )
    assert sentences == [] and said == set()  # a share written as text: not a number


def test_a_recordings_busy_figure_reads_as_a_sentence():
    evidence = {
        "busy_percent": 10.7,
        "busy_source": "gpm",
        "busy_measure": "SM activity",
        "window_s": 28.5,
        "samples": 286,
        "time_share_percent": 26.1,
        "space_share_percent": 40.8,
    }
    sentences, said = phrased(evidence)
    assert sentences == [
        "The GPU was busy 10.7% of the time, by SM activity (NVML's GPM counters), over "
        "28.5 s in 286 samples.",
        "A kernel ran 26% of the time, and while one ran 41% of its SMs were busy.",
    ]
    assert said == set(evidence)
