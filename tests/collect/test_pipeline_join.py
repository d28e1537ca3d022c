"""Joining TF's run nodes with the transformations as written (pipeline_join.py), on the
chains TF's model really holds: the names below are what TF 2.21 reports."""

from gpuwhy.collect.inprocess.pipeline_join import match_stages
from gpuwhy.tfapi.tfdata.dataset_chain import WrittenTransformation
from gpuwhy.tfapi.tfdata.iterator_models import RunNode


def written(api: str, op: str, line: int) -> WrittenTransformation:
    return WrittenTransformation(api=api, op=op, location=f"train.py:{line}")


def node(name: str) -> RunNode:
    return RunNode(name=name, node_class="KNOWN_RATIO")


TEXT_GENERATION = [  # tensorflow/text's text generation with an RNN
    written("from_tensor_slices", "TensorSliceDataset", 39),
    written("batch", "BatchDatasetV2", 47),
    written("map", "MapDataset", 64),
    written("shuffle", "ShuffleDatasetV3", 78),
    written("batch", "BatchDatasetV2", 79),
    written("prefetch", "PrefetchDataset", 80),
]


def joined(run: list[RunNode]) -> list[tuple[str | None, str | None]]:
    return [
        (s.run.name if s.run else None, s.written[0].location if s.written else None)
        for s in match_stages(TEXT_GENERATION, run)
    ]


def test_every_stage_in_the_model_is_joined_from_the_source():
    run = [node(n) for n in ("TensorSlice", "BatchV2", "ParallelMapV2", "Shuffle", "BatchV2")]
    assert joined([*run, node("Prefetch")]) == [
        ("TensorSlice", "train.py:39"),
        ("BatchV2", "train.py:47"),
        ("ParallelMapV2", "train.py:64"),
        ("Shuffle", "train.py:78"),
        ("BatchV2", "train.py:79"),
        ("Prefetch", "train.py:80"),
    ]


def test_stages_that_left_the_model_are_joined_from_the_output():
    """The shuffle's buffer took the whole dataset before the model was read: TF's model
    holds the last batch and the prefetch. That batch is the one at :79, not the first
    batch written (:47); the stages before it are stages with no node, in their order."""
    assert joined([node("BatchV2"), node("Prefetch")]) == [
        (None, "train.py:39"),
        (None, "train.py:47"),
        (None, "train.py:64"),
        (None, "train.py:78"),
        ("BatchV2", "train.py:79"),
        ("Prefetch", "train.py:80"),
    ]
    # the shuffle still there (its buffer not yet empty): joined to it
    assert joined([node("Shuffle"), node("BatchV2"), node("Prefetch")])[3:] == [
        ("Shuffle", "train.py:78"),
        ("BatchV2", "train.py:79"),
        ("Prefetch", "train.py:80"),
    ]
