"""A watched run: every run collector started together, their facts gathered at the end.

Behind ``gpuwhy run`` (the script runs inside a Session), ``with gpuwhy.session()`` in a
notebook, and the Keras callback. The collectors never decide anything; :meth:`stop`
turns what they saw into :class:`~gpuwhy.facts.Facts` and the rules into findings.
"""

from __future__ import annotations

import dataclasses
import os
import sys
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from gpuwhy.collect.inprocess import imports
from gpuwhy.collect.inprocess.base import Collector, StepWindow
from gpuwhy.collect.inprocess.steps import StepCollector
from gpuwhy.facts import DriverFacts, Facts, GpuDevice, ProgramFacts
from gpuwhy.modes.run.script import exception_line
from gpuwhy.record import Record

if TYPE_CHECKING:
    from gpuwhy.collect.inprocess.eager import EagerOpCounter
    from gpuwhy.tfapi.frames_hidden import HiddenFrames

DEFAULT_HZ = 10.0
# Every tf.function that ran is audited (fit's, evaluate's, predict's, the user's), up to
# this many, those with the most time in calls first; the rest are named in the notes.
AUDIT_FUNCTIONS = 16


class Session:
    """Watch this process from :meth:`start` to :meth:`stop`.

    ``hz``: NVML samples per second. ``audit``: run the placement audit over the
    tf.functions the program spent its time in. ``eager``: count eager ops (a per-op
    callback, switched on for windows of the run: ``eager_duty`` of the time, 1/11 by
    default; 1 counts every op, at about a fifth more per small eager op).
    """

    def __init__(
        self,
        hz: float = DEFAULT_HZ,
        audit: bool = True,
        eager: bool = True,
        command: Sequence[str] | None = None,
        eager_duty: float | None = None,
        target: str | None = None,
    ) -> None:
        """``target``: a GPU to project the training step onto (a name of
        gpuwhy.gpu_specs, or "auto"); None: no projection."""
        from gpuwhy.collect.inprocess.distribute import DistributeCollector
        from gpuwhy.collect.inprocess.eager import EagerOpCounter
        from gpuwhy.collect.inprocess.functions import FunctionWatcher
        from gpuwhy.collect.inprocess.pipelines import PipelineCollector
        from gpuwhy.collect.inprocess.step_profile import StepSampler
        from gpuwhy.collect.sampler import GpuSampler

        if not (hz > 0):
            raise ValueError("hz must be a positive number of samples per second")
        self.hz, self.audit, self.command = hz, audit, tuple(command or sys.argv)
        self.target = target
        self.steps = StepCollector()
        self.functions = FunctionWatcher()
        self.eager: EagerOpCounter | None = None
        if eager:
            self.eager = EagerOpCounter() if eager_duty is None else EagerOpCounter(duty=eager_duty)
        self.sampler = GpuSampler(hz=hz, pids=_own_process_tree)
        self.pipelines = PipelineCollector()
        # a few steps under TF's profiler (one session per process): the time in
        # collectives of a tf.distribute step, and for --target the ops of the training
        # function that stay on the CPU on any GPU
        self.profile = StepSampler(
            self.functions.outermost_calls,
            warm=self.functions.warm if target is not None else None,
            calls_of=self.functions.calls_of if target is not None else None,
        )
        self.distribute = DistributeCollector(sampler=self.profile)
        self.collectors: list[Collector] = [
            c
            for c in (
                self.steps,
                self.functions,
                self.eager,
                self.sampler,
                self.pipelines,
                self.profile,
                self.distribute,
            )
            if c is not None
        ]
        self.t0: float | None = None
        self.record: Record | None = None
        self._driver: DriverFacts | None = None
        self._devices: tuple[GpuDevice, ...] | None = None
        self.notes: list[str] = []
        self._frames_hidden: HiddenFrames | None = None

    @property
    def _script(self) -> str | None:
        """The script the program runs, where it is a .py file (its code is read for
        fixes that use the program's own names)."""
        return self.command[0] if self.command and self.command[0].endswith(".py") else None

    # -- life cycle --------------------------------------------------------------------
    def start(self) -> Session:
        from gpuwhy.collect import driver as driver_collector

        if self.t0 is not None:
            raise RuntimeError("this session was already started")
        # NVML before TF touches the GPU: what it lists now belongs to other programs.
        self._driver, self._devices = driver_collector.collect(frozenset({os.getpid()}))
        self.t0 = time.perf_counter()
        for collector in self.collectors:
            self._safely(collector.start, self.t0)
        imports.when_imported("tensorflow", self._on_tensorflow)
        imports.when_imported("keras", self._on_keras)
        imports.when_imported("tf_keras", self._on_keras)
        return self

    def _on_tensorflow(self, _module: Any = None) -> None:
        from gpuwhy.tfapi.frames_hidden import hide_gpuwhy_frames

        self._frames_hidden = hide_gpuwhy_frames()  # never raises; .reason says what a TF lacked
        for collector in self.collectors:
            self._safely(collector.on_tensorflow)

    def _on_keras(self, _module: Any = None) -> None:
        self._safely(self.steps.on_keras)

    def _safely(self, fn, *args) -> None:
        """While the program runs: a hook failing is noted, never raised into it."""
        try:
            fn(*args)
        except Exception as e:  # noqa: BLE001 - watching must never break the program
            self.notes.append(f"{getattr(fn, '__qualname__', fn)} failed: {type(e).__name__}: {e}")

    def stop(
        self, ended: str = "completed", exit_code: int = 0, error: str | None = None
    ) -> Record:
        """Undo every hook, gather the facts, run the rules. Safe to call twice."""
        if self.record is not None:
            return self.record
        if self.t0 is None:
            raise RuntimeError("this session was never started")
        t_end = time.perf_counter()
        imports.cancel(self._on_tensorflow)
        imports.cancel(self._on_keras)
        for collector in reversed(self.collectors):
            self._safely(collector.stop)
        if self._frames_hidden is not None:
            self._frames_hidden.undo()
        facts = self._facts(t_end, ended, exit_code, error)
        self.record = Record.diagnose("run", facts)
        return self.record

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
    def _measured(self, t_end: float, guard, live: bool = False) -> tuple[Facts, StepWindow]:
        """What the collectors measured up to ``t_end``: steps, input, eager ops, traces
        and GPU samples (the facts that need no audit); ``guard(what, fn, default)``
        keeps one failing collector from losing the others. ``live``: mid-run, leaving
        every collector watching."""
        from gpuwhy.collect.inprocess.input_wait import with_keras_input_wait, with_loop_waits

        assert self.t0 is not None
        tf_imported = "tensorflow" in sys.modules
        calls = guard("tf.function calls", self.functions.calls, {})
        looped = [name for name, spans in calls.items() if len(spans) >= 3]
        trains = guard("training functions", lambda: self.functions.trains(looped), {})
        steps, window = guard(
            "steps",
            lambda: self.steps.facts(self.t0, calls, t_end, trains, live=live),
            (None, StepWindow(self.t0)),
        )
        pipelines = self.pipelines.snapshot if live else self.pipelines.facts
        tfdata = guard("tf.data pipelines", pipelines, None) if tf_imported else None
        steps = with_keras_input_wait(steps, tfdata)
        tfdata = guard(
            "next() timings",
            lambda: with_loop_waits(tfdata, self.pipelines.iterator_spans(), self.steps.reads()),
            tfdata,
        )
        eager = guard("eager ops", lambda: self.eager.facts(window), None) if self.eager else None
        facts = Facts(
            devices=self._devices,
            steps=steps,
            eager=eager,
            tracing=guard("tracing", lambda: self.functions.facts(self.t0), None),
            gpu_samples=guard("GPU samples", self.sampler.facts, None),
            tfdata=tfdata,
        )
        return facts, window

    def live(self) -> tuple[Facts, tuple[tuple[float, float], ...]]:
        """The run so far, for live metrics: the measured facts (no audit) and the steps
        after warm-up as (start, end) in perf_counter seconds. Never raises."""
        facts, window = self._measured(time.perf_counter(), _quiet_guard, live=True)
        if "tensorflow" in sys.modules:  # the strategy and its measured collectives so far
            distribute = _quiet_guard(
                "tf.distribute", lambda: self.distribute.facts(self._script), None
            )
            facts = dataclasses.replace(facts, distribute=distribute)
        return facts, window.intervals

    def _facts(self, t_end: float, ended: str, exit_code: int, error: str | None) -> Facts:
        from gpuwhy.collect.inprocess.environment import run_environment_facts
        from gpuwhy.collect.inprocess.input_wait import delivered_batch
        from gpuwhy.collect.inprocess.task import task_facts

        assert self.t0 is not None
        tf_imported = "tensorflow" in sys.modules
        measured, _ = self._measured(t_end, self._guard)
        steps, tfdata, eager = measured.steps, measured.tfdata, measured.eager
        tracing, gpu_samples = measured.tracing, measured.gpu_samples
        distribute = (
            self._guard("tf.distribute", lambda: self.distribute.facts(self._script), None)
            if tf_imported
            else None
        )
        placement = (
            self._guard(
                "placement audit",
                lambda: self._audit(tracing, delivered_batch(tfdata, steps), distribute),
                None,
            )
            if (self.audit and tf_imported)
            else None
        )
        environment = (
            self._guard("environment", lambda: run_environment_facts(self._driver), None)
            if tf_imported
            else None
        )
        projection = None
        if self.target is not None and tf_imported:
            projection = self._guard(
                "projection",
                lambda: self._projection(placement, tfdata, steps, eager),
                None,
            )
        notes = list(self.notes) + list(self.steps.notes) + list(self.distribute.notes)
        if not tf_imported:
            notes.append("the program never imported TensorFlow: no steps, traces or placement")
        program = ProgramFacts(
            command=self.command,
            ended=ended,
            exit_code=exit_code,
            error=error,
            seconds=round(t_end - self.t0, 3),
            tensorflow_imported=tf_imported,
            tensorflow_version=getattr(sys.modules.get("tensorflow"), "__version__", None),
            keras_version=_keras_version(),
            gpus_seen_by_tf=_tf_gpus() if tf_imported else (),
            keras_auto_jit=self.steps.keras_auto_jit,
            keras_cudnn_rnn=self.steps.keras_cudnn_rnn,
            notes=tuple(notes),
        )
        return Facts(
            environment=environment,
            devices=self._devices,
            placement=placement,
            program=program,
            steps=steps,
            eager=eager,
            tracing=tracing,
            gpu_samples=gpu_samples,
            tfdata=tfdata,
            projection=projection,
            distribute=distribute,
            task=self._guard("task", task_facts, None),
        )

    def _projection(self, placement, tfdata, steps, eager):
        """The run projected onto --target; None, with a note saying why, where the GPU
        is unknown or the run gave nothing to cost."""
        from gpuwhy.derived.pipeline import steps_pipeline
        from gpuwhy.gpu_specs import UnknownGpuError
        from gpuwhy.projection.step import NothingToProject, projection_facts

        assert self.target is not None
        facts = Facts(
            placement=placement,
            devices=self._devices,
            tfdata=tfdata,
            program=ProgramFacts(
                command=self.command,
                gpus_seen_by_tf=_tf_gpus(),
                keras_auto_jit=self.steps.keras_auto_jit,
                keras_cudnn_rnn=self.steps.keras_cudnn_rnn,
            ),
        )
        try:
            return projection_facts(
                facts,
                self.target,
                steps_pipeline(tfdata, steps),
                steps,
                eager,
                profile=self.profile.result,
                unprofiled=self.profile.reason or "the steps were not profiled",
            )
        except (UnknownGpuError, NothingToProject) as e:
            self.notes.append(f"no projection onto {self.target}: {e}")
            return None

    def _guard(self, what: str, fn, default):
        """After the program: one section failing keeps the others (GPUWHY_DEBUG raises)."""
        try:
            return fn()
        except Exception as e:
            if os.environ.get("GPUWHY_DEBUG"):
                raise
            self.notes.append(f"{what} failed: {type(e).__name__}: {e}")
            return default

    def _audit(self, tracing, batch: int | None = None, distribute=None):
        """Placement audit of the functions the program spent its time in; ``batch``, the
        batch size the steps were given, sizes what their traces left unknown. A
        strategy made over this machine's CPUs (no GPU here: MirroredStrategy() picks
        the CPU) places its replicas there; the audit predicts them as a GPU machine's
        strategy would place them."""
        from gpuwhy.collect.placement import audit_functions

        if tracing is None:
            return None
        ran = sorted((f for f in tracing.functions if f.calls), key=lambda f: -f.call_s)
        if len(ran) > AUDIT_FUNCTIONS:
            left = ", ".join(f"{f.name} ({f.location})" for f in ran[AUDIT_FUNCTIONS:][:5])
            self.notes.append(
                f"placement audit: {len(ran) - AUDIT_FUNCTIONS} tf.functions with the least "
                f"time in calls were not audited ({left})"
            )
        wanted = [(f.name, f.location) for f in ran[:AUDIT_FUNCTIONS]]
        targets = self.functions.audit_targets(wanted) if wanted else []
        if not targets:
            return None
        ignored: frozenset[str] = frozenset()
        if distribute is not None and not _tf_gpus():
            ignored = frozenset(d for d in distribute.devices if "CPU" in d.upper())
        return audit_functions(targets, batch=batch, ignored_devices=ignored)[0]

    # -- output ------------------------------------------------------------------------
    def render(self, format: str = "terminal", verbose: bool = False, color: bool = False) -> str:
        """The report as text (stopping the session first if needed)."""
        from gpuwhy.report import renderer_class

        record = self.record or self.stop()
        return renderer_class(format)(verbose=verbose, color=color).render(record)

    def report(self, verbose: bool = False, file: Any = None) -> None:
        """Print the terminal report (to stdout unless ``file`` is given)."""
        stream = file or sys.stdout
        stream.write(self.render(verbose=verbose, color=_is_tty(stream)))
        stream.flush()


def _quiet_guard(_what: str, fn, default):
    """Live updates: a collector failing mid-run skips its part of this update only."""
    try:
        return fn()
    except Exception:  # noqa: BLE001 - the final report says what failed
        return default


def _is_tty(stream: Any) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False


def _own_process_tree() -> set[int]:
    from gpuwhy.collect.process_tree import descendants

    return {os.getpid(), *descendants(os.getpid())}


def _tf_gpus() -> tuple[str, ...]:
    from gpuwhy.tfapi.memory import tf_gpus

    return tf_gpus()


def _keras_version() -> str | None:
    from gpuwhy.tfapi.keras_hooks import keras_version

    return keras_version()
