"""``gpuwhy run --target GPU``: the projection as one of the run's collectors, asked
once the program ended, after the sections it reads (``placement``, ``program``,
``tfdata``, ``steps``, ``eager``) and given the steps the step sampler profiled.

Where the GPU is unknown or the run gave nothing to cost, the section stays empty and
the program's notes say why.
"""

from __future__ import annotations

from collections.abc import Sequence

from gpuwhy.collect.inprocess.base import Collector, Gathering, Option, RunOptions
from gpuwhy.collect.inprocess.functions import FunctionWatcher
from gpuwhy.collect.inprocess.step_profile import StepSampler
from gpuwhy.collect.nvml import peaks_reading
from gpuwhy.derived.pipeline import steps_pipeline
from gpuwhy.facts import ProjectionFacts
from gpuwhy.gpu_specs import UnknownGpuError, find_gpu
from gpuwhy.projection.step import NothingToProject, projection_facts


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
    name = section = "projection"
    reads_from = ("tracing", "placement", "program", "tfdata", "steps", "eager", "step_profile")
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

    def fill(self, gathering: Gathering) -> ProjectionFacts | None:
        target = gathering.options[TARGET]
        assert target is not None
        facts, profile = gathering.facts, gathering.peer(StepSampler)
        try:
            return projection_facts(
                facts,
                target,
                steps_pipeline(facts.tfdata, facts.steps),
                facts.steps,
                facts.eager,
                profile=profile.result,
                unprofiled=profile.reason or "the steps were not profiled",
                read_peaks=peaks_reading,
            )
        except (UnknownGpuError, NothingToProject) as e:
            gathering.note(f"no projection onto {target}: {e}")
            return None
