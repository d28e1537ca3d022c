"""A few training steps under TF's own profiler, once a run: per call of the training
function, where its time went, op node by op node.

A trigger names the function to sample: it traced an all-reduce
(gpuwhy.collect.inprocess.distribute, for the time in collectives), or, for ``--target``, the
training function with the most time in calls has warmed up (profiler.WARMUP_CALLS calls
after its first; without one, a function called ``FALLBACK_CALLS`` times). A background thread then starts TF's profiler (host trace in memory,
gpuwhy.tfapi.profiler_trace) for ``SAMPLE_CALLS`` calls of it and stops it. Each call
of the function in the trace (``EagerLocalExecute: __inference_<name>_N``) is a step;
the op kernels that start inside it are its ops. The profile keeps, per step: the time
of each op node (the ``MAX_NODES`` longest), of each kernel type (all), and the union
of its collective ops' intervals (collective_time reads it). The projection reads the
time of the ops that stay on the CPU on any GPU (gpuwhy.projection.cpu_ops).

The profiler runs for those few steps only (they run slower while traced: each kernel
is a host event; shares are taken within the trace). TF's one profiler session is held
through collect/inprocess/profiler.py (which says when it is never started, and how the
sample gives way to the program's own profiler).
"""

from __future__ import annotations

import functools
import statistics
import threading
import time
from bisect import bisect_right
from collections.abc import Callable, Sequence
from contextlib import nullcontext
from typing import Any

from gpuwhy.collect.inprocess import profiler
from gpuwhy.collect.inprocess.base import Collector, RunOptions
from gpuwhy.collect.inprocess.functions import FunctionWatcher
from gpuwhy.facts.step_profile import NodeTime, StepProfile
from gpuwhy.tfapi import profiler_trace
from gpuwhy.tfapi.profiler_trace import FUNCTION_CALL

PAUSE_FACTOR = 3.0  # a call's own cost this many times the median call's: a pause
FALLBACK_CALLS = 100  # --target, no function trains: an inference loop's, once this warm
SAMPLE_CALLS = 4
MAX_SAMPLE_S = 20.0  # the profiler is stopped by then whatever the steps
WARM_POLL_S = 0.1  # --target: how often the function to profile is looked for
MAX_NODES = 200  # op nodes kept per profile, most time first
LAUNCH = "CollectiveOpV2Kernel::Run"  # one replica launching one collective


def is_collective(name: str) -> bool:
    lower = name.lower()
    return "collective" in lower or "nccl" in lower


class StepSampler(Collector):
    """``calls()``: tf.function calls so far (the step clock after a named trigger).
    ``warm(min_calls, fallback_calls)``: (name, calls) of the function to profile once
    warm, else None (FunctionWatcher.warm), and ``calls_of(name)``: its calls; given
    both, :meth:`on_tensorflow` watches for it (``--target``). ``result`` or ``reason``
    (why not measured) once stopped."""

    name = "step_profile"
    reads_from = ("tracing",)  # whose calls it profiles

    @classmethod
    def create(cls, options: RunOptions, made: Sequence[Collector]) -> StepSampler:
        """A watched run's: a few steps of the function watcher's functions (one
        profiler session per process: the time in collectives of a tf.distribute step,
        and for --target the ops of the training function that stay on the CPU, once
        the projection asked for them: :meth:`profile_when_warm`)."""
        watcher = cls.peer_of(made, FunctionWatcher)
        sampler = cls(watcher.outermost_calls)
        sampler.hooks_held = lambda: watcher.pauses.held() if watcher.pauses else nullcontext()
        return sampler

    def __init__(
        self,
        calls: Callable[[], int] | None,
        warm: Callable[[int, int], tuple[str, int] | None] | None = None,
        calls_of: Callable[[str], int] | None = None,
    ) -> None:
        self._calls = calls
        self._warm = warm
        self._calls_of = calls_of
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._session: Any = None  # the profiler session while it samples
        self._session_lock = threading.Lock()
        self._wanted: tuple[str, int] | None = None  # a named trigger: (function, replicas)
        self._forbidden: str | None = None
        self.local_replicas = 1
        self.result: StepProfile | None = None
        self.reason: str | None = None
        self.sampled: str | None = None  # the function chosen
        # while the profiler runs, every call is timed (its few calls are counted by
        # the calls seen: the function watcher's hooks must not pause meanwhile)
        self.hooks_held: Callable[[], Any] = nullcontext

    def profile_when_warm(
        self,
        warm: Callable[[int, int], tuple[str, int] | None],
        calls_of: Callable[[str], int],
    ) -> None:
        """Profile the function ``warm`` names once it is (--target: the projection
        costs the training function's ops that stay on the CPU); before the program
        starts."""
        self._warm, self._calls_of = warm, calls_of

    # -- triggers ------------------------------------------------------------------------
    def on_tensorflow(self) -> None:
        if self._warm is None or self._calls_of is None:
            return
        self._begin()

    def start_after(self, function: str, local_replicas: int = 1) -> None:
        """Sample ``function`` once it ran ``profiler.WARMUP_CALLS`` more calls (a watch for the
        function to profile, not yet decided, gives way to it)."""
        if self._calls is None or function == "eager":
            return
        with self._lock:
            if self._wanted is None:
                self._wanted = (function, local_replicas)
        self._begin()

    def forbid(self, reason: str) -> None:
        """Never start the profiler in this process (``reason``: why)."""
        with self._lock:
            self._forbidden = reason
            if self.result is None:
                self.reason = reason

    def _begin(self) -> None:
        with self._lock:
            if self._thread is not None or self._forbidden:
                return
            why = profiler.refused()
            if why:
                self.reason = why
                self._thread = threading.Thread()  # never started: no second try
                return
            self._thread = threading.Thread(
                target=self._sample, name="gpuwhy-step-profile", daemon=True
            )
            self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        thread = self._thread
        if thread is not None and thread.is_alive():
            thread.join(timeout=10.0)

    # -- the sampling thread ---------------------------------------------------------------
    def _give_way(self) -> None:
        """The program starts TF's profiler (from any module): the sample's session ends
        first, its events dropped (one session per process; the program's must start)."""
        with self._session_lock:
            session, self._session = self._session, None
        if session is not None:
            session.stop()

    def _choose(self) -> tuple[str, Callable[[], int], bool] | None:
        """The function to sample, warmed up, the clock that counts its steps, and
        whether the GPUs' kernels are traced too (collectives: NCCL's kernels; the
        ops on the CPU need the host's events only)."""
        while not self._stop.is_set():
            with self._lock:
                wanted = self._wanted
            if wanted is not None and self._calls is not None:
                function, self.local_replicas = wanted
                clock, target = self._calls, self._calls() + profiler.WARMUP_CALLS
                warmed = functools.partial(_reached, clock, target)
                if not profiler.wait_for(warmed, float("inf"), self._stop):
                    return None
                return function, clock, True
            hot = self._warm(1 + profiler.WARMUP_CALLS, FALLBACK_CALLS) if self._warm else None
            if hot is not None and self._calls_of is not None:
                return hot[0], functools.partial(self._calls_of, hot[0]), False
            time.sleep(WARM_POLL_S)
        return None

    def _sample(self) -> None:
        try:
            chosen = self._choose()
            if chosen is None:
                self.reason = "the run ended before its steps warmed up"
                return
            function, clock, device = chosen
            self.sampled = function
            with self._lock:
                if self._forbidden:
                    return
            with profiler.held(self._give_way, self._stop), self.hooks_held():
                events = self._trace(clock, device)
            if events is None:
                return
            self.result = profile(events, function, self.local_replicas)
            if self.result is None:
                self.reason = f"no complete call of {function} in the profiled steps"
        except Exception as e:  # noqa: BLE001 - never into the program (profiler.Busy too)
            self.reason = f"{type(e).__name__}: {e}"

    def _trace(self, clock: Callable[[], int], device: bool) -> list | None:
        """The events of ``SAMPLE_CALLS`` calls (at most ``MAX_SAMPLE_S``); None where
        the profiler would not start or gave way to the program's (``reason`` says)."""
        with self._session_lock:
            try:
                self._session = profiler_trace.start(device=device)
            except Exception as e:  # noqa: BLE001 - the program's profiler session runs
                self.reason = f"TF's profiler would not start ({e})"
                return None
        # the first call once the hooks are held: calls counted while they paused come
        # in with it, all at once
        first = clock()
        profiler.wait_for(
            lambda: clock() != first or self._session is None,
            time.perf_counter() + MAX_SAMPLE_S,
            self._stop,
        )
        target = clock() + SAMPLE_CALLS + 1
        profiler.wait_for(
            lambda: clock() >= target or self._session is None,
            time.perf_counter() + MAX_SAMPLE_S,
            self._stop,
        )
        with self._session_lock:
            session, self._session = self._session, None
        if session is None:
            self.reason = "the program started TF's profiler itself: the sample gave way"
            return None
        return profiler_trace.stop(session, _kept)


def _reached(clock: Callable[[], int], calls: int) -> bool:
    return clock() >= calls


def _kept(name: str) -> bool:
    """Every event but the executor's and thread pool's own bookkeeping."""
    return not name.startswith(("ThreadpoolListener::", "ExecutorState::", "ExecutorDone"))


def profile(events: list, function: str, local_replicas: int = 1) -> StepProfile | None:
    """The profile of the calls of ``function`` in ``events`` (time order); None
    without one. An event belongs to the call it starts in."""

    prefix = f"{FUNCTION_CALL}__inference_{function}_"
    calls = [e for e in events if e.name.startswith(prefix)]
    if not calls:
        return None
    starts = [c.start_ps for c in calls]
    nodes: dict[tuple[str, str], int] = {}
    kernels: dict[str, int] = {}
    collectives: list[list] = [[] for _ in calls]
    spans: list[list[int]] = [[] for _ in calls]  # per call: its ops' first start, last end
    for e in events:
        i = bisect_right(starts, e.start_ps) - 1
        if i < 0 or e.start_ps >= calls[i].start_ps + calls[i].duration_ps:
            continue
        if is_collective(e.name):
            collectives[i].append(e)
        if e.op and e.host:
            span, end = spans[i], e.start_ps + e.duration_ps
            if span:
                span[0], span[1] = min(span[0], e.start_ps), max(span[1], end)
            else:
                span += [e.start_ps, end]
            key = (e.op, e.name)
            nodes[key] = nodes.get(key, 0) + e.duration_ps
            kernels[e.name] = kernels.get(e.name, 0) + e.duration_ps
    count = len(calls)
    overhead = call_overhead(events, calls, spans, function)
    per_step = sorted(
        (NodeTime(node, kernel, ps / 1e12 / count) for (node, kernel), ps in nodes.items()),
        key=lambda n: -n.seconds,
    )
    union, call_s, waits = 0.0, 0.0, []
    with_collectives = 0
    for call, mine in zip(calls, collectives):
        if not mine:
            continue
        end = call.start_ps + call.duration_ps
        with_collectives += 1
        call_s += call.duration_ps / 1e12
        union += _union(mine, end) / 1e12
        launches = sorted(e.start_ps for e in mine if e.name == LAUNCH)
        if local_replicas > 1 and len(launches) == local_replicas:
            waits.append((launches[-1] - launches[0]) / 1e12)
    return StepProfile(
        function=function,
        steps=count,
        step_s=sum(c.duration_ps for c in calls) / 1e12 / count,
        nodes=tuple(per_step[:MAX_NODES]),
        nodes_left_out=max(0, len(per_step) - MAX_NODES),
        kernels=tuple(
            sorted(((k, ps / 1e12 / count) for k, ps in kernels.items()), key=lambda kv: -kv[1])
        ),
        collective_steps=with_collectives,
        collective_call_s=call_s / with_collectives if with_collectives else 0.0,
        collective_s=union / with_collectives if with_collectives else 0.0,
        collective_wait_s=(
            sum(waits) / len(waits) if waits and len(waits) == with_collectives else None
        ),
        call_overhead_s=overhead[0] if overhead else None,
        call_overhead_range_s=overhead[1:] if overhead else None,
    )


def call_overhead(
    events: list, calls: list, spans: list[list[int]], function: str
) -> tuple[float, float, float] | None:
    """A call's own cost, per call: the time of the whole call, from Python
    (``Function.__call__``'s trace annotation, named ``function``, holds the runtime's
    ``EagerLocalExecute``) less the span of its ops, first start to last end. What is left
    is the call's fixed work: arguments bound and flattened, the function looked up, its
    executor made and its outputs handed back, which a GPU does not shorten. None where
    no call ran an op on the host (``spans``: per call, its host ops' first start and
    last end). Returns (the median call's, and the first and third quartiles: the least
    and the most of fewer than four calls)."""
    outer = [e for e in events if e.name == function]
    kept = []
    for call, span in zip(calls, spans):
        if not span:
            continue
        end = call.start_ps + call.duration_ps
        wrapper = next(
            (o for o in outer if o.start_ps <= call.start_ps and o.start_ps + o.duration_ps >= end),
            call,
        )
        kept.append(max(0, wrapper.duration_ps - (span[1] - span[0])) / 1e12)
    if not kept:
        return None
    # A call whose own cost is PAUSE_FACTOR times the median call's paused (it traced
    # again: a partial last batch; a collection; the profiler's own start): that is no
    # fixed cost of a call, and of four calls the quartiles would still reach for it
    # (one retrace of 400 ms among calls of 1 ms read as a band up to 160 ms)
    typical = statistics.median_low(kept)
    kept = [k for k in kept if k <= PAUSE_FACTOR * typical] or kept
    # the median call and the middle half of the calls: one call that paused less than
    # that (a neighbour's burst) sets neither the figure nor its band
    if len(kept) < 4:
        return statistics.median_low(kept), min(kept), max(kept)
    first, _, third = statistics.quantiles(kept, n=4, method="inclusive")
    return statistics.median_low(kept), first, third


def _union(events: list, end_ps: int) -> int:
    """The picoseconds any of ``events`` runs before ``end_ps`` (overlaps counted once).
    NumPy only here, in the profiler's thread: the collectors import without it."""
    import numpy as np

    from gpuwhy.collect.capture.intervals import total, union

    starts = np.array([e.start_ps for e in events], np.int64)
    ends = np.minimum(np.array([e.start_ps + e.duration_ps for e in events], np.int64), end_ps)
    keep = ends > starts
    return total(union(starts[keep], ends[keep]))
