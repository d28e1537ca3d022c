"""input.projected-bound from small projection facts."""

from dataclasses import replace

import pytest

from gpuwhy.facts import ProjectionFacts
from gpuwhy.rules.input.projected_bound import ProjectedInputBound
from tests import builders as b
from tests import builders_tfdata as t


def projection(**changes) -> ProjectionFacts:
    """A100: a 0.7 ms step against a pipeline that needs 14 ms per batch here."""
    measured = {
        "input_batch_measured_s": 0.014,
        "input_wait_fraction": 0.95,
        "input_wait_low": 0.93,
        "input_wait_high": 0.96,
    }
    return b.projection(function="multi_step_on_iterator (train.py:80)", **{**measured, **changes})


def check(facts):
    return ProjectedInputBound().check(facts, dict(ProjectedInputBound.options))


def test_a_pipeline_that_starves_the_projected_step_is_high_and_said_as_projected():
    facts = replace(t.facts(t.example_pipeline(), steps=t.fit_steps(0.0)), projection=projection())
    (f,) = check(facts)
    assert f.severity == "high"
    assert f.title.startswith(
        "On A100 (projected), steps would wait for input 95% of the time (93%–96%): the "
        "step would take 0.7 ms (0.5 ms–1.0 ms), the pipeline takes 14.0 ms (as the steps "
        "got their batches) per batch here"
    )
    assert f.title.endswith("; its slowest stage is Map(augment at train.py:47)")
    assert f.location == "train.py:47" and "stateless" in f.fix  # the stage's own fix
    assert f.evidence["calibrated"] is False and "not a measurement" in f.evidence["what"]
    assert f.estimated_gain.startswith("projection:")


def test_the_band_s_low_end_judges():
    medium = projection(input_wait_fraction=0.3, input_wait_low=0.1, input_wait_high=0.5)
    (f,) = check(replace(t.facts(t.example_pipeline()), projection=medium))
    assert f.severity == "medium"
    unsure = projection(input_wait_fraction=0.3, input_wait_low=0.0, input_wait_high=0.5)
    assert check(replace(t.facts(t.example_pipeline()), projection=unsure)) == []


def test_no_input_figures_no_finding():
    none = projection(input_wait_fraction=None, input_wait_low=None, input_wait_high=None)
    assert check(replace(t.facts(t.example_pipeline()), projection=none)) == []


def test_stages_before_a_cache_run_in_the_first_epoch_only():
    """The tf.data guide's .map(decode).cache().shuffle().batch(): the decode runs in the
    first epoch only, so it is neither the input's time per batch nor the slowest stage
    named; the note says what it cost in the first epoch."""
    from gpuwhy.projection.step import batch_seconds, first_epoch_note

    stages = list(t.example_pipeline().stages)
    stages[2] = replace(stages[2], root_elements_per_s=70.0)  # augment: 14 ms a batch
    stages[4] = replace(stages[4], root_elements_per_s=2000.0)  # batch: 0.5 ms a batch
    plain = replace(t.example_pipeline(), stages=tuple(stages))
    cache = replace(stages[3], name="Cache", kind="cache", written_as=("cache",),
                    written_calls=(".cache()",), root_elements_per_s=None)  # fmt: skip
    cached = replace(plain, stages=(*stages[:3], cache, *stages[3:]))
    assert batch_seconds(plain) == 1 / 70.0
    # a repeat after the cache: passes unknown (a long run), the augmentation replays
    assert batch_seconds(cached) == 1 / 2000.0
    assert "are left out of the input's time per batch" in first_epoch_note(cached)
    assert first_epoch_note(plain) is None
    # no repeat: fit's 3 epochs, one iterator each; the first decodes (14 ms a batch)
    epochs = [s for s in cached.stages if s.kind != "repeat"]
    three = replace(cached, stages=tuple(epochs), iterators=3)
    assert batch_seconds(three) == pytest.approx((1 / 70.0 + 2 / 2000.0) / 3)
    assert "their mean over this run's 3 passes" in first_epoch_note(three)
    many = replace(three, iterators=300)  # a longer run weighs the first epoch less
    assert batch_seconds(many) == pytest.approx((1 / 70.0 + 299 / 2000.0) / 300)
    facts = replace(t.facts(cached, steps=t.fit_steps(0.0)), projection=projection())
    (f,) = check(facts)  # figures given directly: the finding names no cached stage
    assert f.title.endswith("; its slowest stage is BatchV2 at train.py:64")


def test_the_title_gives_the_pipeline_s_own_time_not_the_steps():
    """A CPU run whose model takes 5.6 s a step and whose pipeline makes a batch in 56 ms
    alone: the title names the 56 ms, never the steps' time."""
    own = projection(input_batch_s=0.056, input_batch_measured_s=5.63)
    (f,) = check(replace(t.facts(t.example_pipeline()), projection=own))
    assert "the pipeline takes 56.0 ms per batch here" in f.title and "5,630" not in f.title


def test_a_first_epoch_of_decoding_before_a_cache_is_named_where_it_is_most_of_the_run():
    """The images tutorial's list_files -> map(decode JPEG) -> cache -> shuffle -> batch,
    fit for 3 epochs: the decode (24 ms a batch) in the first epoch outweighs the two
    cached epochs (1.8 ms a batch each): it is the stage named, and its fix is not a
    second cache but the one written, on disk; over 300 epochs the batch is named."""
    from gpuwhy.derived.pipeline import run_bottleneck

    decode = t.parse(codec_ops=("DecodeJpeg",), root_elements_per_s=1 / 0.024)
    cache = t.stage(name="MemoryCache", kind="cache", written_as=("cache",),
                    written_calls=("ds.cache()",), location="train.py:58",
                    root_elements_per_s=50_000.0)  # fmt: skip
    batch = t.batch(root_elements_per_s=1 / 0.0018)
    images = t.pipeline(t.tfrecord(), decode, cache, t.shuffle(), batch, t.prefetch())
    assert run_bottleneck(images) == (1, True)
    facts = replace(t.facts(images, steps=t.fit_steps(0.0)), projection=projection())
    (f,) = check(facts)
    assert "its slowest stage is ParallelMapV2(parse at train.py:41) (before cache()" in f.title
    assert f.location == "train.py:41"
    assert "# decoded once a run already: the cache() after it (at train.py:58)" in f.fix
    assert '#   ds.cache("train_cache")' in f.fix
    assert "\nds.map(parse).cache()" not in f.fix  # never a second cache
    long_run = replace(images, iterators=300)
    assert run_bottleneck(long_run) == (4, False)
