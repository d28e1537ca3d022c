"""Eager ops: which ops the program dispatches one by one from Python, where, how often.

An op callback (see :mod:`gpuwhy.tfapi.op_callbacks`) sees every op the watched thread
runs eagerly. It is not free: on a loop of 8x8 ops it adds about a fifth to each op
while it is on (``benchmarks/bench_eager_counter.py``). So it is on in *windows*, 1/11
of the time from the TensorFlow import on: short windows at first (a run of a few
seconds still gets several), longer ones later (:func:`duty_cycle`), which keeps the
cost to a loop of small eager ops near 4% (measured: +3.6%). A window closes only once it
has seen ``WINDOW_MIN_OPS`` ops or been open ``longest_on_s``: few ops cost little, and a
window that closed on a handful would leave a short loop unjudged. Counting
stops for good after ``max_ops`` ops (the evidence is complete long before), which also
bounds memory (32 bytes an op: 8 MB).

A window that saw nothing but the steps' own calls (``tf.function`` calls and input
reads: a loop whose steps are traced) has nothing to find; from the first such window
(``QUIET_WINDOWS``) the pauses between windows grow ``QUIET_BACKOFF`` times, until a
window sees another op. A window slows a loop of 0.46 ms traced steps by about a tenth
(the callback runs for the call and the read of every step, and the per-step hooks are
on: 1.12 times the loop's time with the callback always on, 4 rounds side by side);
waiting for three quiet windows before backing off kept them open 6 % of a 20 s loop's
time (0.6-0.8 % of it lost), backing off from the first 2.5 %.

The callback only appends one tuple per op. A background thread switches the windows
and, every ``tick_s``, moves those tuples into compact arrays (a site index, two
clock readings and an element count per op). Everything else waits for :meth:`facts`,
which is told the steps: only steps that lie wholly inside a window are used, so a
step's count is exact, never a partial one.
"""

from __future__ import annotations

import bisect
import math
import os
import statistics
import threading
import time
from array import array
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from itertools import repeat
from typing import Any

from gpuwhy.collect.host_cpu import run_queue_seconds
from gpuwhy.collect.inprocess.base import Collector, Gathering, Option, RunOptions, StepWindow
from gpuwhy.collect.inprocess.functions import FunctionWatcher
from gpuwhy.collect.inprocess.steps import StepCollector
from gpuwhy.collect.time_windows import width_for
from gpuwhy.facts import EagerFacts, EagerOpSite, Facts, StepCode
from gpuwhy.source_calls import step_code as read
from gpuwhy.tfapi import op_callbacks
from gpuwhy.tfapi.op_callbacks import device_name, is_function_call

GAP_CAP_S = 1e-3  # a longer gap between two eager ops is not dispatch alone
# ops that read an input pipeline: the gap before one holds the wait for the next batch
INPUT_READS = ("IteratorGetNext", "MultiDeviceIteratorGetNext")  # and ...AsOptional, ...FromShard
TOP_SITES = 20
# Of several loops' steps, those issuing this share of the busiest loop's eager ops a
# step or more are the ones "per step" is of (a traced loop's 2 beside an eager one's 250)
DISPATCHING_SHARE = 0.25
QUIET_WINDOWS = 1  # windows in a row with only the steps' calls and reads: back off
QUIET_BACKOFF = 4.0  # the pauses between windows, that many times as long
QUIET_MIN_OPS = 20  # a window with fewer ops says nothing either way
QUIET_CHECK_S = 0.05  # how often an open window is asked whether it is quiet
# a window that has seen fewer ops stays open another spell, up to longest_on_s: the ops
# launch.eager-ops needs without steps (its min_ops_per_step)
WINDOW_MIN_OPS = 100
THREAD_NOTE = (
    "counted on thread {thread!r} only: TensorFlow keeps op callbacks per thread, "
    "so ops run eagerly by other threads are not seen"
)


def duty_cycle(
    first_on_s: float, duty: float, longest_on_s: float, repeat: int = 4
) -> Iterator[tuple[float, float]]:
    """(on, then off) seconds of each window.

    Every window is followed by a pause of ``on * (1/duty - 1)``, so the share of time
    on is ``duty`` from the first window on, however early the run ends. Windows start
    short, so that a run of a few seconds still gets one *after* its start-up (a first
    window at the TensorFlow import sees model building, not steps), and double every
    ``repeat`` windows up to ``longest_on_s``, so that long steps eventually fit wholly
    inside one: with the defaults 0.25 s windows every 2.75 s for the first 11 s.
    """
    if duty >= 1.0:  # counting every op: one window from start to stop
        while True:
            yield float("inf"), 0.0
    on = first_on_s
    count = 0
    while True:
        yield on, on * (1.0 / duty - 1.0)
        count += 1
        if count % repeat == 0:
            on = min(on * 2.0, longest_on_s)


def step_code(sites: Mapping[str, int], loops: tuple[str, ...] = ()) -> StepCode | None:
    """The function (or loop body) of the user's file that issues most of the counted ops
    (``sites``: ops per ``file:line``), read from its source: the code a fix puts in a
    ``tf.function``, and the objects it reads that the program re-creates in a loop.
    ``loops``: the training loops' sites (StepLoop.name: ``train.py:40``, ``train_step
    (train.py:12)``): a loop of the steps inside a function (a ``main()``) is the step's
    code, not the function."""

    by_file: dict[str, dict[int, int]] = {}
    for location, count in sites.items():
        shown, _, line = location.rpartition(":")
        if line.isdigit():
            lines = by_file.setdefault(shown, {})
            lines[int(line)] = lines.get(int(line), 0) + count
    if not by_file:
        return None
    shown = max(by_file, key=lambda name: sum(by_file[name].values()))
    loop_lines = [
        int(line)
        for name in loops
        for where in [name.rpartition("(")[2].rstrip(")")]
        if where.rpartition(":")[0] == shown and (line := where.rpartition(":")[2]).isdigit()
    ]
    try:
        return read(os.path.abspath(shown), shown, by_file[shown], loop_lines)
    except (RecursionError, ValueError):  # a source too deep or odd to read: no names
        return None


@dataclass
class _Site:
    op_type: str
    code: Any
    lasti: int
    device: str | None
    function: bool
    dtype: str | None = None  # of its first output


COUNT_EAGER: Option[bool] = Option(
    "eager",
    "--no-eager",
    True,
    "do not count eager ops (no per-op callback at all)",
    switch=True,
)


def _not_a_share(duty: float | None) -> str | None:
    return None if duty is None or 0 < duty <= 1 else "--eager-duty must be a fraction in (0, 1]"


EAGER_DUTY: Option[float | None] = Option(
    "eager_duty",
    "--eager-duty",
    None,
    "share of the run in which eager ops are counted (default 1/11, which keeps the "
    "cost under 5%%; 1 counts every op, ~20%% slower eager ops)",
    type=float,
    metavar="F",
    refuse=_not_a_share,
)


class EagerOpCounter(Collector):
    """Counts the eager ops of the thread that imports TensorFlow, in windows.

    ``on_tensorflow()`` arms it on the calling thread (op callbacks are per thread: see
    :data:`THREAD_NOTE`); ``stop()`` removes the callback from that thread's list, the
    only one it was ever added to, and ends the window thread.
    """

    name = section = "eager"
    # tells the steps and the functions which steps to keep one by one; places its ops in
    # the steps' window
    reads_from = ("steps", "tracing")
    options = (COUNT_EAGER, EAGER_DUTY)
    what = "eager ops"
    live = True
    shown = 40

    @classmethod
    def report_rows(cls, facts: Facts, html: bool) -> list[tuple[str, str]]:
        if facts.eager is None or facts.program is None or not facts.program.tensorflow_imported:
            return []
        return [("Eager ops", eager_line(facts.eager))]

    @classmethod
    def create(cls, options: RunOptions, made: Sequence[Collector]) -> EagerOpCounter:
        duty = options[EAGER_DUTY]
        counter = cls() if duty is None else cls(duty=duty)
        # A long run's steps are kept as statistics beyond their first ones: those
        # that overlap a counting window are kept one by one, for facts() to place ops in
        for collector in made:
            if isinstance(collector, StepCollector | FunctionWatcher):
                collector.sampling = counter.overlapping
            if isinstance(collector, StepCollector):
                collector.began = counter.steps_began
                if collector.pauses is not None:
                    # the steps inside a counting window are timed one by one: the ones
                    # it places ops in
                    collector.pauses.blocked = lambda: counter.is_on
                    counter.window_opened = collector.pauses.resume
        return counter

    def __init__(
        self,
        first_on_s: float = 0.25,
        duty: float = 1 / 11,
        longest_on_s: float = 4.0,
        tick_s: float = 0.25,
        max_ops: int = 250_000,
    ) -> None:
        self.first_on_s = first_on_s
        self.duty = duty
        self.longest_on_s = longest_on_s
        self.tick_s = tick_s
        self.max_ops = max_ops
        self.t0 = time.perf_counter()
        self.windows: list[list[float]] = []  # [start, end] on perf_counter; end inf while open
        # per window (by its start): seconds the counted thread waited for a core in it
        self.core_waits: dict[float, float] = {}
        self._tid: int | None = None  # the counted thread's, for its schedstat
        self._waited_at_open: float | None = None
        self.error: str | None = None
        self.thread_name: str | None = None
        self.full = False  # stopped counting at max_ops
        self._pending: list = []  # raw records, appended by the callback
        self._sites: list[_Site] = []
        self._site_index: dict[tuple[str, int, int, int | None], int] = {}
        self._t_in = array("d")
        self._t_out = array("d")
        self._site = array("l")
        self._elements = array("q")  # -1: unknown
        self._seen_upto = 0  # the ops of windows before the last one closed
        self._switch: Any = None
        self._frames: Any = None
        self._stopping = threading.Event()
        self._wake = threading.Event()  # set on stop and when the steps begin
        self._restart = False  # the steps began: the schedule starts again
        self._steps_began_s: float | None = None
        self._lock = threading.Lock()  # one compaction at a time
        self._thread: threading.Thread | None = None
        # called as each window opens (the steps' next() timing resumes for it)
        self.window_opened: Callable[[], None] | None = None

    # -- life cycle ------------------------------------------------------------------
    def on_tensorflow(self) -> None:
        if self._switch is not None:  # armed already
            return
        try:
            self._frames = op_callbacks.UserFrames()
            callback = op_callbacks.recording_callback(self._pending.append, self._frames)
            self._switch = op_callbacks.CallbackSwitch(op_callbacks.thread_callbacks(), callback)
            self.thread_name = threading.current_thread().name
            self._tid = threading.get_native_id()
            self._switch_on()
            self._thread = threading.Thread(
                target=self._run_windows, name="gpuwhy-eager-windows", daemon=True
            )
            self._thread.start()
        except Exception as exc:  # noqa: BLE001 - never into the program
            self.error = f"eager op counter not armed: {type(exc).__name__}: {exc}"
            self._switch_off()

    def stop(self) -> None:
        self._stopping.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout=5.0)
        self._switch_off()
        self._compact()

    def steps_began(self) -> None:
        """The first steps were seen: the schedule starts again from its first short
        window, now. Anchored at the TensorFlow import alone, a run whose set-up takes a
        few seconds and whose loop a few more could see its steps between two windows
        (an eager loop of 200 steps in 1.6 s read as no steps sampled, one run in two)."""
        self._steps_began_s = time.perf_counter()
        self._restart = True
        if not self.is_on:  # else the window open now counts them, the schedule after it
            self._wake.set()

    def overlapping(self, starts: Any, ends: Any) -> Any:
        """Of the steps ``[starts[i], ends[i]]`` (NumPy arrays), which overlap a counting
        window (one still open included): steps the counter may have seen ops of. The
        windows open one after the other, so only the last one opened before a step's
        end can overlap it."""
        import numpy as np

        windows = list(self.windows)  # the counter's thread may append meanwhile
        if not windows:
            return np.zeros(len(starts), dtype=bool)
        opened = np.array([w[0] for w in windows])
        closed = np.array([w[1] for w in windows])
        k = np.searchsorted(opened, ends, side="right") - 1
        return (k >= 0) & (closed[np.maximum(k, 0)] >= starts)

    @property
    def is_on(self) -> bool:
        return self._switch is not None and self._switch.is_on

    # -- windows -----------------------------------------------------------------------
    def _switch_on(self) -> None:
        if self._switch is None or self.full or self._stopping.is_set():
            return
        opened = self.window_opened
        if opened is not None:
            opened()
        self._waited_at_open = self._core_wait_s()
        self._switch.on()
        self.windows.append([time.perf_counter(), float("inf")])

    def _switch_off(self) -> None:
        if self.windows and self.windows[-1][1] == float("inf"):
            self.windows[-1][1] = time.perf_counter()  # before off: later ops lie outside
            waited, opened = self._core_wait_s(), self._waited_at_open
            if waited is not None and opened is not None:
                self.core_waits[self.windows[-1][0]] = max(0.0, waited - opened)
        if self._switch is not None:
            self._switch.off()

    def _core_wait_s(self) -> float | None:
        """Seconds the counted thread has waited for a core so far (None: not known)."""
        return run_queue_seconds(os.getpid(), self._tid) if self._tid is not None else None

    def _run_windows(self) -> None:
        try:
            schedule = duty_cycle(self.first_on_s, self.duty, self.longest_on_s)
            on_s, off_s = next(schedule)
            quiet = 0  # windows in a row that saw only the steps' calls and reads
            while True:
                opened = self.windows[-1][0] if self.windows else time.perf_counter()
                end = opened + on_s
                while True:
                    self._count_until(end)
                    if not self._too_few_to_close(opened):
                        break
                    end += on_s
                self._switch_off()
                self._compact()
                quiet = self._quiet_since_last(quiet)
                if not self._barely_saw_steps():
                    backoff = QUIET_BACKOFF if quiet >= QUIET_WINDOWS else 1.0
                    self._wake.wait(off_s * backoff)  # cut short where the steps begin
                if self._stopping.is_set() or self.full:
                    return
                if self._restart:  # short windows from the steps' start on
                    self._restart = False
                    self._wake.clear()
                    schedule = duty_cycle(self.first_on_s, self.duty, self.longest_on_s)
                on_s, off_s = next(schedule)
                self._switch_on()
        except Exception as exc:  # noqa: BLE001 - the user's code may raise anything
            self.error = f"eager op counter stopped: {type(exc).__name__}: {exc}"
            self._switch_off()

    def _count_until(self, end: float) -> None:
        """Keep the window open until ``end`` (perf_counter), compacting every tick; a
        window whose latest ``WINDOW_MIN_OPS`` ops were only the steps' ``tf.function``
        calls and input reads closes at the next ``QUIET_CHECK_S``: a loop of
        short traced steps was 6-7 % slower while the callback was on (TF leaves its
        fast path for every op while one is registered), and its windows, a quarter of
        a second each, fell at every loop's start, in its head of steps all timed."""
        tick = min(self.tick_s, QUIET_CHECK_S)
        while not self._stopping.is_set() and not self.full:
            left = end - time.perf_counter()
            if left <= 0:
                return
            self._stopping.wait(min(tick, left))
            self._compact()
            if self._window_quiet():
                return

    def _window_quiet(self) -> bool:
        """The window open now has seen ``WINDOW_MIN_OPS`` ops or more, the latest
        ``WINDOW_MIN_OPS`` of them each a ``tf.function`` call or an input read (the ops
        that made the loop's iterator, at its start, are not its steps')."""
        if len(self._site) - self._seen_upto < WINDOW_MIN_OPS:
            return False
        ops = self._site[len(self._site) - WINDOW_MIN_OPS :]
        sites = self._sites
        return all(sites[i].function or sites[i].op_type.startswith(INPUT_READS) for i in set(ops))

    def _too_few_to_close(self, opened: float) -> bool:
        """The window opened at ``opened`` has seen fewer than ``WINDOW_MIN_OPS`` ops, too
        few to judge from, and has been open less than ``longest_on_s``: it stays open
        another spell. Few ops cost the callback little, and a window that closed on them
        would leave a short loop judged from a handful: one that opened on a program's
        first steps saw 13 ops of 1.7 ms apart (first calls build kernels) and closed, the
        loop of 2,000 ops a second ended before the next one, and `launch.eager-ops`
        was not found, one run in four on a quiet machine."""
        if self._stopping.is_set() or self.full:
            return False
        self._compact()
        seen = len(self._site) - self._seen_upto
        return seen < WINDOW_MIN_OPS and time.perf_counter() - opened < self.longest_on_s

    def _quiet_since_last(self, quiet: int) -> int:
        """``quiet`` plus one where the window just closed saw only ``tf.function`` calls
        and input reads (at least ``QUIET_MIN_OPS`` of them); 0 where it saw another op;
        unchanged where it saw too few to say."""
        seen = self._seen_upto
        self._seen_upto = len(self._site)
        ops = self._site[seen:]
        if len(ops) < QUIET_MIN_OPS:
            return quiet
        sites = self._sites
        if all(sites[i].function or sites[i].op_type.startswith(INPUT_READS) for i in set(ops)):
            return quiet + 1
        return 0

    def _barely_saw_steps(self) -> bool:
        """The steps began in the window just closed, within half a first window of its
        end, too late to count a few of them whole (the first window, opened at the
        TensorFlow import, ending just after the model was built): the schedule starts
        again at once, since the pause after it would outlast a loop of a second or two
        (an eager loop of 192 steps of 8 ms read as no steps sampled, two runs in three
        on a loaded machine)."""
        began = self._steps_began_s
        if not self._restart or began is None or not self.windows:
            return False
        return self.windows[-1][1] - began < self.first_on_s / 2

    def _compact(self) -> None:
        """Move the callback's tuples into the arrays (any thread; appends may go on)."""

        with self._lock:
            n = len(self._pending)
            batch = self._pending[:n]
            del self._pending[:n]
            index = self._site_index
            for t_in, t_out, op_type, code, lasti, elements, device, dtype in batch:
                if isinstance(op_type, bytes):  # TF's slow path names ops in bytes: b"Square"
                    op_type = op_type.decode("utf-8", "replace")
                key = (op_type, id(code), lasti, dtype)
                site = index.get(key)
                if site is None:
                    site = index[key] = len(self._sites)
                    self._sites.append(
                        _Site(
                            op_type,
                            code,
                            lasti,
                            device,
                            is_function_call(op_type),
                            op_callbacks.dtype_name(dtype),
                        )
                    )
                self._t_in.append(t_in)
                self._t_out.append(t_out)
                self._site.append(site)
                self._elements.append(-1 if elements is None else elements)
            if len(self._t_in) >= self.max_ops and not self.full:
                self.full = True
                self._switch_off()

    # -- facts -------------------------------------------------------------------------
    def fill(self, gathering: Gathering) -> EagerFacts:
        """Section ``eager``: the ops inside the steps the step collector found."""
        width = width_for(gathering.t_end - gathering.t0)
        steps = gathering.facts.steps
        loops = tuple(loop.name for loop in steps.loops) if steps is not None else ()
        return self.facts(gathering.peer(StepCollector).window, width, loops)

    def facts(
        self, window: StepWindow, width_s: float | None = None, loops: tuple[str, ...] = ()
    ) -> EagerFacts:
        """The eager ops inside the steps of ``window`` that lie wholly inside a counting window.

        ``dispatch_fraction`` is an *estimate* of the share of those steps' time spent
        issuing eager ops: the sum of the gaps between consecutive eager ops of a step
        (from the end of one op's callback to the next op's), each capped at
        :data:`GAP_CAP_S`, over the steps' total time less the time spent in the callback
        itself and the time the thread waited for a core (``core_wait_s``: another
        process's load is not the program's time). A gap covers the op's Python and
        runtime dispatch and its kernel when that runs synchronously (always on the CPU),
        but also any Python code between the two ops and TF's own work to call the
        callback (about a microsecond, so the figure runs a little high); the cap keeps a long pause (a
        data load, a print) from counting as dispatch, and the gap before a step's first
        op is left out. Only a gap from one eager op to the next is an eager op's: a gap
        that ends with a ``tf.function`` call holds the function's run, one that starts
        with it the framework's own work after the call (Keras' loop and callbacks: the
        projection measures that part apart, projection/host.py), and one that ends with
        an iterator's read holds the wait for input (measured apart). ``tf.function``
        calls are not eager ops and are not counted in ``ops``; the note says how many
        there were.

        With no steps, or none wholly inside a window (steps longer than the windows),
        ``sampled_steps`` is 0 and the same figures cover all the ops counted: the share
        over each window from its first op to its last, the rate (``ops / counted_s``)
        over the seconds the counter was on.

        ``width_s``: the width of the run's timeline windows, for ``windows``.

        A run of several loops where some issue their ops eagerly and others call a
        ``tf.function`` (a tutorial's eager loops, then the same step traced) is counted
        per step of the loops that issue them: those whose sampled steps issue at least
        ``DISPATCHING_SHARE`` of the busiest loop's ops a step (``of_loops`` names them
        where others were left out). Pooled, keras-io's custom-loop guide read 74 ops a
        step in one run and 239 in the next, as its windows happened to sample the
        traced loop's fast steps or the eager loops' (about 250 each).
        """
        self._compact()
        windows = sorted((start, end) for start, end in self.windows if end != float("inf"))
        sampled = [
            (s, e, k)
            for (s, e), k in zip(window.intervals, window.loops or repeat(0))
            if inside_a_window(s, e, windows)
        ]
        pooled, span_ops, lines = self._counted(window, windows, [(s, e) for s, e, _ in sampled])
        per_window = (
            _per_window([(s, e) for s, e, _ in sampled], span_ops, window.t0, width_s)
            if sampled
            else ()
        )
        kept = _dispatching_loops([k for _, _, k in sampled], span_ops)
        if kept is None:
            return replace(pooled, step_code=step_code(lines, loops), windows=per_window)
        chosen, _, lines = self._counted(
            window, windows, [(s, e) for s, e, k in sampled if k in kept]
        )
        return replace(
            chosen,
            step_code=step_code(lines, loops),
            windows=per_window,
            of_loops=tuple(loops[k] for k in sorted(kept) if k < len(loops)),
        )

    def _counted(
        self,
        window: StepWindow,
        windows: list[tuple[float, float]],
        sampled: list[tuple[float, float]],
    ) -> tuple[EagerFacts, list[int], dict[str, int]]:
        """The figures over the ``sampled`` steps (sorted; none: over the counting
        ``windows``), the ops each sampled step issued, and the ops of each line."""
        counted_s = sum(end - start for start, end in windows)
        steps = bool(window.intervals)
        spans = sampled if sampled else windows
        starts = [s for s, _ in spans]
        all_steps = sorted(window.intervals)
        all_starts = [s for s, _ in all_steps]

        t_in, t_out, site_of, elements = self._t_in, self._t_out, self._site, self._elements
        sites = self._sites
        counts: dict[int, int] = {}
        site_elements: dict[int, list[int]] = {}
        gaps: list[float] = []
        dispatch_s = 0.0
        calls = outside = 0
        own_s = 0.0  # inside the callback: not the program's time
        previous_span = -1
        span_ops = [0] * len(spans)
        # without steps, each window from its first op to its last: the program's own
        # time before its first op (a model built at the import, the data made) holds
        # none of theirs, and a window open across a loop's start would read half the
        # share of one inside it (0.47 against 0.73-0.83, so no finding, one run in four)
        first_in = [math.inf] * len(spans)
        last_out = [0.0] * len(spans)
        for i in range(len(t_in)):
            t = t_in[i]
            k = bisect.bisect_right(starts, t) - 1
            span = k if k >= 0 and t <= spans[k][1] else -1
            if steps and span < 0:
                j = bisect.bisect_right(all_starts, t) - 1
                if j < 0 or t > all_steps[j][1]:
                    outside += 1
            if span < 0:
                previous_span = -1
                continue
            own_s += t_out[i] - t
            first_in[span] = min(first_in[span], t)
            last_out[span] = t_out[i]
            site = site_of[i]
            if sites[site].function:
                calls += 1
            else:
                counts[site] = counts.get(site, 0) + 1
                span_ops[span] += 1
                if elements[i] >= 0:
                    site_elements.setdefault(site, []).append(elements[i])
                if (
                    previous_span == span
                    and not sites[site_of[i - 1]].function
                    and not sites[site].op_type.startswith(INPUT_READS)
                ):
                    gap = max(0.0, t - t_out[i - 1])
                    gaps.append(gap)
                    dispatch_s += min(gap, GAP_CAP_S)
            previous_span = span

        ops = sum(counts.values())
        timed = spans if sampled else [(f, last) for f, last in zip(first_in, last_out) if last]
        core_wait = sum(self._core_wait_in(start, end, windows) for start, end in timed)
        span_s = sum(end - start for start, end in timed) - own_s - core_wait
        top, lines = self._top_sites(counts, site_elements)
        figures = EagerFacts(
            sampled_steps=len(sampled),
            ops=ops,
            per_step=ops / len(sampled) if sampled else None,
            dispatch_fraction=min(1.0, dispatch_s / span_s) if span_s > 0 and ops else None,
            median_gap_us=statistics.median(gaps) * 1e6 if gaps else None,
            counted_s=counted_s,
            core_wait_s=round(core_wait, 6),
            sites=top,
            outside_steps=outside,
            note=self._note(calls),
        )
        return figures, span_ops, lines

    def _core_wait_in(self, start: float, end: float, windows: list[tuple[float, float]]) -> float:
        """Seconds the counted thread waited for a core in [start, end], a span inside
        one of ``windows`` (sorted): its window's wait, in proportion to the span's
        share of the window (the wait is read as each window opens and closes, not per
        op). Left out of the time the dispatch share is over: under three busy
        processes on two cores the thread waited for a core half of each window, and
        the share of an eager loop read 0.40-0.51 against 0.92-0.95 on the quiet host."""
        k = bisect.bisect_right(windows, (start, math.inf)) - 1
        if k < 0:
            return 0.0
        opened, closed = windows[k]
        whole = self.core_waits.get(opened)
        if not whole or closed <= opened:
            return 0.0
        return whole * min(1.0, max(0.0, end - start) / (closed - opened))

    def _top_sites(
        self, counts: dict[int, int], site_elements: dict[int, list[int]]
    ) -> tuple[tuple[EagerOpSite, ...], dict[str, int]]:
        """The ``TOP_SITES`` sites (op, line, dtype) that issued the most ops, and every
        line's ops, all sites counted: the code the fix lifts is read from all of them.
        Cut to the top sites, keras-io's custom-loop guide kept only its optimizer's
        line (its per-variable ops fill the first twenty), and the fix traced
        ``optimizer.apply`` alone, leaving the model's call and ``tape.gradient`` eager
        (about 2x faster, where the whole step traced ran 4x)."""
        merged: dict[tuple[str, str | None, str | None], dict[str, Any]] = {}
        for site, count in counts.items():
            info = self._sites[site]
            location = self._frames.location(info.code, info.lasti) if self._frames else None
            row = merged.setdefault(
                (info.op_type, location, info.dtype), {"count": 0, "elements": [], "devices": {}}
            )
            row["count"] += count
            row["elements"].extend(site_elements.get(site, ()))
            device = device_name(info.device)
            row["devices"][device] = row["devices"].get(device, 0) + count
        rows = sorted(
            merged.items(),
            key=lambda item: (-item[1]["count"], item[0][0], item[0][1] or "", item[0][2] or ""),
        )
        lines: dict[str, int] = {}
        for (_, location, _), row in rows:
            if location:
                lines[location] = lines.get(location, 0) + row["count"]
        top = tuple(
            EagerOpSite(
                op=op,
                location=location,
                count=row["count"],
                median_elements=int(statistics.median_low(row["elements"]))
                if row["elements"]
                else None,
                device=max(row["devices"], key=lambda d: row["devices"][d]),
                dtype=dtype,
            )
            for (op, location, dtype), row in rows[:TOP_SITES]
        )
        return top, lines

    def _note(self, calls: int) -> str | None:
        parts = []
        if self.error:
            parts.append(self.error)
        if self.thread_name is not None:
            parts.append(THREAD_NOTE.format(thread=self.thread_name))
        elif not self.error:
            parts.append("not armed: TensorFlow was not imported")
        if calls:
            parts.append(
                f"{calls} tf.function call{'s' if calls != 1 else ''} in the same time, "
                "not counted as eager ops"
            )
        if self.full:
            parts.append(f"counting stopped after {self.max_ops} ops")
        return "; ".join(parts) or None


def _dispatching_loops(loop_of: list[int], span_ops: list[int]) -> set[int] | None:
    """The loops (indices) whose sampled steps issue ``DISPATCHING_SHARE`` or more of the
    busiest loop's eager ops a step; None where that is every loop sampled (or one)."""
    steps: dict[int, int] = {}
    ops: dict[int, int] = {}
    for k, n in zip(loop_of, span_ops):
        steps[k] = steps.get(k, 0) + 1
        ops[k] = ops.get(k, 0) + n
    if len(steps) < 2:
        return None
    rates = {k: ops[k] / steps[k] for k in steps}
    busiest = max(rates.values())
    kept = {k for k, rate in rates.items() if busiest > 0 and rate >= DISPATCHING_SHARE * busiest}
    return None if not kept or len(kept) == len(steps) else kept


def _per_window(
    sampled: list[tuple[float, float]], span_ops: list[int], t0: float, width_s: float | None
) -> tuple[tuple[float, int, int], ...]:
    """Sampled steps and their ops per timeline window (by the step's start)."""
    width = width_s or width_for(sampled[-1][0] - t0)
    steps: dict[int, list[int]] = {}
    for (start, _), ops in zip(sampled, span_ops):
        entry = steps.setdefault(max(0, int((start - t0) // width)), [0, 0])
        entry[0] += 1
        entry[1] += ops
    return tuple((round(i * width, 6), n, ops) for i, (n, ops) in sorted(steps.items()))


def inside_a_window(start: float, end: float, windows: list[tuple[float, float]]) -> bool:
    """Whether [start, end] lies wholly inside one of ``windows`` (sorted, and not
    overlapping: the counter opens one after the other closes). Only the last window
    opened at or before ``start`` can hold it: a bisection per step, where asking every
    window made the end of a long run cost steps x windows."""
    k = bisect.bisect_right(windows, (start, math.inf)) - 1
    return k >= 0 and end <= windows[k][1]


# -- its rows in the reports ------------------------------------------------------
def eager_line(eager: EagerFacts) -> str:
    if eager.sampled_steps and eager.per_step is not None:
        text = f"{eager.per_step:,.0f} per step over {eager.sampled_steps} sampled steps"
        if eager.of_loops:
            text += " of " + ", ".join(eager.of_loops)
        if eager.dispatch_fraction is not None:
            text += f", about {eager.dispatch_fraction:.0%} of step time spent issuing them"
    else:
        text = f"{eager.ops:,} counted" + (
            f" ({eager.outside_steps:,} outside steps)" if eager.outside_steps else ""
        )
    if eager.sites:
        top = eager.sites[0]
        text += f"; most from {top.op} at {top.location or '?'}"
    return text
