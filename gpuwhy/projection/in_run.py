"""``gpuwhy run --target GPU``: the projection as one of the run's collectors, asked
once the program ended, after the sections it reads (``placement``, ``program``,
``tfdata``, ``steps``, ``eager``) and given the steps the step sampler profiled.

Where the GPU is unknown or the run gave nothing to cost, the section stays empty and
the program's notes say why.
"""

from __future__ import annotations

from gpuwhy.collect.inprocess.base import Collector, Gathering, RunOptions
from gpuwhy.collect.inprocess.step_profile import StepSampler
from gpuwhy.derived.pipeline import steps_pipeline
from gpuwhy.facts import ProjectionFacts
from gpuwhy.gpu_specs import UnknownGpuError
from gpuwhy.projection.step import NothingToProject, projection_facts


class TargetProjection(Collector):
    section = "projection"
    order = 110  # after placement, program, tfdata, steps and eager, which it reads
    what = "projection"
    needs_tensorflow = True

    @classmethod
    def wanted(cls, options: RunOptions) -> bool:
        return options.target is not None

    def fill(self, gathering: Gathering) -> ProjectionFacts | None:
        target = gathering.options.target
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
            )
        except (UnknownGpuError, NothingToProject) as e:
            gathering.note(f"no projection onto {target}: {e}")
            return None
