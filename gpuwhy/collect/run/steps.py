"""Training steps found without step markers, for Keras ``fit`` and custom loops alike.

Four kinds of evidence are recorded while the program runs, and the strongest one that
is present becomes the step clock (``StepFacts.source``):

1. ``keras-fit``: Keras' own per-batch callback calls (``tfapi/keras_hooks.py``); one
   call of the train function runs ``steps_per_execution`` steps.
2. ``tf-data``: ``next()`` on a tf.data iterator from a Python loop
   (``tfapi/tfdata/iterators.py``); every loop site's steps count (a script may train
   in several loops), the one with the most batches names them. Here the time inside
   ``next()`` *is* the input wait.
3. ``tf-function``: outermost calls of tf.functions called in loops (``FunctionWatcher``),
   every such function's, the most-called one naming them.
4. ``optimizer``: eager ``apply_gradients`` calls (an eager loop with no tf.function).

A step runs from one boundary to the next, so the Python between two train calls
(logging, metrics, eager ops) is part of the step, as it is part of the user's wait.
For function and optimizer calls, boundaries farther apart than ``GAP_LIMIT`` times the
typical step (evaluation between epochs, a checkpoint) end the step at the end of its
call instead; Keras batches and tf.data loops end at epoch ends on their own.
"""

from __future__ import annotations

import bisect
import statistics
import threading
import time
from dataclasses import dataclass, field

from gpuwhy.collect.run.base import RunCollector, StepWindow
from gpuwhy.facts import StepFacts

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


@dataclass
class StepCollector(RunCollector):
    """Records Keras, tf.data and optimizer events; :meth:`facts` picks the step clock."""

    keras_events: list = field(default_factory=list)  # (event, t, value)
    iterator_calls: dict = field(default_factory=dict)  # site -> [(id, start, end, exhausted)]
    optimizer_calls: list = field(default_factory=list)  # (start, end)
    notes: list = field(default_factory=list)

    def __post_init__(self) -> None:
        self._patches: list = []
        self._lock = threading.Lock()

    # -- hooks ---------------------------------------------------------------------
    def on_tensorflow(self) -> None:
        from gpuwhy.tfapi.tfdata import iterators as data_iterator

        self._install(lambda: data_iterator.install(self._on_next), "tf.data iterators")

    def on_keras(self) -> None:
        from gpuwhy.tfapi import keras_hooks

        self._install(
            lambda: keras_hooks.install_callbacks(self._on_keras_event), "Keras callbacks"
        )
        self._install(lambda: keras_hooks.install_optimizer(self._on_apply), "Keras optimizers")

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
    def facts(
        self, t0: float, function_calls: dict | None = None, t_end: float | None = None
    ) -> tuple[StepFacts | None, StepWindow]:
        """The step facts and the after-warm-up step intervals other collectors use."""
        t_end = time.perf_counter() if t_end is None else t_end
        found = (
            self._keras_steps()
            or self._iterator_steps()
            or self._call_steps(function_calls or {})
            or self._optimizer_steps()
        )
        if not found:
            return None, StepWindow(t0)
        source, marker, steps, phases, spe = found
        return _summarise(source, marker, steps, phases, spe, t0, t_end), StepWindow(
            t0, tuple((s.start, s.end) for s in steps[_warmup(steps) :])
        )

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
        if not steps:
            return None
        marker = f"Model.fit at {site}" if site else "Model.fit"
        return "keras-fit", marker, steps, phases, spe

    def _iterator_steps(self):
        with self._lock:
            calls = {site: list(rows) for site, rows in self.iterator_calls.items()}
        # the loop sites by batches read, most first: its site names the steps
        by_reads = sorted(calls.items(), key=lambda kv: -sum(1 for r in kv[1] if not r[3]))
        merged = _every_loop((site, _iterator_sequence(rows)) for site, rows in by_reads)
        if merged is None:
            return None
        sites, steps = merged
        return "tf-data", _marker("next() on a tf.data iterator", "loops", sites), steps, [], 1

    def _call_steps(self, function_calls: dict):
        by_calls = sorted(function_calls.items(), key=lambda kv: -len(kv[1]))
        merged = _every_loop(
            (name, _cycles(calls)) for name, calls in by_calls if len(calls) >= MIN_STEPS
        )
        if merged is None:
            return None
        names, steps = merged
        return "tf-function", _marker("calls of", "functions", names, at=False), steps, [], 1

    def _optimizer_steps(self):
        if len(self.optimizer_calls) < MIN_STEPS:
            return None
        return "optimizer", "optimizer.apply_gradients calls", _cycles(self.optimizer_calls), [], 1


# Another loop's steps may overlap the counted ones by this share of their time and
# still be their own loop (not one nested inside a counted step).
MAX_NESTED_OVERLAP = 0.10


def _every_loop(loops) -> tuple[list[str], list[_Step]] | None:
    """The steps of every loop (site or function) with ``MIN_STEPS`` steps or more, in
    time order, and the loops' names, most steps first.

    A script with several training loops (one per model, a warm-up loop, a fine-tuning
    loop) has steps in each; taking only the busiest would leave the others out of the
    statistics. A loop whose steps lie inside steps already counted (an inner loop over
    a second dataset, read within each outer step) is part of those steps, not steps of
    its own, and is left out.
    """
    names: list[str] = []
    steps: list[_Step] = []
    for name, sequence in loops:
        if len(sequence) < MIN_STEPS:
            continue
        if steps and _overlap(sequence, steps) > MAX_NESTED_OVERLAP:
            continue
        names.append(str(name))
        steps.extend(sequence)
    if not steps:
        return None
    return names, sorted(steps, key=lambda step: step.start)


def _overlap(sequence: list[_Step], counted: list[_Step]) -> float:
    """The share of ``sequence``'s time inside steps already counted."""
    spans = sorted((s.start, s.end) for s in counted)
    starts = [a for a, _ in spans]
    inside = 0.0
    for step in sequence:
        index = bisect.bisect_right(starts, step.end)
        for start, end in spans[max(0, index - 64) : index]:  # the spans it may touch
            inside += max(0.0, min(end, step.end) - max(start, step.start))
    total = sum(s.end - s.start for s in sequence)
    return inside / total if total > 0 else 0.0


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
    warm = _warmup(steps)
    counted = steps[warm:]
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
        warmup=sum(s.steps for s in steps[:warm]),
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
