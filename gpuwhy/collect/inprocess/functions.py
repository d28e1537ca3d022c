"""FunctionWatcher: the tf.functions a running program calls and traces.

Installs :class:`gpuwhy.tfapi.tracing.FunctionHooks` once TensorFlow is imported and
keeps, per ``Function`` object: the (start, end) of every outermost call from eager
code (what finds the training step of a custom loop), and its traces with the
argument types TF traced for (what explains retracing). tf.data's own wrapper
functions are left out: they are traced when a dataset is built, not per step.

Memory is bounded whatever the program does: a call costs 16 bytes (two doubles in
an array) until a drain thread folds it, a few times a second, into the steps of that
function's calls (:class:`~gpuwhy.collect.inprocess.step_streams.CycleStream`, kept
per function in a bounded :class:`~gpuwhy.collect.inprocess.step_record.LoopRecord`:
a looped tf.function is a loop of steps), only the first few signatures of a function are kept, and a traced
``ConcreteFunction`` (a whole graph) is kept only for the audit: the first two and
the latest trace of each live ``Function``, and of the few most-called ones that were
garbage-collected before the run ended (a ``tf.function`` created in a loop must not
keep all its graphs alive).
"""

from __future__ import annotations

import functools
import threading
import weakref
from array import array
from collections import deque
from collections.abc import Callable, Sequence
from typing import Any

from gpuwhy.collect.inprocess.base import Collector, Gathering, RunOptions
from gpuwhy.collect.inprocess.drain import Drain, take
from gpuwhy.collect.inprocess.hook_pauses import HookPauses, call_stretch
from gpuwhy.collect.inprocess.step_record import LoopRecord, LoopView
from gpuwhy.collect.inprocess.step_streams import CycleStream, cycle_view
from gpuwhy.collect.placement import AuditTarget
from gpuwhy.collect.quantiles import Sketch
from gpuwhy.collect.time_windows import TimeWindows, Total
from gpuwhy.facts import (
    KERAS_STEP_FUNCTIONS,
    Facts,
    TracedFunction,
    TraceSignature,
    TracingFacts,
)
from gpuwhy.tfapi.keras_hooks import keras_owner
from gpuwhy.tfapi.tracing import (
    FunctionHooks,
    calls_key,
    describe,
    eager_calls,
    functions_run_eagerly,
)
from gpuwhy.tfapi.training import (
    full_batch_trace,
    has_backward_pass,
    traced_before,
    updates_weights,
)

__all__ = ["FunctionWatcher"]

MAX_SIGNATURES = 5  # per function in the facts
MAX_KEPT_CONCRETE = 3  # per live Function object: the first two traces and the latest
MAX_DEAD_KEPT = 4  # garbage-collected Functions whose traces stay for the audit
MAX_FUNCTIONS = 100  # functions in the facts, by time spent in calls and traces
MAX_PENDING_TRACES = 4096  # trace starts waiting for their call's fold (a retrace storm)
MAX_INSIDE = 4  # enclosing functions named per function
MAX_MODELS = 256  # Keras models told apart per buried record (a run making models in a loop)
LONG_CALL_S = 0.01  # a call this long is placed over the windows it ran through
MAX_RECORDS = 1000  # Function objects followed one by one; dead ones beyond add up per place
# the latest steady calls timed before a pause whose mean its counted calls are worth
# (the short time on after a pause times tens to hundreds of a fast loop's calls)
RECENT_CALLS = 256


class CallWindows:
    """Where in the run the outermost tf.function calls and the traces ran: their seconds
    and the traces' count per window of the run's timeline, each placed in the windows
    it ran through (a call is folded a quarter of a second after it ended: read as a
    total at the timeline's poll, a 0.7 s trace of a loop's first step landed a window
    late, in the loop's first window the report reads, as 42 % of a fit's step). Those
    that began in one of fit's validation passes are left out: they ran between the
    training steps, not in them (``between_steps``)."""

    def __init__(self, t0: float, between_steps: Callable[[float], bool] | None = None) -> None:
        # where given, whether a moment fell in a pass of fit's own between its steps
        # (its validation): a call or a trace that began then is not placed
        self.between_steps = between_steps
        self.calls: TimeWindows[Total] = TimeWindows(t0, Total)
        self.traced_calls: TimeWindows[Total] = TimeWindows(t0, Total)
        self.tracing: TimeWindows[Total] = TimeWindows(t0, Total)
        self.traces: TimeWindows[Total] = TimeWindows(t0, Total)

    def place_calls(self, begin: float, end: float, seconds: float) -> None:
        if self._between(begin):
            return
        if end - begin < LONG_CALL_S:  # most calls: in the window they began in
            self.calls.at(begin).value += seconds
        else:
            self.place(self.calls, begin, end, seconds)

    def place_traced_call(self, begin: float, end: float) -> None:
        if not self._between(begin):
            self.place(self.traced_calls, begin, end, end - begin)

    def place_trace(self, start: float, seconds: float) -> None:
        if not self._between(start):
            self.traces.at(start).value += 1
            self.place(self.tracing, start, start + seconds, seconds)

    def _between(self, t: float) -> bool:
        between = self.between_steps
        return between is not None and between(t)

    @staticmethod
    def place(windows: TimeWindows[Total], begin: float, end: float, seconds: float) -> None:
        for window, share in windows.over(begin, end):
            window.value += seconds * share

    def rows(self, width: float) -> dict[int, dict[str, float]]:
        """Per window index at ``width`` seconds: function_call_s, traced_call_s, trace_s
        and traces (RunWindow's fields)."""
        rows: dict[int, dict[str, float]] = {}
        for field, windows in (
            ("function_call_s", self.calls),
            ("traced_call_s", self.traced_calls),
            ("trace_s", self.tracing),
            ("traces", self.traces),
        ):
            twin = windows.copy()
            twin.coarsen(width)
            for start, total in twin.items():
                index = max(0, int((start - twin.t0) // width + 1e-9))
                value = total.value
                rows.setdefault(index, {})[field] = (
                    int(value) if field == "traces" else round(value, 6)
                )
        return rows


class _Watched:
    """One tf.function object (``Function``): its calls and traces."""

    __slots__ = (
        "info",
        "location",
        "display",
        "times",
        "folded_calls",
        "folded_s",
        "counted_calls",
        "counted_s",
        "unvalued_calls",
        "recent_call_s",
        "recent_mean_s",
        "traced_call_s",
        "trace_starts",
        "stream",
        "record",
        "traces",
        "trace_s",
        "signatures",
        "first_args",
        "changed",
        "concretes",
        "alive",
        "instances",
        "inside",
        "model",
        "per_model",
        "function",
        "gaps",
        "last_end",
    )

    def __init__(self, info: Any, location: str | None, display: str) -> None:
        self.info = info
        self.location = location  # def file:line; for Keras' functions the user's call site
        self.display = display
        self.times = array("d")  # start, end, start, end ... until folded
        self.folded_calls = 0
        self.folded_s = 0.0  # of the calls timed
        self.counted_calls = 0  # calls only counted while the call hook paused (in folded_calls)
        # their seconds, each pause's at the mean of the calls timed just before it, within
        # the pause's own span; ``unvalued_calls`` of them had no timed call before
        self.counted_s = 0.0
        self.unvalued_calls = 0
        # the latest steady calls timed since the last pause (their seconds), and the
        # mean of those before it (None: none yet)
        self.recent_call_s: deque[float] = deque(maxlen=RECENT_CALLS)
        self.recent_mean_s: float | None = None
        # the calls that traced, whole: the trace, the graph's optimisation and any XLA
        # compile, and the first run of the new graph (TF does all of it in that call)
        self.traced_call_s = 0.0
        self.trace_starts: list[float] = []  # of traces not yet matched to their call
        self.stream: CycleStream | None = None  # the steps of its calls, once called
        self.record: LoopRecord | None = None
        self.traces = 0
        self.trace_s = 0.0
        self.signatures: list[TraceSignature] = []  # absolute perf_counter times until facts()
        self.first_args: dict[str, str] = {}
        self.changed: dict[str, None] = {}
        self.concretes: list[tuple[int, Any]] = []  # (trace number, ConcreteFunction)
        self.function: Any = None  # a weak reference to the Function, where it takes one
        self.alive = True
        self.instances = 1  # Function objects it stands for (FunctionWatcher._bury)
        # names of the tf.functions whose graphs call this one (it was traced inside
        # theirs): its work runs in their calls, so its own calls from eager code may be 0
        self.inside: dict[str, None] = {}
        self.model: Any = None  # weak reference to the Keras model of a Keras step function
        # Function objects it stands for, by the number of the Keras model each was made for
        # (a Keras step function's: each model, and each compile of one, makes its own)
        self.per_model: dict[int, int] = {}
        # the host's time between two timed calls in a row (one's end to the next one's
        # start), measured directly: the projection's time between calls
        self.gaps = Sketch()
        self.last_end: float | None = None  # the last timed call's end (None: a pause since)

    @property
    def calls(self) -> int:
        t = self.times[:]
        waiting = sum(int(-a) if a < 0 else 1 for a in t[0::2])
        return self.folded_calls + waiting

    def call_seconds(self) -> float:
        """Seconds in its calls: the timed ones', and the calls only counted (the hook
        paused): each pause's folded at the mean of the steady calls timed just before it
        (:meth:`fold`), the rest at the mean of all timed calls that did not trace (a
        call that traced takes the trace's time too)."""
        t = self.times[:]
        pairs = [(t[i], t[i + 1]) for i in range(0, len(t) - 1, 2)]
        timed = self.folded_s + sum(b - a for a, b in pairs if a >= 0)
        unfolded = sum(int(-a) for a, _ in pairs if a < 0)
        unvalued = self.unvalued_calls + unfolded
        if not unvalued:
            return timed + self.counted_s
        steady_calls = self.calls - self.counted_calls - unfolded - self.traces
        steady_s = timed - self.traced_call_s
        if steady_calls <= 0 or steady_s <= 0:
            return timed + self.counted_s
        return timed + self.counted_s + unvalued * steady_s / steady_calls

    def _counted_call_s(self, calls: int, span_s: float | None) -> float | None:
        """The seconds of ``calls`` counted in one pause of ``span_s`` (None: not known):
        at the mean of the latest steady calls timed before it (the loop's pace then,
        not its first steps': a loop's first 5,000 calls, all timed, ran about 9 %
        slower than its later ones in a loop measured here), at most the pause's span;
        None where no steady call was timed yet."""
        if self.recent_call_s:
            self.recent_mean_s = sum(self.recent_call_s) / len(self.recent_call_s)
            self.recent_call_s.clear()
        if self.recent_mean_s is None:
            return None
        estimate = calls * self.recent_mean_s
        return min(estimate, span_s) if span_s is not None and span_s > 0 else estimate

    def absorb(self, dead: _Watched) -> None:
        """Add a dead Function's counts to this record (its steps are not kept)."""
        self.folded_calls += dead.calls
        self.folded_s += dead.call_seconds()  # an estimate where some were only counted
        self.gaps.merge(dead.gaps)
        self.traced_call_s += dead.traced_call_s
        self.trace_s += dead.trace_s
        for name in set(dead.first_args) | set(self.first_args):
            if (
                self.traces
                and dead.traces
                and dead.first_args.get(name) != self.first_args.get(name)
            ):
                self.changed[name] = None
        if not self.traces and dead.traces:
            self.first_args = dead.first_args
        self.traces += dead.traces
        self.changed.update(dead.changed)
        for name in dead.inside:
            if len(self.inside) < MAX_INSIDE:
                self.inside[name] = None
        self.signatures = sorted(self.signatures + dead.signatures, key=lambda s: s.at_s)[
            :MAX_SIGNATURES
        ]
        self.instances += dead.instances
        for model, objects in dead.per_model.items():
            if model in self.per_model or len(self.per_model) < MAX_MODELS:
                self.per_model[model] = self.per_model.get(model, 0) + objects

    def fold(
        self, t0: float, sampled: Any, tracking: Any = None, windows: CallWindows | None = None
    ) -> None:
        """Move the calls recorded since the last fold into the steps of its calls
        (``tracking()``, where given, makes the stall tracker of its loop) and their
        seconds into the run's ``windows``, where they ran."""
        taken = take(self.times)
        if not taken:
            return
        if self.stream is None:
            self.record = LoopRecord(t0, sampled, tracking() if tracking is not None else None)
            self.stream = CycleStream(self.record.add)
        feed = self.stream.feed
        starts = sorted(self.trace_starts)
        gaps = array("d")
        last_end = self.last_end
        k = 0
        for i in range(0, len(taken) - 1, 2):
            begin, end = taken[i], taken[i + 1]
            if begin < 0:  # -calls, end: calls counted while the call hook paused
                calls = int(-begin)
                # over the pause: from the last timed call on
                seconds = self._counted_call_s(calls, None if last_end is None else end - last_end)
                if seconds is None:
                    self.unvalued_calls += calls
                else:
                    self.counted_s += seconds
                    if windows is not None:
                        windows.place_calls(last_end or end, end, seconds)
                self.stream.stretch(calls, end)
                self.folded_calls += calls - 1  # the pair is one more below
                self.counted_calls += calls
                last_end = None  # the next timed call follows an untimed one
                continue
            if last_end is not None and begin >= last_end:
                gaps.append(begin - last_end)
            last_end = end
            feed(begin, end)
            self.folded_s += end - begin
            if windows is not None:
                windows.place_calls(begin, end, end - begin)
            while k < len(starts) and starts[k] < begin:
                k += 1  # a trace outside any call (a concrete function asked for)
            if k < len(starts) and starts[k] <= end:
                self.traced_call_s += end - begin
                if windows is not None:
                    windows.place_traced_call(begin, end)
                while k < len(starts) and starts[k] <= end:
                    k += 1
            else:
                self.recent_call_s.append(end - begin)
        self.trace_starts = starts[k:] if k < len(starts) else []
        self.folded_calls += len(taken) // 2
        self.last_end = last_end
        if gaps:
            import numpy  # TensorFlow's, loaded long before its first call

            self.gaps.add_many(numpy.frombuffer(gaps, dtype=numpy.float64))

    def view(self, t0: float) -> LoopView | None:
        """The steps of its calls so far (None: never called from eager code)."""
        stream, record = self.stream, self.record
        if stream is None or record is None:
            return None
        return cycle_view(t0, stream, record)

    def add_trace(self, trace: Any) -> None:
        self.traces += 1
        enclosing = getattr(trace, "inside", None)
        if enclosing is not None and len(self.inside) < MAX_INSIDE:
            self.inside[describe(enclosing).name] = None
        self.trace_s += trace.seconds
        if len(self.trace_starts) < MAX_PENDING_TRACES:
            self.trace_starts.append(trace.started)
        args = dict(trace.args)
        if self.traces == 1:
            self.first_args = args
        else:
            for name in set(args) | set(self.first_args):
                if args.get(name) != self.first_args.get(name):
                    self.changed[name] = None
        if len(self.signatures) < MAX_SIGNATURES:
            self.signatures.append(
                TraceSignature(
                    at_s=trace.started,
                    args=trace.args,
                    seconds=round(trace.seconds, 6),
                    caller=trace.caller,
                )
            )
        entry = (self.traces, trace.concrete)
        if len(self.concretes) < MAX_KEPT_CONCRETE:
            self.concretes.append(entry)
        else:
            self.concretes[-1] = entry


class FunctionWatcher(Collector):
    """Watches tf.function calls and traces from the moment TensorFlow is imported.

    For the lead: :meth:`calls` (per function, outermost eager calls), :meth:`facts`
    (section ``tracing``), :meth:`concrete_functions` and :meth:`audit_targets`
    (what the placement audit runs on). Function names are ``"name (file:line)"``,
    with ``" #2"``, ``" #3"`` ... for further ``Function`` objects at the same place
    (a method's function per instance, a ``tf.function`` created in a loop).
    """

    name = section = "tracing"
    what = "tracing"
    # the step collector, made before it: its call hook pauses with the next() hook
    uses = ("steps",)
    live = True
    shown = 50

    @classmethod
    def create(cls, options: RunOptions, made: Sequence[Collector]) -> FunctionWatcher:
        """The watcher, its call hook pausing with the step collector's next() hook
        (hook_pauses.py) where the steps pause theirs: the step collector is made
        first (it starts first), so the two are wired here."""
        watcher = cls()
        for peer in made:
            pauses = getattr(peer, "pauses", None) if peer.name == "steps" else None
            if isinstance(pauses, HookPauses):
                watcher.pauses = pauses
                pauses.ready = watcher.ready
        return watcher

    @classmethod
    def report_rows(cls, facts: Facts, html: bool) -> list[tuple[str, str]]:
        if facts.tracing is None or not facts.tracing.functions:
            return []
        return [("tf.functions", tracing_line(facts.tracing))]

    def __init__(self) -> None:
        self.t0 = 0.0
        self.windows = CallWindows(self.t0)  # where the calls and traces ran
        self.error: str | None = None
        self._hooks: Any = None
        self._lock = threading.RLock()  # a finalizer may run inside our own locked section
        self._by_id: dict[int, _Watched | None] = {}  # live Function objects (None: not watched)
        self._times: dict[int, array] = {}  # the hooks append call times here, by id(Function)
        self._records: list[_Watched] = []  # every Function seen, in order
        self._by_display: dict[str, _Watched] = {}
        self._seen_names: dict[str, int] = {}
        self._dead_kept: list[_Watched] = []
        self._graves: dict[tuple, _Watched] = {}  # FunctionWatcher._bury
        self._finalizers: dict[int, weakref.finalize] = {}
        # a number for each Keras model seen alive, by its id: a model's id is reused
        # once it is freed (a loop building model after model), its number never is
        self._model_numbers: dict[int, int] = {}
        self._models_seen = 0
        self._stopped = False
        self._training: dict[int, bool] = {}  # id(_Watched) -> trains (warm())
        self._drain: Drain | None = None
        # the per-step hooks' pauses (the step collector's, where it pauses them)
        self.pauses: HookPauses | None = None
        self._called: dict[int, _Watched] = {}  # functions called since ready() asked
        self._calls_timed = 0  # calls timed since ready() asked
        # whether a step's interval beyond the head is wanted (the eager op counter's)
        self.sampling: Any = None
        # the activity collector's: a loop's stall tracker, and who hears of each trace
        self.stall_tracking: Any = None
        self.trace_listener: Any = None
        # whether a moment fell between the training steps in a pass of fit's own (its
        # validation): calls and traces then are not placed in the windows
        self.between_steps: Any = None

    def start(self, t0: float) -> None:
        self.t0 = t0
        self.windows = CallWindows(t0, self.between_steps)  # set by create, before this
        self._drain = Drain(self.fold, "functions")  # kept before it starts: a Ctrl-C meanwhile
        self._drain.start()  # still finds it to stop

    def _sampled(self, starts: Any, ends: Any) -> Any:
        """Which of these steps (arrays) a counting window overlaps (None: no counter)."""
        sampling = self.sampling
        return None if sampling is None else sampling(starts, ends)

    def fold(self) -> None:
        """Fold every function's recorded calls into steps (the drain thread, and every
        read of the calls)."""
        with self._lock:
            for watched in self._records:
                if watched.times:
                    self._calls_timed += len(watched.times) // 2  # a stretch's pair too
                    watched.fold(self.t0, self._sampled, self.stall_tracking, self.windows)
                    self._called[id(watched)] = watched

    # -- life cycle ------------------------------------------------------------------
    def on_tensorflow(self) -> None:
        try:
            hooks = FunctionHooks(
                self._times,
                self._on_new_function,
                self._on_trace,
                self.pauses,
            )
            hooks.install()
            self._hooks = hooks
        except Exception as error:  # noqa: BLE001 - never raise into the program
            self.error = f"tf.function calls and traces not watched: {error}"

    def stop(self) -> None:
        if self._drain is not None:
            self._drain.stop()
            if self._drain.error:
                self.error = f"tf.function calls not followed to the end: {self._drain.error}"
        hooks, self._hooks = self._hooks, None
        if hooks is not None:
            try:
                hooks.uninstall()
            except Exception as error:  # noqa: BLE001 - the user's code may raise anything
                self.error = f"could not remove the tf.function hooks: {error}"
        with self._lock:
            # A later session may have patched over ours, keeping our wrappers in its
            # chain: with an empty table and _stopped, they record nothing more.
            self._stopped = True
            self.fold()
            self._times.clear()
            self._by_id.clear()
            for finalizer in self._finalizers.values():
                finalizer.detach()  # Functions no longer keep this watcher alive
            self._finalizers.clear()

    # -- listeners (called by the hooks on the program's threads) ---------------------
    def _on_new_function(self, function: Any) -> array:
        """A Function called for the first time since the hooks were installed."""
        watched = self._register(function, None)
        return watched.times if watched is not None else array("d")

    def _on_trace(self, trace: Any) -> None:
        # the hooks back first, outside this watcher's lock (the pauses' lock is never
        # waited for while it is held): TF's count of the function's calls may start
        # again lower once this call ends
        pauses = self.pauses
        was_paused = pauses is not None and pauses.paused
        if pauses is not None:
            pauses.resume()
        with self._lock:
            if self._stopped:
                return
            watched = self._by_id.get(id(trace.function))
            if watched is None:
                watched = self._register(trace.function, trace.caller)
            if watched is not None:
                watched.add_trace(trace)
            if not trace.nested:  # a nested trace's time is its enclosing trace's
                self.windows.place_trace(trace.started, trace.seconds)
            listener = self.trace_listener
            if listener is not None and not trace.nested:
                listener(trace.started, trace.started + trace.seconds, trace.caller)
        if pauses is not None and not trace.nested:
            self._call_under_way(pauses, trace, watched, was_paused)

    @staticmethod
    def _call_under_way(pauses: HookPauses, trace: Any, watched: Any, was_paused: bool) -> None:
        """A trace: the calls counted while paused go in now, before a call that
        traces lowers TF's count (of the function, and of every other function of its
        ``def``, which TF counts with it); the call that traced is one of them where it
        began while the hook was paused (TF counts it once it ends): where it did not run
        through the hook, though the drain may have put the hook back during its trace
        (a first call lost so, 1 in 6,850, in a CI run)."""
        key = id(trace.function)
        under_way = 1 if trace.in_call else 0
        known = key in pauses.open
        try:
            group = calls_key(trace.function)
        except Exception:  # noqa: BLE001 - a TF without it: never paused anyway
            return
        pauses.close_group(group, key, trace.function, under_way)
        began_paused = was_paused or (pauses.pauses > 0 and not trace.hooked)
        if not known and began_paused and under_way and watched is not None:
            watched.times.extend((-1.0, trace.started + trace.seconds))  # its first call

    def ready(self) -> tuple[bool, int]:
        """For the hooks' pauses (the steps' drain asks): whether the functions called
        since it last asked may pause (each has its first steps kept one by one, none
        shares TF's count with another one alive, functions are not run eagerly), and
        how many calls were timed since. Never before the hooks are in: TensorFlow may
        still be importing on the program's thread, and this runs on the drain's."""
        if self._hooks is None:
            return False, 0
        self.fold()
        with self._lock:
            called, self._called = self._called, {}
            calls, self._calls_timed = self._calls_timed, 0
            if self._stopped or functions_run_eagerly():
                return False, calls
            if any(w.stream is None or w.stream.holds_calls() for w in called.values()):
                return False, calls
            keys: set = set()
            for watched in self._by_id.values():
                function = watched.function() if watched is not None and watched.function else None
                if function is None:
                    continue
                try:
                    counted_as = calls_key(function)
                except Exception:  # noqa: BLE001 - a TF without it: never paused
                    return False, calls
                if counted_as in keys:  # two live functions of one def: counts mixed
                    return False, calls
                keys.add(counted_as)
            return True, calls

    def _track(self, key: int, function: Any, watched: _Watched) -> None:
        """A new function, counted at each pause with the others of its ``def`` (TF
        counts them together): those still open from a pause are counted first."""
        pauses = self.pauses
        assert pauses is not None
        try:
            group = calls_key(function)
        except Exception:  # noqa: BLE001 - a TF without it: its calls stay timed
            pauses.refused = "a tf.function's calls could not be counted"
            return
        pauses.close_group(group, key, function, 0)
        count = functools.partial(_counted_under, group)  # readable once the function is gone
        pauses.track(key, function, count, call_stretch(watched.times), group)

    def _register(self, function: Any, caller: str | None) -> _Watched | None:
        with self._lock:
            if self._stopped:
                return None
            key = id(function)
            if key in self._by_id:
                return self._by_id[key]
            info = describe(function)
            if info.tf_data:
                self._by_id[key] = None  # seen, not watched
                self._times[key] = array("d")  # never called from eager code anyway
                watched = None
            else:
                location = caller if info.library else info.location
                base = f"{info.name} ({location})" if location else info.name
                count = self._seen_names.get(base, 0) + 1
                self._seen_names[base] = count
                display = base if count == 1 else f"{base} #{count}"
                watched = _Watched(info, location, display)
                watched.function = _weak(function)
                if info.library and info.name in KERAS_STEP_FUNCTIONS:
                    owner = keras_owner(function)
                    watched.model = _weak(owner)
                    if owner is not None:
                        watched.per_model[self._model_number(owner)] = 1
                self._by_id[key] = watched
                self._times[key] = watched.times
                self._records.append(watched)
                self._by_display[display] = watched
                if self.pauses is not None:  # its calls are counted at each pause
                    self._track(key, function, watched)
            try:
                finalizer = weakref.finalize(function, self._forget, key)
                # a settable property at run time; typeshed's __slots__ omit it
                finalizer.atexit = False  # type: ignore[misc]
                self._finalizers[key] = finalizer
            except TypeError:  # not weak-referenceable (TF's Function is): its id may be reused
                pass
            return watched

    def _model_number(self, model: Any) -> int:
        """The model's number, the same for each of its step functions and never given
        to another model (its id is, once it is freed). Called under the lock."""
        key = id(model)
        number = self._model_numbers.get(key)
        if number is None:
            self._models_seen += 1
            number = self._model_numbers[key] = self._models_seen
            try:
                weakref.finalize(model, self._model_numbers.pop, key, None)
            except TypeError:  # not weakly referable: numbered by its id while it lives
                pass
        return number

    def _forget(self, key: int) -> None:
        """The Function was garbage-collected: its id may be reused from now on. Calls it
        had while the hook paused are counted now (TF's count outlives it: a
        ``tf.function`` defined in a ``train()`` that returns keeps its last calls)."""
        if self.pauses is not None:
            self.pauses.freed(key)
        with self._lock:
            self._finalizers.pop(key, None)
            self._times.pop(key, None)
            watched = self._by_id.pop(key, None)
            if watched is None:
                return
            watched.alive = False
            if watched.times:
                watched.fold(self.t0, self._sampled, self.stall_tracking, self.windows)
            if watched.concretes:
                self._dead_kept.append(watched)
                if len(self._dead_kept) > MAX_DEAD_KEPT:
                    least = min(self._dead_kept, key=lambda w: (w.calls, w.call_seconds()))
                    self._dead_kept.remove(least)
                    least.concretes = []
                    if len(self._records) > MAX_RECORDS:
                        self._bury(least)
            if len(self._records) > MAX_RECORDS and watched not in self._dead_kept:
                self._bury(watched)

    def _bury(self, watched: _Watched) -> None:
        """A program that makes Function after Function (a ``tf.function`` created in a
        loop) would grow these records without end: beyond ``MAX_RECORDS``, a dead one
        adds its counts to one record per name and place, and its steps are let go."""
        if not watched.instances:
            return  # buried already
        info = watched.info
        key = (info.name, info.filename, info.line, watched.location)
        grave = self._graves.get(key)
        if grave is None:
            grave = self._graves[key] = _Watched(info, watched.location, watched.display)
            grave.alive = False
            grave.instances = 0
            self._records.append(grave)
        grave.absorb(watched)
        watched.instances = 0  # buried: never again
        self._records.remove(watched)
        if self._by_display.get(watched.display) is watched:
            del self._by_display[watched.display]

    # -- what the lead reads -----------------------------------------------------------
    def outermost_calls(self) -> int:
        """Calls of every watched tf.function from eager code so far (a step clock that
        costs a few list reads: another collector's background thread polls it)."""
        with self._lock:
            return sum(w.calls for w in self._records)

    def trace_rows(self, width: float) -> dict[int, dict[str, float]]:
        """The run timeline's tf.function columns per window of ``width`` seconds:
        seconds in outermost calls, in those that traced, in outermost traces, and the
        traces begun (:class:`CallWindows`), after a fold."""
        self.fold()
        with self._lock:
            return self.windows.rows(width)

    def warm(self, min_calls: int, fallback_calls: int) -> tuple[str, int] | None:
        """The function to profile, once warm: of those with ``min_calls`` outermost
        calls or more, the one with the most time in calls that trains (a backward pass
        in its latest trace; an evaluation or a helper warming up first is not it);
        where none does, one called ``fallback_calls`` times (an inference loop). Its
        name as TF traces it and its calls; None until then."""
        with self._lock:
            warm = [(w, w.concretes[-1][1] if w.concretes else None) for w in self._records]
        warm = [(w, c) for w, c in warm if w.calls >= min_calls]
        training = [w for w, concrete in warm if self._trains(w, concrete)]
        pool = training or [w for w, _ in warm if w.calls >= fallback_calls]
        if not pool:
            return None
        hot = max(pool, key=lambda w: w.call_seconds())
        return hot.info.name, hot.calls

    def _trains(self, watched: _Watched, concrete: Any) -> bool:
        """Whether the function's latest trace has a backward pass (read once each)."""

        key = id(watched)
        if key not in self._training:
            self._training[key] = concrete is not None and bool(_trace_trains(concrete))
        return self._training[key]

    def calls_of(self, name: str) -> int:
        """Outermost calls so far of the functions traced as ``name``."""
        with self._lock:
            return sum(w.calls for w in self._records if w.info.name == name)

    def names(self) -> list[str]:
        with self._lock:
            return [w.display for w in self._records]

    def calls(self) -> dict[str, list[tuple[float, float]]]:
        """Per function, its first outermost calls from eager code (up to
        ``HEAD_STEPS`` + 1): (start, end) perf_counter times in call order. Functions
        never called from eager code are left out."""
        self.fold()
        with self._lock:
            return {
                w.display: w.stream.first_calls() for w in self._records if w.stream is not None
            }

    def loops(self) -> dict[str, LoopView]:
        """Per function called from eager code, the steps of its calls (a looped
        tf.function is a loop of steps: gpuwhy.collect.inprocess.steps)."""
        self.fold()
        with self._lock:
            views = {w.display: w.view(self.t0) for w in self._records}
        return {name: view for name, view in views.items() if view is not None}

    def trains(self, names) -> dict[str, bool | None]:
        """Per name (a key of :meth:`calls`), whether the latest trace of the function
        has a backward pass (None: no trace kept, or its graph not readable): what tells
        a training loop's function from a validation loop's. A function traced before
        gpuwhy watched (a notebook cell run again) is read by its earlier traces."""

        with self._lock:
            watched = {name: w for name in names if (w := self._by_display.get(name)) is not None}
            latest = {name: w.concretes[-1][1] for name, w in watched.items() if w.concretes}
            earlier = {
                name: w.function()
                for name, w in watched.items()
                if not w.concretes and w.function is not None
            }
        trains = {name: _trace_trains(concrete) for name, concrete in latest.items()}
        for name, function in earlier.items():
            # traced before gpuwhy watched (a notebook cell run again): its earlier traces
            readings = [_trace_trains(c) for c in traced_before(function)[:MAX_KEPT_CONCRETE]]
            if any(readings):
                trains[name] = True
            elif readings and all(r is False for r in readings):
                trains[name] = False
        return trains

    def concrete_functions(self, name: str) -> list:
        """The kept ConcreteFunctions of one function (at most the first two traces and
        the latest), oldest first; empty for an unknown name."""
        with self._lock:
            watched = self._by_display.get(name)
            return [cf for _, cf in watched.concretes] if watched else []

    def audit_targets(self, names: Sequence[str | tuple[str, str | None]]) -> list[AuditTarget]:
        """AuditTargets for :func:`gpuwhy.collect.placement.audit_functions`: the latest
        trace of each named function (the graph its calls run now; auditing every trace
        would count the same ops several times). A name is a key of :meth:`calls` or the
        ``name`` of a :class:`~gpuwhy.facts.TracedFunction`; the latter, shared by
        several ``Function`` objects, means the most-called one that still has traces.
        Use :meth:`concrete_functions` for the other kept traces. A (name, location)
        pair names one :class:`~gpuwhy.facts.TracedFunction` exactly: Keras gives fit's,
        evaluate's and predict's functions one name, told apart by their call site."""
        targets = []
        with self._lock:
            for wanted in dict.fromkeys(names):
                if isinstance(wanted, tuple):
                    targets.extend(self._targets_at(*wanted))
                    continue
                watched = self._by_display.get(wanted)
                if watched is None:
                    same = [w for w in self._records if w.info.name == wanted and w.concretes]
                    watched = max(same, key=lambda w: (w.calls, w.call_seconds()), default=None)
                concrete = _latest_graph(watched) if watched is not None else None
                if watched is None or concrete is None:
                    continue
                targets.append(
                    AuditTarget(
                        watched.info.name, concrete, watched.location, model=_model(watched)
                    )
                )
        return targets

    def _targets_at(self, name: str, location: str | None) -> list[AuditTarget]:
        """One target per different graph among the functions of this name and place.

        Keras runs fit's training and its validation through one Python function, so
        the two ``Function`` objects share name, code and call site, yet their graphs
        differ (one has a backward pass): both are audited. A ``tf.function`` re-created
        in a loop makes many objects with one graph: audited once."""
        same = sorted(
            (w for w in self._records if w.info.name == name and w.location == location),
            key=lambda w: (-w.calls, -w.call_seconds()),
        )
        found: dict[tuple, AuditTarget] = {}
        for watched in same:
            concrete = _latest_graph(watched)
            if concrete is None:
                continue
            shape = _graph_shape(concrete)
            if shape not in found:
                found[shape] = AuditTarget(
                    watched.info.name, concrete, watched.location, model=_model(watched)
                )
        targets = list(found.values())
        if len(targets) > 1:  # one name, one place: say which is which
            for target in targets:
                trains = has_backward_pass(target.function)  # None: unreadable, no label
                if trains is not None:
                    target.note = TRAINING_NOTE if trains else NOT_TRAINING_NOTE
        return targets

    def fill(self, gathering: Gathering) -> TracingFacts:
        return self.facts(gathering.t0)

    def facts(self, t0: float | None = None) -> TracingFacts:
        """Section ``tracing``, times relative to ``t0`` (default: the run's start).

        ``Function`` objects with the same name and place are one entry: a method's
        function on several instances, or a ``tf.function`` re-created in a loop (TF's
        "defined in a loop" retracing), whose traces then add up.
        """
        t0 = self.t0 if t0 is None else t0
        with self._lock:
            records = list(self._records)
        groups: dict[tuple, list[_Watched]] = {}
        for watched in records:
            info = watched.info
            groups.setdefault((info.name, info.filename, info.line, watched.location), []).append(
                watched
            )
        functions = [_merged(members, t0) for members in groups.values()]
        functions.sort(key=lambda f: -(f.call_s + f.trace_s))
        return TracingFacts(functions=tuple(functions[:MAX_FUNCTIONS]))


def _merged(members: list[_Watched], t0: float) -> TracedFunction:
    first = members[0]
    changed: dict[str, None] = {}
    inside: dict[str, None] = {}
    for watched in members:
        inside.update(watched.inside)
    for watched in members:
        changed.update(watched.changed)
        for name in set(watched.first_args) | set(first.first_args):
            if (
                watched.traces
                and first.traces
                and watched.first_args.get(name) != first.first_args.get(name)
            ):
                changed[name] = None
    signatures = sorted((s for w in members for s in w.signatures), key=lambda s: s.at_s)[
        :MAX_SIGNATURES
    ]
    return TracedFunction(
        name=first.info.name,
        location=first.location,
        calls=sum(w.calls for w in members),
        call_s=round(sum(w.call_seconds() for w in members), 6),
        traced_call_s=round(sum(w.traced_call_s for w in members), 6),
        traces=sum(w.traces for w in members),
        trace_s=round(sum(w.trace_s for w in members), 6),
        changed_args=tuple(sorted(changed)),
        signatures=tuple(
            TraceSignature(
                at_s=round(s.at_s - t0, 6), args=s.args, seconds=s.seconds, caller=s.caller
            )
            for s in signatures
        ),
        reduce_retracing=first.info.reduce_retracing,
        jit_compile=first.info.jit_compile,
        library=first.info.library,
        instances=sum(w.instances for w in members),
        **_per_model(members),
        inside=tuple(sorted(inside))[:MAX_INSIDE],
        **_gaps(members),
    )


def _per_model(members: list[_Watched]) -> dict[str, int]:
    """How many Keras models the Function objects were made for, and the most one of
    them has (0 and 0 where they are no Keras step function's)."""
    objects: dict[int, int] = {}
    for watched in members:
        for model, count in watched.per_model.items():
            objects[model] = objects.get(model, 0) + count
    return {"models": len(objects), "most_per_model": max(objects.values(), default=0)}


def _gaps(members: list[_Watched]) -> dict[str, Any]:
    """The median time between two timed calls in a row, and how many were timed."""
    gaps = Sketch()
    for watched in members:
        gaps.merge(watched.gaps)
    median = gaps.quantile(0.5) if gaps.count else None
    return {
        "gaps": int(gaps.count),
        "gap_median_s": round(median, 9) if median is not None else None,
    }


def _counted_under(key: Any, _function: Any) -> int:
    """TF's count of the calls of the functions of ``key`` (the function itself unused:
    it may be gone)."""
    return eager_calls(key)


TRAINING_NOTE = "the training step (it has a backward pass)"
NOT_TRAINING_NOTE = "validation's or evaluate()'s step (no backward pass)"


def _latest_graph(watched: _Watched) -> Any | None:
    """The ConcreteFunction its calls run: its latest trace seen (or the full batch's,
    where the latest is an epoch's smaller last batch), else (traced before gpuwhy
    watched: a notebook cell run again) the latest it held already."""
    if watched.concretes:
        return full_batch_trace([concrete for _, concrete in watched.concretes])
    function = watched.function() if watched.function is not None else None
    earlier = traced_before(function) if function is not None else []
    return earlier[-1] if earlier else None


def _trace_trains(concrete: Any) -> bool | None:
    """Whether a trace trains: a backward pass, or an optimizer's update applied to
    gradients taken outside it (None: its graph not readable)."""
    backward = has_backward_pass(concrete)
    return backward if backward is not False else updates_weights(concrete)


def _weak(obj: Any) -> Any:
    if obj is None:
        return None
    try:
        return weakref.ref(obj)
    except TypeError:
        return None


def _model(watched: _Watched) -> Any:
    return watched.model() if watched.model is not None else None


def _graph_shape(concrete: Any) -> tuple:
    """What tells two traces' graphs apart cheaply: their op types and counts."""
    try:
        ops = concrete.graph.get_operations()
    except Exception:  # noqa: BLE001 - no graph to read: a target of its own
        return (id(concrete),)
    counts: dict[str, int] = {}
    for op in ops:
        counts[op.type] = counts.get(op.type, 0) + 1
    return tuple(sorted(counts.items()))


# -- its rows in the reports ------------------------------------------------------
def calls_text(fn: TracedFunction) -> str:
    """ "10 calls"; for a function only ever run by another's graph (Keras'
    one_step_on_data inside multi_step_on_iterator), where it runs instead of "0 calls":
    its work is counted in that function's calls."""
    if fn.calls == 0 and fn.inside:
        return "runs inside " + ", ".join(fn.inside)
    return f"{fn.calls:,} call" + ("" if fn.calls == 1 else "s")


def calls_column(fn: TracedFunction) -> str:
    """:func:`calls_text` in a table's calls column: the number alone ("10")."""
    return calls_text(fn) if fn.calls == 0 and fn.inside else f"{fn.calls:,}"


def tracing_line(tracing: TracingFacts) -> str:
    parts = []
    for fn in sorted(tracing.functions, key=lambda f: (-f.traces, -f.calls))[:4]:
        where = f" ({fn.location})" if fn.location else ""
        xla = ", XLA-compiled" if fn.jit_compile else ""
        parts.append(
            f"{fn.name}{where}{xla}: {calls_text(fn)}, {fn.traces} trace"
            + ("s" if fn.traces != 1 else "")
            + (f" ({fn.trace_s:.1f} s)" if fn.trace_s >= 0.05 else "")
        )
    more = len(tracing.functions) - len(parts)
    return "; ".join(parts) + (f"; {more} more" if more > 0 else "")
