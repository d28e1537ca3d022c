"""How many elements a dataset gives per pass, and how many bytes one element takes:
asked by the run collector (the cache advice's size) and the fix planner (whether a
cache fits) alike, answered here with TF's own conventions."""

from __future__ import annotations

from typing import Any

from gpuwhy.tfapi.tfdata.classes import dataset_class

INFINITE, UNKNOWN = -1, -2  # tf.data.INFINITE_CARDINALITY, tf.data.UNKNOWN_CARDINALITY


def cardinality(dataset: Any) -> int:
    """TF's count of elements per pass: a count, INFINITE or UNKNOWN (also when TF
    cannot say at all)."""
    try:
        return int(dataset.cardinality())
    except Exception:  # noqa: BLE001 - a dataset TF cannot count
        return UNKNOWN


def known_count(dataset: Any) -> int | None:
    """Elements per pass when TF knows the pass ends; None when infinite or unknown."""
    count = cardinality(dataset)
    return count if count >= 0 else None


# after a repeat, stages that give one element for each they read: a pass of the data
# keeps its count through them (a take or skip only ends the run early or late)
_ONE_FOR_ONE = frozenset(
    {"map", "prefetch", "take", "skip", "shuffle", "cache", "with_options", "restructured"}
)
_BATCHES = frozenset({"batch", "padded_batch", "ragged_batch", "map_and_batch"})
_REPEATS = frozenset({"repeat", "shuffle_and_repeat"})
_MAX_WALK = 200


def pass_count(dataset: Any) -> int | None:
    """Elements a pass over the data gives, as the program reads them: TF's cardinality
    where nothing repeats the data; where a repeat does (``ds.repeat().take(640)``,
    ``ds.repeat(3)``), TF counts every pass together (640, or 3 passes), so the count is
    the repeat's input's, divided by the batches after it; None where unknown (a
    filter after the repeat, a zip, an unknown input count)."""
    chain = _unary_chain(dataset)  # the output first
    per_pass = 1.0  # the batch sizes after the repeat, divided out
    for i, current in enumerate(chain):
        api = dataset_class(current).api
        if api in _REPEATS:
            count = cardinality(chain[i + 1]) if i + 1 < len(chain) else UNKNOWN
            return max(1, round(count * per_pass)) if count >= 0 else None
        batch = _batch_size(current) if api in _BATCHES else None
        if batch is not None:
            per_pass /= batch
        elif api not in _ONE_FOR_ONE:
            # a source, or a stage that changes the count: TF's own count, unless a
            # repeat below it counts passes together
            below = any(dataset_class(d).api in _REPEATS for d in chain[i + 1 :])
            return None if below else known_count(dataset)
    return known_count(dataset)


def _unary_chain(dataset: Any) -> list[Any]:
    """``dataset`` and its inputs, each stage's ``_input_dataset`` (tf.compat.v1's
    adapters unwrapped), to a source or a stage of several inputs."""
    chain: list[Any] = []
    current = dataset
    while current is not None and len(chain) < _MAX_WALK:
        while type(current).__name__ == "DatasetV1Adapter":  # tf.compat.v1.data
            current = getattr(current, "_dataset", None)
        if current is None:
            break
        chain.append(current)
        current = getattr(current, "_input_dataset", None)
    return chain


def _batch_size(dataset: Any) -> int | None:
    """A batching stage's batch size (``_batch_size``; ``map_and_batch``'s
    ``_batch_size_t``), None where it has none that is a number."""
    value = getattr(dataset, "_batch_size", None)
    if value is None:
        value = getattr(dataset, "_batch_size_t", None)
    try:
        size = int(value)  # type: ignore[arg-type]
    except Exception:  # noqa: BLE001 - no static batch size
        return None
    return size if size > 0 else None


def example_bytes(dataset: Any) -> int | None:
    """Bytes of one example of a dataset whose every component has an unknown leading
    (batch) dimension and is otherwise of fixed size; None for any other dataset."""
    from tensorflow.python.framework import tensor_spec
    from tensorflow.python.util import nest

    try:
        specs = nest.flatten(dataset.element_spec)
    except Exception:  # noqa: BLE001 - no element_spec to read
        return None
    leading = [
        isinstance(s, tensor_spec.TensorSpec)
        and s.shape.rank is not None
        and s.shape.rank > 0
        and s.shape.as_list()[0] is None
        for s in specs
    ]
    if not specs or not all(leading):
        return None
    return element_bytes(dataset, 1)


def element_bytes(dataset: Any, batch_size: int | None = None) -> int | None:
    """Bytes of one element from the dataset's element_spec, when every component is a
    dense tensor of a fixed-size dtype (not strings, ragged or sparse) and a fixed shape;
    an unknown leading dimension (a batch whose last one may be partial) counts as
    ``batch_size`` when given."""
    from tensorflow.python.framework import tensor_spec
    from tensorflow.python.util import nest

    try:
        specs = nest.flatten(dataset.element_spec)
    except Exception:  # noqa: BLE001 - no element_spec to read
        return None
    total = 0
    for spec in specs:
        if not isinstance(spec, tensor_spec.TensorSpec) or spec.shape.rank is None:
            return None
        dims = spec.shape.as_list()
        if dims and dims[0] is None and batch_size:
            dims[0] = batch_size
        if any(d is None for d in dims) or spec.dtype.name in ("string", "variant", "resource"):
            return None
        count = 1
        for d in dims:
            count *= d
        total += count * spec.dtype.size
    return total
