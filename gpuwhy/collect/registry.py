"""COLLECTORS: every collector of a watched run, in the order the run needs them.

The list below names them; the order is not written anywhere: each collector declares
the collectors it ``reads_from`` (by name), and :func:`run_order` puts every collector after
those it reads (in the order listed here where nothing decides). A read of a name no
collector has, two collectors of one name, or collectors that read each other in a
circle are refused when this module is imported. The session makes, starts and asks
them in that order and stops them in reverse; the reports ask them for their rows.

Adding a collector: its module (a ``Collector`` subclass: ``name``, ``section``,
``reads_from``, ``uses``, ``options``, its hooks, ``fill``, ``report_rows``), its facts dataclass
(gpuwhy/facts/<section>.py and its field on ``Facts``), one line below, and the schema
regenerated (``python tools/generate_schema.py``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from gpuwhy.collect.environment import RunEnvironment
from gpuwhy.collect.inprocess.activities import ActivityCollector
from gpuwhy.collect.inprocess.base import Collector, Option
from gpuwhy.collect.inprocess.capture import CaptureCollector
from gpuwhy.collect.inprocess.distribute import DistributeCollector
from gpuwhy.collect.inprocess.eager import EagerOpCounter
from gpuwhy.collect.inprocess.functions import FunctionWatcher
from gpuwhy.collect.inprocess.pipelines import PipelineCollector
from gpuwhy.collect.inprocess.placement_audit import PlacementAudit
from gpuwhy.collect.inprocess.program import Program
from gpuwhy.collect.inprocess.projection import TargetProjection
from gpuwhy.collect.inprocess.step_profile import StepSampler
from gpuwhy.collect.inprocess.steps import StepCollector
from gpuwhy.collect.inprocess.task import Task
from gpuwhy.collect.inprocess.timeline import RunTimelineCollector
from gpuwhy.collect.sampler import GpuSampler
from gpuwhy.facts import Facts


class RegistryError(RuntimeError):
    """Collectors that cannot be put in an order: what is wrong, by name."""


def run_order(kinds: Iterable[type[Collector]]) -> tuple[type[Collector], ...]:
    """``kinds`` with every collector after the collectors it reads, else as given."""
    listed = list(kinds)
    names = [kind.name for kind in listed]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice or "" in names:
        raise RegistryError(f"collectors need one name each: {twice or 'one has none'}")
    unknown = [
        f"{k.name} reads {r!r}" for k in listed for r in k.reads_from + k.uses if r not in names
    ]
    if unknown:
        raise RegistryError(f"no collector has that name: {'; '.join(unknown)}")
    sections = {k.name: k.section for k in listed}
    stray = [
        f"{k.name} amends {a!r}"
        for k in listed
        for a in k.amends
        if a not in {sections[r] for r in k.reads_from}
    ]
    if stray:
        raise RegistryError(f"a collector amends only a section it reads: {'; '.join(stray)}")
    placed: list[type[Collector]] = []
    waiting = list(listed)
    while waiting:
        done = {kind.name for kind in placed}
        ready = next((k for k in waiting if all(r in done for r in k.reads_from)), None)
        if ready is None:
            circle = ", ".join(f"{k.name} reads {', '.join(k.reads_from)}" for k in waiting)
            raise RegistryError(f"collectors read each other in a circle: {circle}")
        placed.append(ready)
        waiting.remove(ready)
    return tuple(placed)


COLLECTORS: tuple[type[Collector], ...] = run_order(
    (
        StepCollector,
        FunctionWatcher,
        EagerOpCounter,
        ActivityCollector,
        GpuSampler,
        PipelineCollector,
        RunTimelineCollector,
        StepSampler,
        DistributeCollector,
        PlacementAudit,
        RunEnvironment,
        Program,
        TargetProjection,
        Task,
        CaptureCollector,
    )
)


def run_options(kinds: Iterable[type[Collector]] = COLLECTORS) -> tuple[Option[Any], ...]:
    """Every option the collectors take, in their order."""
    return tuple(option for kind in kinds for option in kind.options)


def checked_options(
    values: Mapping[str, Any], kinds: Iterable[type[Collector]] = COLLECTORS
) -> dict[str, Any]:
    """Options given by name (``gpuwhy.session(hz=5)``, the command line's), each checked
    by the collector that takes it: a name no collector takes is a TypeError, a refused
    value a ValueError (its message the command line's usage error)."""
    known = {option.name: option for option in run_options(kinds)}
    unknown = sorted(set(values) - set(known))
    if unknown:
        raise TypeError(f"unknown option {', '.join(unknown)}; the options are {', '.join(known)}")
    return {name: known[name].check(value) for name, value in values.items()}


# The collectors that show rows in the reports' Run block, in their places.
SHOWN: tuple[type[Collector], ...] = tuple(
    sorted((k for k in COLLECTORS if k.shown is not None), key=lambda k: k.shown or 0)
)


def shown_rows(facts: Facts, html: bool) -> list[tuple[str, str]]:
    """The "Run" block's rows of every collector that shows its section there."""
    return [row for kind in SHOWN for row in kind.report_rows(facts, html)]
