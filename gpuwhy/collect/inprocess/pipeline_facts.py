"""A pipeline's facts from its iterators: counters added up over iterators, each stage's
time per element and how fast it alone could feed the consumer (its share of the work,
parallelism capped at the host's cores), and the bottleneck."""

from __future__ import annotations

import dataclasses
import statistics
from dataclasses import dataclass
from typing import Any

from gpuwhy.collect.inprocess.pipeline_iterators import IteratorState, Pipeline
from gpuwhy.collect.inprocess.pipeline_join import JoinedStage, match_stages
from gpuwhy.derived.pipeline import BOOKKEEPING
from gpuwhy.facts import PipelineFacts, PipelineStage
from gpuwhy.formatting import GAP_TIMER, GENERATOR_TIMING
from gpuwhy.tfapi.tfdata.dataset_chain import has_final_prefetch
from gpuwhy.tfapi.tfdata.node_names import INNER_NAMES, SOURCE_APIS, STAGE_KINDS, run_family

MAX_GAPS = 20000  # gap samples kept per pipeline
TF_KEPT_GAPS = 100  # the latest gaps TF keeps of an iterator (tensorflow/core/framework/model.cc)
# Elements the iterators after the first must have given, between them, for the rate to
# be theirs (the first one's time holds the consumer's tracing), where the first gave
# this many
MIN_LATER_ELEMENTS = 20


@dataclass
class Merged:
    """A pipeline's chain summed over its iterators: the reference iterator's latest
    nodes (the longest chain), and per node the elements and seconds of all iterators."""

    nodes: list
    elements: list
    seconds: list
    root_elements: int
    root_bytes: int = 0  # bytes of those elements, where TF counted them

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


def merge_iterators(states: list) -> Merged:
    reference = max(states, key=lambda s: (len(s.positions), s.root_elements))
    nodes = [p.node for p in reference.positions]
    names = [n.name for n in nodes]
    elements = [0] * len(nodes)
    seconds = [0.0] * len(nodes)
    root = root_bytes = 0
    for state in states:
        own = state.positions
        offset = len(names) - len(own)
        if offset < 0 or [p.node.name for p in own] != names[offset:]:
            continue  # a chain of another shape (another TF version of the rewrite?)
        root += state.root_elements
        root_bytes += state.root_bytes
        for index, position in enumerate(own):
            elements[offset + index] += position.elements
            seconds[offset + index] += position.seconds
    if nodes and nodes[-1].name == "Root":  # the iterator's bookkeeping, not a stage
        nodes, elements, seconds = nodes[:-1], elements[:-1], seconds[:-1]
    return Merged(nodes, elements, seconds, root, root_bytes)


def pipeline_facts(pipeline: Pipeline, cores: int, t0: float | None = None) -> PipelineFacts:
    read = [s for s in pipeline.iterators if s.positions]
    used = [s for s in read if s.root_elements > 0]
    errors = [s.error for s in pipeline.iterators if s.error and not s.positions]
    model_error = pipeline.error
    if not read:
        model_error = errors[0] if errors else (model_error or "no model of this pipeline was read")
        if not pipeline.autotune and pipeline.options_by_library:
            model_error = _autotune_off_by_library(pipeline)
    written = pipeline.written
    steps = [w for w in written if w.node and not w.noop]

    stages: list[PipelineStage] = []
    root_elements = root_bytes = 0
    if read:
        merged = merge_iterators(used or read)
        root_elements, root_bytes = merged.root_elements, merged.root_bytes
        index_of = {id(node): i for i, node in enumerate(merged.nodes)}
        for number, stage in enumerate(match_stages(written, merged.nodes)):
            stages.append(_stage_facts(stage, merged, index_of, cores, number == 0))
        last_async = bool(merged.nodes) and merged.nodes[-1].asynchronous
    else:
        stages = [
            _stage_facts(JoinedStage(written=[w]), None, {}, cores, i == 0)
            for i, w in enumerate(steps)
        ]
        last_async = bool(steps) and (
            steps[-1].api == "prefetch" or steps[-1].num_parallel_calls is not None
        )

    stages = _with_work_shares(stages, cores)
    # The first iterator's time includes what the consumer did once (tracing its
    # step function): with later ones to go by, it is left out of the wait. Not where
    # the later ones gave a handful of elements between them and the first gave more
    # (a run interrupted just after an epoch began: one element and the time to the
    # interrupt would be the rate): then the first one's is.
    in_order = sorted(used, key=lambda s: s.created)
    timed = in_order
    if len(timed) > 1:
        later = sum(state.window()[1] for state in timed[1:])
        first_only = later < MIN_LATER_ELEMENTS <= timed[0].window()[1]
        timed = timed[:1] if first_only else timed[1:]
    windows = [state.window() for state in timed]
    # The gaps: every iterator's, the first one's without its first gap where TF still
    # holds it (the run's first step less its read: a warm-up, left out of the steps
    # too, whose callbacks and one-time work made a gap of 46 ms among gaps of 1 ms; a
    # later iterator's first gap is an ordinary step's, and an epoch of one batch has no
    # other), the latest MAX_GAPS of them; and when the first iterator they come from
    # was made: the steps they time begin there (fit's wait weighs them against those
    # steps only, collect/inprocess/input_wait.py, so an iterator whose model was never
    # read leaves its steps out too, not a wait in their place).
    own = [_steady_gaps(state) if i == 0 else list(state.gaps) for i, state in enumerate(in_order)]
    first_kept = len(in_order)
    held = 0
    while first_kept > 0 and held < MAX_GAPS:
        first_kept -= 1
        held += len(own[first_kept])
    gaps = [gap for kept in own[first_kept:] for gap in kept][-MAX_GAPS:]
    gaps_since = next(
        (in_order[i].created for i in range(first_kept, len(in_order)) if own[i]), None
    )
    consume_s = sum(seconds for seconds, _ in windows)
    consumed = sum(elements for _, elements in windows)
    gap_median = statistics.median(gaps) if gaps else None
    per_element = consume_s / consumed if consumed and consume_s > 0 else None
    # Time per element = the consumer's (gap) + the wait: the mean gap is what adds up,
    # the median (reported) what a typical step does.
    wait = (
        max(0.0, per_element - statistics.fmean(gaps)) if per_element is not None and gaps else None
    )

    gap_stats = _GapStats(
        median_s=gap_median,
        mean_s=statistics.fmean(gaps) if gaps else None,
        count=len(gaps),
        stdev_s=statistics.stdev(gaps) if len(gaps) > 1 else None,
        since=gaps_since,
        source=GAP_TIMER if gaps else None,
    )
    slowest = _bottleneck(stages)
    if not read:  # no model: a generator's own timer, where it times the consumer
        timed_by_generator = _generator_gap_stats(pipeline, steps)
        if timed_by_generator is not None:
            gap_stats, generator_reads = timed_by_generator
            if len(steps) == 1:  # the generator's element is the consumer's, and it is
                # the only stage: the slowest by elimination, its own time not measured
                root_elements = root_elements or generator_reads
                slowest = 0 if slowest is None and len(stages) == 1 else slowest
    # Keras' enqueuer (a PyDataset with workers) reads ahead on its own threads, and
    # turns tf.data's autotune off since: a prefetch in all but name
    last_async = last_async or (
        not pipeline.autotune
        and pipeline.options_by_library
        and bool(steps)
        and steps[0].api == "from_generator"
        and steps[0].by_library
    )
    return PipelineFacts(
        id=pipeline.id,
        location=pipeline.location,
        consumer=pipeline.consumer,
        read_at=pipeline.read_at,
        read_via=pipeline.read_via,
        helper_call=next((w.library_call for w in reversed(written) if w.library_call), None),
        iterators=len(used) if read else len(pipeline.iterators),
        elements=root_elements,
        elements_at_least=any(s.end_unread for s in used),
        stages=tuple(stages),
        bottleneck=slowest,
        prefetch_written=has_final_prefetch(written),
        prefetch_run=last_async,
        cache_written=any(w.api == "cache" for w in written),
        autotune=pipeline.autotune,
        deterministic=pipeline.deterministic,
        cardinality=pipeline.cardinality,
        element_bytes=pipeline.element_bytes,
        example_bytes=pipeline.example_bytes,
        delivered_bytes=root_bytes or None,
        gap_median_s=_round(gap_stats.median_s),
        gap_mean_s=_round(gap_stats.mean_s),
        gap_count=gap_stats.count,
        gap_stdev_s=_round(gap_stats.stdev_s),
        gaps_since_s=(
            round(max(0.0, gap_stats.since - t0), 6)
            if gap_stats.since is not None and t0 is not None
            else None
        ),
        gap_source=gap_stats.source,
        wait_per_element_s=_round(wait),
        consume_s=round(consume_s, 6),
        throughput_per_s=round(consumed / consume_s, 3) if consumed and consume_s > 0 else None,
        model_error=model_error,
    )


def _autotune_off_by_library(pipeline: Pipeline) -> str:
    """Why TF kept no model, where the program never turned autotune off: Keras does, for
    a ``PyDataset`` with ``workers`` (``py_dataset_adapter.get_tf_dataset``)."""
    who = (
        "Keras turned autotune off for this dataset (a PyDataset with workers reads ahead "
        "on its own threads)"
        if pipeline.consumer.startswith("keras")
        else "the library that built this dataset turned autotune off"
    )
    return f"{who}, so TF keeps no per-stage model"


@dataclass(frozen=True)
class _GapStats:
    """The consumer's gaps between elements, as the pipeline's facts give them."""

    median_s: float | None
    mean_s: float | None
    count: int
    stdev_s: float | None
    since: float | None  # perf_counter: when the first iterator they come from was made
    source: str | None


def _generator_gap_stats(pipeline: Pipeline, steps: list) -> tuple[_GapStats, int] | None:
    """The gaps a ``from_generator`` source timed around its own calls, with the elements
    it gave, where they are the consumer's: the generator is the source and nothing
    after it runs ahead on threads of its own (a prefetch, a parallel map or batch),
    so each ``GetNext`` calls the generator on the spot (autotune off: TF injects no
    prefetch either). None elsewhere, or before two elements of a pass."""
    timer = pipeline.generator_gaps
    if timer is None or not steps or steps[0].api != "from_generator":
        return None
    if any(_runs_ahead(w) for w in steps[1:]):
        return None
    summary = timer.summary()
    if summary is None:
        return None
    stats = _GapStats(
        median_s=summary.median_s,
        mean_s=summary.mean_s,
        count=summary.count,
        stdev_s=summary.stdev_s,
        since=summary.since,
        source=GENERATOR_TIMING,
    )
    return stats, summary.reads


def _runs_ahead(step: Any) -> bool:
    """A written transformation that produces on threads of its own."""
    return (
        "prefetch" in step.api
        or step.num_parallel_calls is not None
        or step.api in ("parallel_interleave", "parallel_map")
    )


def _steady_gaps(state: IteratorState) -> list[float]:
    """The first iterator's gaps without its first where TF still holds it: TF keeps the
    latest ``TF_KEPT_GAPS``, one between each two reads (the read that ended the data
    too)."""
    gaps = list(state.gaps)
    held = len(gaps) < TF_KEPT_GAPS or state.root_elements <= TF_KEPT_GAPS
    return gaps[1:] if gaps and held else gaps


def _stage_facts(
    stage: JoinedStage, merged: Merged | None, index_of: dict, cores: int, first: bool
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
    if primary is not None and primary.api in INNER_NAMES:
        # a reader or generator runs inside TF's own flat_map/interleave: name what it reads
        name = INNER_NAMES[primary.api]
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
        buffer_size=_buffer(run, primary),
        elements=elements,
        self_time_s=round(seconds, 9),
        self_time_per_element_s=_round(per_element),
        ratio=round(ratio, 6),
        root_elements_per_s=None if rate is None else round(rate, 3),
        python=any(w.python for w in written),
        stateful=any(w.stateful for w in written),
        order_dependent=any(w.order_dependent for w in written),
        deterministic=primary.deterministic if primary else None,
        codec_ops=tuple(dict.fromkeys(op for w in written for op in w.codec_ops)),
        random=any(w.random for w in written),
        repeats=all(w.varies is None for w in written) if written else None,
        written_calls=tuple(w.call or "" for w in written),
        element_bytes=written[-1].element_bytes if written else None,
        files=next((w.files for w in written if w.files is not None), None),
        by_library=bool(written) and all(w.by_library for w in written),
        as_slices=next((w.as_slices for w in written if w.as_slices), None),
    )


def _buffer(run: Any, primary: Any) -> int | None:
    """The stage's buffer in elements: a shuffle's as written (TF's model does not
    carry it), others' as TF ran them, a prefetch's as written when it did not run."""
    if primary is not None and primary.api == "shuffle" and primary.argument:
        return primary.argument
    if run is not None:
        return run.buffer_size
    return primary.argument if primary is not None and primary.api == "prefetch" else None


def _kind(api: str | None, family: str | None, first: bool) -> str:
    for name in (api, family):
        if name in STAGE_KINDS:
            return STAGE_KINDS[name]
        if name in SOURCE_APIS:
            return "source"
    return "source" if first else "other"


def _with_work_shares(stages: list[PipelineStage], cores: int) -> list[PipelineStage]:
    """Each working stage's part of the CPU time the pipeline spends per element the
    consumer gets: min(parallelism, cores) / root_elements_per_s, over the sum. Per
    consumer element, not over total self times: TF drops an exhausted input's nodes from
    its model, so the stages' totals come from different moments, their rates do not."""
    work = {
        i: min(s.parallelism or 1, cores) / s.root_elements_per_s
        for i, s in enumerate(stages)
        if s.root_elements_per_s and s.kind not in BOOKKEEPING
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
    working = [(r, i) for r, i in rated if stages[i].kind not in BOOKKEEPING]
    pool = working or rated
    return min(pool)[1] if pool else None


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 9)
