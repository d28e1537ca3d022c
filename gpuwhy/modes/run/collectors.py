"""COLLECTORS: every collector of a watched run, in the order the session makes and
starts them (and stops them, in reverse) and asks them for their sections.

Adding a collector (it fills one section of the record):
1. its section: a frozen dataclass in gpuwhy/facts.py, a field of ``Facts`` named after it;
2. its module: a ``Collector`` subclass (collect/inprocess/base.py) declaring ``section``,
   ``what``, ``live``, ``needs_tensorflow`` (``wanted()`` for an option), its hooks, and
   ``fill(gathering)`` returning the section (``gathering.facts`` has those before it);
3. its class in COLLECTORS, after the collectors whose sections or objects it reads;
4. the schema regenerated: ``python tools/generate_schema.py``.
"""

from __future__ import annotations

from gpuwhy.collect.environment import RunEnvironment
from gpuwhy.collect.inprocess.base import Collector
from gpuwhy.collect.inprocess.distribute import DistributeCollector
from gpuwhy.collect.inprocess.eager import EagerOpCounter
from gpuwhy.collect.inprocess.functions import FunctionWatcher
from gpuwhy.collect.inprocess.pipelines import PipelineCollector
from gpuwhy.collect.inprocess.placement_audit import PlacementAudit
from gpuwhy.collect.inprocess.program import Program
from gpuwhy.collect.inprocess.step_profile import StepSampler
from gpuwhy.collect.inprocess.steps import StepCollector
from gpuwhy.collect.inprocess.task import Task
from gpuwhy.collect.sampler import GpuSampler
from gpuwhy.projection.in_run import TargetProjection

COLLECTORS: tuple[type[Collector], ...] = (
    StepCollector,  # steps (the function watcher's calls make loops of steps)
    FunctionWatcher,  # tracing
    EagerOpCounter,  # eager (the ops inside the steps)
    GpuSampler,  # gpu_samples
    PipelineCollector,  # tfdata (joined with the steps: their input wait)
    StepSampler,  # no section: a few steps profiled, for distribute and projection
    DistributeCollector,  # distribute
    PlacementAudit,  # placement (the functions traced, the batch, the strategy)
    RunEnvironment,  # environment
    Program,  # program (its notes added last)
    TargetProjection,  # projection (placement, program, tfdata, steps, eager)
    Task,  # task
)
