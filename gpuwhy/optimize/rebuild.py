"""The rewritten pipeline, built stage by stage from the original's parsed chain and a
plan, with each stage's counterpart (where the elements are compared)."""

from __future__ import annotations

from typing import Any

from gpuwhy.optimize.plan import Plan
from gpuwhy.tfapi.tfdata import rewrite as dr


class StageFailed(Exception):
    def __init__(self, index: int, reason: str) -> None:
        super().__init__(reason)
        self.index, self.reason = index, reason


def build(chain: list, plan: Plan, original: Any, keep_order: bool) -> tuple[Any, dict[int, Any]]:
    """The rewritten dataset, and each stage's counterpart in it (by chain index)."""

    counterpart: dict[int, Any] = {}
    current: Any = None
    changed = False
    deterministic = True if keep_order else False
    for i, stage in enumerate(chain):
        try:
            if i == 0:
                current = (
                    dr.tfrecord_parallel_reads(stage)
                    if plan.parallel_reads and stage.kind == "tfrecord"
                    else stage.dataset
                )
                changed = current is not stage.dataset
            elif plan.parallel.get(i) == "map":
                current, changed = (
                    dr.make_parallel_map(stage.dataset, current, deterministic=deterministic),
                    True,
                )
            elif plan.parallel.get(i) == "interleave":
                current, changed = (
                    dr.make_parallel_interleave(
                        stage.dataset, current, deterministic=deterministic
                    ),
                    True,
                )
            elif changed:
                current = dr.rebuild(stage, current)
            else:
                current = stage.dataset
        except dr.RebuildError as e:
            raise StageFailed(i, str(e)) from None
        except Exception as e:  # noqa: BLE001 - a rebuild TF rejected
            raise StageFailed(i, f"rebuilding it failed: {type(e).__name__}: {e}") from None
        if plan.cache_after == i:
            current, changed = dr.make_cache(current), True
        counterpart[i] = current
    if plan.prefetch:
        current = dr.make_prefetch(current)
    wanted = original.options()
    if plan.any_order:
        import tensorflow as tf

        extra = tf.data.Options()
        extra.deterministic = False
        current = dr.with_options(current, extra)
        wanted = wanted.merge(extra)
    if current.options() != wanted:
        current = dr.with_options(current, wanted)
    return current, counterpart
