"""Where a ``cache()`` is safe: below the first stage whose elements may change from
pass to pass (a shuffle, a random op, Python not declared pure, a generator, a
tf.Variable read), since a cache replays its first pass on every later one.

One judgement, ``stages.varies_between_passes`` over TF's dataset objects, asked in one
place by its two readers: ``gpuwhy fix`` of the live chain it rewrites
(:func:`first_varying`), and input.no-cache and the decode fixes of the stages a run
recorded, where the collector kept the same judgement per stage as
``PipelineStage.repeats`` (gpuwhy.derived.pipeline_stages: ``same_every_pass``,
``varies_before``, pure functions of the facts the rules ask).
"""

from __future__ import annotations

from gpuwhy.tfapi.tfdata.dataset_args import int_value
from gpuwhy.tfapi.tfdata.stages import Stage, reproducibility


def first_varying(
    chain: list[Stage], *, assume_pure: bool = False, rebuilt: bool = False
) -> tuple[int, str] | None:
    """The first stage of ``chain`` (source first) whose elements, or those of a dataset
    below it, may differ from pass to pass, and why; None when every pass gives the same
    elements. ``gpuwhy fix`` caches only below it. ``rebuilt``: where a rewrite's copy
    of a stage may differ from the original: an unseeded shuffle that keeps one order
    for every pass (``reshuffle_each_iteration=False``) draws another one when built
    again; its elements are compared only below it."""
    for index, stage in enumerate(chain):
        reason = reproducibility(stage.dataset, assume_pure=assume_pure)
        if not reason and rebuilt and _unseeded_shuffle(stage.dataset):
            reason = "the shuffle draws its one order anew when built again (no seed)"
        if reason:
            return index, reason
    return None


def _unseeded_shuffle(dataset: object) -> bool:
    if type(dataset).__name__ != "_ShuffleDataset":
        return False
    return int_value(getattr(dataset, "_seed", None)) in (None, 0)
