"""TF's Python dataset classes (``tensorflow/python/data/ops/*_op.py``), one table.

For each class: what the user wrote (``api``: ``map``, ``TFRecordDataset``), the op TF
runs (``op``: ``ParallelMapDatasetV2``), gpuwhy's stage kind (``kind``: what the fix
planner rebuilds), and three properties both readers need. A class TF adds later is
one row here; a class missing from the table is read by its name (``_FooDataset`` is
api ``foo``, op ``FooDataset``) and treated as opaque by the fix planner.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class DatasetClass:
    api: str  # as written: map, batch, from_generator, TFRecordDataset ...
    op: str  # the TF dataset op it becomes
    kind: str | None  # the fix planner's stage kind; None: it cannot rebuild it
    source: bool = False  # reads no other dataset of the user's
    node: bool = True  # False: no node of its own when TF runs it (options)
    reproducible: bool = True  # same input -> same elements in the same order, every pass


def _row(api: str, op: str, kind: str | None = None, **flags: bool) -> DatasetClass:
    return DatasetClass(api, op, kind if kind is not None else api, **flags)


def _source(api: str, op: str, kind: str, reproducible: bool = True) -> DatasetClass:
    return DatasetClass(api, op, kind, source=True, reproducible=reproducible)


CLASSES: dict[str, DatasetClass] = {
    # sources
    "_RangeDataset": _source("range", "RangeDataset", "range"),
    "_TensorSliceDataset": _source(
        "from_tensor_slices", "TensorSliceDataset", "from_tensor_slices"
    ),
    "_TensorDataset": _source("from_tensors", "TensorDataset", "from_tensors"),
    "_SparseTensorSliceDataset": _source(
        "from_sparse_tensor_slices", "SparseTensorSliceDataset", "from_sparse_tensor_slices"
    ),
    "_GeneratorDataset": _source(
        "from_generator", "GeneratorDataset", "generator", reproducible=False
    ),
    "_RandomDataset": _source("random", "RandomDataset", "random", reproducible=False),
    "TFRecordDatasetV2": _source("TFRecordDataset", "TFRecordDatasetV2", "tfrecord"),
    "_TFRecordDataset": DatasetClass("TFRecordDataset", "TFRecordDatasetV2", None, source=True),
    "TextLineDatasetV2": _source("TextLineDataset", "TextLineDataset", "text_lines"),
    "_TextLineDataset": DatasetClass("TextLineDataset", "TextLineDataset", None, source=True),
    "FixedLengthRecordDatasetV2": _source(
        "FixedLengthRecordDataset", "FixedLengthRecordDatasetV2", "fixed_length_records"
    ),
    "_FixedLengthRecordDataset": DatasetClass(
        "FixedLengthRecordDataset", "FixedLengthRecordDatasetV2", None, source=True
    ),
    "CsvDatasetV2": DatasetClass("CsvDataset", "CSVDatasetV2", None, source=True),
    # transformations
    "_MapDataset": _row("map", "MapDataset"),
    "_ParallelMapDataset": _row("map", "ParallelMapDatasetV2"),
    "_FilterDataset": _row("filter", "FilterDataset"),
    "_ParallelFilterDataset": DatasetClass("filter", "ParallelFilterDataset", None),
    "_FlatMapDataset": _row("flat_map", "FlatMapDataset"),
    "_InterleaveDataset": _row("interleave", "InterleaveDataset"),
    "_ParallelInterleaveDataset": _row("interleave", "ParallelInterleaveDatasetV4"),
    "ParallelInterleaveDataset": _row("interleave", "LegacyParallelInterleaveDatasetV2"),
    "_BatchDataset": _row("batch", "BatchDatasetV2"),
    "_ParallelBatchDataset": _row("batch", "ParallelBatchDataset"),
    "_PaddedBatchDataset": _row("padded_batch", "PaddedBatchDatasetV2"),
    "_DenseToRaggedDataset": _row("ragged_batch", "DenseToRaggedDataset", "dense_to_ragged"),
    "_PrefetchDataset": _row("prefetch", "PrefetchDataset"),
    "CacheDataset": _row("cache", "CacheDatasetV2"),
    "_CacheDataset": DatasetClass("cache", "CacheDatasetV2", None),  # TF < 2.16
    "_ShuffleDataset": _row("shuffle", "ShuffleDatasetV3", reproducible=False),
    "_ShuffleAndRepeatDataset": DatasetClass(
        "shuffle_and_repeat", "ShuffleAndRepeatDataset", None, reproducible=False
    ),
    "_RepeatDataset": _row("repeat", "RepeatDataset"),
    "_TakeDataset": _row("take", "TakeDataset"),
    "_SkipDataset": _row("skip", "SkipDataset"),
    "_ShardDataset": _row("shard", "ShardDataset"),
    "_TakeWhileDataset": _row("take_while", "TakeWhileDataset"),
    "_ZipDataset": _row("zip", "ZipDataset"),
    "_ConcatenateDataset": _row("concatenate", "ConcatenateDataset"),
    "_UnbatchDataset": _row("unbatch", "UnbatchDataset"),
    "_WindowDataset": _row("window", "WindowDataset"),
    "_ScanDataset": _row("scan", "ScanDataset"),
    "_MapAndBatchDataset": DatasetClass("map_and_batch", "MapAndBatchDataset", None),
    "_IgnoreErrorsDataset": _row("ignore_errors", "IgnoreErrorsDataset", reproducible=False),
    "_AssertCardinalityDataset": _row("assert_cardinality", "AssertCardinalityDataset"),
    "_UniqueDataset": _row("unique", "UniqueDataset"),
    "_RebatchDataset": _row("rebatch", "RebatchDataset"),
    "_GroupByWindowDataset": _row("group_by_window", "GroupByWindowDataset"),
    "_OptionsDataset": _row("with_options", "OptionsDataset", "options", node=False),
    "_RestructuredDataset": _row("restructured", "RestructuredDataset", node=False),
    # a dataset behind a variant tensor: what it does is not known
    "_VariantDataset": DatasetClass(
        "variant", "VariantDataset", None, node=False, reproducible=False
    ),
}

# Readers built from their own internal flat_map/interleave over the file names.
READERS = frozenset({"TFRecordDataset", "TextLineDataset", "FixedLengthRecordDataset"})


def _snake(name: str) -> str:
    name = re.sub(r"V\d+$", "", name.strip("_"))
    name = name[: -len("Dataset")] if name.endswith("Dataset") else name
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower() or "dataset"


def dataset_class(dataset_or_name: Any) -> DatasetClass:
    """The row of a dataset object (or of TF's class name); an unknown class is read by
    its name and cannot be rebuilt."""
    name = dataset_or_name if isinstance(dataset_or_name, str) else type(dataset_or_name).__name__
    known = CLASSES.get(name)
    if known is not None:
        return known
    op = name.strip("_")
    return DatasetClass(_snake(name), op if op.endswith("Dataset") else op + "Dataset", None)


def is_sequential_map(dataset_or_name: Any, num_parallel_calls: int | None = None) -> bool:
    """A ``map`` that runs one element at a time as written (no ``num_parallel_calls``,
    or 1)."""
    row = dataset_class(dataset_or_name)
    return row.op == "MapDataset" or (row.op == "ParallelMapDatasetV2" and num_parallel_calls == 1)


def is_sequential_interleave(dataset_or_name: Any) -> bool:
    """An ``interleave`` written without ``num_parallel_calls``."""
    return dataset_class(dataset_or_name).op == "InterleaveDataset"
