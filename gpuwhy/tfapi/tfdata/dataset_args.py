"""The arguments TF keeps on a dataset object (``_batch_size``, ``_num_parallel_calls``,
...) as Python ints: the one reading stages.py, rewrite.py and the distribute hooks share."""

from __future__ import annotations

from typing import Any

AUTOTUNE = -1  # tf.data.AUTOTUNE, without importing TensorFlow


def int_value(value: Any) -> int | None:
    try:
        return int(value)
    except (TypeError, ValueError):
        try:
            return int(value.numpy())
        except Exception:  # noqa: BLE001 - a symbolic tensor
            return None
