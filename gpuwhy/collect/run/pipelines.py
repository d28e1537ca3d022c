"""PipelineCollector: the tf.data pipelines a program iterates, stage by stage.

Once TensorFlow is imported it installs two sets of hooks, both off the per-element
path (``next()`` is never wrapped here):

* :func:`gpuwhy.tfapi.tfdata.written.install_origin_hooks`: each dataset remembers the
  user's line that built it (the *written* view);
* :func:`gpuwhy.tfapi.tfdata.run_model.install_iterator_hooks`: each eager iterator is
  registered under its dataset and consumer (Keras ``fit``/``evaluate``/``predict``
  or a Python loop), and read one last time just before it is freed.

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
to the moment its final count was first seen (exact when the iterator is freed right
after its last element, as ``for`` loops and Keras epochs do; otherwise within a poll),
leaving out the first iterator when there are others (its time includes tracing the
consumer's step). ``wait_per_element_s`` = time per element - mean gap (the mean is
what adds up; the median, reported, what a typical step does).
"""

from __future__ import annotations

import dataclasses
import os
import re
import statistics
import threading
import time
import weakref
from dataclasses import dataclass, field
from typing import Any

from gpuwhy.collect.run.base import RunCollector
from gpuwhy.facts import PipelineFacts, PipelineStage, TfDataFacts
from gpuwhy.tfapi.op_callbacks import unseen

__all__ = ["PipelineCollector"]

POLL_S = 1.0  # between two reads of a live iterator's model
FIRST_POLL_S = 0.1  # ... the first time (then doubling up to POLL_S)
BUDGET = 0.005  # of the run's wall time that model reads may take
FINAL_BUDGET = 0.02  # ... counting the last reads of freed iterators
BUDGET_SLACK_S = 0.05  # reads always allowed at the start of a run
FINAL_SLACK_S = 0.25  # ... and last reads
MAX_PIPELINES = 64
MAX_ITERATORS = 2000  # kept per pipeline (Keras makes two per epoch)
MAX_GAPS = 20000  # gap samples kept per pipeline
LOOKAHEAD = 3  # run nodes searched ahead for a written transformation's node

_SOURCES = frozenset(
    {
        "range",
        "from_tensor_slices",
        "from_tensors",
        "from_sparse_tensor_slices",
        "random",
        "counter",
        "from_list",
        "load",
        "CsvDataset",
        "list_files",
        "TFRecordDataset",
        "TextLineDataset",
        "FixedLengthRecordDataset",
        "tf_record",
        "text_line",
        "fixed_length_record",
        "tensor_slice",
        "from_tensor",
    }
)
_KINDS = {
    "map": "map",
    "map_and_batch": "map",
    "filter": "filter",
    "flat_map": "flat_map",
    "interleave": "interleave",
    "batch": "batch",
    "padded_batch": "batch",
    "ragged_batch": "batch",
    "prefetch": "prefetch",
    "cache": "cache",
    "shuffle": "shuffle",
    "shuffle_and_repeat": "shuffle",
    "repeat": "repeat",
    "from_generator": "generator",
    "generator": "generator",
}
_RUN_FAMILIES = {
    "Map": "map",
    "ParallelMap": "map",
    "MapAndBatch": "map_and_batch",
    "Batch": "batch",
    "ParallelBatch": "batch",
    "PaddedBatch": "padded_batch",
    "Prefetch": "prefetch",
    "MemoryCache": "cache",
    "FileCache": "cache",
    "Cache": "cache",
    "Shuffle": "shuffle",
    "ShuffleAndRepeat": "shuffle_and_repeat",
    "Repeat": "repeat",
    "FiniteRepeat": "repeat",
    "ForeverRepeat": "repeat",
    "EmptyRepeat": "repeat",
    "Take": "take",
    "FiniteTake": "take",
    "EmptyTake": "take",
    "Skip": "skip",
    "FiniteSkip": "skip",
    "EmptySkip": "skip",
    "Filter": "filter",
    "ParallelFilter": "filter",
    "FlatMap": "flat_map",
    "Interleave": "interleave",
    "ParallelInterleave": "interleave",
    "LegacyParallelInterleave": "interleave",
    "TensorSlice": "from_tensor_slices",
    "FromTensor": "from_tensors",
    "Generator": "generator",
    "DenseToRagged": "ragged_batch",
}
_COMPOSITES = {
    "from_generator": ("flat_map",),
    "TFRecordDataset": ("flat_map", "interleave"),
    "TextLineDataset": ("flat_map", "interleave"),
    "FixedLengthRecordDataset": ("flat_map", "interleave"),
}
_INNER_NAMES = {
    "from_generator": "Generator",
    "TFRecordDataset": "TFRecord",
    "TextLineDataset": "TextLine",
    "FixedLengthRecordDataset": "FixedLengthRecord",
}


def run_family(name: str) -> str:
    """TF's node name -> the transformation it runs (``BatchV2`` -> ``batch``)."""
    base = re.sub(r"V\d+$", "", name)
    return _RUN_FAMILIES.get(base) or re.sub(r"(?<!^)(?=[A-Z])", "_", base).lower()


def _written_families(api: str) -> tuple[str, ...]:
    return _COMPOSITES.get(api, (api,))


# -- what is kept while the program runs ----------------------------------------------


class _Position:
    """One place in an iterator's chain: the node instance there now, and what the
    earlier instances at that place did (TF makes the nodes under a ``repeat`` anew
    for every pass)."""

    __slots__ = ("node", "done_elements", "done_time")

    def __init__(self, node: Any) -> None:
        self.node = node
        self.done_elements = 0
        self.done_time = 0.0

    @property
    def elements(self) -> int:
        return self.done_elements + self.node.num_elements

    @property
    def seconds(self) -> float:
        return self.done_time + self.node.total_time_s

    def update(self, node: Any) -> None:
        if node.id != self.node.id:  # a new instance: bank the old one's work
            self.done_elements += self.node.num_elements
            self.done_time += self.node.total_time_s
        elif not node.inner and self.node.inner:
            # the same instance, whose inner datasets ended (a generator, the last file):
            # keep them, scaled by RunNode.total_time_s to the elements it made since
            node = dataclasses.replace(
                node, inner=self.node.inner, inner_elements=self.node.inner_elements
            )
        self.node = node


def _observe(positions: list, model: Any) -> list:
    """The positions after a new read, aligned from the consumer's end by node names.
    A node missing at the source end left the model (its input ran out): its place
    and counts are kept until a new instance appears there."""
    new = list(model.nodes)
    if not positions:
        return [_Position(n) for n in new]
    shared = 0
    while (
        shared < min(len(positions), len(new))
        and positions[-1 - shared].node.name == new[-1 - shared].name
    ):
        shared += 1
    matched = positions[len(positions) - shared :]
    for position, node in zip(matched, new[len(new) - shared :]):
        position.update(node)
    fresh = new[: len(new) - shared]
    if not fresh:
        return positions[: len(positions) - shared] + matched
    return [_Position(n) for n in fresh] + matched


class _Iterator:
    """One iterator: its chain as read so far, and when its element count last changed."""

    __slots__ = (
        "ref",
        "key",
        "created",
        "positions",
        "gaps",
        "seen_at",
        "first_t",
        "first_count",
        "reads",
        "last_read",
        "error",
        "done",
        "thread",
        "__weakref__",
    )

    def __init__(self, ref: Any, key: int, created: float) -> None:
        self.ref, self.key, self.created = ref, key, created
        self.thread = threading.get_ident()  # the thread that created it
        self.positions: list[_Position] = []  # source first, Root last
        self.gaps: tuple[float, ...] = ()
        self.seen_at = created  # when the latest element count was first seen
        self.first_t: float | None = None  # the first read that saw elements
        self.first_count = 0
        self.reads = 0
        self.last_read = created
        self.error: str | None = None
        self.done = False  # freed: no more reads

    @property
    def root_elements(self) -> int:
        return self.positions[-1].node.num_elements if self.positions else 0

    def observe(self, model: Any, now: float) -> None:
        before = self.root_elements
        self.positions = _observe(self.positions, model)
        self.gaps = model.gap_times_s
        count = self.root_elements
        if self.reads <= 1 or count != before:
            self.seen_at = now
        if self.first_t is None and count > 0:
            self.first_t, self.first_count = now, count

    def due(self, now: float, poll_s: float) -> bool:
        """Read young iterators more often (0.1 s, 0.2 s, 0.4 s ... then ``poll_s``):
        TF drops an input's nodes from the model once the input runs out, so a short
        iterator read only at its end would lose its source."""
        return now - self.last_read >= min(poll_s, FIRST_POLL_S * 2**self.reads)

    def window(self) -> tuple[float, int]:
        """(seconds, elements) over which the consumer read: from the first read that
        saw elements (leaving out the start, e.g. Keras tracing its train step) to the
        moment the final count was first seen; from creation when no read came between."""
        final = self.root_elements
        if (
            self.first_t is not None
            and 0 < self.first_count < final
            and self.seen_at > self.first_t
        ):
            return self.seen_at - self.first_t, final - self.first_count
        return max(0.0, self.seen_at - self.created), final


@dataclass
class _Pipeline:
    id: int
    consumer: str
    written: list
    location: str | None
    autotune: bool
    cardinality: int | None
    element_bytes: int | None
    iterators: list = field(default_factory=list)
    dropped_iterators: int = 0
    error: str | None = None


class PipelineCollector(RunCollector):
    """Watches tf.data iterators; :meth:`facts` gives section ``tfdata``."""

    def __init__(self, poll_s: float = POLL_S, budget: float = BUDGET) -> None:
        self.poll_s, self.budget = poll_s, budget
        self.t0: float | None = None
        self.notes: list[str] = []
        self._patches: list = []
        self._lock = threading.RLock()
        self._pipelines: list[_Pipeline] = []
        self._by_dataset: weakref.WeakKeyDictionary[Any, dict[str, _Pipeline]] = (
            weakref.WeakKeyDictionary()
        )
        self._by_signature: dict[tuple, _Pipeline] = {}
        self._live: dict[int, _Iterator] = {}
        self._thread: threading.Thread | None = None
        self._stopping = threading.Event()
        self._read_s = 0.0
        self._skipped_reads = 0
        self._distributed = 0
        self._watching = False
        self._stopped = False
        self._facts: TfDataFacts | None = None
        self._cpu_start: tuple | None = None
        self._cpu_end: tuple | None = None

    # -- life cycle ------------------------------------------------------------------
    def start(self, t0: float) -> None:
        self.t0 = t0
        self._cpu_start = _cpu_snapshot()

    def on_tensorflow(self) -> None:
        if self._watching or self._stopped:
            return
        if self.t0 is None:
            self.start(time.perf_counter())
        try:
            from gpuwhy.tfapi.tfdata import run_model as data_model
            from gpuwhy.tfapi.tfdata import written as data_pipeline

            data_model.prepare()  # imports done now, not inside the first (timed) read
            self._patches.extend(data_pipeline.install_origin_hooks())
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
        thread = self._thread
        if thread is not None:
            thread.join(timeout=5.0)
        try:
            self.read_live(final=True)
        except Exception as error:  # noqa: BLE001
            self.notes.append(f"last tf.data model reads failed: {type(error).__name__}: {error}")
        self._undo()
        self._cpu_end = _cpu_snapshot()
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

    def facts(self) -> TfDataFacts | None:
        """Section ``tfdata`` (None when TensorFlow was never imported)."""
        if not self._stopped:
            self.stop()
        return self._facts

    def _undo(self) -> None:
        patches, self._patches = self._patches, []
        for patch in reversed(patches):
            try:
                patch.undo()
            except Exception:  # noqa: BLE001
                pass

    # -- hooks (the program's threads) ------------------------------------------------
    def _on_iterator(self, iterator: Any, dataset: Any) -> None:
        from gpuwhy.tfapi.tfdata import run_model as data_model

        if self._stopped:
            return
        if data_model.is_distributed_part(dataset):
            self._distributed += 1
            return
        consumer = data_model.consumer_label()
        pipeline = self._pipeline(dataset, consumer)
        if pipeline is None:
            return
        key = id(iterator)
        state = _Iterator(None, key, time.perf_counter())
        state.ref = weakref.ref(iterator, lambda _ref, key=key: self._forget(key, _ref))
        with self._lock:
            if len(pipeline.iterators) >= MAX_ITERATORS:
                pipeline.dropped_iterators += 1
                return
            pipeline.iterators.append(state)
            self._live[key] = state
        self._ensure_thread()

    def _on_iterator_end(self, iterator: Any) -> None:
        state = self._live.get(id(iterator))
        if state is None or state.ref() is not iterator or self._stopped:
            return
        if threading.get_ident() != state.thread:
            # collected on another thread (a tf.data py_function thread, the poller):
            # no TF op in a finaliser there; the last periodic read stands
            return
        self._read(state, iterator, final=True)
        state.done = True

    def _forget(self, key: int, ref: Any) -> None:
        with self._lock:
            state = self._live.get(key)
            if state is not None and state.ref is ref:
                del self._live[key]

    def _pipeline(self, dataset: Any, consumer: str) -> _Pipeline | None:
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
        tick = min(FIRST_POLL_S, self.poll_s)
        while not self._stopping.wait(tick):
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

    def _allowed(self, final: bool) -> bool:
        elapsed = time.perf_counter() - (self.t0 or 0.0)
        if final:
            return self._read_s <= FINAL_BUDGET * elapsed + FINAL_SLACK_S
        return self._read_s <= self.budget * elapsed + BUDGET_SLACK_S

    def _read(self, state: _Iterator, iterator: Any, final: bool) -> None:
        from gpuwhy.tfapi.tfdata.run_model import ModelUnavailable, read_model

        if state.done or (state.error is not None and not state.positions):
            return
        if not self._allowed(final):
            self._skipped_reads += 1
            return
        start = time.perf_counter()
        try:
            with unseen():
                model = read_model(iterator)
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

    # -- facts ----------------------------------------------------------------------
    def _build(self, t_end: float) -> TfDataFacts:
        cores = _host_cores()
        with self._lock:
            pipelines = list(self._pipelines)
        facts = []
        for pipeline in pipelines:
            try:
                facts.append(_pipeline_facts(pipeline, cores))
            except Exception as error:  # noqa: BLE001 - one pipeline failing keeps the others
                facts.append(
                    PipelineFacts(
                        id=pipeline.id,
                        location=pipeline.location,
                        consumer=pipeline.consumer,
                        model_error=f"{type(error).__name__}: {error}",
                    )
                )
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
        busy, process = _cpu_fractions(self._cpu_start, self._cpu_end, cores)
        total, available = _memory()
        return TfDataFacts(
            pipelines=tuple(facts),
            host_cores=cores,
            host_cpu_busy_fraction=busy,
            process_cpu_fraction=process,
            host_memory_bytes=total,
            host_memory_available_bytes=available,
            notes=tuple(notes),
        )


# -- the written view of a new pipeline ---------------------------------------------


def _signature(pipeline: _Pipeline) -> tuple | None:
    """What the program wrote, where: None when a transformation's line is unknown
    (then two datasets are only the same pipeline if they are the same object)."""
    written = pipeline.written
    if not written or any(w.location is None for w in written):
        return None
    return (pipeline.consumer, tuple((w.api, w.location, w.function_location) for w in written))


def _describe(dataset: Any, consumer: str, number: int) -> _Pipeline:
    from gpuwhy.tfapi.tfdata import elements
    from gpuwhy.tfapi.tfdata import written as data_pipeline

    error = None
    try:
        written = data_pipeline.written_chain(dataset)
    except Exception as failure:  # noqa: BLE001
        written, error = [], f"written pipeline not read: {type(failure).__name__}: {failure}"
    location = None
    for step in reversed(written):
        if step.location and not step.by_library:
            location = step.location
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
    return _Pipeline(
        id=number,
        consumer=consumer,
        written=written,
        location=location,
        autotune=data_pipeline.autotune_enabled(dataset),
        cardinality=elements.known_count(dataset),
        element_bytes=elements.element_bytes(dataset, batch),
        error=error,
    )


# -- joining the two views ----------------------------------------------------------


@dataclass
class _Stage:
    """A run node and the written transformations it runs."""

    run: Any = None  # RunNode of the reference iterator (None: not in the model)
    written: list = field(default_factory=list)
    absorbed: list = field(default_factory=list)  # run nodes folded in (a generator's dummy input)


def _match(written: list, run: list) -> list[_Stage]:
    """Pair each written transformation with the run node that runs it, source first.

    Fusions are recognised by the fused node's name; a written transformation whose node
    is not among the next few run nodes was removed by TF; run nodes nobody wrote
    (an injected ``Prefetch``) become stages of their own, except those upstream of the
    first match, which belong to the source (a reader's file names, the dummy element
    ``from_generator`` flat-maps)."""
    steps = [w for w in written if w.node and not w.noop]
    stages: list[_Stage] = []
    j = 0
    i = 0
    first = True
    while i < len(steps):
        step = steps[i]
        following = steps[i + 1] if i + 1 < len(steps) else None
        if j < len(run):
            family = run_family(run[j].name)
            if following is not None and (
                (family == "map_and_batch" and step.api == "map" and following.api == "batch")
                or (
                    family == "shuffle_and_repeat"
                    and step.api == "shuffle"
                    and following.api == "repeat"
                )
            ):
                stages.append(_Stage(run=run[j], written=[step, following]))
                i, j, first = i + 2, j + 1, False
                continue
        wanted = _written_families(step.api)
        found = None
        for k in range(j, min(len(run), j + LOOKAHEAD + 1) if not first else len(run)):
            if run_family(run[k].name) in wanted:
                found = k
                break
        if found is None:
            if first:  # a source whose node TF dropped once it was exhausted
                stages.append(_Stage(written=[step]))
            i += 1  # else no node of its own: eliminated by TF (an identity map ...)
            continue
        skipped = run[j:found]
        stage = _Stage(run=run[found], written=[step])
        if first and skipped:
            stage.absorbed = list(skipped)  # the source's own inputs (file names, dummy)
        else:
            stages.extend(_Stage(run=n) for n in skipped)  # added by TF
        stages.append(stage)
        i, j, first = i + 1, found + 1, False
    stages.extend(_Stage(run=n) for n in run[j:])  # injected prefetch, ...
    return stages


@dataclass
class _Merged:
    """A pipeline's chain summed over its iterators: the reference iterator's latest
    nodes (the longest chain), and per node the elements and seconds of all iterators."""

    nodes: list
    elements: list
    seconds: list
    root_elements: int

    def ratio(self, index: int) -> float:
        """Input elements per output element: TF's own for a node of known ratio
        (``batch(32)``: 32), else measured from the counts (a filter, an interleave)."""
        node = self.nodes[index]
        if node.ratio > 0 and node.node_class in ("KNOWN_RATIO", "ASYNC_KNOWN_RATIO"):
            return node.ratio
        if index > 0 and self.elements[index - 1] and self.elements[index]:
            return self.elements[index - 1] / self.elements[index]
        return 1.0

    def per_root_element(self, index: int) -> float:
        """How many of its own elements node ``index`` makes per element the consumer
        gets: the product of the ratios of the nodes after it."""
        product = 1.0
        for later in range(index + 1, len(self.nodes)):
            product *= self.ratio(later)
        return product


def _merge(states: list) -> _Merged:
    reference = max(states, key=lambda s: (len(s.positions), s.root_elements))
    nodes = [p.node for p in reference.positions]
    names = [n.name for n in nodes]
    elements = [0] * len(nodes)
    seconds = [0.0] * len(nodes)
    root = 0
    for state in states:
        own = state.positions
        offset = len(names) - len(own)
        if offset < 0 or [p.node.name for p in own] != names[offset:]:
            continue  # a chain of another shape (another TF version of the rewrite?)
        root += state.root_elements
        for index, position in enumerate(own):
            elements[offset + index] += position.elements
            seconds[offset + index] += position.seconds
    if nodes and nodes[-1].name == "Root":  # the iterator's bookkeeping, not a stage
        nodes, elements, seconds = nodes[:-1], elements[:-1], seconds[:-1]
    return _Merged(nodes, elements, seconds, root)


def _pipeline_facts(pipeline: _Pipeline, cores: int) -> PipelineFacts:
    read = [s for s in pipeline.iterators if s.positions]
    used = [s for s in read if s.root_elements > 0]
    errors = [s.error for s in pipeline.iterators if s.error and not s.positions]
    model_error = pipeline.error
    if not read:
        model_error = errors[0] if errors else (model_error or "no model of this pipeline was read")
    written = pipeline.written
    steps = [w for w in written if w.node and not w.noop]

    stages: list[PipelineStage] = []
    root_elements = 0
    if read:
        merged = _merge(used or read)
        root_elements = merged.root_elements
        index_of = {id(node): i for i, node in enumerate(merged.nodes)}
        for number, stage in enumerate(_match(written, merged.nodes)):
            stages.append(_stage_facts(stage, merged, index_of, cores, number == 0))
        last_async = bool(merged.nodes) and merged.nodes[-1].asynchronous
    else:
        stages = [
            _stage_facts(_Stage(written=[w]), None, {}, cores, i == 0) for i, w in enumerate(steps)
        ]
        last_async = bool(steps) and (
            steps[-1].api == "prefetch" or steps[-1].num_parallel_calls is not None
        )

    stages = _with_work_shares(stages, cores)
    gaps: list[float] = []
    for state in used:
        gaps.extend(state.gaps)
    gaps = gaps[-MAX_GAPS:]
    # The first iterator's time includes what the consumer did once (tracing its
    # step function): with later ones to go by, it is left out of the wait.
    timed = sorted(used, key=lambda s: s.created)
    timed = timed[1:] if len(timed) > 1 else timed
    consume_s, consumed = 0.0, 0
    for state in timed:
        seconds, elements = state.window()
        consume_s += seconds
        consumed += elements
    gap_median = statistics.median(gaps) if gaps else None
    per_element = consume_s / consumed if consumed and consume_s > 0 else None
    # Time per element = the consumer's (gap) + the wait: the mean gap is what adds up,
    # the median (reported) what a typical step does.
    wait = (
        max(0.0, per_element - statistics.fmean(gaps)) if per_element is not None and gaps else None
    )
    from gpuwhy.tfapi.tfdata.written import has_final_prefetch

    return PipelineFacts(
        id=pipeline.id,
        location=pipeline.location,
        consumer=pipeline.consumer,
        iterators=len(used) if read else len(pipeline.iterators),
        elements=root_elements,
        stages=tuple(stages),
        bottleneck=_bottleneck(stages),
        prefetch_written=has_final_prefetch(written),
        prefetch_run=last_async,
        cache_written=any(w.api == "cache" for w in written),
        autotune=pipeline.autotune,
        cardinality=pipeline.cardinality,
        element_bytes=pipeline.element_bytes,
        gap_median_s=_round(gap_median),
        gap_mean_s=_round(statistics.fmean(gaps)) if gaps else None,
        wait_per_element_s=_round(wait),
        consume_s=round(consume_s, 6),
        throughput_per_s=round(consumed / consume_s, 3) if consumed and consume_s > 0 else None,
        model_error=model_error,
    )


def _stage_facts(
    stage: _Stage, merged: _Merged | None, index_of: dict, cores: int, first: bool
) -> PipelineStage:
    """One stage: the written transformations' view, the run node's counts, and how
    fast it alone could feed the consumer:
    min(parallelism, cores) / (seconds per own element) / (own elements per consumer element)."""
    written = stage.written
    primary = written[0] if written else None
    run = stage.run
    family = run_family(run.name) if run is not None else None
    kind = _kind(primary.api if primary is not None else family, family, first)
    name = run.name if run is not None else (primary.op.replace("Dataset", "") if primary else "?")
    if primary is not None and primary.api in _INNER_NAMES:
        # a reader or generator runs inside TF's own flat_map/interleave: name what it reads
        name = _INNER_NAMES[primary.api]
    parallelism = run.parallelism if run is not None else None
    if run is None and primary is not None and (primary.num_parallel_calls or 0) > 0:
        parallelism = primary.num_parallel_calls
    elements, seconds, ratio, rate = 0, 0.0, 1.0, None
    index = index_of.get(id(run)) if run is not None else None
    if merged is not None and index is not None:
        elements = merged.elements[index]
        seconds = merged.seconds[index] + sum(
            merged.seconds[index_of[id(n)]] for n in stage.absorbed if id(n) in index_of
        )
        ratio = merged.ratio(index)
        if elements and seconds > 0:
            rate = (
                min(parallelism or 1, cores) / (seconds / elements) / merged.per_root_element(index)
            )
    per_element = seconds / elements if elements and seconds else None
    return PipelineStage(
        name=name,
        kind=kind,
        written_as=tuple(w.api for w in written),
        location=primary.location if primary else None,
        function=primary.function if primary else None,
        function_location=primary.function_location if primary else None,
        parallelism=parallelism,
        parallelism_written=primary.num_parallel_calls if primary else None,
        buffer_size=run.buffer_size
        if run is not None
        else (primary.argument if primary is not None and primary.api == "prefetch" else None),
        elements=elements,
        self_time_s=round(seconds, 9),
        self_time_per_element_s=_round(per_element),
        ratio=round(ratio, 6),
        root_elements_per_s=None if rate is None else round(rate, 3),
        python=any(w.python for w in written),
        stateful=any(w.stateful for w in written),
        deterministic=primary.deterministic if primary else None,
        codec_ops=tuple(dict.fromkeys(op for w in written for op in w.codec_ops)),
        random=any(w.random for w in written),
    )


def _kind(api: str | None, family: str | None, first: bool) -> str:
    for name in (api, family):
        if name in _KINDS:
            return _KINDS[name]
        if name in _SOURCES:
            return "source"
    return "source" if first else "other"


# Stages that move elements without transforming them. Their self time is mostly
# waiting that TF's timers attribute to them (a shuffle buffer filling up, say), not
# work that a fix to that stage would remove.
_BOOKKEEPING = frozenset({"prefetch", "shuffle", "repeat"})


def _with_work_shares(stages: list[PipelineStage], cores: int) -> list[PipelineStage]:
    """Each working stage's part of the CPU time the pipeline spends per element the
    consumer gets: min(parallelism, cores) / root_elements_per_s, over the sum. Per
    consumer element, not over total self times: TF drops an exhausted input's nodes from
    its model, so the stages' totals come from different moments, their rates do not."""
    work = {
        i: min(s.parallelism or 1, cores) / s.root_elements_per_s
        for i, s in enumerate(stages)
        if s.root_elements_per_s and s.kind not in _BOOKKEEPING
    }
    total = sum(work.values())
    if total <= 0:
        return stages
    return [
        dataclasses.replace(s, work_share=round(work[i] / total, 4)) if i in work else s
        for i, s in enumerate(stages)
    ]


def _bottleneck(stages: list[PipelineStage]) -> int | None:
    rated = [
        (s.root_elements_per_s, i)
        for i, s in enumerate(stages)
        if s.root_elements_per_s is not None
    ]
    working = [(r, i) for r, i in rated if stages[i].kind not in _BOOKKEEPING]
    pool = working or rated
    return min(pool)[1] if pool else None


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 9)


# -- the host -----------------------------------------------------------------------


def _host_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))  # what tf.data's threads may use
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def _cpu_snapshot() -> tuple:
    """(wall, this process tree's CPU seconds, machine busy jiffies, machine total jiffies)."""
    times = os.times()
    process = times.user + times.system + times.children_user + times.children_system
    busy = total = None
    try:
        with open("/proc/stat") as stat:
            fields = [int(v) for v in stat.readline().split()[1:]]
        idle = fields[3] + (fields[4] if len(fields) > 4 else 0)  # idle + iowait
        total = sum(fields[:8])  # guest time is inside user
        busy = total - idle
    except (OSError, ValueError, IndexError):
        pass
    return time.perf_counter(), process, busy, total


def _cpu_fractions(start: tuple | None, end: tuple | None, cores: int) -> tuple:
    if not start or not end:
        return None, None
    wall = end[0] - start[0]
    process = None
    if wall > 0 and cores:
        process = round(min(1.0, max(0.0, (end[1] - start[1]) / (wall * cores))), 4)
    busy = None
    if start[2] is not None and end[2] is not None and end[3] > start[3]:
        busy = round(min(1.0, max(0.0, (end[2] - start[2]) / (end[3] - start[3]))), 4)
    return busy, process


def _memory() -> tuple[int | None, int | None]:
    from gpuwhy.collect.host_memory import host_memory

    return host_memory()
