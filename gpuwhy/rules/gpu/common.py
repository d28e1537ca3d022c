"""Shared by the gpu rules: one judgement over each GPU the program used."""

from __future__ import annotations

from collections.abc import Callable

from gpuwhy.derived.gpu_activity import program_gpus, usable
from gpuwhy.facts import Facts, GpuSeries
from gpuwhy.finding import Finding


def each_program_gpu(facts: Facts, judge: Callable[[GpuSeries], Finding | None]) -> list[Finding]:
    """``judge`` over each GPU the program used (none without usable samples): the
    findings it returned."""
    samples = facts.gpu_samples
    if not usable(samples):
        return []
    found = (judge(series) for series in program_gpus(samples))
    return [finding for finding in found if finding is not None]
