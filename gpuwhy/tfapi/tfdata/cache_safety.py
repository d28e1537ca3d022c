"""Where a ``cache()`` is safe: below the first stage whose elements may change from
pass to pass (a shuffle, a random op, Python not declared pure, a generator, a
tf.Variable read), since a cache replays its first pass on every later one.

One judgement, ``stages.varies_between_passes`` over TF's dataset objects, asked in one
place by its two readers: ``gpuwhy fix`` of the live chain it rewrites
(:func:`first_varying`), and input.no-cache and the decode fixes of the stages a run
recorded, where the collector kept the same judgement per stage as
``PipelineStage.repeats`` (:func:`same_every_pass`, :func:`varies_before`).
"""

from __future__ import annotations

from gpuwhy.facts import PipelineFacts, PipelineStage
from gpuwhy.tfapi.tfdata.stages import Stage, reproducibility


def first_varying(chain: list[Stage], *, assume_pure: bool = False) -> tuple[int, str] | None:
    """The first stage of ``chain`` (source first) whose elements, or those of a dataset
    below it, may differ from pass to pass, and why; None when every pass gives the same
    elements. ``gpuwhy fix`` caches only below it, and compares elements only there."""
    for index, stage in enumerate(chain):
        reason = reproducibility(stage.dataset, assume_pure=assume_pure)
        if reason:
            return index, reason
    return None


def same_every_pass(stage: PipelineStage) -> bool:
    """The recorded stage's elements are the same on every pass, so a cache after it is
    safe.

    The collector records the judgement ``gpuwhy fix`` places its cache by
    (``repeats``, from ``stages.varies_between_passes``): a lookup table read is not
    state, a random op, Python that is not declared pure, a shuffle or a generator is.
    A record from before it was kept falls back on the stage's flags."""
    if stage.repeats is not None:
        return stage.repeats
    return not (stage.random or stage.stateful or stage.kind in ("generator", "shuffle"))


def varies_before(pipeline: PipelineFacts, stage: PipelineStage) -> PipelineStage | None:
    """The first recorded stage before ``stage`` whose elements or order change from
    pass to pass (a shuffle, a random map): a cache after ``stage`` would replay that
    stage's first pass on every epoch (one shuffled order for good). None where every
    stage before it repeats."""
    before = pipeline.stages[: pipeline.stages.index(stage)] if stage in pipeline.stages else ()
    return next((s for s in before if not same_every_pass(s)), None)
