"""Live metrics for a run or a watched command: every ``interval_s`` a daemon thread takes
what the collectors have measured so far (no placement audit: that runs once, at the
end), runs the rules on it, and updates the metrics; Prometheus scrapes read the last
update, so a scrape costs the program nothing. At the end the final record (audit and
all) makes a last update and a last push.

The step histogram takes in every step after its loop's warm-up exactly once, however
long the run: each loop counts its steps into the histogram's buckets as it records them
(gpuwhy.collect.step_histogram), and an update publishes what those counts grew by, so
an update's cost does not grow with the run (each loop's first steps, warm-up and all,
are kept one by one; what an update reads beyond them is of fixed size).

Nothing here may slow or break the run: the update runs beside the program's threads
at a low rate (never more than ``MAX_SHARE`` of the time, counted in the CPU time the
updates take: an update that takes long, in a program with many loops or functions,
makes the next one come later), a failing
update is skipped, a port in use or a Pushgateway down is one
line on stderr (:mod:`gpuwhy.export.prometheus`), and so is an OTLP collector that is
down (:mod:`gpuwhy.export.otlp`, whose last export the end of the run waits ~2 s for at
most).
"""

from __future__ import annotations

import gc
import os
import threading
import time
import traceback
from collections.abc import Callable
from typing import TYPE_CHECKING

from gpuwhy.collect.identity import job_labels
from gpuwhy.collect.step_histogram import LoopHistograms, StepHistogram
from gpuwhy.export.metrics import busy_sums, named_functions, values
from gpuwhy.export.metrics_options import MetricsOptions
from gpuwhy.export.otlp import OtlpMetrics
from gpuwhy.export.prometheus import Endpoint, PrometheusMetrics, Pusher
from gpuwhy.facts import Facts
from gpuwhy.rules import run_rules
from gpuwhy.version import __version__

if TYPE_CHECKING:
    from gpuwhy.record import Record

MAX_SHARE = 0.005  # of the run's time spent in live updates, at most

# What the run measured so far: its facts, and per loop counted (by a name that stays
# its own) its steps after warm-up so far, counted per bucket.
Snapshot = Callable[[], tuple[Facts, LoopHistograms]]


class LiveMetrics:
    def __init__(
        self, options: MetricsOptions, mode: str, command: str, t0: float, snapshot: Snapshot
    ) -> None:
        self.options, self.mode, self.command, self.t0 = options, mode, command, t0
        self.snapshot = snapshot
        self.metrics: PrometheusMetrics | None = None
        self.endpoint: Endpoint | None = None
        self.pusher: Pusher | None = None
        self.otlp: OtlpMetrics | None = None
        self._busy: dict[int, tuple[float, int]] = {}  # GPU samples at the last update
        self._published = StepHistogram()  # every step published so far
        self._seen: dict[str, StepHistogram] = {}  # per loop, its steps published
        self._named: frozenset[str] = frozenset()  # functions with a series of their own
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def start(self) -> LiveMetrics:
        info = {"mode": self.mode, "command": self.command[:200], "version": __version__}
        job = job_labels()
        metrics = self.metrics = PrometheusMetrics(job, info)
        if self.options.port is not None:
            endpoint = Endpoint(metrics, self.options.port, self.options.addr)
            self.endpoint = endpoint if endpoint.start() else None
        if self.options.push_url:
            self.pusher = Pusher(metrics, self.options.push_url)
        if self.options.otlp_url:
            self.otlp = OtlpMetrics.create(job, info, self.options.otlp_url)
        if self.endpoint is None and self.pusher is None and self.otlp is None:
            return self
        self._thread = threading.Thread(target=self._run, name="gpuwhy-metrics", daemon=True)
        self._thread.start()
        return self

    def _run(self) -> None:
        wait = self.options.interval_s
        collections = CollectionsOnThread()
        gc.callbacks.append(collections)
        try:
            while not self._stopping.wait(wait):
                wait = self._timed_update(collections)
        finally:
            if collections in gc.callbacks:
                gc.callbacks.remove(collections)

    def _timed_update(self, collections: CollectionsOnThread) -> float:
        """One update; returns the pause before the next."""
        started, collected = time.thread_time(), collections.cpu_s
        try:
            facts, steps = self.snapshot()
            self.update(facts, steps, _rule_ids(facts))
        except Exception:  # noqa: BLE001 - skip this update, never the run
            if os.environ.get("GPUWHY_DEBUG"):
                traceback.print_exc()
        # an update's cost is bounded, not fixed (it reads each loop's first steps,
        # the rules, every collector's facts): where one takes long the pause grows,
        # so that updates never take more than MAX_SHARE of the run. Its cost is this
        # thread's CPU time: what it took from the program; its wall time would also
        # count the waits for the GIL and for a machine busy with other work, and one
        # slow update on a loaded machine would put the next minutes away. Nor is a
        # garbage collection of the program's heap that falls on this thread (the
        # program sleeping, its allocations are the only ones) its cost: the heap's
        # debt, paid wherever it falls; a full one of a large heap takes a second
        cost = time.thread_time() - started - (collections.cpu_s - collected)
        return max(self.options.interval_s, cost / MAX_SHARE)

    def update(
        self,
        facts: Facts,
        loops: LoopHistograms,
        findings: list[tuple[str, str]],
        final: bool = False,
    ) -> None:
        """Publish ``facts``: each loop's steps counted since the last update go into the
        step histogram (the collector leaves out a step still running, whose end can
        still move, until it ends, and counts a Keras call of steps_per_execution N as N
        steps). A loop's counts only add what they grew by since its last reading, so
        no step is published twice, even where a step first counted was later called
        warm-up. ``final`` is the caller's: the end of the run."""
        if self.metrics is None:
            return
        with self._lock:
            now_s = time.perf_counter() - self.t0
            for name, counted in loops:
                before = self._seen.get(name, StepHistogram())
                self._published.merge(counted.grown_since(before))
                self._seen[name] = counted.highest(before)
            self._named = named_functions(facts, self._named)
            published = values(
                facts, findings, now_s, self._published, self._busy, named=self._named
            )
            self.metrics.update(published)
            self._busy = busy_sums(facts) or self._busy
            if self.pusher is not None:
                self.pusher.push()
            if self.otlp is not None:
                self.otlp.update(published)
                if not final:  # the last export is finish()'s, which bounds its wait
                    self.otlp.export()

    def finish(self, record: Record | None) -> None:
        """The last update, from the final record (None: none was made), then stop
        serving."""
        self._stopping.set()
        if self._thread is not None:
            self._thread.join(30)
        try:
            if record is not None and self.metrics is not None:
                _, loops = self.snapshot()
                self.update(record.facts, loops, _keys(record.findings), final=True)
        except Exception:  # noqa: BLE001 - the report matters more than a last push
            pass
        if self.otlp is not None:
            self.otlp.finish()
        if self.endpoint is not None:
            self.endpoint.stop()


class CollectionsOnThread:
    """The CPU time of Python's garbage collections that ran on the thread that made
    this (a ``gc.callbacks`` entry: collections run on whichever thread's allocation
    set them off)."""

    def __init__(self) -> None:
        self.thread = threading.get_ident()
        self.cpu_s = 0.0
        self._started: float | None = None

    def __call__(self, phase: str, _info: dict) -> None:
        if threading.get_ident() != self.thread:
            return
        if phase == "start":
            self._started = time.thread_time()
        elif self._started is not None:
            self.cpu_s += time.thread_time() - self._started
            self._started = None


def _rule_ids(facts: Facts) -> list[tuple[str, str]]:
    """The findings the rules make of ``facts`` now: (id, severity)."""

    findings, _ = run_rules(facts)
    return _keys(findings)


def _keys(findings) -> list[tuple[str, str]]:
    """(id, severity) of each finding: what the finding gauges are labelled with."""
    return [(f.id, f.severity) for f in findings]
