"""``gpuwhy run --target GPU``: the ``target`` section, what the projection onto GPU
needs that no other collector keeps: the steps the step sampler profiled once warm
and, for ``auto`` on a GPU gpuwhy's table lacks, NVML's reading of it. The projection
itself is derived from this section and the others (derived/stage.py), wherever the
record is read.
"""

from __future__ import annotations

from collections.abc import Sequence

from gpuwhy.collect.inprocess.base import Collector, Gathering, Option, RunOptions
from gpuwhy.collect.inprocess.functions import FunctionWatcher
from gpuwhy.collect.inprocess.step_profile import StepSampler
from gpuwhy.collect.nvml import peaks_reading
from gpuwhy.facts import GpuDevice, NvmlReading, TargetFacts
from gpuwhy.gpu_specs import UnknownGpuError, find_gpu
from gpuwhy.projection.host import UNPROFILED
from gpuwhy.projection.step import AUTO


def _unknown_gpu(name: str | None) -> str | None:
    """A --target that names no GPU, refused before anything runs ("auto": this
    machine's, known once it runs)."""
    if name is None or name.strip().lower() == "auto":
        return None
    try:
        find_gpu(name)
    except UnknownGpuError as error:
        return str(error)
    return None


TARGET: Option[str | None] = Option(
    "target",
    "--target",
    None,
    "also project the training step onto GPU (A100, H100, L4, T4, V100, "
    "'RTX 4090' ... or auto: this machine's): predicted step time, kernel time and "
    "input wait, said to be a projection",
    metavar="GPU",
    refuse=_unknown_gpu,
)


class TargetProjection(Collector):
    name = section = "target"
    # the function watcher (to know when the steps are warm) and the step sampler
    reads_from = ("tracing", "step_profile")
    options = (TARGET,)
    what = "projection"
    needs_tensorflow = True

    @classmethod
    def wanted(cls, options: RunOptions) -> bool:
        return options[TARGET] is not None

    @classmethod
    def create(cls, options: RunOptions, made: Sequence[Collector]) -> TargetProjection:
        """Asks the step sampler to profile the training function once warm: the ops of
        it that stay on the CPU are costed from that profile."""
        functions = cls.peer_of(made, FunctionWatcher)
        cls.peer_of(made, StepSampler).profile_when_warm(functions.warm, functions.calls_of)
        return cls()

    def fill(self, gathering: Gathering) -> TargetFacts:
        target = gathering.options[TARGET]
        assert target is not None
        sampler = gathering.peer(StepSampler)
        profile = sampler.result
        return TargetFacts(
            requested=target,
            profile=profile,
            unprofiled=None if profile is not None else sampler.reason or UNPROFILED,
            peaks=_auto_peaks(target, gathering.facts.devices or ()),
        )


def _auto_peaks(requested: str, devices: Sequence[GpuDevice]) -> NvmlReading | None:
    """What NVML reports of this machine's first GPU, where ``auto`` projects onto it
    and gpuwhy's table lacks it (its peaks are derived from this); else None."""
    if requested.strip().lower() != AUTO or not devices or _unknown_gpu(devices[0].name) is None:
        return None
    reading = peaks_reading(devices[0].index)
    return NvmlReading(**reading) if reading is not None else None
