"""The evidence entries findings about a GPU's memory and activity carry, in one order
and one rounding for every rule group that reports them (gpu, memory, env, distribute)."""

from __future__ import annotations

from typing import Any

from gpuwhy.formatting import MiB


def memory_evidence(
    gpu: int, *, used_key: str, used: int, total: int, share_key: str, share: float
) -> dict[str, Any]:
    """The evidence entries a finding about one GPU's memory opens with (the GPU, the
    memory in question, the device's total, the share), in one order and one rounding
    for every rule that reports them: whole MiB, shares to a tenth of a percent."""
    return {
        "gpu": gpu,
        used_key: round(used / MiB),
        "memory_total_mib": round(total / MiB),
        share_key: round(share, 3),
    }


def percent(value: float | None) -> float | None:
    return None if value is None else round(100 * value, 1)
