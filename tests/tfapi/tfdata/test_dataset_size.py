"""gpuwhy.tfapi.tfdata.dataset_size.pass_count against the installed TensorFlow: the
elements a pass of the data gives, where a repeat makes TF count the passes together."""

from __future__ import annotations

import pytest

tf = pytest.importorskip("tensorflow")

from gpuwhy.tfapi.tfdata.dataset_size import known_count, pass_count  # noqa: E402


def batches():
    return tf.data.Dataset.range(2048).map(lambda x: x * 2).batch(32)  # 64 a pass


def test_a_dataset_without_a_repeat_is_tfs_count():
    assert pass_count(batches()) == known_count(batches()) == 64
    assert pass_count(batches().prefetch(2)) == 64
    assert pass_count(tf.data.Dataset.range(10).filter(lambda x: x > 3)) is None  # unknown


def test_behind_a_repeat_a_pass_is_what_the_repeat_repeats():
    """`ds.repeat().take(640)`: TF counts 640, ten passes of 64 batches; `repeat(3)`:
    192. input.no-cache took either for one pass and saw nothing read twice."""
    assert known_count(batches().repeat().take(640)) == 640
    assert pass_count(batches().repeat().take(640)) == 64
    assert pass_count(batches().repeat(3)) == 64
    assert pass_count(batches().repeat()) == 64  # TF: infinite
    shuffled = batches().shuffle(8).repeat().map(lambda x: x).prefetch(2)
    assert pass_count(shuffled) == 64


def test_batches_after_the_repeat_divide_the_pass():
    assert pass_count(tf.data.Dataset.range(2000).repeat().batch(32).take(100)) == 62  # 62.5
    fused = (
        tf.data.Dataset.range(100)
        .repeat()
        .apply(tf.data.experimental.map_and_batch(lambda x: x, 10))
    )
    assert pass_count(fused) == 10


def test_a_stage_after_the_repeat_that_changes_the_count_leaves_it_unknown():
    assert pass_count(batches().repeat().filter(lambda x: True)) is None
    # TF counts 50 in all, which is no pass
    assert pass_count(batches().repeat().unbatch().take(50)) is None
    # no repeat below: TF's own count, whatever it is
    assert pass_count(batches().unbatch()) == known_count(batches().unbatch())
    # a repeat of what TF cannot count: unknown
    unknown = tf.data.Dataset.range(10).filter(lambda x: x > 3).repeat().take(5)
    assert pass_count(unknown) is None
