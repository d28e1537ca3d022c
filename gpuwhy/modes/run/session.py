"""A watched run: every run collector started together, their facts gathered at the end.

Behind ``gpuwhy run`` (the script runs inside a Session), ``with gpuwhy.session()`` in a
notebook, and the Keras callback. The session names no collector: it loops over the
registry (collect/registry.py), each collector declaring its section, its options, what
it reads, when it is asked and when it is available. The collectors never decide anything; :meth:`stop` turns what
they saw into :class:`~gpuwhy.facts.Facts` and the rules into findings.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import sys
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from gpuwhy.collect import driver as driver_collector
from gpuwhy.collect.inprocess import imports
from gpuwhy.collect.inprocess.base import Collector, Ending, Gathering, RunOptions, peer
from gpuwhy.collect.inprocess.guard import Guard, Policy
from gpuwhy.collect.inprocess.steps import StepCollector
from gpuwhy.collect.registry import COLLECTORS, checked_options, run_order
from gpuwhy.collect.step_histogram import LoopHistograms
from gpuwhy.facts import DriverFacts, Facts, GpuDevice
from gpuwhy.modes.run.script import exception_line
from gpuwhy.record import Record
from gpuwhy.report.renderers import renderer_class
from gpuwhy.tfapi.own_frames_hidden import hide_gpuwhy_frames

if TYPE_CHECKING:
    from gpuwhy.tfapi.own_frames_hidden import HiddenFrames


class Session:
    """Watch this process from :meth:`start` to :meth:`stop`.

    ``options``: the collectors' options by name, as ``gpuwhy run`` takes them on its
    command line (collect/registry.py's ``run_options()``), e.g. ``hz`` NVML samples per
    second; ``audit`` the placement audit of the tf.functions the program spent its time
    in; ``eager`` count eager ops (a per-op callback, switched on for windows of the run:
    ``eager_duty`` of the time, 1/11 by default; 1 counts every op, at about a fifth more
    per small eager op); ``target`` a GPU to project the training step onto (a name of
    gpuwhy.gpu_specs, or "auto"). A name no collector takes is a TypeError, a value
    refused a ValueError. ``collectors``: the collector classes (put in their run order).
    """

    def __init__(
        self,
        command: Sequence[str] | None = None,
        collectors: Sequence[type[Collector]] = COLLECTORS,
        **options: Any,
    ) -> None:
        kinds = run_order(collectors)
        self.options = RunOptions(tuple(command or sys.argv), checked_options(options, kinds))
        self.command = self.options.command
        self.collectors: list[Collector] = []
        for kind in kinds:
            if kind.wanted(self.options):
                self.collectors.append(kind.create(self.options, self.collectors))
        self.t0: float | None = None
        self.record: Record | None = None
        self._driver: DriverFacts | None = None
        self._devices: tuple[GpuDevice, ...] | None = None
        self.notes: list[str] = []
        self._hooks_guard = Guard(Policy.HOOK, self.notes)
        self._frames_hidden: HiddenFrames | None = None
        self._histograms: LoopHistograms = ()  # the final facts' (live metrics' last update)

    @property
    def steps(self) -> StepCollector:
        """The step collector (the Keras callback marks the start of fit on it)."""
        return peer(self.collectors, StepCollector)

    # -- life cycle --------------------------------------------------------------------
    def start(self) -> Session:
        if self.t0 is not None:
            raise RuntimeError("this session was already started")
        try:
            # NVML before TF touches the GPU: what it lists now belongs to other programs.
            self._driver, self._devices = driver_collector.collect(frozenset({os.getpid()}))
            self.t0 = time.perf_counter()
            for collector in self.collectors:
                self._safely(collector.start, self.t0)
            imports.when_imported("tensorflow", self._on_tensorflow)
            imports.when_imported("keras", self._on_keras)
            imports.when_imported("tf_keras", self._on_keras)
        except BaseException:
            # Ctrl-C while the hooks go in (a notebook cell interrupted as it starts):
            # none of them stays in the process
            self._undo()
            raise
        return self

    def _on_tensorflow(self, _module: Any = None) -> None:
        self._frames_hidden = hide_gpuwhy_frames()  # never raises; .reason says what a TF lacked
        for collector in self.collectors:
            self._safely(collector.on_tensorflow)

    def _on_keras(self, _module: Any = None) -> None:
        if self._frames_hidden is not None:  # Keras' traceback filter, as TF's
            self._frames_hidden.hide_from_keras()
        for collector in self.collectors:
            self._safely(collector.on_keras)

    def _safely(self, hook: Callable[..., None], *args: Any) -> None:
        """While the program runs: a hook failing is noted, never raised into it."""
        name = getattr(hook, "__qualname__", str(hook))
        self._hooks_guard(name, functools.partial(hook, *args), None)

    def stop(
        self, ended: str = "completed", exit_code: int = 0, error: str | None = None
    ) -> Record:
        """Undo every hook, gather the facts, run the rules. Safe to call twice."""
        if self.record is not None:
            return self.record
        if self.t0 is None:
            raise RuntimeError("this session was never started")
        t_end = time.perf_counter()
        self._undo()
        facts = self._facts(t_end, Ending(ended, exit_code, error))
        self.record = Record.diagnose("run", facts)
        return self.record

    def _undo(self) -> None:
        """Every hook out of the process, the collectors' in reverse order. A Ctrl-C
        meanwhile (a second one, in a notebook) is raised once all of them are out."""
        interrupted: BaseException | None = None
        undos: list[Callable[[], None]] = [
            functools.partial(imports.cancel, self._on_tensorflow),
            functools.partial(imports.cancel, self._on_keras),
            *(collector.stop for collector in reversed(self.collectors)),
        ]
        if self._frames_hidden is not None:
            undos.append(self._frames_hidden.undo)
        for undo in undos:
            try:
                self._safely(undo)
            except BaseException as e:  # noqa: BLE001 - undo the rest first, then raise it
                interrupted = interrupted or e
        self._frames_hidden = None
        if interrupted is not None:
            raise interrupted

    def __enter__(self) -> Session:
        return self.start()

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is None:
            self.stop()
        elif issubclass(exc_type, KeyboardInterrupt):
            self.stop("interrupted", 130, "KeyboardInterrupt")
        else:
            self.stop("exception", 1, exception_line(exc))
        # never swallow the program's exception

    # -- facts -----------------------------------------------------------------------
    def _gather(self, t_end: float, guard: Guard, ending: Ending | None = None) -> Gathering:
        """Every collector's section up to ``t_end``, in the registry's order, each
        failure kept to its own section by ``guard``. ``ending`` None: a live update,
        asking only the collectors that fill one (and leaving them all watching)."""
        assert self.t0 is not None
        gathering = Gathering(
            options=self.options,
            collectors=self.collectors,
            guard=guard,
            t0=self.t0,
            t_end=t_end,
            all_facts=Facts(devices=self._devices),
            live=ending is None,
            ending=ending,
            driver=self._driver,
        )
        for collector in self.collectors:
            if collector.section is None or (gathering.live and not collector.live):
                continue
            if collector.needs_tensorflow and not gathering.tensorflow_imported:
                continue
            gathering.ask(collector)
            section = guard(collector.what, functools.partial(collector.fill, gathering), None)
            gathering.fill(collector.section, section)
            gathering.ask(None)
        return gathering

    def live(self) -> tuple[Facts, LoopHistograms]:
        """The run so far, for live metrics: the sections of the collectors asked live
        (no audit) and per loop its steps after warm-up counted per bucket. Once
        stopped: the final facts and every loop's steps, those still open at the end
        included. Never raises."""
        if self.record is not None:
            return self.record.facts, self._histograms
        gathering = self._gather(time.perf_counter(), Guard(Policy.LIVE))
        return gathering.facts, self.steps.window.histograms

    def _facts(self, t_end: float, ending: Ending) -> Facts:
        """Every section, then the program's notes: what failed, in the order it
        failed, and what each collector could not watch."""
        gathering = self._gather(t_end, Guard(Policy.REPORT, self.notes), ending)
        self._histograms = self.steps.window.histograms
        notes = list(self.notes)
        for collector in self.collectors:
            notes += collector.program_notes()
        if not gathering.tensorflow_imported:
            notes.append("the program never imported TensorFlow: no steps, traces or placement")
        program = gathering.facts.program
        if program is not None:
            gathering.fill("program", dataclasses.replace(program, notes=tuple(notes)))
        return gathering.facts

    # -- output ------------------------------------------------------------------------
    def render(self, format: str = "terminal", verbose: bool = False, color: bool = False) -> str:
        """The report as text (stopping the session first if needed)."""

        record = self.record or self.stop()
        return renderer_class(format)(verbose=verbose, color=color).render(record)

    def report(self, verbose: bool = False, file: Any = None) -> None:
        """Print the terminal report (to stdout unless ``file`` is given)."""
        stream = file or sys.stdout
        stream.write(self.render(verbose=verbose, color=_is_tty(stream)))
        stream.flush()


def _is_tty(stream: Any) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False
