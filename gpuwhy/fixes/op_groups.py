"""Op groups of the ``placement`` section as findings show them (an evidence row, a
short list in a title) and the note that a placement seen on a machine without a GPU is
a prediction: shared by the placement, codec and tensor-core rules."""

from __future__ import annotations

from typing import Any

from gpuwhy.facts import OpGroup, PlacementFacts

PREDICTION_NOTE = (
    "predicted from TensorFlow's GPU kernel registry: no GPU on this machine "
    "(gpuwhy run, or gpuwhy audit --verify, on a GPU machine confirms it)"
)


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
