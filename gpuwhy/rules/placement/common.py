"""Shared reading of the ``placement`` section for the placement, codec and tensor-core rules.

Not a rule: helpers that turn op groups into evidence rows and say, once, that a
placement seen on a machine without a GPU is a prediction.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

from gpuwhy.facts import (
    KERAS_TRAIN_FUNCTIONS,
    HostDeviceCopy,
    OpGroup,
    PlacementFacts,
    is_input_boundary,
)

__all__ = [
    "HEAVY_BYTES_PER_STEP",
    "PREDICTION_NOTE",
    "copies_evidence",
    "copies_made_by",
    "group_row",
    "is_input_boundary",
    "known_bytes",
    "nameable_groups",
    "op_list",
    "prediction_note",
    "size_text",
]

PREDICTION_NOTE = (
    "predicted from TensorFlow's GPU kernel registry: no GPU on this machine "
    "(run with --verify on a GPU machine to confirm)"
)


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


def prediction_note(placement: PlacementFacts) -> dict[str, Any]:
    """Evidence entry that says how the placement is known."""
    if placement.predicted and placement.gpu_name:
        return {
            "placement": f"predicted from TensorFlow's GPU kernel registry for this machine's "
            f"{placement.gpu_name} (--verify compares with TF's real placement)"
        }
    if placement.predicted:
        return {"placement": PREDICTION_NOTE}
    return {"placement": f"seen on this machine's {placement.gpu_name or 'GPU'} (--verify)"}


def size_text(size: int) -> str:
    """1536 -> "1.5 KiB"; plain bytes below 1 KiB."""
    value = float(size)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{value:,.0f} {unit}" if unit == "B" else f"{value:,.1f} {unit}"
        value /= 1024
    return f"{size} B"


def dtypes_text(group: OpGroup) -> str:
    dtypes = list(dict.fromkeys(group.in_dtypes + group.out_dtypes))
    return ", ".join(dtypes) if dtypes else "-"


def group_row(group: OpGroup) -> dict[str, Any]:
    row: dict[str, Any] = {
        "op": group.op,
        "dtypes": dtypes_text(group),
        "count": group.count,
        "reason": group.reason,
        "examples": list(group.examples),
    }
    if group.locations:
        row["locations"] = list(group.locations)
    if group.in_loop:
        row["in_loop"] = True
    if group.colocated_with:
        row["colocated_with"] = group.colocated_with
    return row


def op_list(groups: list[OpGroup], limit: int = 4) -> str:
    """ "AsString (float32) ×2 at train.py:10, StringLength (string) ...": a title fragment."""
    parts = []
    for group in groups[:limit]:
        where = f" at {group.locations[0]}" if group.locations else ""
        times = f" ×{group.count}" if group.count > 1 else ""
        parts.append(f"{group.op} ({dtypes_text(group)}){times}{where}")
    if len(groups) > limit:
        parts.append(f"{len(groups) - limit} more")
    return ", ".join(parts)


def is_keras_step(name: str | None) -> bool:
    """Whether the step function named (``name (file:line)`` less its place) is Keras':
    its fix is then a ``compile`` argument, not a decorator on the user's function.
    Unknown (None) is taken as Keras, whose steps are the common case."""
    return (
        name is None
        or name in KERAS_TRAIN_FUNCTIONS
        or name.endswith((".train_step", ".test_step", ".predict_step"))
    )


def jit_compile_fix(step: str | None) -> list[str]:
    """The lines that compile the step ``step`` with XLA, as the user writes them."""
    if is_keras_step(step):
        return ["model.compile(<your compile arguments>, jit_compile=True)"]
    return ["@tf.function(jit_compile=True)", f"def {step}(...):"]
