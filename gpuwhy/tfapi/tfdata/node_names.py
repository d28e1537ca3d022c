"""TF's names of the nodes an iterator runs (``ParallelMapV2``, ``MapAndBatch``,
``FiniteRepeat``), and which transformations as written they come from: how the run
collector joins TF's model of a running pipeline with the chain the user wrote."""

from __future__ import annotations

import re

SOURCE_APIS = frozenset(
    {
        "range",
        "from_tensor_slices",
        "from_tensors",
        "from_sparse_tensor_slices",
        "random",
        "counter",
        "from_list",
        "load",
        "CsvDataset",
        "list_files",
        "TFRecordDataset",
        "TextLineDataset",
        "FixedLengthRecordDataset",
        "tf_record",
        "text_line",
        "fixed_length_record",
        "tensor_slice",
        "from_tensor",
    }
)
STAGE_KINDS = {
    "map": "map",
    "map_and_batch": "map",
    "filter": "filter",
    "flat_map": "flat_map",
    "interleave": "interleave",
    "batch": "batch",
    "padded_batch": "batch",
    "ragged_batch": "batch",
    "prefetch": "prefetch",
    "cache": "cache",
    "shuffle": "shuffle",
    "shuffle_and_repeat": "shuffle",
    "repeat": "repeat",
    "from_generator": "generator",
    "generator": "generator",
}
RUN_FAMILIES = {
    "Map": "map",
    "ParallelMap": "map",
    "MapAndBatch": "map_and_batch",
    "Batch": "batch",
    "ParallelBatch": "batch",
    "PaddedBatch": "padded_batch",
    "Prefetch": "prefetch",
    "MemoryCache": "cache",
    "FileCache": "cache",
    "Cache": "cache",
    "Shuffle": "shuffle",
    "ShuffleAndRepeat": "shuffle_and_repeat",
    "Repeat": "repeat",
    "FiniteRepeat": "repeat",
    "ForeverRepeat": "repeat",
    "EmptyRepeat": "repeat",
    "Take": "take",
    "FiniteTake": "take",
    "EmptyTake": "take",
    "Skip": "skip",
    "FiniteSkip": "skip",
    "EmptySkip": "skip",
    "Filter": "filter",
    "ParallelFilter": "filter",
    "FlatMap": "flat_map",
    "Interleave": "interleave",
    "ParallelInterleave": "interleave",
    "LegacyParallelInterleave": "interleave",
    "TensorSlice": "from_tensor_slices",
    "FromTensor": "from_tensors",
    "Generator": "generator",
    "DenseToRagged": "ragged_batch",
}
COMPOSITES = {
    "from_generator": ("flat_map",),
    "TFRecordDataset": ("flat_map", "interleave"),
    "TextLineDataset": ("flat_map", "interleave"),
    "FixedLengthRecordDataset": ("flat_map", "interleave"),
}
INNER_NAMES = {
    "from_generator": "Generator",
    "TFRecordDataset": "TFRecord",
    "TextLineDataset": "TextLine",
    "FixedLengthRecordDataset": "FixedLengthRecord",
}


def run_family(name: str) -> str:
    """TF's node name -> the transformation it runs (``BatchV2`` -> ``batch``)."""
    base = re.sub(r"V\d+$", "", name)
    return RUN_FAMILIES.get(base) or re.sub(r"(?<!^)(?=[A-Z])", "_", base).lower()


def written_families(api: str) -> tuple[str, ...]:
    return COMPOSITES.get(api, (api,))
