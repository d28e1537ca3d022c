"""Steps made from events as they come, so no event is kept once its step is known.

Each stream turns one kind of evidence into steps in time order and hands every step it
closes to ``emit`` (a :class:`~gpuwhy.collect.inprocess.step_record.LoopRecord`'s
``add``). The collectors feed them from a background thread a few times a second
(:mod:`gpuwhy.collect.inprocess.drain`), and once more when facts are asked for.

- :class:`KerasStream`: Keras' batch and phase callbacks (``Model.fit``).
- :class:`IteratorStream`: ``next()`` calls at one loop site.
- :class:`CycleStream`: calls of one function (a looped tf.function, eager
  ``apply_gradients``): call k starts step k.

A stream's last step may still be open (its end is the next event's start): it is
handed out by ``open_steps()`` for a snapshot and emitted once closed.
"""

from __future__ import annotations

import statistics
from array import array
from collections import deque
from collections.abc import Callable

from gpuwhy.collect.inprocess import step_record
from gpuwhy.collect.inprocess.hook_pauses import Stretch
from gpuwhy.collect.inprocess.step_record import LoopRecord, LoopView, Step, snapshot, view_of

GAP_LIMIT = 10.0  # a step this many times the typical one spans something else
MAX_PHASES = 1000  # Keras phases kept: the first half and the latest half

Emit = Callable[[Step], None]

_ENDS = {
    "on_train_end": "fit",
    "on_epoch_end": "on_epoch_begin",
    "on_test_end": "on_test_begin",
    "on_predict_end": "on_predict_begin",
}
_PHASE_NAMES = {
    "fit": "fit",
    "on_epoch_begin": "epoch {}",
    "on_test_begin": "evaluate",
    "on_predict_begin": "predict",
}


MAX_SITES_NAMED = 3  # fit calls named in the loop's marker


class KerasStream:
    """Steps and phases from Keras' callbacks: a step lasts from one batch's begin to
    the next batch's begin (the Python between two batches is the user's wait too),
    and a phase's end closes the step before it at its own batch end."""

    def __init__(self, emit: Emit) -> None:
        self.emit = emit
        self.site: object = None
        self.sites: dict[object, None] = {}  # each fit call's place, the first few
        self._fit_key: object = None  # the model and optimizer of the last fit
        self._opening = False  # the next batch opens a fit of another model or compile
        self.opened: dict[str, float] = {}
        self.first_phases: list[tuple[str, float, float]] = []
        self.last_phases: deque[tuple[str, float, float]] = deque(maxlen=MAX_PHASES // 2)
        self.steps_per_call = 1
        self.epoch_steps: int | None = None  # batches per epoch, where fit knows them
        self._pending: tuple[float, object] | None = None  # the batch begun, not ended
        self._open: Step | None = None  # the last batch, its end not yet known
        # the optimizer's step counter at the epoch's start and at its end (keras_hooks'
        # train_iterations, read where a call of several steps may run fewer), and the
        # steps the epoch's calls reported
        self._iterations_before: int | None = None
        self._iterations_now: int | None = None
        self._epoch_reported = 0

    def feed(self, event: str, t: float, value: object) -> None:
        if event == "on_train_begin":
            self.site = self.site or value
            if value is not None and len(self.sites) < MAX_SITES_NAMED:
                self.sites[value] = None
            self.opened["fit"] = t
            self.epoch_steps = None
            self._iterations_before, self._iterations_now = self._iterations_now, None
            self._epoch_reported = 0
            self._opening = False
        elif event == "fit_key":
            # fit called again on the same model and compile (once per epoch, in a loop)
            # goes on at the same pace; another model, or a new compile, has its own
            self._opening = self._fit_key is not None and value != self._fit_key
            self._fit_key = value
        elif event == "train_iterations":
            self._iterations_now = value if isinstance(value, int) else None
        elif event == "epoch_steps":
            self.epoch_steps = value if isinstance(value, int) else None
        elif event in ("on_epoch_begin", "on_test_begin", "on_predict_begin"):
            self.opened[event] = t
        elif event in _ENDS:
            if event == "on_epoch_end":
                self._settle_epoch()
            begin = _ENDS[event]
            if begin in self.opened:
                name = _PHASE_NAMES[begin].format(value)
                self._phase((name, self.opened.pop(begin), t))
            self._pending = None
            self._close()
        elif event == "on_train_batch_begin":
            if self._open is not None and self._pending is not None:
                if self._open.start == self._pending[0]:
                    self._open.end = t  # step = begin to the next begin
            # the step stays open to the next batch's end or the phase's end: an epoch of
            # unknown length begins one more call that finds no data, and the epoch's end
            # may still settle the last call's steps
            self._pending = (t, value)
        elif event == "on_train_batch_end" and self._pending is not None:
            begin_t, begin_step = self._pending
            count = 1
            if isinstance(begin_step, int) and isinstance(value, int) and value >= begin_step:
                last = value if self.epoch_steps is None else min(value, self.epoch_steps - 1)
                count = max(1, last - begin_step + 1)
            self._epoch_reported += count
            self.steps_per_call = max(self.steps_per_call, count)
            self._close()
            self._open = Step(begin_t, t, count, opens=self._opening)
            self._opening = False

    def _settle_epoch(self) -> None:
        """At an epoch's end, where the optimizer's counter was read at its start and
        now: the steps its calls reported beyond the steps it ran come off its last call
        (still open), the one Keras reports whole though the epoch's end cut it short."""
        before, now = self._iterations_before, self._iterations_now
        if before is not None and now is not None and self._open is not None:
            excess = self._epoch_reported - (now - before)
            if 0 < excess < self._open.steps:
                self._open.steps -= excess
        self._iterations_before, self._iterations_now = now, None
        self._epoch_reported = 0

    def _close(self) -> None:
        if self._open is not None:
            self.emit(self._open)
            self._open = None

    def _phase(self, phase: tuple[str, float, float]) -> None:
        if len(self.first_phases) < MAX_PHASES // 2:
            self.first_phases.append(phase)
        else:
            self.last_phases.append(phase)

    def open_steps(self) -> list[Step]:
        return [self._open] if self._open is not None else []

    @property
    def phases(self) -> list[tuple[str, float, float]]:
        return self.first_phases + list(self.last_phases)

    @property
    def marker(self) -> str:
        if len(self.sites) > 1:
            return "Model.fit at " + ", ".join(str(s) for s in self.sites)
        return f"Model.fit at {self.site}" if self.site else "Model.fit"


class IteratorStream:
    """Steps from the next() calls of one loop site, in order.

    One iterator leads: each of its fetches starts a step that lasts until its next
    fetch. Other iterators read at the same line between its fetches (``zip(ds_a,
    ds_b)``) belong to the same step: their time is added to its wait. A new epoch's
    iterator leads once the previous one is exhausted, or abandoned (read twice in a
    row without the old leader). A fetch not followed by another of its iterator (the
    loop broke) is no step.
    """

    def __init__(self, emit: Emit) -> None:
        self.emit = emit
        self.reads = 0  # fetches that returned an element
        self._leader: int | None = None
        self._pending: Step | None = None
        self._others: dict[int, int] = {}  # reads of other iterators since the leader's last

    def feed(self, key: int, start: float, end: float, exhausted: bool | Stretch) -> None:
        if isinstance(exhausted, Stretch):
            self._stretch(key, start, end, exhausted)
            return
        if not exhausted:
            self.reads += 1
        if self._leader is None:
            self._leader = key
        if key != self._leader:
            self._others[key] = self._others.get(key, 0) + 1
            if self._others[key] < 2:  # read alongside the leader (zip): part of its step
                if self._pending is not None and self._pending.wait is not None:
                    self._pending.wait += end - start
                return
            self._leader, self._pending = key, None  # the leader was abandoned (break)
        self._others.clear()
        if self._pending is not None:
            self._pending.end = start
            self.emit(self._pending)
            self._pending = None
        if exhausted:
            self._leader = None
        else:
            self._pending = Step(start, end, wait=end - start)

    def _stretch(self, key: int, start: float, end: float, stretch: Stretch) -> None:
        """Reads counted while the timing paused: with the leader's last timed read, they
        make ``stretch.steps`` steps up to ``end``, seen only as a count. A partner's
        (zip) add to no step: their wait was not timed."""
        self.reads += stretch.reads
        if key != self._leader:
            # the leader's reads of the same pause come as a stretch of their own, after
            # this partner's next timed read where the hooks came back between the
            # leader's read and the partner's: its reads so far do not say the leader
            # was abandoned
            self._others.pop(key, None)
            return
        pending, self._pending = self._pending, None
        self._others.clear()
        if stretch.steps <= 0:  # the run ended on them: the last step stays open, unseen
            pass
        elif pending is not None:
            self.emit(Step(pending.start, end, stretch.steps, counted=True))
        elif stretch.steps > 1:  # no timed read began the first of them
            self.emit(Step(start, end, stretch.steps - 1, counted=True))
        if stretch.ended:
            self._leader = None

    def open_steps(self) -> list[Step]:
        return []


class CycleStream:
    """Steps from the calls of one function: call k starts step k, which lasts until
    call k+1 starts; the last one until it returns. A step longer than ``GAP_LIMIT``
    typical steps spans something else (evaluation, a checkpoint): it ends where its own
    call ended.

    "Typical" is the median step of the first ``HEAD_STEPS`` calls, which are held
    back (16 bytes each; they stay readable as :attr:`first_calls`) until there are
    that many: a shorter run's steps are cut by the median of all its steps, as if seen
    whole; a longer run's later steps by the median of its first ones.
    """

    def __init__(self, emit: Emit) -> None:
        self.emit = emit
        self.calls = 0
        self._first = array("d")  # start, end of the first HEAD_STEPS + 1 calls
        self._typical: float | None = None  # known once the first calls were emitted
        self._previous: tuple[float, float] | None = None  # the last call: its step is open

    def feed(self, start: float, end: float) -> None:
        self.calls += 1
        if self._typical is not None and self._previous is None:  # after a counted stretch
            self._previous = (start, end)
            return
        if self._typical is None:
            self._first.extend((start, end))
            if len(self._first) // 2 > step_record.HEAD_STEPS:
                steps, self._typical = cycles(self.first_calls())
                for step in steps[:-1]:
                    self.emit(step)
                self._previous = (start, end)
            return
        previous = self._previous
        assert previous is not None
        step = Step(previous[0], start)
        if step.end - step.start > GAP_LIMIT * self._typical and previous[1] < step.end:
            step.end = previous[1]
        self.emit(step)
        self._previous = (start, end)

    def stretch(self, calls: int, end: float) -> None:
        """``calls`` calls counted while the call hook paused, the last of them until
        ``end``: with the last timed call (its step still open) they make ``calls + 1``
        steps, seen only as a count. Calls still held back are let go first, their
        typical step taken from them."""
        self.calls += calls
        if self._typical is None and self._first:
            steps, self._typical = cycles(self.first_calls())
            for step in steps[:-1]:
                self.emit(step)
            self._previous = (steps[-1].start, steps[-1].end)
        previous, self._previous = self._previous, None
        if previous is not None:
            self.emit(Step(previous[0], max(end, previous[0]), calls + 1, counted=True))
        else:  # none timed before them
            self.emit(Step(end, end, calls, counted=True))

    def first_calls(self) -> list[tuple[float, float]]:
        """(start, end) of the first calls, up to ``HEAD_STEPS`` + 1."""
        first = self._first
        return list(zip(first[0::2], first[1::2]))

    def holds_calls(self) -> bool:
        """Whether calls are still held back (none emitted yet): a question asked four
        times a second, answered without making their steps (held_steps: 2.8 ms at
        5,000 calls, the GIL held meanwhile)."""
        return self._typical is None and bool(self._first)

    def held_steps(self) -> list[Step]:
        """The steps of the calls held back (all of a run with no more than
        ``HEAD_STEPS`` calls), none of which was emitted yet; empty once they were."""
        return cycles(self.first_calls())[0] if self._typical is None and self._first else []

    def open_steps(self) -> list[Step]:
        if self._typical is None or self._previous is None:
            return []
        return [Step(*self._previous)]


def cycles(calls: list[tuple[float, float]]) -> tuple[list[Step], float]:
    """The steps of ``calls`` (sorted by start) and the typical (median) step."""
    steps = [Step(start, nxt[0]) for (start, _), nxt in zip(calls, calls[1:])]
    steps.append(Step(*calls[-1]))
    typical = statistics.median(s.end - s.start for s in steps)
    for step, (_, own_end) in zip(steps, calls):
        if step.end - step.start > GAP_LIMIT * typical and own_end < step.end:
            step.end = own_end
    return steps, typical


def cycle_view(t0: float, stream: CycleStream, record: LoopRecord) -> LoopView:
    """The steps of a function's calls so far: those it still holds back, else what
    its record kept with the step still open."""
    held = stream.held_steps()
    return view_of(t0, held) if held else snapshot(record, stream.open_steps())


def calls_view(t0: float, calls: list[tuple[float, float]]) -> LoopView:
    """The steps of ``calls`` (start, end), made as the calls of a running program are."""
    record = LoopRecord(t0)
    stream = CycleStream(record.add)
    for start, end in sorted(calls):
        stream.feed(start, end)
    return cycle_view(t0, stream, record)
