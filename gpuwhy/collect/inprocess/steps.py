"""Training steps found without step markers, for Keras ``fit`` and custom loops alike.

Four kinds of evidence are recorded while the program runs; each marks loops:

1. ``keras-fit``: Keras' own per-batch callback calls (``tfapi/keras_hooks.py``); one
   call of the train function runs ``steps_per_execution`` steps.
2. ``tf-data``: ``next()`` on a tf.data iterator from a Python loop
   (``tfapi/tfdata/iterators.py``), or on a tf.distribute iterator
   (``tfapi/distribute.py``), one loop per site. Here the time inside ``next()`` *is*
   the input wait.
3. ``tf-function``: outermost calls of a tf.function called in a loop (``FunctionWatcher``).
4. ``optimizer``: eager ``apply_gradients`` calls (an eager loop with no tf.function).

Every training loop's steps count, whatever marks it: a script may warm up, train one
model per loop, or train in a custom loop and then call ``fit``. Evidence of one loop
seen twice (the function a loop site calls per step, Keras' own functions) counts once,
by the strongest kind; a loop whose steps train nothing (a validation loop) is left out
where another loop trains, and so is every loop not seen training (a few sample images
plotted, a loop of predictions, images generated each epoch): the training loops alone
are the steps. ``StepFacts.source`` names the loop with the most steps (a count, the
same from run to run), ``StepFacts.loops`` each of them.

A step runs from one boundary to the next, so the Python between two train calls
(logging, metrics, eager ops) is part of the step, as it is part of the user's wait.
For function and optimizer calls, boundaries farther apart than ``GAP_LIMIT`` times the
typical step (evaluation between epochs, a checkpoint) end the step at the end of its
call instead; Keras batches and tf.data loops end at epoch ends on their own.
"""

from __future__ import annotations

import bisect
import dataclasses
import heapq
import itertools
import statistics
import threading
import time
import weakref
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from gpuwhy.collect.inprocess.base import Collector, Gathering, Option, RunOptions, StepWindow
from gpuwhy.collect.inprocess.drain import Drain, take
from gpuwhy.collect.inprocess.functions import FunctionWatcher
from gpuwhy.collect.inprocess.hook_pauses import HookPauses, Stretch, read_stretch
from gpuwhy.collect.inprocess.step_record import (
    HEAD_STEPS,
    LAST_STEPS,
    SLOWEST,
    LoopRecord,
    LoopView,
    Step,
    StepStats,
    snapshot,
)
from gpuwhy.collect.inprocess.step_streams import (
    CycleStream,
    IteratorStream,
    KerasStream,
    calls_view,
    cycle_view,
)
from gpuwhy.collect.quantiles import Sketch
from gpuwhy.collect.step_histogram import StepHistogram
from gpuwhy.collect.time_windows import TimeWindows, width_for
from gpuwhy.facts import Facts, StepFacts, StepLoop, StepSpan, StepTimeline
from gpuwhy.formatting import duration, wait_in_time
from gpuwhy.tfapi import distribute, keras_hooks
from gpuwhy.tfapi.tfdata import iterators as data_iterator
from gpuwhy.tfapi.tfdata.dataset_chain import keeps_a_model
from gpuwhy.tfapi.tfdata.iterator_models import root_elements

MAX_STEPS = 5000  # per-step series kept in the facts (the first steps of the run)
MIN_STEPS = 3  # fewer boundaries than this are not a loop
WARMUP_LOOKAHEAD = 5  # warm-up steps are found among the first few only
WARMUP_FACTOR = 3.0
MAX_SITES = 64  # loop sites followed; reads at further sites are not steps
MAX_LATER_WARMUP = 64  # later warm-up steps named in the facts
MAX_COMPILES = 64  # Keras models whose compile is remembered
MAX_READ_RUNS = 4096  # per-iterator sums of next() reads kept for the input wait
BEGAN_AFTER = 3  # step marks before the eager op counter is told again that steps began
# a timeline window whose steps were mostly only counted (the timing paused) has a
# median where at least this many were timed
MIN_TIMED_IN_WINDOW = 3

PAUSE_TIMING: Option[bool] = Option(
    "pause_timing",
    "--time-every-step",
    True,
    "time every next() and tf.function call (by default their timing pauses for most "
    "of a long steady loop of short steps, whose steps are then counted, not timed, to "
    "keep watching under 2%% of their time)",
    switch=True,
)


class _Iterator:
    """The reads of one iterator id since it started being read (its id may be
    reused by a later iterator: an exhausted read ends it)."""

    __slots__ = ("key", "first", "waited", "elements", "counted")

    def __init__(self, key: int, first: float) -> None:
        self.key, self.first, self.waited, self.elements = key, first, 0.0, 0
        self.counted = 0  # elements read while the timing paused (in ``elements``)

    @property
    def wait_estimate(self) -> float:
        """Seconds waited: timed, and for the reads only counted, at the timed ones' mean."""
        timed = self.elements - self.counted
        if not self.counted or timed <= 0:
            return self.waited
        return self.waited * self.elements / timed


@dataclass
class StepCollector(Collector):
    """Records Keras, tf.data and optimizer events; :meth:`facts` picks the step clock.

    The hooks append each event to a list; a drain thread (and every :meth:`facts`)
    turns those into steps (:mod:`~gpuwhy.collect.inprocess.step_streams`), kept per
    loop in bounded state (:mod:`~gpuwhy.collect.inprocess.step_record`)."""

    name = section = "steps"
    # The function watcher's calls make loops of steps: it asks for them when asked for
    # its section, and is first to start and last to stop.
    uses = ("tracing",)
    options = (PAUSE_TIMING,)
    what = "steps"
    live = True
    shown = 20

    @classmethod
    def report_rows(cls, facts: Facts, html: bool) -> list[tuple[str, str]]:
        if facts.steps is not None:
            return [("Steps", steps_line(facts.steps))]
        if not html and facts.program is not None and facts.program.tensorflow_imported:
            called = [f for f in (facts.tracing.functions if facts.tracing else ()) if f.calls]
            if called:
                # a step function ran, too few times to tell a loop (a heavy step in a
                # short or bounded run)
                top = max(called, key=lambda f: f.call_s)
                where = f" ({top.location})" if top.location else ""
                none = (
                    f"none found: {top.name}{where} was called {top.calls} time"
                    f"{'s' if top.calls != 1 else ''}, too few to time a loop of steps "
                    "(a longer run shows them)"
                )
            else:
                none = (
                    "none found (no Keras fit, no loop over a tf.data iterator, "
                    "no repeated tf.function or apply_gradients calls)"
                )
            return [("Steps", none)]
        return []

    keras_events: list = field(default_factory=list)  # (event, t, value), until drained
    notes: list = field(default_factory=list)
    # Keras compile(jit_compile="auto"): would Keras XLA-compile the step on a GPU
    keras_auto_jit: bool | None = None
    # per compiled model (by id; the weak reference tells a reused id): would_xla
    keras_compiles: dict = field(default_factory=dict)
    keras_cudnn_rnn: tuple = ()  # the compiled model's LSTM/GRU layers cuDNN runs on a GPU
    keras_run_eagerly_at: str | None = None  # the last compile's line, given run_eagerly=True
    # Whether a step's interval is wanted one by one beyond the head: the eager op
    # counter sets it (a step that overlaps one of its counting windows)
    sampling: Callable[[Any, Any], Any] | None = None  # which steps (arrays) to keep
    # Called from the fold that first sees a loop's events (a Keras batch, a read of a
    # tf.data iterator, an optimizer step), and again from the one that sees its third
    # step mark: the eager op counter opens a window at each, so a short run's steps are
    # counted whatever the time its set-up took. The first alone may be spent on a step
    # that traces, counting no step whole (an eager-metric loop of 200 steps in 0.8 s
    # read as no steps sampled, 3 runs of 3)
    began: Callable[[], None] | None = None
    # A new loop's stall tracker (the activity collector's), fed each step as it folds
    stall_tracking: Callable[[], object] | None = None
    # Told of each run of reads of one iterator that no other iterator's read broke
    # (start, end, the loop's site): a validation pass between training steps, as the
    # program's own thread reads it, so a stall found later finds it (activities.py)
    loop_listener: Callable[[float, float, object], None] | None = None
    # Whether the next() and tf.function call timing may pause on a long steady loop of
    # short steps (hook_pauses.py), and the pauses
    pause_timing: bool = True
    pauses: HookPauses | None = None

    @classmethod
    def wanted(cls, options: RunOptions) -> bool:
        return True  # its switch (--time-every-step) configures it, never turns it off

    @classmethod
    def create(cls, options: RunOptions, made) -> StepCollector:
        # its pauses take the next() hook alone in a run (functions.py says why the call
        # hook is not wired to them)
        return cls(pause_timing=options[PAUSE_TIMING])

    def __post_init__(self) -> None:
        self._marks = 0  # step marks folded while ``began`` waits
        self._patches: list = []
        self._lock = threading.RLock()
        self.t0 = time.perf_counter()
        # The steps after warm-up as of the last section asked (set by fill)
        self.window = StepWindow(self.t0)
        self._reads: list = []  # (key, site, start, end, exhausted), until drained
        self._applies: list = []  # (start, end) of eager apply_gradients, until drained
        self._keras: tuple[KerasStream, LoopRecord] | None = None
        self._sites: dict[object, tuple[IteratorStream, LoopRecord]] = {}
        self._optimizer: tuple[CycleStream, LoopRecord] | None = None
        self._iterators: dict[int, _Iterator] = {}  # per iterator id: its current reads
        # the reads running: [key, site, first start, last end, elements read]
        self._segment: list | None = None
        self._read_runs: list[_Iterator] = []  # iterators ended (exhausted or re-led)
        self._drain: Drain | None = None
        self._read_sites: set = set()  # the loop sites read since the last tick
        if self.pause_timing and self.pauses is None:
            self.pauses = HookPauses()

    def start(self, t0: float) -> None:
        self.t0 = t0
        self._drain = Drain(self.fold, "steps")  # kept before it starts: a Ctrl-C meanwhile
        self._drain.start()  # still finds it to stop

    # -- hooks ---------------------------------------------------------------------
    def on_tensorflow(self) -> None:
        # the hooks append each read to the list themselves (``list.append``: no Python
        # frame of gpuwhy's on the program's thread), and the fold does the rest
        pauses = self.pauses
        self._install(
            lambda: data_iterator.install(self._reads.append, pauses, self._track),
            "tf.data iterators",
        )
        if pauses is not None and pauses.patches:
            # a new iterator's first steps are timed; one freed while paused is counted
            self._install(
                lambda: [
                    data_iterator.on_iterator_created(
                        before=lambda iterator, dataset: self._created(iterator),
                        end=pauses.ended,
                    )
                ],
                "tf.data iterators' pauses",
            )
        self._install(self._install_distributed, "distributed iterators")

    def _created(self, iterator: Any) -> None:
        """A new iterator (the program's thread): its first steps are timed, and where
        the program made it, nothing pauses before its first read is."""
        pauses = self.pauses
        if pauses is not None:
            pauses.resume()
            if data_iterator.made_by_the_program():
                pauses.expect(id(iterator), iterator)

    def _track(self, key: int, iterator: Any, site: object) -> None:
        """An iterator the timing sees (the hook, on the program's thread): counted by
        its model at each pause, its paused reads back among the reads."""
        if self.pauses is None:
            return
        if not keeps_a_model(iterator):
            # TF keeps no count of its elements to read (asking makes TF log a warning
            # on the program's stderr): its reads are timed, every one
            self.pauses.refuse("a count could not be read (autotune is off for a dataset)")
        else:
            stretch = read_stretch(self._reads.append, key, site)
            self.pauses.track(key, iterator, root_elements, stretch, counted_elsewhere=True)

    def _install_distributed(self) -> list:
        """A tf.distribute iterator read in the loop (``for x in dist_ds``): its reads
        are this worker's wait for its own input, timed like a tf.data iterator's."""

        return distribute.install_iterator_timing(self._reads.append)

    def on_keras(self) -> None:
        self._install(
            lambda: keras_hooks.install_callbacks(self._on_keras_event), "Keras callbacks"
        )
        self._install(lambda: keras_hooks.install_optimizer(self._on_apply), "Keras optimizers")
        self._install(lambda: keras_hooks.install_compile(self._on_compile), "Keras compile")

    def _on_compile(
        self, model: Any, would_xla: bool | None, cudnn: tuple = (), eager_at: str | None = None
    ) -> None:
        """A compile: with jit_compile="auto", would Keras XLA-compile it on a GPU
        (None: another jit_compile); the LSTM/GRU layers cuDNN would run there. Kept per
        model (a script may compile several, each settling "auto" for itself), and the
        last one for the program's facts."""
        self.keras_auto_jit = would_xla
        self.keras_cudnn_rnn = tuple(cudnn)
        self.keras_run_eagerly_at = eager_at
        try:
            ref: Any = weakref.ref(model)
        except TypeError:
            ref = None
        if len(self.keras_compiles) >= MAX_COMPILES:
            self.keras_compiles.pop(next(iter(self.keras_compiles)))
        self.keras_compiles[id(model)] = (ref, would_xla, tuple(cudnn))

    def keras_compile_of(self, model: Any) -> tuple[bool, bool | None, tuple[str, ...]]:
        """(whether compile was seen for ``model``, what "auto" would mean on a GPU,
        the model's LSTM/GRU layers cuDNN runs there). Where the model is unknown (None),
        the last compile seen stands for it."""
        if model is None:
            return bool(self.keras_compiles), self.keras_auto_jit, self.keras_cudnn_rnn
        entry = self.keras_compiles.get(id(model))
        if entry is None or (entry[0] is not None and entry[0]() is not model):
            return False, None, ()
        return True, entry[1], entry[2]

    def _install(self, install, what: str) -> None:
        try:
            self._patches.extend(install())
        except Exception as e:  # noqa: BLE001 - a TF/Keras version we do not know
            self.notes.append(f"could not watch {what}: {type(e).__name__}: {e}")

    def stop(self) -> None:
        if self._drain is not None:  # first: its tick may pause the hooks again
            self._drain.stop()
            if self._drain.error:
                self.notes.append(f"steps not followed to the end: {self._drain.error}")
        if self.pauses is not None:
            try:
                self.pauses.finish()
            except Exception as e:  # noqa: BLE001 - the steps counted so far stay
                self.notes.append(f"paused reads not counted: {type(e).__name__}: {e}")
        for patch in reversed(self._patches):
            patch.undo()
        self._patches.clear()

    def mark_fit_start(self, location: object) -> None:
        """For a watcher started inside ``fit`` (the Keras callback), after the hook that
        would have seen ``on_train_begin``: where fit was called from."""
        self._on_keras_event("on_train_begin", time.perf_counter(), location)

    def _on_keras_event(self, event: str, t: float, value: object) -> None:
        self.keras_events.append((event, t, value))

    def _on_next(self, key: int, site: object, start: float, end: float, exhausted: bool) -> None:
        """One read, as the hooks append it (tests and benchmarks feed reads here)."""
        self._reads.append((key, site, start, end, exhausted))

    def _tell_loops(self, reads: list) -> None:
        """Runs of reads of one iterator, told to ``loop_listener`` as each ends, in the
        fold before the reads' steps are (the stalls those steps feed ask the listener's
        collector what overlapped them, and find these runs there)."""
        segment = self._segment
        for key, site, start, end, exhausted in reads:
            if isinstance(exhausted, Stretch):  # reads counted while the timing paused
                if segment is not None and segment[0] == key:
                    segment[3] = end
                    segment[4] += exhausted.reads
                    if exhausted.ended:
                        self._told(segment)
                        segment = None
                continue
            if segment is not None and segment[0] != key:  # another iterator's reads begin
                self._told(segment)
                segment = None
            if segment is None:
                segment = [key, site, start, end, 0]
            segment[3] = end
            segment[4] += not exhausted
            if exhausted:
                self._told(segment)
                segment = None
        self._segment = segment

    def _told(self, segment: list) -> None:
        """A run of reads ended: told to the listener where it read two elements or
        more (a loop; a zip's partner read once a step, or a peek, is none)."""
        listener = self.loop_listener
        if listener is not None and segment[4] >= 2:
            listener(segment[2], segment[3], segment[1])

    def _on_apply(self, event: str, start: float, end: object) -> None:
        self._applies.append((start, end))

    # -- folding the events into steps ---------------------------------------------
    def _sampled(self, starts: Any, ends: Any) -> Any:
        """Which of these steps (arrays) a counting window overlaps (None: no counter)."""
        sampling = self.sampling
        return None if sampling is None else sampling(starts, ends)

    def _record(self) -> LoopRecord:
        tracking = self.stall_tracking
        return LoopRecord(self.t0, self._sampled, tracking() if tracking is not None else None)

    def fold(self) -> None:
        """Turn the events recorded since the last fold into steps (the drain thread,
        and every snapshot)."""
        with self._lock:
            events = take(self.keras_events)
            if events:
                if self._keras is None:
                    record = self._record()
                    self._keras = (KerasStream(record.add), record)
                feed = self._keras[0].feed
                for event in events:
                    feed(*event)
            reads = take(self._reads)
            if reads and self.loop_listener is not None:
                self._tell_loops(reads)
            timed = 0
            for key, site, start, end, exhausted in reads:
                self._count_read(key, start, end, exhausted)
                timed += not isinstance(exhausted, Stretch)
                self._read_sites.add(site)
                stream = self._sites.get(site)
                if stream is None:
                    if len(self._sites) >= MAX_SITES:
                        continue
                    record = self._record()
                    stream = self._sites[site] = (IteratorStream(record.add), record)
                stream[0].feed(key, start, end, exhausted)
            applies = take(self._applies)
            if applies:
                if self._optimizer is None:
                    record = self._record()
                    self._optimizer = (CycleStream(record.add), record)
                feed_call = self._optimizer[0].feed
                for start, end in applies:
                    feed_call(start, end)
            if self.began is not None and (events or self._sites or applies):
                marks = self._marks
                self._marks += len(reads) + len(applies)
                self._marks += sum(1 for e in events if e[0] == "on_train_batch_end")
                if marks == 0 or self._marks >= BEGAN_AFTER:
                    self.began()
                if self._marks >= BEGAN_AFTER:
                    self.began = None
            if self.pauses is not None:
                self._tick_pauses(timed)

    def _tick_pauses(self, timed: int) -> None:
        """The hooks' pauses after a fold of ``timed`` timed reads: every loop read since
        the last tick must have its first steps kept one by one (the head every rule on
        single steps reads) before the hooks pause (the function watcher says the same
        of its functions)."""
        pauses = self.pauses
        assert pauses is not None
        sites, self._read_sites = self._read_sites, set()
        steady = all(
            site in self._sites and len(self._sites[site][1].head) >= HEAD_STEPS for site in sites
        )
        pauses.tick(time.perf_counter(), timed, steady)

    def _count_read(self, key: int, start: float, end: float, exhausted: bool) -> None:
        """Per iterator, what its next() calls waited and how many elements they gave."""
        current = self._iterators.get(key)
        if current is None:
            current = self._iterators[key] = _Iterator(key, start)
        if isinstance(exhausted, Stretch):  # elements read while the timing paused
            current.elements += exhausted.reads
            current.counted += exhausted.reads
            if not exhausted.ended:
                return
        else:
            current.waited += end - start
        if not exhausted:
            current.elements += 1
            return
        del self._iterators[key]
        if len(self._read_runs) < MAX_READ_RUNS:
            self._read_runs.append(current)
        else:  # beyond, the id's reads add to the last run kept of that id (if any)
            kept = next((r for r in reversed(self._read_runs) if r.key == key), None)
            if kept is not None:
                kept.waited += current.waited
                kept.elements += current.elements
                kept.counted += current.counted

    def reads(self) -> list[tuple[int, float, float, int]]:
        """Every iterator's ``next()`` calls, summed: (iterator id, its first read's
        start, seconds waited, elements returned). The reads only counted while the
        timing paused are taken to have waited as long as the timed ones did on average."""
        self.fold()
        with self._lock:
            runs = self._read_runs + list(self._iterators.values())
            return [(r.key, r.first, r.wait_estimate, r.elements) for r in runs]

    def candidates(self) -> list[tuple[str, str, LoopView]]:
        """(source, name, steps) of the Keras, tf.data and optimizer loops so far,
        tf.data sites most reads first."""
        self.fold()
        with self._lock:
            out: list[tuple[str, str, LoopView]] = []
            if self._keras is not None:
                stream, record = self._keras
                out.append(("keras-fit", stream.marker, snapshot(record, stream.open_steps())))
            by_reads = sorted(self._sites.items(), key=lambda kv: -kv[1][0].reads)
            for site, (sequence, record) in by_reads:
                out.append(("tf-data", str(site), snapshot(record, sequence.open_steps())))
            if self._optimizer is not None:
                view = cycle_view(self.t0, *self._optimizer)
                out.append(("optimizer", "eager optimizer updates (apply_gradients, apply)", view))
            return out

    def keras_phases(self) -> tuple[list[tuple[str, float, float]], int, list]:
        """Keras' phases, steps per call and the phases still open."""
        with self._lock:
            if self._keras is None:
                return [], 1, []
            stream = self._keras[0]
            return stream.phases, stream.steps_per_call, list(stream.opened.items())

    # -- facts ---------------------------------------------------------------------
    def fill(self, gathering: Gathering) -> StepFacts | None:
        """Section ``steps``, from these events and the function watcher's calls (a
        loop of calls to one function is a loop of steps); keeps their ``window`` for the
        collectors that read the steps (the eager op counter, the live histograms)."""
        self.window = StepWindow(gathering.t0)
        functions = gathering.peer(FunctionWatcher)
        no_loops: dict[str, LoopView] = {}
        loops = gathering.guard("tf.function calls", functions.loops, no_loops)
        looped = [name for name, view in loops.items() if view.count >= MIN_STEPS]
        unknown: dict[str, bool | None] = {}
        trains = gathering.guard("training functions", lambda: functions.trains(looped), unknown)
        steps, self.window = self.facts(
            gathering.t0, t_end=gathering.t_end, trains=trains, live=gathering.live,
            function_loops=loops,
        )  # fmt: skip
        return steps

    def program_notes(self) -> list[str]:
        return list(self.notes)

    def facts(
        self,
        t0: float,
        function_calls: dict | None = None,
        t_end: float | None = None,
        trains: dict | None = None,
        live: bool = False,
        function_loops: dict[str, LoopView] | None = None,
    ) -> tuple[StepFacts | None, StepWindow]:
        """The step facts and the after-warm-up step intervals other collectors use.

        ``function_loops``: per tf.function (FunctionWatcher.loops), the steps of its
        calls; ``function_calls`` the same given as (start, end) calls. ``trains``: per
        function name, whether its graph has a backward pass (True), has none (False) or
        is unknown (absent/None); what tells a validation loop from a training loop.
        ``live``: mid-run, a loop whose warm-up is not decided yet (no more than
        ``WARMUP_LOOKAHEAD`` steps so far) keeps its steps out of the window until it
        is: a live step histogram must not take in a tracing step that the final facts
        leave out. The window's ``histograms``: per loop counted, its steps after
        warm-up in the live histogram's buckets (:func:`_histogram`)."""
        t_end = time.perf_counter() if t_end is None else t_end
        views = dict(function_loops or {})
        for name, spans in (function_calls or {}).items():
            views[name] = calls_view(t0, spans)
        loops, phases, spe = self._loops(views, trains or {})
        if not loops:
            return None, StepWindow(t0)
        for loop in loops:  # each loop's first steps trace or build its own things
            # marked on copies: the view's list is the snapshot's own, its steps the
            # record's, which another snapshot (live metrics) may be reading
            warm = _warmup(loop.steps)
            loop.steps[:warm] = [dataclasses.replace(s, warm=True) for s in loop.steps[:warm]]
            for i in _later_warmups(loop.steps, warm):
                loop.steps[i] = dataclasses.replace(loop.steps[i], warm=True)
        facts = _summarise(loops, phases, spe, t0, t_end)
        undecided = {
            id(s) for loop in loops if live and len(loop.steps) <= WARMUP_LOOKAHEAD
            for s in loop.steps
        }  # fmt: skip
        window = [
            (s.start, s.end, k)
            for k, loop in enumerate(loops)
            for s in loop.steps + loop.view.extra
            if not s.warm and id(s) not in undecided
        ]
        window += [
            (*interval, k) for k, loop in enumerate(loops) for interval in loop.view.intervals
        ]
        window.sort()
        histograms = tuple(
            (f"{loop.source} {loop.name}", _histogram(loop, live))
            for loop in loops
            if not (live and len(loop.steps) <= WARMUP_LOOKAHEAD)
        )
        intervals = tuple((start, end) for start, end, _ in window)
        return facts, StepWindow(t0, intervals, histograms, tuple(k for _, _, k in window))

    def _loops(self, function_loops: dict[str, LoopView], trains: dict):
        """Every training loop's steps, whatever marks them, most steps first.

        Candidates come strongest evidence first (Keras batches, tf.data loop sites,
        looped tf.functions, eager optimizer calls); one whose steps lie inside steps or
        Keras phases already taken (the function Keras calls per batch, an inner loop, the
        function a loop site calls) is part of those, not a loop of its own. A script
        may train several models, warm up, train in a custom loop and then ``fit``: every
        such loop counts. A loop none of whose steps train (a validation loop calling a
        ``test_step``) is left out where another loop does train. A loop's steps beyond
        its head are judged by the windows of its timeline they fill."""
        found = self.candidates()
        phases, spe, still_open = self.keras_phases()
        candidates: list[_Loop] = []
        kept: list[_Loop] = []
        covered: list[Step] = []
        for source, name, view in found:
            if source == "keras-fit":
                if view.count:
                    kept.append(_Loop("keras-fit", name, view, trains=True))
            else:
                candidates.append(
                    _Loop(source, name, view, True if source == "optimizer" else None)
                )
        # Keras' own loops (fit's, evaluate's, predict's functions and iterators), those
        # still running (read while fit runs, or a fit that never ended) up to now
        covered += [Step(a, b) for name, a, b in phases if name == "fit"]
        covered += [Step(t, float("inf")) for name, t in still_open if name != "on_epoch_begin"]
        # evaluate() and predict() calls: Keras' own loops too, unless a loop's step holds
        # one whole (a custom loop calling generator.predict() each iteration)
        calls = [Step(a, b) for name, a, b in phases if name in ("evaluate", "predict")]
        # every phase of Keras' own loops: a loop whose steps begin inside them is theirs
        # (fit's multi_step_on_iterator called once per fit in a DQN's loop of one-batch
        # fits, its steps spanning the predict() calls between them)
        keras_own = sorted(
            [Step(a, b) for name, a, b in phases if not name.startswith("epoch")]
            + [Step(t, float("inf")) for name, t in still_open if name != "on_epoch_begin"],
            key=lambda s: s.start,
        )
        optimizer = [c for c in candidates if c.source == "optimizer"]
        data = [c for c in candidates if c.source == "tf-data"]
        # training functions first (then those not known to train): one that trains is
        # never read as nested in one that does not (a Keras 3 GAN's discriminator made
        # untrainable after its compile, its calls twice the combined model's)
        functions = _iteration_first(
            [
                _Loop("tf-function", str(name), view, trains.get(name))
                for name, view in sorted(
                    function_loops.items(),
                    key=lambda kv: (_TRAINS_FIRST[trains.get(kv[0])], -kv[1].count),
                )
                if view.count >= MIN_STEPS
            ]
        )
        for loop in data + functions + optimizer:
            if loop.count < MIN_STEPS:
                continue
            spans = _spans(loop.view)
            against = covered + _not_inside(calls, spans)
            if against and _overlap(spans, against) > MAX_NESTED_OVERLAP:
                continue
            if keras_own and _begun_inside(spans, keras_own) > KERAS_OWN_SHARE:
                continue
            covered = covered + spans
            kept.append(loop)
        applies = _spans(optimizer[0].view) if optimizer else []
        for loop in kept:
            if loop.trains is None:
                loop.trains = _loop_trains(loop, function_loops, trains, applies)
        return _training_loops(kept), phases, spe


def _training_loops(loops: list[_Loop]) -> list[_Loop]:
    """The loops whose steps are the program's steps, most steps first.

    Where some loop is known to train (``fit``, a loop calling a training tf.function or
    the optimizer), the training loops alone are the steps: a loop beside them that was
    not seen training is a side loop (plotting nine sample images, a loop of
    ``model(x)`` or ``predict_on_batch`` over a test set, a few generated images per
    epoch). Pooled, its few-ms inference steps would set the training steps' median,
    its pipeline would stand for their input, and the eager ops of its plotting would
    count as theirs. Where none is known to train (inference only, or training gpuwhy
    cannot see), every loop counts but a short one beside a far longer one (:func:`_short`).
    """
    if any(loop.trains for loop in loops):
        loops = [loop for loop in loops if loop.trains]
    else:
        most = max((loop.count for loop in loops), default=0)
        loops = [loop for loop in loops if not _short(loop, most)]
    return sorted(loops, key=lambda loop: -loop.count)


# A loop of fewer steps than this, beside one with SIDE_LOOP_RATIO times as many, is a
# look at a few elements (nine images plotted), not part of the program's loop.
SIDE_LOOP_STEPS = 10
SIDE_LOOP_RATIO = 10


def _short(loop: _Loop, most: int) -> bool:
    """Whether ``loop`` is a handful of steps beside a loop of ``most`` steps."""
    return loop.count < SIDE_LOOP_STEPS and most >= SIDE_LOOP_RATIO * loop.count


_TRAINS_FIRST = {True: 0, None: 1, False: 2}  # the order function loops are taken in

# Training functions called in one loop, the busiest at most this many times as often
# as another (a GAN's discriminator twice an iteration, a WGAN's critic five times): the
# one called least marks the iteration
MAX_CALLS_AN_ITERATION = 8


def _iteration_first(functions: list[_Loop]) -> list[_Loop]:
    """``functions`` (most calls first) with, before each training function, the
    training function called in the same loop fewer times (at least ``SIDE_LOOP_STEPS``
    and no fewer than 1/``MAX_CALLS_AN_ITERATION`` as many), whose calls are then the
    steps: a Keras GAN's loop calls the discriminator's ``train_on_batch`` twice an
    iteration and the combined model's once, and the discriminator's calls made steps
    that alternated 14 ms and 450 ms (their median anywhere between; 0.5 predicts a
    step). "In the same loop": most of the busier one's steps' time lies in the other's
    steps (its own long gaps are cut at its calls' ends: its steps are its calls)."""
    out = list(functions)
    for i, busiest in enumerate(out):
        if not busiest.trains:
            continue
        spans = _spans(busiest.view)
        fewer = [
            loop
            for loop in out[i + 1 :]
            if loop.trains
            and SIDE_LOOP_STEPS <= loop.count < busiest.count <= MAX_CALLS_AN_ITERATION * loop.count
            and _overlap(spans, _spans(loop.view)) > 0.5
        ]
        if fewer:
            least = min(fewer, key=lambda loop: loop.count)
            out.remove(least)
            out.insert(i, least)
            break  # the iteration's loop leads; the busier ones now read as nested in it
    return out


# A loop most of whose steps begin inside Keras' fit/evaluate/predict calls is one of
# Keras' own loops (its step function, its iterators), however long its steps.
KERAS_OWN_SHARE = 0.5


def _begun_inside(spans: list[Step], phases: list[Step]) -> float:
    """The share of ``spans`` that begin inside one of ``phases`` (sorted by start)."""
    if not spans:
        return 0.0
    starts = [p.start for p in phases]
    reach = list(itertools.accumulate((p.end for p in phases), max))  # latest end so far
    inside = 0
    for span in spans:
        i = bisect.bisect_right(starts, span.start) - 1
        if i >= 0 and reach[i] > span.start:
            inside += 1
    return inside / len(spans)


def _not_inside(calls: list[Step], spans: list[Step]) -> list[Step]:
    """The ``calls`` (Keras evaluate/predict phases) that no one of ``spans`` holds
    whole. One a step holds is part of that step: ``generator.predict(z)`` or
    ``model.evaluate(...)`` in a custom loop's body, whose steps would otherwise read as
    nested in Keras' own loop (a DCGAN trained with ``train_on_batch``, a predict each
    iteration: "no training steps found")."""
    ordered = sorted(spans, key=lambda s: s.start)
    starts = [s.start for s in ordered]
    out = []
    for call in calls:
        i = bisect.bisect_right(starts, call.start) - 1
        if i < 0 or ordered[i].end < call.end:
            out.append(call)
    return out


def _spans(view: LoopView) -> list[Step]:
    """A loop's time as spans: its head steps one by one, then per timeline window the
    stretch its later steps fill (steps follow one another, so that stretch is theirs)."""
    spans = list(view.steps)
    if view.tail is not None:
        head_end = max((s.end for s in view.steps), default=float("-inf"))
        for _, stats in view.timeline.items():
            if stats.last > head_end:
                spans.append(Step(max(stats.first, head_end), stats.last))
    return spans


def _loop_trains(
    loop: _Loop, function_loops: dict[str, LoopView], trains: dict, applies: list[Step]
) -> bool | None:
    """Whether a loop site's steps train: a training function or an eager optimizer
    call inside them says yes; functions called inside, none of which trains, say
    no, as does no optimizer call inside while the program's optimizer was seen
    stepping eagerly elsewhere. Otherwise unknown."""
    spans = _spans(loop.view)
    inside = [name for name, view in function_loops.items() if _overlap(_spans(view), spans) > 0.5]
    if any(trains.get(name) for name in inside):
        return True
    # the optimizer calls made while this loop ran: a program that trains in two eager
    # loops (keras-io's guide: a second model after the first) calls it in both, and the
    # second loop held 40 % of all the calls, not the half asked
    begun = min((s.start for s in spans), default=0.0)
    ended = max((s.end for s in spans), default=0.0)
    meanwhile = [a for a in applies if a.start >= begun and a.end <= ended]
    if meanwhile and _overlap(meanwhile, spans) > 0.5:
        return True
    if inside and all(trains.get(name) is False for name in inside):
        return False
    if not inside and applies:
        return False
    return None


@dataclass
class _Loop:
    """One loop's steps while the step clock is chosen."""

    source: str
    name: str
    view: LoopView
    trains: bool | None = None

    @property
    def steps(self) -> list[Step]:
        return self.view.steps

    @property
    def count(self) -> int:
        return self.view.count

    def facts(self, t0: float) -> StepLoop:
        timed = [s for s in self.steps if not s.warm] or self.steps
        first = self.steps[0].start if self.steps else self.view.extra[0].start
        tail = self.view.tail
        median, _ = _quantiles(
            [s.per_step for s in timed + self.view.extra],
            [tail.total.sketch] if tail is not None else [],
        )
        latest = self.view.extra or (list(tail.last) if tail is not None else []) or self.steps
        last = latest[-1].start if latest else first
        return StepLoop(
            source=self.source,
            name=self.name,
            count=self.count,
            first_s=round(first - t0, 6),
            last_s=round(last - t0, 6),
            median_s=round(median, 6) if median is not None else None,
        )


# Another loop's steps may overlap the counted ones by this share of their time and
# still be their own loop (not one nested inside a counted step).
MAX_NESTED_OVERLAP = 0.10


# A step is compared with the counted spans that start at most this many spans before
# its end (the spans it may touch).
OVERLAP_LOOKBACK = 64
# Steps compared at once: each adds OVERLAP_LOOKBACK numbers to each array of the
# comparison (a block's arrays are ~8 MiB at their peak, whatever the loop's length).
OVERLAP_BLOCK = 2048


def _overlap(sequence: list[Step], counted: list[Step]) -> float:
    """The share of ``sequence``'s time inside steps already counted.

    Each step adds its intersection with each of the ``OVERLAP_LOOKBACK`` counted spans
    that start last before its end, in start order. Computed as arrays, a block of steps
    at a time (each step against its 64 spans; a step with fewer spans before it, against
    those), and added up in the very order visiting the spans one by one adds them
    (``add.accumulate`` is sequential): the same share to the bit. The loop over steps
    in Python this replaced was most of what gpuwhy did after a program of short steps
    ended (96 ms of 155 ms of the steps' facts, a loop of 20,000 steps: docs/speed.md)."""
    import numpy as np

    if not counted or not sequence:
        return 0.0
    starts = np.fromiter((s.start for s in counted), float, len(counted))
    ends = np.fromiter((s.end for s in counted), float, len(counted))
    order = np.lexsort((ends, starts))  # by start, then end: as the pairs sort
    starts, ends = starts[order], ends[order]
    inside = 0.0
    offsets = np.arange(-OVERLAP_LOOKBACK, 0)
    for first in range(0, len(sequence), OVERLAP_BLOCK):
        block = sequence[first : first + OVERLAP_BLOCK]
        begin = np.fromiter((s.start for s in block), float, len(block))[:, None]
        end = np.fromiter((s.end for s in block), float, len(block))[:, None]
        # per step, its spans: the OVERLAP_LOOKBACK that start last at or before its end
        columns = np.searchsorted(starts, end[:, 0], side="right")[:, None] + offsets
        given = columns >= 0
        columns[~given] = 0
        touching = np.minimum(ends[columns], end) - np.maximum(starts[columns], begin)
        # max(0.0, x) as Python takes it: 0.0 unless x is above it (NaN included)
        touching = np.where(given & (touching > 0.0), touching, 0.0)
        inside = float(np.add.accumulate(np.concatenate(([inside], touching.ravel())))[-1])
    total = sum(s.end - s.start for s in sequence)
    return inside / total if total > 0 else 0.0


_WHAT = {
    "tf-data": ("next() on a tf.data iterator", "loops", True),
    "tf-function": ("calls of", "functions", False),
}


def _markers(loops: list[_Loop]) -> str:
    """The marker of the loops counted: one source's loops as :func:`_marker` says them;
    loops of several sources as the busiest loop's marker and the others after it, each
    with its own steps (``Model.fit at train.py:80 (300 steps), and 2 more loops: next()
    at train.py:26 (40), calls of gan_step (train.py:68) (12)``)."""
    sources = {loop.source for loop in loops}
    if len(sources) == 1 and loops[0].source in _WHAT:
        what, plural, at = _WHAT[loops[0].source]
        return _marker(what, plural, [loop.name for loop in loops], at=at)
    lead = _one_marker(loops[0])
    if len(loops) == 1:
        return lead
    # each loop's own steps, where the count before the marker is theirs together
    lead += f" ({loops[0].count:,} steps)"
    others = [f"{_one_marker(loop, short=True)} ({loop.count:,})" for loop in loops[1:4]]
    more = f" and {len(loops) - 4} more" if len(loops) > 4 else ""
    plural = "loop" if len(loops) == 2 else "loops"
    return f"{lead}, and {len(loops) - 1} more {plural}: {', '.join(others)}{more}"


def _one_marker(loop: _Loop, short: bool = False) -> str:
    if loop.source == "tf-data":
        return f"next() at {loop.name}" if short else f"next() on a tf.data iterator at {loop.name}"
    if loop.source == "tf-function":
        return f"calls of {loop.name}"
    return loop.name


def _marker(what: str, plural: str, names: list[str], at: bool = True) -> str:
    """``next() on a tf.data iterator at train.py:40``, or for several loops
    ``next() on tf.data iterators in 3 loops (also train.py:55, train.py:70) at
    train.py:40``: the busiest loop's file:line last, where readers look for it.
    Functions: ``calls of train_step`` / ``calls of 2 functions (also eval_step),
    most of train_step``."""
    if len(names) == 1:
        return f"{what} at {names[0]}" if at else f"{what} {names[0]}"
    others = ", ".join(names[1:4]) + (f" and {len(names) - 4} more" if len(names) > 4 else "")
    if at:
        return f"{what} in {len(names)} {plural} (also {others}) at {names[0]}"
    return f"{what} {len(names)} {plural} (also {others}), most of {names[0]}"


def _histogram(loop: _Loop, live: bool) -> StepHistogram:
    """The loop's steps after its warm-up in the live histogram's buckets: every step
    its record counted (so the cost does not grow with the run), less its warm-up steps
    (only head steps can be warm: its first ones, and a later fit's first ones); the
    steps still open only at the end of the run (mid-run their end may still move:
    they are counted once they close)."""
    view = loop.view
    histogram = view.histogram.copy()
    still_open = {id(s) for s in view.still_open}
    for step in view.steps:
        if step.warm and id(step) not in still_open:
            histogram.add(step.per_step, -step.steps)
    if not live:
        for step in view.still_open:
            if not step.warm:
                histogram.add(step.per_step, step.steps)
    return histogram


def _warmup(steps: list[Step], first_always: bool = True) -> int:
    """Leading steps far slower than the rest (tracing, autotune ramp-up, cuDNN search).
    A loop's first step always traces or builds something; the first step of a later
    part of it (``first_always`` False) only where it is as slow as one that does."""
    if len(steps) < 4:
        return 0
    rest = [s.end - s.start for s in steps[WARMUP_LOOKAHEAD:]] or [s.end - s.start for s in steps]
    typical = statistics.median(rest)
    count = 1 if first_always else 0
    for s in steps[count:WARMUP_LOOKAHEAD]:
        if s.end - s.start <= WARMUP_FACTOR * typical:
            break
        count += 1
    return min(count, len(steps) - 2)


def _later_warmups(steps: list[Step], warm: int) -> list[int]:
    """The warm-up steps of the later parts of a loop (a second Keras fit, of a new
    model or after a new compile, traces and builds its own things): each part, from
    the step that opens it to the next, judged as a loop of its own (a fine-tuning fit's
    steps may be heavier than the first fit's). Only the head's steps are judged (a part
    opening beyond it has thousands of steps before it to dilute its first)."""
    opening = [i for i, s in enumerate(steps) if s.opens and i >= warm]
    found: list[int] = []
    for start, end in zip(opening, opening[1:] + [len(steps)]):
        found.extend(range(start, start + _warmup(steps[start:end], first_always=False)))
    return found


def _summarise(loops: list[_Loop], phases, spe: int, t0: float, t_end: float) -> StepFacts:
    """The steps of every loop counted, on one time line. Where no loop went beyond its
    head, every figure is exact; otherwise the quantiles come from the loops' sketches
    (within the sketch's relative error) and the sums stay exact."""
    head = sorted((s for loop in loops for s in loop.steps), key=lambda s: s.start)
    extra = [s for loop in loops for s in loop.view.extra]
    counted = [s for s in head if not s.warm] + extra
    tails = [loop.view.tail for loop in loops if loop.view.tail is not None]
    total = sum(s.end - s.start for s in counted) + sum(t.total.step_s for t in tails)
    # the steps' time less that of the steps only counted (the next() timing paused):
    # the input wait's share is the timed steps'
    timed_total = total - sum(t.total.counted_s for t in tails)
    waits = [s.wait for s in counted if s.wait is not None]
    # every counted step timed its wait
    measured = (
        len(waits) == len(counted) and bool(counted) and all(t.total.all_waited for t in tails)
    )
    waited = sum(waits) + sum(t.total.wait_s for t in tails)
    median, p90 = _quantiles([s.per_step for s in counted], [t.total.sketch for t in tails])
    wait_median, _ = _quantiles(
        [s.wait / s.steps for s in counted if s.wait is not None], [t.waits for t in tails]
    )
    kept = head[:MAX_STEPS]
    leading = next((i for i, s in enumerate(kept) if not s.warm), len(kept))
    later = tuple(i for i, s in enumerate(kept) if s.warm and i >= leading)[:MAX_LATER_WARMUP]
    first = min((s.start for s in head + extra), default=t0)
    sizes = tuple(s.steps for s in kept)
    return StepFacts(
        source=loops[0].source,
        marker=_markers(loops),
        count=sum(loop.count for loop in loops),
        warmup=sum(s.steps for s in head if s.warm),
        later_warmup=later,
        median_s=median,
        p90_s=p90,
        total_s=total,
        input_wait_fraction=(waited / timed_total if timed_total > 0 else 0.0)
        if measured
        else None,
        input_wait_median_s=wait_median if measured else None,
        input_wait_source="next() timing" if measured else None,
        steps_per_call=spe,
        run_s=t_end - t0,
        first_step_s=first - t0,
        starts=tuple(round(s.start - t0, 6) for s in kept),
        durations=tuple(round(s.end - s.start, 6) for s in kept),
        input_waits=tuple(None if s.wait is None else round(s.wait, 6) for s in kept),
        call_steps=sizes if any(n != max(1, spe) for n in sizes) else (),
        phases=tuple((name, round(a - t0, 6), round(b - t0, 6)) for name, a, b in phases),
        loops=tuple(loop.facts(t0) for loop in loops),
        last_steps=_last_steps(tails, t0),
        slowest=_slowest(tails, counted, t0) if tails else (),
        timeline=_timeline(loops, t0, t_end),
        all_kept=not tails and not extra and len(head) <= MAX_STEPS,
        counted_only=sum(t.total.counted for t in tails),
    )


def _quantiles(values: list[float], sketches: list[Sketch]) -> tuple[float | None, float | None]:
    """Median and p90 of ``values`` and of what ``sketches`` hold: exact where there are
    no sketches (every step was kept), within the sketch's error otherwise (the values
    added a bucket at a time, as the tails' own steps were: 5,000 values one by one
    were 20 ms of the steps' facts after a program of short steps ended)."""
    if sketches:
        import numpy as np

        merged = Sketch()
        for sketch in sketches:
            merged.merge(sketch)
        merged.add_many(np.asarray(values, dtype=float))
        return merged.quantile(0.5), merged.quantile(0.9)
    if not values:
        return None, None
    ranked = sorted(values)
    return statistics.median(ranked), ranked[min(len(ranked) - 1, int(0.9 * len(ranked)))]


def _last_steps(tails: list, t0: float) -> tuple[tuple[float, float, float | None], ...]:
    """The most recent steps beyond the heads: (start, seconds, input wait)."""
    recent = heapq.nlargest(LAST_STEPS, (s for t in tails for s in t.last), key=lambda s: s.start)
    return tuple(
        (
            round(s.start - t0, 6),
            round(s.end - s.start, 6),
            None if s.wait is None else round(s.wait, 6),
        )
        for s in sorted(recent, key=lambda s: s.start)
    )


def _slowest(tails: list, counted: list[Step], t0: float) -> tuple[tuple[float, float], ...]:
    """The slowest steps after warm-up over the whole run: (start, seconds per step)."""
    entries = [e for t in tails for e in t.slowest]
    entries += [(s.per_step, s.start, s.end) for s in counted]
    return tuple(
        (round(start - t0, 6), round(per_step, 6))
        for per_step, start, _ in heapq.nlargest(SLOWEST, entries)
    )


def _timeline(loops: list[_Loop], t0: float, t_end: float) -> StepTimeline | None:
    """Every counted loop's steps in windows of equal width, from the first to the last,
    as wide as the whole run's timeline (its other rows share the windows)."""
    merged: TimeWindows[StepStats] | None = None
    for loop in loops:
        own = loop.view.timeline
        if merged is None:
            merged = TimeWindows(own.t0, StepStats, own.capacity, own.width)
        merged.absorb(own)
    if merged is None:
        return None
    merged.coarsen(width_for(t_end - merged.t0, merged.capacity))
    windows = []
    for start, stats in merged.items():
        p50, p90 = stats.sketch.quantile(0.5), stats.sketch.quantile(0.9)
        if stats.counted and stats.calls < MIN_TIMED_IN_WINDOW:
            p50 = p90 = None  # the timing paused for (nearly) all of the window
        windows.append(
            StepSpan(
                start_s=round(start - t0, 6),
                steps=stats.steps,
                p50_s=None if p50 is None else round(p50, 6),
                p90_s=None if p90 is None else round(p90, 6),
                max_s=round(stats.max_s, 6),
                step_s=round(stats.step_s, 6),
                input_wait_s=_window_wait(stats),
            )
        )
    return StepTimeline(width_s=merged.width, windows=tuple(windows))


def _window_wait(stats: StepStats) -> float | None:
    """A window's input wait: timed for each step (None: some step's was not); where
    some steps were only counted (the timing paused), their share at the timed steps'."""
    if not stats.all_waited:
        return None
    if not stats.counted:
        return round(stats.wait_s, 6)
    timed_s = stats.timed_s
    return round(stats.wait_s * stats.step_s / timed_s, 6) if timed_s > 0 else None


# -- its rows in the reports ------------------------------------------------------
def steps_line(steps: StepFacts) -> str:
    text = f"{steps.count:,} by {steps.marker}"
    if steps.median_s is not None:
        text += f"; median {duration(steps.median_s)}, p90 {duration(steps.p90_s)}"
    if steps.warmup and steps.later_warmup:
        later = sum(1 for i in steps.later_warmup if i < len(steps.starts))
        spc = max(steps.steps_per_call, 1)
        first = max(steps.warmup - later * spc, 0)
        text += (
            f" ({steps.warmup} left out as warm-up: {first} at the start, {later} at the "
            "start of a later fit or loop)"
        )
    elif steps.warmup:
        text += f" (first {steps.warmup} left out as warm-up)"
    if steps.steps_per_call > 1:
        text += f"; {steps.steps_per_call} steps per call"
    if steps.input_wait_fraction is not None:
        text += f"; waiting for input {steps.input_wait_fraction:.0%} of step time" + wait_in_time(
            steps
        )
    else:
        text += "; input wait not measured for this kind of loop"
    if steps.counted_only:
        text += (
            f"; {steps.count - steps.counted_only:,} of them timed one by one, the rest "
            "counted (the timing pauses on a long loop of short steps: --time-every-step)"
        )
    return text
