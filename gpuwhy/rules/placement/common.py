"""Shared reading of the ``placement`` section for the placement rules.

Not a rule: which op groups a finding may name, the copies they make, and the XLA fix
both placement rules give. The evidence rows and the prediction note, which the codec
and tensor-core rules show too, are gpuwhy.fixes.op_groups'.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

from gpuwhy.derived.op_classes import is_keras_step
from gpuwhy.facts import (
    HostDeviceCopy,
    OpGroup,
    PlacementFacts,
    is_input_boundary,
)

__all__ = [
    "HEAVY_BYTES_PER_STEP",
    "copies_evidence",
    "copies_made_by",
    "is_input_boundary",
    "known_bytes",
    "nameable_groups",
]


# Bytes copied between host and GPU per step from which the copies alone make a finding
# high (placement.host-transfers' default `max_bytes_per_step`).
HEAVY_BYTES_PER_STEP = 64 * 1024 * 1024


def nameable_groups(
    placement: PlacementFacts, reasons: Collection[str], ignored: Collection[str]
) -> list[OpGroup]:
    """The op groups placed for one of ``reasons`` that a placement finding may name:
    not an op type the user lists in the rule's `ignore_ops` (kept on the CPU on
    purpose), nor one of tf.data's iterator ops, whose CPU placement is TF's making."""
    return [
        g
        for g in placement.groups
        if g.reason in reasons and g.op not in ignored and not is_input_boundary(g.op)
    ]


def copies_made_by(placement: PlacementFacts, groups: list[OpGroup]) -> list[HostDeviceCopy]:
    """The step's copies that the ops of ``groups`` make: the copy's cause has their op
    type and placement reason (or, in a record without them, is one of their examples)."""
    kinds = {(g.op, g.reason) for g in groups}
    names = {e for g in groups for e in g.examples}
    return [
        c
        for c in placement.copies
        if c.kind == "step"
        and (
            (c.cause_op, c.cause_reason) in kinds
            if c.cause_op is not None and c.cause_reason is not None
            else c.cause in names
        )
    ]


def known_bytes(copies: list[HostDeviceCopy]) -> int:
    """Bytes the copies move, counting those whose size TF's graph gives (0: none)."""
    return sum(c.bytes for c in copies if c.bytes is not None)


def copies_evidence(copies: list[HostDeviceCopy]) -> dict[str, Any]:
    """Evidence entries for the host<->device copies a finding's ops cause: how many,
    and the bytes per step where any size is known (none: no entries)."""
    if not copies:
        return {}
    evidence: dict[str, Any] = {"copies_they_cause": len(copies)}
    if any(c.bytes is not None for c in copies):
        evidence["bytes_copied_per_step"] = known_bytes(copies)
    return evidence


def jit_compile_fix(step: str | None) -> list[str]:
    """The lines that compile the step ``step`` with XLA, as the user writes them."""
    if is_keras_step(step):
        return ["model.compile(<your compile arguments>, jit_compile=True)"]
    return ["@tf.function(jit_compile=True)", f"def {step}(...):"]
