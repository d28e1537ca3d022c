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
where another loop trains. ``StepFacts.source`` names the loop with the most steps,
``StepFacts.loops`` each of them.

A step runs from one boundary to the next, so the Python between two train calls
(logging, metrics, eager ops) is part of the step, as it is part of the user's wait.
For function and optimizer calls, boundaries farther apart than ``GAP_LIMIT`` times the
typical step (evaluation between epochs, a checkpoint) end the step at the end of its
call instead; Keras batches and tf.data loops end at epoch ends on their own.
"""

from __future__ import annotations

import bisect
import dataclasses
import math
import statistics
import threading
import time
from dataclasses import dataclass, field

from gpuwhy.collect.inprocess.base import Collector, Gathering, StepWindow
from gpuwhy.collect.inprocess.functions import FunctionWatcher
from gpuwhy.facts import StepFacts, StepLoop
from gpuwhy.tfapi import distribute, keras_hooks
from gpuwhy.tfapi.tfdata import iterators as data_iterator

MAX_STEPS = 5000  # per-step series kept in the facts
MIN_STEPS = 3  # fewer boundaries than this are not a loop
GAP_LIMIT = 10.0
WARMUP_LOOKAHEAD = 5  # warm-up steps are found among the first few only
WARMUP_FACTOR = 3.0


@dataclass
class _Step:
    start: float
    end: float
    steps: int = 1  # steps this call ran (Keras steps_per_execution)
    wait: float | None = None
    warm: bool = False  # one of its loop's warm-up steps: out of the statistics


@dataclass
class StepCollector(Collector):
    """Records Keras, tf.data and optimizer events; :meth:`facts` picks the step clock."""

    section = "steps"
    order = 10  # the function watcher's calls make loops of steps; first to start, last to stop
    what = "steps"
    live = True

    keras_events: list = field(default_factory=list)  # (event, t, value)
    iterator_calls: dict = field(default_factory=dict)  # site -> [(id, start, end, exhausted)]
    optimizer_calls: list = field(default_factory=list)  # (start, end)
    notes: list = field(default_factory=list)
    # Keras compile(jit_compile="auto"): would Keras XLA-compile the step on a GPU
    keras_auto_jit: bool | None = None
    keras_cudnn_rnn: tuple = ()  # the compiled model's LSTM/GRU layers cuDNN runs on a GPU

    def __post_init__(self) -> None:
        self._patches: list = []
        self._lock = threading.Lock()

    # -- hooks ---------------------------------------------------------------------
    def on_tensorflow(self) -> None:
        self._install(lambda: data_iterator.install(self._on_next), "tf.data iterators")
        self._install(self._install_distributed, "distributed iterators")

    def _install_distributed(self) -> list:
        """A tf.distribute iterator read in the loop (``for x in dist_ds``): its reads
        are this worker's wait for its own input, timed like a tf.data iterator's."""

        return distribute.install_iterator_timing(self._on_next)

    def on_keras(self) -> None:
        self._install(
            lambda: keras_hooks.install_callbacks(self._on_keras_event), "Keras callbacks"
        )
        self._install(lambda: keras_hooks.install_optimizer(self._on_apply), "Keras optimizers")
        self._install(lambda: keras_hooks.install_compile(self._on_compile), "Keras compile")

    def _on_compile(self, would_xla: bool | None, cudnn: tuple = ()) -> None:
        """The last compile: with jit_compile="auto", would Keras XLA-compile it on a
        GPU (None: another jit_compile); the LSTM/GRU layers cuDNN would run there."""
        if would_xla is not None:
            self.keras_auto_jit = would_xla
        self.keras_cudnn_rnn = tuple(cudnn)

    def _install(self, install, what: str) -> None:
        try:
            self._patches.extend(install())
        except Exception as e:  # noqa: BLE001 - a TF/Keras version we do not know
            self.notes.append(f"could not watch {what}: {type(e).__name__}: {e}")

    def stop(self) -> None:
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
        with self._lock:
            self.iterator_calls.setdefault(site, []).append((key, start, end, exhausted))

    def _on_apply(self, event: str, start: float, end: object) -> None:
        self.optimizer_calls.append((start, end))

    def reads(self) -> list[tuple[int, float, float, bool]]:
        """Every timed ``next()`` call: (iterator id, start, end, exhausted)."""
        with self._lock:
            return [row for rows in self.iterator_calls.values() for row in rows]

    # -- facts ---------------------------------------------------------------------
    def fill(self, gathering: Gathering) -> StepFacts | None:
        """Section ``steps``, from these events and the function watcher's calls (a
        loop of calls to one function is a loop of steps); sets ``gathering.window``."""
        functions = gathering.peer(FunctionWatcher)
        no_calls: dict[str, list[tuple[float, float]]] = {}
        calls = gathering.guard("tf.function calls", functions.calls, no_calls)
        looped = [name for name, spans in calls.items() if len(spans) >= MIN_STEPS]
        unknown: dict[str, bool | None] = {}
        trains = gathering.guard("training functions", lambda: functions.trains(looped), unknown)
        steps, gathering.window = self.facts(
            gathering.t0, calls, gathering.t_end, trains, live=gathering.live
        )
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
    ) -> tuple[StepFacts | None, StepWindow]:
        """The step facts and the after-warm-up step intervals other collectors use.

        ``trains``: per function name (a key of ``function_calls``), whether its graph
        has a backward pass (True), has none (False) or is unknown (absent/None); what
        tells a validation loop from a training loop. ``live``: mid-run, a loop whose
        warm-up is not decided yet (no more than ``WARMUP_LOOKAHEAD`` steps so far)
        keeps its steps out of the window until it is: a live step histogram must not
        take in a tracing step that the final facts leave out."""
        t_end = time.perf_counter() if t_end is None else t_end
        loops, phases, spe = self._loops(function_calls or {}, trains or {})
        if not loops:
            return None, StepWindow(t0)
        for loop in loops:  # each loop's first steps trace or build its own things
            for step in loop.steps[: _warmup(loop.steps)]:
                step.warm = True
        steps = sorted((s for loop in loops for s in loop.steps), key=lambda s: s.start)
        lead = loops[0]
        facts = _summarise(lead.source, _markers(loops), steps, phases, spe, t0, t_end)
        facts = dataclasses.replace(facts, loops=tuple(loop.facts(t0) for loop in loops))
        undecided = {
            id(s) for loop in loops if live and len(loop.steps) <= WARMUP_LOOKAHEAD
            for s in loop.steps
        }  # fmt: skip
        window = tuple((s.start, s.end) for s in steps if not s.warm and id(s) not in undecided)
        return facts, StepWindow(t0, window)

    def _loops(self, function_calls: dict, trains: dict):
        """Every training loop's steps, whatever marks them, most steps first.

        Candidates come strongest evidence first (Keras batches, tf.data loop sites,
        looped tf.functions, eager optimizer calls); one whose steps lie inside steps or
        Keras phases already taken (the function Keras calls per batch, an inner loop, the
        function a loop site calls) is part of those, not a loop of its own. A script
        may train several models, warm up, train in a custom loop and then ``fit``: every
        such loop counts. A loop none of whose steps train (a validation loop calling a
        ``test_step``) is left out where another loop does train."""
        marker, steps, phases, spe, still_open = self._keras_steps()
        candidates: list[_Loop] = []
        kept: list[_Loop] = []
        if steps:
            kept.append(_Loop("keras-fit", marker, steps, trains=True))
        # Keras' own loops (fit's, evaluate's, predict's functions and iterators), those
        # still running (read while fit runs, or a fit that never ended) up to now
        covered = [_Step(a, b) for name, a, b in phases if not name.startswith("epoch")]
        covered += [_Step(t, math.inf) for name, t in still_open if name != "on_epoch_begin"]
        with self._lock:
            calls = {site: list(rows) for site, rows in self.iterator_calls.items()}
        by_reads = sorted(calls.items(), key=lambda kv: -sum(1 for r in kv[1] if not r[3]))
        for site, rows in by_reads:
            candidates.append(_Loop("tf-data", str(site), _iterator_sequence(rows)))
        for name, spans in sorted(function_calls.items(), key=lambda kv: -len(kv[1])):
            if len(spans) >= MIN_STEPS:
                candidates.append(_Loop("tf-function", str(name), _cycles(spans), trains.get(name)))
        if len(self.optimizer_calls) >= MIN_STEPS:
            optimizer = _cycles(self.optimizer_calls)
            candidates.append(
                _Loop("optimizer", "optimizer.apply_gradients calls", optimizer, True)
            )
        for loop in candidates:
            if len(loop.steps) < MIN_STEPS:
                continue
            if covered and _overlap(loop.steps, covered) > MAX_NESTED_OVERLAP:
                continue
            covered = covered + loop.steps
            kept.append(loop)
        for loop in kept:
            if loop.trains is None:
                loop.trains = self._loop_trains(loop, function_calls, trains)
        if any(loop.trains for loop in kept):
            kept = [loop for loop in kept if loop.trains is not False]
        kept.sort(key=lambda loop: -loop.count)
        return kept, phases, spe

    def _loop_trains(self, loop: _Loop, function_calls: dict, trains: dict) -> bool | None:
        """Whether a loop site's steps train: a training function or an eager optimizer
        call inside them says yes; functions called inside, none of which trains, say
        no, as does no optimizer call inside while the program's optimizer was seen
        stepping eagerly elsewhere. Otherwise unknown."""
        inside = [
            name
            for name, spans in function_calls.items()
            if _overlap([_Step(a, b) for a, b in spans], loop.steps) > 0.5
        ]
        optimizer = [_Step(a, b) for a, b in self.optimizer_calls]
        if any(trains.get(name) for name in inside):
            return True
        if optimizer and _overlap(optimizer, loop.steps) > 0.5:
            return True
        if inside and all(trains.get(name) is False for name in inside):
            return False
        if not inside and optimizer:
            return False
        return None

    def _keras_steps(self):
        steps: list[_Step] = []
        phases: list[tuple[str, float, float]] = []
        opened: dict[str, float] = {}
        site = None
        pending: tuple[float, object] | None = None
        spe = 1
        for event, t, value in self.keras_events:
            if event == "on_train_begin":
                site = site or value
                opened["fit"] = t
            elif event in ("on_epoch_begin", "on_test_begin", "on_predict_begin"):
                opened[event] = t
            elif event in ("on_train_end", "on_epoch_end", "on_test_end", "on_predict_end"):
                begin = {
                    "on_train_end": "fit",
                    "on_epoch_end": "on_epoch_begin",
                    "on_test_end": "on_test_begin",
                    "on_predict_end": "on_predict_begin",
                }[event]
                if begin in opened:
                    name = {
                        "fit": "fit",
                        "on_epoch_begin": f"epoch {value}",
                        "on_test_begin": "evaluate",
                        "on_predict_begin": "predict",
                    }[begin]
                    phases.append((name, opened.pop(begin), t))
                pending = None
            elif event == "on_train_batch_begin":
                if pending is not None and steps and steps[-1].start == pending[0]:
                    steps[-1].end = t  # step = begin to the next begin
                pending = (t, value)
            elif event == "on_train_batch_end" and pending is not None:
                begin_t, begin_step = pending
                count = 1
                if isinstance(begin_step, int) and isinstance(value, int) and value >= begin_step:
                    count = value - begin_step + 1
                spe = max(spe, count)
                steps.append(_Step(begin_t, t, count))
        marker = f"Model.fit at {site}" if site else "Model.fit"
        return marker, steps, phases, spe, list(opened.items())


@dataclass
class _Loop:
    """One loop's steps while the step clock is chosen."""

    source: str
    name: str
    steps: list[_Step]
    trains: bool | None = None

    @property
    def count(self) -> int:
        return sum(s.steps for s in self.steps)

    def facts(self, t0: float) -> StepLoop:
        timed = [s for s in self.steps if not s.warm] or self.steps
        per_step = [(s.end - s.start) / s.steps for s in timed]
        return StepLoop(
            source=self.source,
            name=self.name,
            count=self.count,
            first_s=round(self.steps[0].start - t0, 6),
            median_s=round(statistics.median(per_step), 6) if per_step else None,
        )


# Another loop's steps may overlap the counted ones by this share of their time and
# still be their own loop (not one nested inside a counted step).
MAX_NESTED_OVERLAP = 0.10


# A step is compared with the counted spans that start at most this many spans before
# its end (the spans it may touch).
OVERLAP_LOOKBACK = 64
# Spans longer than this many times the median span (a fit still running, an epoch) are
# few: every step checks them; any other span can touch a step only if it starts within
# the longest of them before the step.
LONG_SPAN_FACTOR = 8.0


def _overlap(sequence: list[_Step], counted: list[_Step]) -> float:
    """The share of ``sequence``'s time inside steps already counted.

    Each step adds its intersection with each of the ``OVERLAP_LOOKBACK`` counted spans
    that start last before its end, in start order. Spans that end before the step
    starts add nothing, so they are skipped: a step visits the few spans near it and
    the long ones, not all 64 (at 100,000 steps this was most of the time gpuwhy took
    after the program ended)."""
    spans = sorted((s.start, s.end) for s in counted)
    if not spans or not sequence:
        return 0.0
    starts = [a for a, _ in spans]
    lengths = [b - a for a, b in spans]
    cutoff = LONG_SPAN_FACTOR * statistics.median(lengths)
    long_at = [i for i, length in enumerate(lengths) if not length <= cutoff]
    reach = max((length for length in lengths if length <= cutoff), default=0.0)
    inside = 0.0
    for step in sequence:
        index = bisect.bisect_right(starts, step.end)
        first = max(0, index - OVERLAP_LOOKBACK)
        near = max(first, bisect.bisect_left(starts, step.start - reach, first, index))
        # the long spans between the window's first and the near ones, then the near
        # ones: the same order, and so the same sum, as visiting every span
        for i in long_at[bisect.bisect_left(long_at, first) : bisect.bisect_left(long_at, near)]:
            start, end = spans[i]
            inside += max(0.0, min(end, step.end) - max(start, step.start))
        for start, end in spans[near:index]:
            inside += max(0.0, min(end, step.end) - max(start, step.start))
    total = sum(s.end - s.start for s in sequence)
    return inside / total if total > 0 else 0.0


_WHAT = {
    "tf-data": ("next() on a tf.data iterator", "loops", True),
    "tf-function": ("calls of", "functions", False),
}


def _markers(loops: list[_Loop]) -> str:
    """The marker of the loops counted: one source's loops as :func:`_marker` says them;
    loops of several sources as the busiest loop's marker and the others after it
    (``Model.fit at train.py:80, and 2 more loops: next() at train.py:26, calls of
    gan_step (train.py:68)``)."""
    sources = {loop.source for loop in loops}
    if len(sources) == 1 and loops[0].source in _WHAT:
        what, plural, at = _WHAT[loops[0].source]
        return _marker(what, plural, [loop.name for loop in loops], at=at)
    lead = _one_marker(loops[0])
    if len(loops) == 1:
        return lead
    others = [_one_marker(loop, short=True) for loop in loops[1:4]]
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


def _iterator_sequence(rows) -> list[_Step]:
    """Steps from the next() calls of one loop site, in order.

    One iterator leads: each of its fetches starts a step that lasts until its next
    fetch. Other iterators read at the same line between its fetches (``zip(ds_a,
    ds_b)``) belong to the same step: their time is added to its wait. A new epoch's
    iterator leads once the previous one is exhausted, or abandoned (read twice in a
    row without the old leader).
    """
    steps: list[_Step] = []
    leader: int | None = None
    pending: _Step | None = None
    others: dict[int, int] = {}  # reads of other iterators since the leader's last
    for key, start, end, exhausted in rows:
        if leader is None:
            leader = key
        if key != leader:
            others[key] = others.get(key, 0) + 1
            if others[key] < 2:  # read alongside the leader (zip): part of its step
                if pending is not None and pending.wait is not None:
                    pending.wait += end - start
                continue
            leader, pending = key, None  # the leader was abandoned (break): this one leads
        others.clear()
        if pending is not None:
            pending.end = start
            steps.append(pending)
            pending = None
        if exhausted:
            leader = None
        else:
            pending = _Step(start, end, wait=end - start)
    return steps


def _cycles(calls: list[tuple[float, float]]) -> list[_Step]:
    """Call k starts step k, which lasts until call k+1 starts; the last one until it
    returns. A step far longer than the typical one spans something else (evaluation, a
    checkpoint): it ends where its own call ended."""
    steps = [_Step(start, nxt[0]) for (start, _), nxt in zip(calls, calls[1:])]
    steps.append(_Step(*calls[-1]))
    typical = statistics.median(s.end - s.start for s in steps)
    for step, (_, own_end) in zip(steps, calls):
        if step.end - step.start > GAP_LIMIT * typical and own_end < step.end:
            step.end = own_end
    return steps


def _warmup(steps: list[_Step]) -> int:
    """Leading steps far slower than the rest (tracing, autotune ramp-up, cuDNN search)."""
    if len(steps) < 4:
        return 0
    rest = [s.end - s.start for s in steps[WARMUP_LOOKAHEAD:]] or [s.end - s.start for s in steps]
    typical = statistics.median(rest)
    count = 1  # the first step always traces or builds something
    for s in steps[1:WARMUP_LOOKAHEAD]:
        if s.end - s.start <= WARMUP_FACTOR * typical:
            break
        count += 1
    return min(count, len(steps) - 2)


def _summarise(source, marker, steps: list[_Step], phases, spe, t0, t_end) -> StepFacts:
    counted = [s for s in steps if not s.warm]
    per_step = [(s.end - s.start) / s.steps for s in counted]
    per_step_sorted = sorted(per_step)
    total = sum(s.end - s.start for s in counted)
    waits = [s.wait for s in counted if s.wait is not None]
    measured = len(waits) == len(counted) and counted  # every counted step timed its wait
    kept = steps[:MAX_STEPS]
    return StepFacts(
        source=source,
        marker=marker,
        count=sum(s.steps for s in steps),
        warmup=sum(s.steps for s in steps if s.warm),
        median_s=statistics.median(per_step) if per_step else None,
        p90_s=per_step_sorted[min(len(per_step_sorted) - 1, int(0.9 * len(per_step_sorted)))]
        if per_step_sorted
        else None,
        total_s=total,
        input_wait_fraction=(sum(waits) / total if total else 0.0) if measured else None,
        input_wait_median_s=statistics.median(w / s.steps for w, s in zip(waits, counted))
        if measured
        else None,
        input_wait_source="next() timing" if measured else None,
        steps_per_call=spe,
        run_s=t_end - t0,
        first_step_s=steps[0].start - t0,
        starts=tuple(round(s.start - t0, 6) for s in kept),
        durations=tuple(round(s.end - s.start, 6) for s in kept),
        input_waits=tuple(None if s.wait is None else round(s.wait, 6) for s in kept),
        phases=tuple((name, round(a - t0, 6), round(b - t0, 6)) for name, a, b in phases),
    )
