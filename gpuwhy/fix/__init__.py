"""Fixes gpuwhy applies itself and proves: ``optimize(dataset)`` rewrites a tf.data input
pipeline with the changes that cannot alter its elements, checks that, and measures it
(``gpuwhy fix --input SCRIPT`` does it for every dataset a script iterates).

Nothing here imports TensorFlow until it is called.
"""

from __future__ import annotations

__all__ = ["optimize"]


def optimize(
    dataset,
    *,
    keep_order=True,
    cache="auto",
    measure=True,
    elements=None,
    repeats=5,
    warmup=1,
    memory_budget_bytes=None,
    assume_pure=False,
):
    """Rewrite a tf.data pipeline with the fixes that cannot change its elements, check
    that they did not, and time original / rewritten / ideal. Returns an
    :class:`gpuwhy.fix.input_pipeline.OptimizeResult` (``.dataset`` is the one to use;
    ``print(result)`` shows the table and the code to paste). See
    :func:`gpuwhy.fix.input_pipeline.optimize` for every argument."""
    from gpuwhy.fix.input_pipeline import optimize as _optimize

    return _optimize(
        dataset,
        keep_order=keep_order,
        cache=cache,
        measure=measure,
        elements=elements,
        repeats=repeats,
        warmup=warmup,
        memory_budget_bytes=memory_budget_bytes,
        assume_pure=assume_pure,
    )
