"""How several tf.data stages are said in one title (formatting.stages_words)."""

from __future__ import annotations

from gpuwhy.formatting import stages_words
from tests import builders_tfdata as t


def test_stages_one_call_built_are_said_once_with_its_line():
    at = dict(location="weather.py:55", written_as=("x",))
    stages = [
        t.stage("FromTensor", "source", **at),
        t.stage("Zip", "other", **at),
        t.stage("ParallelMapV2", "map", function="<lambda>", **at),
        t.stage("BatchV2", "batch", **at),
    ]
    assert stages_words(stages) == (
        "FromTensor → Zip → ParallelMapV2(<lambda>) → BatchV2 at weather.py:55"
    )


def test_stages_written_apart_keep_their_own_labels():
    stages = [
        t.tfrecord(),  # train.py:60
        t.parse(function_location="train.py:41"),  # its function's line of its own
        t.stage("BatchV2", "batch", location="train.py:60", written_as=("batch",)),
        t.stage("Prefetch", "prefetch"),  # added by TF: no line
    ]
    assert stages_words(stages) == (
        "TFRecord at train.py:60, ParallelMapV2(parse at train.py:41), BatchV2 at "
        "train.py:60, Prefetch (added by TF)"
    )
