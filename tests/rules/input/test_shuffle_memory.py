"""input.shuffle-memory: a shuffle buffer of large decoded elements."""

from dataclasses import replace

from gpuwhy.rules.input.shuffle_memory import ShuffleMemory
from tests import builders_tfdata as t

GiB = 1024**3
IMAGE = 1024 * 1024 * 3 * 4  # a decoded 1024x1024x3 float32 image


def check(facts, **options):
    return ShuffleMemory().check(facts, {**ShuffleMemory.options, **options})


def shuffled(buffer_size=2048, element_bytes=IMAGE, **tfdata):
    pipeline = t.example_pipeline()
    stages = list(pipeline.stages)
    stages[3] = replace(stages[3], buffer_size=buffer_size, element_bytes=element_bytes)
    return t.facts(replace(pipeline, stages=tuple(stages)), steps=t.fit_steps(0.1), **tfdata)


def test_a_buffer_larger_than_free_memory_is_high():
    # 2048 x 12 MiB = 24 GiB on a host with 64 GiB, 20 GiB free
    (f,) = check(shuffled(host_memory_available_bytes=20 * GiB))
    assert f.severity == "high"
    assert f.title == (
        "shuffle(2048) holds 2048 elements of 12.0 MiB: ~24.0 GiB, more than the "
        "memory left free on this host"
    )
    assert f.location == "train.py:63"
    assert f.evidence["decoded_by"] == "Map(augment at train.py:47)"
    assert "in place of: ds.map(augment)\nds.shuffle(1000).map(augment)" in f.fix
    assert "# and leave out the ds.shuffle(1000) after it (train.py:63)" in f.fix
    # 10% of 64 GiB in 12 MiB elements
    assert "# or: ds.shuffle(546)" in f.fix


def test_a_quarter_of_the_host_is_medium_and_less_is_quiet():
    (f,) = check(shuffled(buffer_size=1400))  # 16.4 GiB of 64: 26%
    assert f.severity == "medium" and "26% of its memory" in f.title
    assert check(shuffled(buffer_size=1000)) == []  # 11.7 GiB: 18%


def test_elements_of_unknown_size_or_an_unknown_host_are_not_judged():
    assert check(shuffled(element_bytes=None)) == []
    assert check(shuffled(host_memory_bytes=None)) == []
