"""PipelineCollector: the tf.data pipelines a program iterates, stage by stage.

Once TensorFlow is imported it installs two sets of hooks, both off the per-element
path (``next()`` is never wrapped here):

* :func:`gpuwhy.tfapi.tfdata.origins.install_origin_hooks`: each dataset remembers the
  user's line that built it (the *written* view);
* :func:`gpuwhy.tfapi.tfdata.iterator_models.install_iterator_hooks`: each eager iterator is
  registered under its dataset and consumer (Keras ``fit``/``evaluate``/``predict``
  or a Python loop), and read one last time just before it is freed (a young one:
  ``FINAL_READ_MAX_AGE_S``).

A small daemon thread reads TF's model of every live iterator (``get_model_proto``, a
fraction of a millisecond each) about once a second, young iterators sooner (0.1 s,
0.2 s, 0.4 s ...), and skips reads when they would cost more than ``budget`` of the
run's wall time. A node's counters are cumulative for that node only: TF makes the
nodes under a ``repeat`` anew for every pass and drops an input's nodes once it is
exhausted, so each place in the chain banks what its earlier instances were last seen
doing, and keeps a node that left the model. Elements and self times are therefore
lower bounds when passes are shorter than the reads are apart; the rates computed from
them (time per element, elements per consumer element) are not biased by that.

At :meth:`stop` each pipeline's iterators are added up, and its stages *as TF ran
them* are joined with the transformations *as written*, knowing TF 2.21's default
rewrites (``tensorflow/python/data/ops/options.py`` ``OptimizationOptions`` and
``tensorflow/core/grappler/optimizers/data/``):

* ``map_and_batch_fusion``: ``map`` then ``batch`` run as one ``MapAndBatch``;
* ``map_parallelization``: a ``map`` whose function is stateless runs as
  ``ParallelMapV2`` (autotuned parallelism);
* ``shuffle_and_repeat_fusion``: ``shuffle`` then ``repeat`` run as ``ShuffleAndRepeat``;
* ``noop_elimination``: ``take(-1)``, ``skip(0)``, ``repeat(1)``, ``prefetch(0)``,
  ``shard(1, ...)`` and identity maps disappear;
* ``inject_prefetch``: a ``Prefetch`` is added at the end unless the last
  transformation is already asynchronous (``inject_prefetch.cc``: ``MapAndBatch``,
  ``ParallelBatch``, ``ParallelInterleave``, ``ParallelMap``, ``Prefetch``);
* ``parallel_batch`` keeps ``batch``'s node name (it sets ``parallel_copy``).

A stage's self time includes the nodes TF runs inside it (an interleave's or flat_map's
per-element datasets, a zip's other inputs, a reader's file names). How fast a stage
alone could feed the consumer: ``root_elements_per_s`` = parallelism / (self time per
own element) / (own elements per element the consumer gets), with parallelism capped
at the host's cores and the last factor the product of the ratios of the stages after
it (TF's own for known ratios, ``batch(32)``: 32; measured for a filter or an
interleave). The stage with the lowest value is the bottleneck (``Root`` is the
iterator's bookkeeping and not a stage; ``Prefetch``, ``Shuffle`` and ``Repeat`` stages
count only when nothing else ran: they move elements, and their self time is mostly
waiting that TF's timers attribute to them).

The consumer side: ``gap_median_s`` is TF's own timer (time between two ``GetNext``
calls, i.e. the consumer's work per element); the time per element is this
collector's clock, from each iterator's creation (or its first read that saw elements)
to the moment its final count was first seen (exact when a young iterator is freed
right after its last element, as ``for`` loops and Keras epochs do; otherwise within a
poll: an old one is not read as it is freed, see ``FINAL_READ_MAX_AGE_S``),
leaving out the first iterator when there are others (its time includes tracing the
consumer's step). ``wait_per_element_s`` = time per element - mean gap (the mean is
what adds up; the median, reported, what a typical step does).
"""

from __future__ import annotations

import dataclasses
import functools
import sys
import threading
import time
import weakref
from typing import Any

from gpuwhy.collect.host_cpu import cpu_fractions, cpu_snapshot, host_cores, load_average
from gpuwhy.collect.host_memory import host_memory
from gpuwhy.collect.inprocess.base import Collector, Gathering
from gpuwhy.collect.inprocess.input_wait import with_keras_input_wait, with_loop_waits
from gpuwhy.collect.inprocess.pipeline_facts import pipeline_facts
from gpuwhy.collect.inprocess.pipeline_iterators import FIRST_POLL_S, IteratorState, Pipeline
from gpuwhy.collect.inprocess.steps import StepCollector
from gpuwhy.collect.time_windows import TimeWindows
from gpuwhy.derived.pipeline import bottleneck, steps_pipeline
from gpuwhy.facts import Facts, PipelineFacts, PipelineStage, StepFacts, TfDataFacts
from gpuwhy.formatting import (
    FIT_VALIDATION,
    consumer_words,
    duration,
    elements_words,
    stage_label,
)
from gpuwhy.tfapi.op_callbacks import unseen
from gpuwhy.tfapi.tfdata import dataset_chain as data_pipeline
from gpuwhy.tfapi.tfdata import dataset_size
from gpuwhy.tfapi.tfdata import iterator_models as data_model
from gpuwhy.tfapi.tfdata.iterator_models import AUTOTUNE_OFF, ModelUnavailable, read_model
from gpuwhy.tfapi.tfdata.origins import install_origin_hooks

__all__ = ["PipelineCollector"]

POLL_S = 1.0  # between two reads of a live iterator's model
# An iterator older than this, read by the poll, is not read again as it is freed: TF
# frees it after its autotune thread wakes, and a model read just before the free was
# seen to make that wait last (52 s for a 150 s-old iterator, 0.14 s with the read 1 s
# earlier; TF's autotune period grows with the iterator's age up to a minute, and the
# wait lasts up to the rest of it). Its poll read, at most POLL_S old, stands. It was
# 20 s: a new user's epochs of 11 s (keras-io's image classification from scratch) then
# began 9.4 s late under gpuwhy run (the iterator of the epoch before freed at 20.47 s
# of its life) in 2 of 2 watched runs, 0 of 2 plain ones; and a read just before the
# free doubles TF's teardown after it (0.61 -> 0.98 ms, 320 teardowns: docs/speed.md).
# Younger ones are still read as they are freed: a loop that began long after its
# iterator (Keras traces its step in between, for seconds) may run all its elements
# between two polls, and its wait, if the race goes wrong, lasts at most about its age.
FINAL_READ_MAX_AGE_S = 5.0
MIN_WAIT_S = 0.01  # a read due sooner than this (or overdue) is looked at FIRST_POLL_S on
BUDGET = 0.005  # of the run's wall time that model reads may take
FINAL_BUDGET = 0.02  # ... counting the last reads of freed iterators
BUDGET_SLACK_S = 0.05  # reads always allowed at the start of a run
FINAL_SLACK_S = 0.25  # ... and last reads
# The last reads of iterators no read has yet seen give an element, taken whatever the
# budget, up to this many in a run: an epoch's iterator whose reads all came while its
# shuffle filled (the budget spent by then on a loaded host) could otherwise count as
# never used (CI once read a fit of 3 epochs as 2 iterators; not reproduced here, where
# 16 runs beside 3-6 busy processes read 3, one with 19 reads skipped). Keras' iterator
# made ahead of each epoch and never read takes one too: a few milliseconds in all.
UNSEEN_FINAL_READS = 64
MAX_PIPELINES = 64
MAX_ITERATORS = 2000  # kept per pipeline (Keras makes two per epoch)
MAX_DISTRIBUTED_READS = 64  # the sites of loops over tf.distribute datasets kept


class _Mean:
    __slots__ = ("n", "total")

    def __init__(self) -> None:
        self.total, self.n = 0.0, 0

    def add(self, value: float) -> None:
        self.total += value
        self.n += 1

    def value(self) -> float:
        return self.total / self.n if self.n else 0.0

    def merge(self, other: _Mean) -> None:
        self.total += other.total
        self.n += other.n

    def copy(self) -> _Mean:
        twin = _Mean()
        twin.merge(self)
        return twin


class PipelineCollector(Collector):
    """Watches tf.data iterators; :meth:`facts` gives section ``tfdata``."""

    name = section = "tfdata"
    reads_from = ("steps",)  # joins their input wait
    amends = ("steps",)  # a Keras fit's input wait, known from its pipelines
    what = "tf.data pipelines"
    live = True
    needs_tensorflow = True
    shown = 30

    @classmethod
    def report_rows(cls, facts: Facts, html: bool) -> list[tuple[str, str]]:
        """The terminal's: the page shows its pipelines in a section of their own."""
        if html or facts.tfdata is None:
            return []
        ranked = ranked_pipelines(facts.tfdata, facts.steps)
        shown = ranked[:MAX_SHOWN_PIPELINES]
        rows = [("Input" if n == 0 else "", pipeline_line(p)) for n, p in enumerate(shown)]
        rest = unshown_line(ranked[MAX_SHOWN_PIPELINES:])
        return rows + ([("", rest)] if rest else [])

    def __init__(self, poll_s: float = POLL_S, budget: float = BUDGET) -> None:
        self.poll_s, self.budget = poll_s, budget
        self.started = False  # start() ran (a Keras callback may skip it)
        self.notes: list[str] = []
        self._patches: list = []
        self._lock = threading.RLock()
        self._pipelines: list[Pipeline] = []
        self._by_dataset: weakref.WeakKeyDictionary[Any, dict[str, Pipeline]] = (
            weakref.WeakKeyDictionary()
        )
        self._by_signature: dict[tuple, Pipeline] = {}
        self._live: dict[int, IteratorState] = {}
        self._thread: threading.Thread | None = None
        self._stopping = threading.Event()
        self._wake = threading.Event()  # a new iterator, or the end: the poll looks now
        self._read_s = 0.0
        self._skipped_reads = 0
        self._unseen_final_reads = 0  # taken past the budget (UNSEEN_FINAL_READS)
        self._distributed = 0
        self._distributed_reads: dict[str, None] = {}  # where loops read distributed datasets
        self._watching = False
        self._stopped = False
        self._facts: TfDataFacts | None = None
        self._cpu_start: tuple | None = None
        self._cpu_end: tuple | None = None
        # Keras fit's consumer time per element over the run, for the timeline: a
        # fit step is its input wait plus this gap (input_wait.py)
        self._fit_gaps: TimeWindows[_Mean] = TimeWindows(time.perf_counter(), _Mean)

    # -- life cycle ------------------------------------------------------------------
    def start(self, t0: float) -> None:
        self.t0, self.started = t0, True
        self._cpu_start = cpu_snapshot()
        self._fit_gaps = TimeWindows(t0, _Mean)

    def on_tensorflow(self) -> None:
        if self._watching or self._stopped:
            return
        if not self.started:
            self.start(time.perf_counter())
        try:
            data_model.prepare()  # imports done now, not inside the first (timed) read
            self._patches.extend(install_origin_hooks())
            self._patches.extend(
                data_model.install_iterator_hooks(self._on_iterator, self._on_iterator_end)
            )
            self._watching = True
        except Exception as error:  # noqa: BLE001 - a TF version we do not know
            self._undo()
            self.notes.append(f"tf.data pipelines not watched: {type(error).__name__}: {error}")

    def stop(self) -> None:
        """Read every live iterator a last time, undo the hooks, build the facts."""
        if self._stopped:
            return
        self._stopped = True
        self._stopping.set()
        self._wake.set()
        thread = self._thread
        if thread is not None:
            thread.join(timeout=5.0)
        try:
            self.read_live(final=True)
        except Exception as error:  # noqa: BLE001
            self.notes.append(f"last tf.data model reads failed: {type(error).__name__}: {error}")
        self._undo()
        self._cpu_end = cpu_snapshot()
        t_end = time.perf_counter()
        try:
            self._facts = self._build(t_end) if self._watching else None
        except Exception as error:  # noqa: BLE001 - never raise into the program
            self._facts = TfDataFacts(
                notes=(f"tf.data facts failed: {type(error).__name__}: {error}",)
            )

    def read_live(self, final: bool = False) -> None:
        """Read every live iterator's model now, on this thread (must be eager)."""
        with self._lock:
            live = [s for s in self._live.values() if not s.done]
        for state in live:
            iterator = state.ref()
            if iterator is not None:
                self._read(state, iterator, final=final)
            del iterator

    def fill(self, gathering: Gathering) -> TfDataFacts | None:
        """Section ``tfdata``, joined with section ``steps``: the wait of Keras' steps
        from the fit pipeline's gap timer, and the ``next()`` timings of a Python loop's
        reads (the step collector's) as the wait of the pipeline it read."""
        tfdata = self.snapshot() if gathering.live else self.facts()
        gathering.fill("steps", with_keras_input_wait(gathering.facts.steps, tfdata))
        reads = gathering.peer(StepCollector).reads
        return gathering.guard(
            "next() timings",
            lambda: with_loop_waits(tfdata, self.iterator_spans(), reads()),
            tfdata,
        )

    def facts(self) -> TfDataFacts | None:
        """Section ``tfdata`` (None when TensorFlow was never imported)."""
        if not self._stopped:
            self.stop()
        return self._facts

    def snapshot(self) -> TfDataFacts | None:
        """The facts so far while the collector keeps watching (live metrics read them
        mid-run; :meth:`facts` stops it); after :meth:`stop`, the final facts."""
        if self._stopped:
            return self._facts
        if not self._watching:
            return None
        return self._build(time.perf_counter(), cpu_snapshot())

    def iterator_spans(self) -> dict[int, list[tuple[int, float]]]:
        """Per pipeline id, its iterators as (id(iterator), creation time): what joins the
        ``next()`` timings of a Python loop (collect/inprocess/input_wait.py) to a pipeline."""
        with self._lock:
            return {p.id: [(s.key, s.created) for s in p.iterators] for p in self._pipelines}

    def _undo(self) -> None:
        patches, self._patches = self._patches, []
        for patch in reversed(patches):
            try:
                patch.undo()
            except Exception:  # noqa: BLE001
                pass

    # -- hooks (the program's threads) ------------------------------------------------
    def _on_iterator(self, iterator: Any, dataset: Any) -> None:
        if self._stopped:
            return
        if data_model.is_distributed_part(dataset):
            self._distributed += 1
            site, _ = data_model.reader(sys._getframe(1))
            if site is not None and len(self._distributed_reads) < MAX_DISTRIBUTED_READS:
                self._distributed_reads[site] = None
            return
        consumer = data_model.consumer_label()
        pipeline = self._pipeline(dataset, consumer)
        if pipeline is None:
            return
        if consumer == "python-loop":
            _count_reader(pipeline, data_model.reader(sys._getframe(1)))
        elif consumer == "keras-evaluate" and pipeline.read_via is None:
            # fit's validation_data: Keras' fit reads it through evaluate, said as fit's
            if data_model.in_fit(sys._getframe(1)):
                pipeline.read_via = FIT_VALIDATION
        key = id(iterator)
        state = IteratorState(None, key, time.perf_counter())
        state.consumer = consumer
        state.branches = pipeline.branches
        if not pipeline.autotune:
            # TF keeps no model to read: asking for it anyway makes TF log a warning on
            # the program's stderr for each iterator ("Cannot find this iterator's
            # analytical model"), which plain python never prints
            state.error = AUTOTUNE_OFF
        state.ref = weakref.ref(iterator, functools.partial(self._forget, key))
        with self._lock:
            if len(pipeline.iterators) >= MAX_ITERATORS:
                pipeline.dropped_iterators += 1
                return
            pipeline.iterators.append(state)
            self._live[key] = state
        self._wake.set()  # its first read is due in FIRST_POLL_S, whatever the poll's sleep
        self._ensure_thread()

    def _on_iterator_end(self, iterator: Any) -> None:
        state = self._live.get(id(iterator))
        if state is None or state.ref() is not iterator or self._stopped:
            return
        if threading.get_ident() != state.thread:
            # collected on another thread (a tf.data py_function thread, the poller):
            # no TF op in a finaliser there; the last periodic read stands
            state.end_unread = True
            return
        reads = state.reads
        if not _reads_before_free(state, time.perf_counter()):
            self._read(state, iterator, final=True)
        state.end_unread = state.reads == reads  # its poll read stands for its last
        state.done = True

    def _forget(self, key: int, ref: Any) -> None:
        with self._lock:
            state = self._live.get(key)
            if state is not None and state.ref is ref:
                state.end_unread = state.end_unread or not state.done
                del self._live[key]

    def _pipeline(self, dataset: Any, consumer: str) -> Pipeline | None:
        with self._lock:
            known = self._by_dataset.get(dataset)
            if known is not None and consumer in known:
                return known[consumer]
            if len(self._pipelines) >= MAX_PIPELINES:
                return None
            with unseen():
                pipeline = _describe(dataset, consumer, len(self._pipelines) + 1)
            # A dataset built again for every epoch (``make_dataset()`` in the loop) is a
            # new object each time but the same pipeline: the same transformations,
            # written at the same lines.
            signature = _signature(pipeline)
            same = self._by_signature.get(signature) if signature is not None else None
            if same is not None:
                self._by_dataset.setdefault(dataset, {})[consumer] = same
                return same
            self._pipelines.append(pipeline)
            self._by_dataset.setdefault(dataset, {})[consumer] = pipeline
            if signature is not None:
                self._by_signature[signature] = pipeline
            return pipeline

    # -- reading models -------------------------------------------------------------
    def _ensure_thread(self) -> None:
        if self._thread is not None or self._stopping.is_set():
            return
        with self._lock:
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._poll, name="gpuwhy-tfdata", daemon=True
                )
                self._thread.start()

    def _poll(self) -> None:
        """Reads each live iterator's model when it is due, sleeping until the next one
        is (a new iterator wakes it): on a long loop it wakes once a second, not ten
        times (each wake-up takes the program's GIL)."""
        wait_s = min(FIRST_POLL_S, self.poll_s)
        while True:
            self._wake.wait(wait_s)
            self._wake.clear()
            if self._stopping.is_set():
                return
            now = time.perf_counter()
            with self._lock:
                due = [s for s in self._live.values() if not s.done and s.due(now, self.poll_s)]
            for state in due:
                if self._stopping.is_set():
                    return
                iterator = state.ref()
                if iterator is None:
                    continue
                try:
                    self._read(state, iterator, final=False)
                finally:
                    del iterator  # the program's reference decides when it dies
            with self._lock:
                reads = [s.next_read(self.poll_s) for s in self._live.values() if not s.done]
            left = min(reads, default=time.perf_counter() + self.poll_s) - time.perf_counter()
            # overdue (a read the budget put off, an iterator not read again): the old tick
            wait_s = min(self.poll_s, left if left >= MIN_WAIT_S else FIRST_POLL_S)

    def _allowed(self, final: bool, unseen_yet: bool = False) -> bool:
        elapsed = time.perf_counter() - (self.t0 if self.started else 0.0)
        if final and unseen_yet and self._unseen_final_reads < UNSEEN_FINAL_READS:
            self._unseen_final_reads += 1
            return True
        if final:
            return self._read_s <= FINAL_BUDGET * elapsed + FINAL_SLACK_S
        return self._read_s <= self.budget * elapsed + BUDGET_SLACK_S

    def _read(self, state: IteratorState, iterator: Any, final: bool) -> None:
        if state.done or (state.error is not None and not state.positions):
            return
        if not self._allowed(final, unseen_yet=state.root_elements == 0):
            self._skipped_reads += 1
            return
        start = time.perf_counter()
        try:
            with unseen():
                model = read_model(iterator, state.branches)
        except ModelUnavailable as error:
            state.error = str(error)
            return
        except Exception as error:  # noqa: BLE001 - never raise into the program
            state.error = f"{type(error).__name__}: {error}"
            return
        finally:
            end = time.perf_counter()
            self._read_s += end - start
            state.reads += 1
            state.last_read = end
        with self._lock:
            state.observe(model, end)
            if state.consumer == "keras-fit" and model.gap_times_s and not final:
                gaps = model.gap_times_s
                self._fit_gaps.at(end).add(sum(gaps) / len(gaps))

    def fit_gap_rows(self, t0: float, width: float) -> dict[int, dict]:
        """Keras fit's mean consumer time per element (tf.data's gap timer: the latest
        gaps at each read) per timeline window of ``width`` seconds from ``t0``."""
        with self._lock:
            self._fit_gaps.coarsen(width)
            return {
                max(0, int((start - t0) // width + 1e-9)): {"fit_gap_s": round(mean.value(), 6)}
                for start, mean in self._fit_gaps.items()
                if mean.n
            }

    # -- facts ----------------------------------------------------------------------
    def _build(self, t_end: float, cpu_end: tuple | None = None) -> TfDataFacts:
        cores = host_cores()
        with self._lock:
            pipelines = list(self._pipelines)
        facts = []
        for pipeline in pipelines:
            try:
                facts.append(pipeline_facts(pipeline, cores, self.t0 if self.started else None))
            except Exception as error:  # noqa: BLE001 - one pipeline failing keeps the others
                facts.append(
                    PipelineFacts(
                        id=pipeline.id,
                        location=pipeline.location,
                        consumer=pipeline.consumer,
                        read_at=pipeline.read_at,
                        read_via=pipeline.read_via,
                        model_error=f"{type(error).__name__}: {error}",
                    )
                )
        facts = _told_apart(facts, {p.id: p.callers for p in pipelines})
        notes = list(self.notes)
        if self._distributed:
            notes.append(
                f"{self._distributed} per-device iterator(s) of a distributed dataset were not "
                f"measured (their model is not the user's pipeline)"
            )
        if self._skipped_reads:
            notes.append(
                f"{self._skipped_reads} tf.data model read(s) skipped to stay within "
                f"{self.budget:.1%} of the run time"
            )
        for pipeline in pipelines:
            if pipeline.error:
                notes.append(f"tf.data pipeline {pipeline.id}: {pipeline.error}")
            if pipeline.dropped_iterators:
                notes.append(
                    f"tf.data pipeline {pipeline.id}: {pipeline.dropped_iterators} iterators "
                    f"after the first {MAX_ITERATORS} were not measured"
                )
        if len(pipelines) >= MAX_PIPELINES:
            notes.append(f"only the first {MAX_PIPELINES} tf.data pipelines were followed")
        busy, process = cpu_fractions(self._cpu_start, cpu_end or self._cpu_end, cores)
        total, available = host_memory()
        return TfDataFacts(
            pipelines=tuple(facts),
            host_cores=cores,
            host_cpu_busy_fraction=busy,
            process_cpu_fraction=process,
            host_load_average=load_average(),
            host_memory_bytes=total,
            host_memory_available_bytes=available,
            distributed_reads=tuple(self._distributed_reads),
            notes=tuple(notes),
        )


def _told_apart(
    facts: list[PipelineFacts], callers: dict[int, tuple[str, ...]]
) -> list[PipelineFacts]:
    """Pipelines built at one line (one ``make_dataset(split)`` helper called for train
    and test) are named by the innermost of the user's calling lines that differs
    between them, the helper's line kept as ``helper_location``: "built at data.py:14"
    twice would not tell which is which. A helper that calls a helper of its own
    (``return _finish(ds)``) has the same first caller for every split: the line
    further out that differs is the one that tells them apart."""
    chains: dict[str | None, set[tuple[str, ...]]] = {}
    for pipeline in facts:
        chains.setdefault(pipeline.location, set()).add(callers.get(pipeline.id, ()))
    out = []
    for pipeline in facts:
        chain = callers.get(pipeline.id, ())
        depth = _first_difference(chains[pipeline.location]) if pipeline.location else None
        if depth is not None and depth < len(chain):
            pipeline = dataclasses.replace(
                pipeline, location=chain[depth], helper_location=pipeline.location
            )
        out.append(pipeline)
    return out


def _first_difference(chains: set[tuple[str, ...]]) -> int | None:
    """The first depth at which the calling chains are not all the same line."""
    if len(chains) < 2:
        return None
    for depth in range(max(len(c) for c in chains)):
        if len({c[depth] if depth < len(c) else None for c in chains}) > 1:
            return depth
    return None


# -- the written view of a new pipeline ---------------------------------------------


def _signature(pipeline: Pipeline) -> tuple | None:
    """What the program wrote, where: None when a transformation's line is unknown
    (then two datasets are only the same pipeline if they are the same object)."""
    written = pipeline.written
    if not written or any(w.location is None for w in written):
        return None
    return (
        pipeline.consumer,
        pipeline.callers,  # one helper called from two lines: two pipelines
        tuple((w.api, w.location, w.function_location) for w in written),
    )


def _describe(dataset: Any, consumer: str, number: int) -> Pipeline:
    error = None
    try:
        written = data_pipeline.written_chain(dataset)
    except Exception as failure:  # noqa: BLE001
        written, error = [], f"written pipeline not read: {type(failure).__name__}: {failure}"
    location: str | None = None
    callers: tuple[str, ...] = ()
    for step in reversed(written):
        if step.location and not step.by_library:
            location, callers = step.location, step.callers
            break
    if location is None and written:
        location = written[-1].location
    batch = next(
        (
            w.argument
            for w in reversed(written)
            if w.api in ("batch", "padded_batch", "map_and_batch") and w.argument
        ),
        None,
    )
    return Pipeline(
        id=number,
        consumer=consumer,
        written=written,
        location=location,
        callers=callers,
        autotune=data_pipeline.autotune_enabled(dataset),
        deterministic=data_pipeline.deterministic_option(dataset),
        options_by_library=data_pipeline.options_by_library(written),
        generator_gaps=data_pipeline.generator_gaps(dataset),
        cardinality=dataset_size.pass_count(dataset),
        element_bytes=dataset_size.element_bytes(dataset, batch),
        example_bytes=dataset_size.example_bytes(dataset),
        error=error,
        branches=data_pipeline.zip_branches(written),
    )


MAX_READ_SITES = 16  # places that made a pipeline's iterators, counted each


def _count_reader(pipeline: Pipeline, site: tuple[str | None, str | None]) -> None:
    """One more iterator made at ``site``: the pipeline's reader is the place that made
    the most (the first such, at a tie). Once an epoch: a frame walk, no more."""
    sites = pipeline.read_sites
    if site in sites or len(sites) < MAX_READ_SITES:
        sites[site] = sites.get(site, 0) + 1
    pipeline.read_at, pipeline.read_via = max(sites, key=sites.__getitem__)  # first of ties


def _reads_before_free(state: IteratorState, now: float) -> bool:
    """Whether a freed iterator's last poll read stands for its final one: it is older
    than ``FINAL_READ_MAX_AGE_S`` and was read (see there why)."""
    return now - state.created > FINAL_READ_MAX_AGE_S and state.reads > 0 and not state.error


# -- its rows in the reports ------------------------------------------------------
MAX_SHOWN_PIPELINES = 3  # rows of the report (every pipeline up to MAX_PIPELINES is kept)


def ranked_pipelines(tfdata: TfDataFacts, steps: StepFacts | None) -> list[PipelineFacts]:
    """Every pipeline in the order the report says them: the pipeline the steps read
    first (the Input row is theirs: an evaluation loop after fit read more elements than
    fit's own), then those that gave the most elements (fit's validation before a loop
    that looked at one batch; at a tie, a training reader's before evaluate/predict's)."""
    feeding = steps_pipeline(tfdata, steps)

    def rank(p: PipelineFacts) -> tuple[int, int, int]:
        training = p.consumer in ("keras-fit", "python-loop")
        return (0 if p is feeding else 1, -p.elements, 0 if training else 1)

    return sorted(tfdata.pipelines, key=rank)


def shown_pipelines(tfdata: TfDataFacts, steps: StepFacts | None) -> list[PipelineFacts]:
    """The pipelines the report gives a row each (:func:`ranked_pipelines`' first)."""
    return ranked_pipelines(tfdata, steps)[:MAX_SHOWN_PIPELINES]


MAX_NAMED_UNSHOWN = 4  # pipelines left out of the rows, named in their one line


def unshown_line(rest: list[PipelineFacts]) -> str | None:
    """The pipelines the rows leave out (``rest``, in the report's order), said in one
    line (the record keeps them all)."""
    if not rest:
        return None

    def said(p: PipelineFacts) -> str:
        where = f"built at {p.location}, " if p.location else ""
        reader = consumer_words(p.consumer, False, p.read_at, p.read_via)
        return f"{where}read by {reader} ({elements_words(p.elements, p.elements_known)})"

    named = "; ".join(said(p) for p in rest[:MAX_NAMED_UNSHOWN])
    if len(rest) > MAX_NAMED_UNSHOWN:
        named += f"; and {len(rest) - MAX_NAMED_UNSHOWN} more"
    plural = "s" if len(rest) > 1 else ""
    return f"{len(rest)} more pipeline{plural}: {named} (the JSON record's tfdata section has each)"


def pipeline_line(p: PipelineFacts) -> str:
    """One pipeline: what read it, how fast, what TF ran, and its slowest stage."""
    where = f" built at {p.location}" if p.location else ""
    reader = consumer_words(p.consumer, False, p.read_at, p.read_via)
    text = f"tf.data pipeline{where}, read by {reader}: " + elements_words(
        p.elements, p.elements_known, p.elements_at_least
    )
    if p.iterators > 1:
        text += f" over {p.iterators} iterators"
    if p.throughput_per_s:
        text += f", {p.throughput_per_s:,.1f}/s"
    if p.stages:
        text += "; runs as " + " → ".join(stage_name(s) for s in p.stages)
    stage = bottleneck(p)  # None too when a saved record's index is out of range
    if stage is not None:
        text += f"; slowest stage {stage_label(stage)}"
        if stage.self_time_per_element_s is not None:
            text += f" ({duration(stage.self_time_per_element_s, microseconds=True)} per element"
            text += (
                f", {stage.parallelism} threads)"
                if stage.parallelism and stage.parallelism > 1
                else ", sequential)"
            )
    if p.model_error:
        text += f"; TF's per-stage timers unavailable: {p.model_error}"
    return text


def stage_name(stage: PipelineStage) -> str:
    return stage.name + ("*" if not stage.written_as and stage.kind == "prefetch" else "")
