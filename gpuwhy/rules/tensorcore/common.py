"""Shared reading for the tensor-core rules: which GPU is targeted and each op's work.

Not a rule. The GPU comes from the placement audit (TF's own device details) or
NVML's device list; without either the rules judge for "a GPU with tensor cores"
and say that they predict.
"""

from __future__ import annotations

from typing import cast

from gpuwhy.derived.stage import derived
from gpuwhy.facts import Facts, TensorOp
from gpuwhy.gpu_specs import UnknownGpuError, find_gpu

__all__ = ["SIXTEEN_BIT", "target_gpu", "work"]

SIXTEEN_BIT = ("half", "float16", "bfloat16")


def target_gpu(facts: Facts) -> tuple[tuple[int, int] | None, str | None]:
    """(compute capability, GPU name) of the GPU the step runs on, when one is known."""
    placement = facts.placement
    if placement is not None and placement.compute_capability:
        # tuple(): a list when the facts were read back from JSON
        capability = cast("tuple[int, int]", tuple(placement.compute_capability))
        return capability, placement.gpu_name
    for device in facts.devices or ():
        if device.compute_capability:
            major, _, minor = device.compute_capability.partition(".")
            try:
                return (int(major), int(minor or 0)), device.name
            except ValueError:
                continue
    projection = derived(facts).projection
    if projection is not None:  # no GPU here: the one --target named
        try:
            spec = find_gpu(projection.gpu)
        except UnknownGpuError:
            return None, None
        return spec.compute_capability, f"{spec.name} (--target)"
    return None, None


def work(op: TensorOp) -> float:
    """The op's FLOPs when known, else 0 (``shares`` then weighs it apart)."""
    return float(op.flops) if op.flops else 0.0


def shares(ops: list[TensorOp], selected: list[TensorOp]) -> float:
    """Share of the work in ``selected``.

    By FLOPs over the ops whose size is known, as long as they are at least half of the
    ops; otherwise (shapes mostly dynamic) by op count, which is the best left.
    """
    if not ops:
        return 0.0
    known = [op for op in ops if op.flops]
    if len(known) * 2 >= len(ops):
        total = sum(work(op) for op in known)
        chosen = {id(op) for op in selected}
        return sum(work(op) for op in known if id(op) in chosen) / total if total else 0.0
    return len(selected) / len(ops)
