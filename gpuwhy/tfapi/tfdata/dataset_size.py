"""How many elements a dataset gives per pass, and how many bytes one element takes:
asked by the run collector (the cache advice's size) and the fix planner (whether a
cache fits) alike, answered here with TF's own conventions."""

from __future__ import annotations

from typing import Any

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
