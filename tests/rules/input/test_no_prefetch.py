"""input.no-prefetch: no buffer at the end of the pipeline as TF ran it."""

import pytest

from gpuwhy.rules.input.no_prefetch import NoPrefetch
from tests import builders_tfdata as t


def check(facts, **options):
    return NoPrefetch().check(facts, {**NoPrefetch.options, **options})


def unbuffered(**changes):
    """A loop's pipeline with autotune off: TF injected no prefetch and none is written;
    it ends in a plain batch. TF's timers (the gap too) need autotune: the loop's steps
    measure the wait."""
    stages = (t.tfrecord(), t.augment(random=False, stateful=False), t.batch())
    return t.pipeline(
        *stages,
        **{
            "autotune": False,
            "prefetch_run": False,
            "consumer": "python-loop",
            "wait_per_element_s": None,
            "gap_median_s": None,
            **changes,
        },
    )


def test_autotune_off_and_no_written_prefetch_fires():
    (f,) = check(t.facts(unbuffered(), steps=t.loop_steps(0.30)))
    assert f.severity == "medium"
    assert f.title == (
        "The pipeline built at train.py:66 has no prefetch as TF runs it; steps "
        "wait for input 30% of the time"
    )
    assert f.location == "train.py:66"
    assert f.evidence["last_stage"] == "BatchV2 at train.py:64"
    assert f.evidence["why_none"].startswith("autotune is off")
    assert f.evidence["prefetch_written"] is False and f.evidence["prefetch_as_run"] is False
    assert "in place of: ds.batch(32)\nds.batch(32).prefetch(tf.data.AUTOTUNE)" in f.fix
    assert "options.autotune.enabled = True" in f.fix
    assert f.gain_value == pytest.approx(0.30)  # min(w, 1 - w)


def test_the_gain_is_the_overlap_at_most():
    (f,) = check(t.facts(unbuffered(), steps=t.loop_steps(0.80)))
    assert f.gain_value == pytest.approx(0.20)  # compute is only 20%: that much hides


def test_a_step_that_is_almost_all_wait_has_nothing_to_overlap():
    # 99.9% wait: a prefetch alone hides nothing (input.bound says what is slow)
    assert check(t.facts(unbuffered(), steps=t.loop_steps(0.999))) == []
    assert check(t.facts(unbuffered(), steps=t.loop_steps(0.94))) != []


def test_inject_prefetch_off_is_named():
    (f,) = check(t.facts(unbuffered(autotune=True), steps=t.loop_steps(0.30)))
    assert "inject_prefetch" in f.evidence["why_none"]
    assert "autotune.enabled" not in f.fix


def test_a_prefetch_tf_injected_counts():
    injected = t.example_pipeline()  # ends in Prefetch, written_as ()
    assert injected.stages[-1].written_as == () and injected.prefetch_run
    assert check(t.facts(injected, steps=t.fit_steps(0.40))) == []


@pytest.mark.parametrize(
    "name", ["ParallelMapV2", "MapAndBatch", "ParallelBatch", "ParallelInterleaveDatasetV4"]
)
def test_a_pipeline_ending_in_an_async_stage_is_left_alone_as_tf_does(name):
    stages = (t.tfrecord(), t.parse(name=name, codec_ops=()))
    pipeline = t.pipeline(*stages, prefetch_run=False)
    assert check(t.facts(pipeline, steps=t.fit_steps(0.40))) == []


def test_no_wait_no_finding():
    assert check(t.facts(unbuffered(), steps=t.loop_steps(0.04))) == []
    assert check(t.facts(unbuffered(), steps=None)) == []
    assert check(t.facts(unbuffered(consumer="keras-evaluate"), steps=t.loop_steps(0.30))) == []


def test_the_loops_pipeline_takes_the_steps_wait_others_their_own():
    loop = unbuffered(id=1)
    other = unbuffered(
        consumer="keras-evaluate", id=2, wait_per_element_s=0.0002, gap_median_s=0.015
    )
    (f,) = check(t.facts(loop, other, steps=t.loop_steps(0.30)))
    assert f.evidence["pipeline"].startswith("tf.data pipeline 1 ")
