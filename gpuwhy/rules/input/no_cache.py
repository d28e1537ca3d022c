"""input.no-cache: the same expensive preprocessing is repeated every epoch."""

from __future__ import annotations

from typing import Any

from gpuwhy.derived.pipeline import culprit_location
from gpuwhy.derived.pipeline_stages import (
    cache_size,
    element_size,
    pass_elements,
    same_every_pass,
    stage_share,
    work_per_consumer_element_s,
)
from gpuwhy.derived.stage import derived
from gpuwhy.derived.steps_input import beside_steps, input_wait
from gpuwhy.facts import Facts, PipelineFacts, PipelineStage, TfDataFacts
from gpuwhy.finding import Finding
from gpuwhy.fixes import dataset_calls, pipeline_code
from gpuwhy.fixes.pipeline_evidence import pipeline_name, stage_table, wait_evidence
from gpuwhy.formatting import stage_label, stages_words
from gpuwhy.rules.base import Rule
from gpuwhy.source_calls import assigned_names

GiB = 1024**3
# Stages after which a cache would freeze what must change every epoch.
_ORDER_OR_PASS = ("shuffle", "repeat", "cache")
# The cache goes after the last cacheable stage doing at least this share of their work:
# after a decode, not after a cheap cast that would multiply the bytes to keep.
_EXPENSIVE_WITHIN_PREFIX = 0.10
# Sources whose elements are already in memory: caching them (or a batch of them) keeps
# a second copy of what the program holds and saves no work.
_IN_MEMORY_SOURCES = frozenset(
    {"range", "from_tensor_slices", "from_tensors", "from_sparse_tensor_slices"}
)
_IN_MEMORY_NODES = frozenset({"Range", "TensorSlice", "Tensor", "SparseTensorSlice"})
# Stages that move or group elements without computing them.
_MOVES_ONLY = frozenset({"batch", "prefetch", "take", "skip", "shard", "unbatch", "zip"})


class NoCache(Rule):
    """Deterministic, expensive preprocessing is recomputed every epoch though it fits memory.

    ## What it detects
    A pipeline read for more than one full pass (elements read > its cardinality, over
    several iterators or a `repeat`; where TF does not know the cardinality, as for file
    readers, several iterators over a pipeline that does not repeat, each taken to read
    one pass), with no `cache()`, whose deterministic stages take
    at least `min_stage_fraction` of its time (TF's self time of each stage): the stages
    from the source up to the first one whose elements may change from pass to pass,
    judged as `gpuwhy fix` judges where a cache is safe: random ops, Python
    (`tf.py_function`, and `tf.numpy_function` unless declared `stateful=False`), a
    generator, a `shuffle`, a tf.Variable read or a writing op (reading a lookup table
    is not), or a `repeat`. Their
    output, estimated as elements per pass × element size, must fit in `max_memory_fraction`
    of the host's memory and in the memory still available at the end of the run (the
    element size from its spec, else the bytes TF counted per element delivered).
    Without a known pass size, element size or host memory the size cannot be
    checked and the rule stays quiet. Data already in memory is never a finding: a
    prefix of `from_tensor_slices`, `from_tensors` or `range` with only batches, takes
    or prefetches after it computes nothing a cache would save, and caching it keeps a
    second copy. Nor is a prefix whose repeated work over the whole run is below
    `min_saved_s`. Medium when the consumer waits for input at least
    `min_input_wait` of its time, else low: the cache then frees host cores only. A
    pipeline read beside the training steps (fit's `validation_data`) is low: its
    wait is not the steps'.

    ## Why is this slow?
    Every epoch pays the full decode cost again on the host cores, so the first epoch's
    input bottleneck repeats in all of them and the GPU idles for the same reason each
    time. `ds.cache()` keeps the result of the deterministic stages in memory (or in a
    file) after the first epoch; later epochs read it at memory speed and only the
    cheap random augmentation runs again.

    ## Example
    ```python
    ds = (tf.data.Dataset.from_tensor_slices(paths)
          .map(load_and_resize, num_parallel_calls=tf.data.AUTOTUNE)  # same every epoch
          .shuffle(10_000)
          .map(augment, num_parallel_calls=tf.data.AUTOTUNE)
          .batch(64)
          .prefetch(tf.data.AUTOTUNE))
    model.fit(ds, epochs=50)
    ```

    Use instead:
    ```python
    ds = (tf.data.Dataset.from_tensor_slices(paths)
          .map(load_and_resize, num_parallel_calls=tf.data.AUTOTUNE)
          .cache()                     # or .cache("/local_ssd/train") if RAM is short
          .shuffle(10_000)             # after cache: a new order every epoch
          .map(augment, num_parallel_calls=tf.data.AUTOTUNE)
          .batch(64)
          .prefetch(tf.data.AUTOTUNE))
    ```

    The fix puts `cache()` after the last expensive deterministic stage, so the cached
    elements are the decoded ones and not a larger cast of them, and before the shuffle
    and the random stages. The size is an estimate from the pipeline's final elements.

    A dataset a Keras helper built (`keras.utils.timeseries_dataset_from_array`,
    `image_dataset_from_directory`, `text_dataset_from_directory`,
    `audio_dataset_from_directory`) can only be cached after the helper's call, so the
    fix is that call, as written, with `.cache()` after it (a `repeat` the helper zips
    with a finite input repeats no pass). A helper that shuffles (`shuffle=True`, the
    default of the directory helpers) reshuffles before its batch every epoch: a cache
    after it would keep the first epoch's order and batches, so the fix builds it with
    `batch_size=None, shuffle=False`, caches, then shuffles and batches after the cache.
    With `validation_split` the helper's shuffle stays (unshuffled, the split would take
    other files: the sorted paths, class by class) and runs once, into the cache; with
    `subset="both"` the call returns two datasets, each cached on its own.

    ## Options
    - `max_memory_fraction`: largest share of host memory the cached data may take
      (0.50).
    - `min_stage_fraction`: share of the pipeline's time in cacheable stages needed
      for the finding (0.20).
    - `min_input_wait`: input-wait fraction of the consumer's time from which the
      finding is medium rather than low (0.05).
    - `min_saved_s`: seconds of the cacheable stages' work (TF's self time, all
      threads) that the passes after the first redid, below which a cache saves too
      little to report (0.05): their time per element, times the elements those passes
      read (TF's totals of the stages under a shuffle cover part of the run only).
    """

    id = "input.no-cache"
    measured_thresholds = {"min_stage_fraction": "floor", "min_input_wait": "floor"}
    severity = "medium"
    status = "stable"
    needs = ("tfdata",)  # host memory is in it; steps give the measured input wait
    options = {
        "max_memory_fraction": 0.50,
        "min_stage_fraction": 0.20,
        "min_input_wait": 0.05,
        "min_saved_s": 0.05,
    }
    question = "Why is every epoch slow?"

    def check(self, facts: Facts, options: dict[str, Any]) -> list[Finding]:
        tfdata = facts.tfdata
        assert tfdata is not None  # in `needs`: never run without it
        findings = []
        for pipeline in tfdata.pipelines:
            found = self._check_pipeline(facts, tfdata, pipeline, options)
            if found is not None:
                findings.append(found)
        return findings

    def _check_pipeline(
        self, facts: Facts, tfdata: TfDataFacts, pipeline: PipelineFacts, options: dict[str, Any]
    ) -> Finding | None:
        if pipeline.cache_written or any(s.kind == "cache" for s in pipeline.stages):
            return None
        if pipeline.helper_call is None and all(s.by_library for s in pipeline.stages):
            # a library's own pipeline with no call of the program's to cache after:
            # Keras' fit slicing NumPy arrays already in memory (or a generator it wraps)
            return None
        per_pass, how = pass_elements(pipeline)
        element_bytes, size_from = element_size(pipeline)
        if not per_pass or not element_bytes or pipeline.elements <= per_pass:
            return None  # size unknown, or no second pass to save
        prefix, stop, reshuffled = _cacheable_prefix(pipeline.stages, pipeline.helper_call)
        if not any(_computes(s) for s in prefix):
            return None  # data already in memory: a cache is a second copy, no work saved
        work = {id(s): stage_share(pipeline, s) or 0.0 for s in prefix}
        share = sum(work.values())
        if not prefix or share < options["min_stage_fraction"]:
            return None
        # the work a pass of the consumer's elements costs, redone by every pass after the first
        saved_s = sum(work_per_consumer_element_s(pipeline, s) for s in prefix) * (
            pipeline.elements - per_pass
        )
        if saved_s < options["min_saved_s"]:
            return None  # the passes after the first redid too little work to matter
        after = _cache_after(prefix, work, share)
        size, size_from = cache_size(pipeline, after, per_pass)
        limit = _memory_limit(tfdata, options["max_memory_fraction"])
        # (host_memory_bytes is known whenever limit is: named for the type checker)
        if size is None or limit is None or size > limit or tfdata.host_memory_bytes is None:
            return None
        helper = _helper_end(pipeline.stages, after)
        if helper is not None and stop is not None and _index(pipeline.stages, stop) <= helper:
            return None  # the helper's own output changes every pass: nowhere to cache
        if helper is None and reshuffled is not None:
            return None  # a cache after the program's own stages would freeze the helper's shuffle
        culprit = max(prefix, key=lambda s: work[id(s)])
        passes = pipeline.elements / per_pass
        wait = input_wait(facts, pipeline)
        beside = beside_steps(facts, pipeline)  # validation: its wait is not the steps'
        waits = not beside and wait is not None and wait.fraction >= options["min_input_wait"]
        # Only passes after the first read from the cache.
        saved = share * (passes - 1) / passes  # of the pipeline's time
        gain = wait.fraction * saved if wait is not None and not beside else 0.0
        evidence: dict[str, Any] = {
            "pipeline": pipeline_name(pipeline),
            "cacheable_stages": [stage_label(s) for s in prefix],
            "cacheable_share_of_pipeline_time": round(share, 3),
            "stops_at": stage_label(stop) if stop is not None else "the end of the pipeline",
            "cache_after": stage_label(after),
            "passes_read": round(passes, 2),
            "elements_per_pass": round(per_pass, 1),
            "pass_size_from": how,
            "iterators": pipeline.iterators,
            "repeated_work_s": round(saved_s, 3),
            "estimated_cache_mib": round(size / 2**20, 1),
            "element_size_from": size_from,
            "host_memory_gib": round(tfdata.host_memory_bytes / GiB, 1),
        }
        if tfdata.host_memory_available_bytes is not None:
            evidence["host_memory_available_gib"] = round(
                tfdata.host_memory_available_bytes / GiB, 1
            )
        if wait is not None:
            evidence.update(wait_evidence(wait))
        evidence["stages"] = stage_table(pipeline)
        # the helper's own shuffle is rebuilt by the fix, not cached as it runs: it
        # orders the elements anew every pass, the same work it is not
        repeated = [s for s in prefix if s is not reshuffled]
        return self.finding(
            f"Stages {stages_words(repeated)} redo the same work every "
            f"pass ({share:.0%} of the pipeline's time, {passes:.1f} passes read); their "
            f"output (~{_size(size)}) fits in memory",
            severity=self.severity if waits else "low",
            evidence=evidence,
            # the line the cache goes after (the last stage cached), where written
            location=(after.location if helper is None else None) or culprit_location(culprit),
            fix=(
                _fix(after, stop, size)
                if helper is None
                else _helper_fix(pipeline, after, reshuffled, size, per_pass)
            ),
            estimated_gain=(
                (
                    "none on the training steps (the pipeline is read beside them); "
                    if beside
                    else f"estimate: about {gain:.0%} of step time (the wait times the "
                    f"cached stages' share, on every pass after the first); "
                    + _projected_gain(facts, pipeline, saved)
                )
                + f"{share:.0%} of the pipeline's work is done once instead of "
                f"{passes:.1f} times"
            ),
            gain_value=round(gain, 4),
        )


def _projected_gain(facts: Facts, pipeline: PipelineFacts, saved: float) -> str:
    """With ``--target``, the same estimate on the projected step, where the projection's
    input is this pipeline: the wait measured here (a CPU's step, a few percent) says
    nothing of the wait a GPU would have (helper-57's weather forecast: "about 0% of step
    time" under an input.projected-bound of 87 %, where the cache ran its epochs 1.8x
    faster by hand). ``saved``: the share of the pipeline's time the cache saves."""
    result = derived(facts)
    projection = result.projection
    if projection is None or projection.input_wait_fraction is None:
        return ""
    if result.steps_pipeline is not pipeline:
        return ""
    gain = projection.input_wait_fraction * saved
    return (
        f"on {projection.gpu} (projected, where steps would wait for input "
        f"{projection.input_wait_fraction:.0%}): about {gain:.0%} of the step; "
    )


def _cacheable_prefix(
    stages: tuple[PipelineStage, ...], helper_call: str | None = None
) -> tuple[list[PipelineStage], PipelineStage | None, PipelineStage | None]:
    """The stages from the source whose output is the same every pass, the first one
    that is not (None: the whole pipeline is), and a shuffle inside a dataset helper the
    prefix went past (None: none).

    Two stages that look like stops are not: a ``repeat`` that a later ``zip`` bounds
    (``zip((from_tensors(x).repeat(), indices))``, as Keras' timeseries helper builds
    it) repeats no pass; and a shuffle a known helper call makes (``shuffle=True``)
    reorders the same elements, which the fix rebuilds unshuffled and shuffles after the
    cache."""
    prefix: list[PipelineStage] = []
    reshuffled = None
    for index, stage in enumerate(stages):
        if stage.kind == "repeat" and _bounded_by_a_zip(stages, index):
            prefix.append(stage)
            continue
        if stage.kind == "shuffle" and stage.by_library and helper_call and reshuffled is None:
            reshuffled = stage
            prefix.append(stage)
            continue
        # One judgement with gpuwhy fix's (derived.pipeline_stages.same_every_pass): a
        # Python function repeats only when declared pure (numpy_function with
        # stateful=False), a lookup table read is not state.
        if not same_every_pass(stage) or stage.kind in _ORDER_OR_PASS:
            return prefix, stage, reshuffled
        if stage.kind != "prefetch":
            prefix.append(stage)
    return prefix, None, reshuffled


def _bounded_by_a_zip(stages: tuple[PipelineStage, ...], index: int) -> bool:
    """A zip comes later: it ends with its shortest input, so the repeat feeding it
    repeats no pass (the pipeline's cardinality, known here, says it ends)."""
    return any("zip" in s.written_as for s in stages[index + 1 :])


def _index(stages: tuple[PipelineStage, ...], stage: PipelineStage) -> int:
    """The stage's place, by identity (two stages may hold equal facts)."""
    return next(i for i, s in enumerate(stages) if s is stage)


def _helper_end(stages: tuple[PipelineStage, ...], after: PipelineStage) -> int | None:
    """Where a dataset helper's stages end (the index of its last), when the cache would
    fall inside them: the program can only add it after the helper's call."""
    if not after.by_library:
        return None
    end = _index(stages, after)
    while end + 1 < len(stages) and stages[end + 1].by_library:
        end += 1
    return end


def _computes(stage: PipelineStage) -> bool:
    """The stage does work a cache would save: not an in-memory source, not a stage that
    only moves elements (a batch of slices is a copy, cached or not)."""
    if stage.kind == "source" and (
        stage.name in _IN_MEMORY_NODES or any(w in _IN_MEMORY_SOURCES for w in stage.written_as)
    ):
        return False
    return not (stage.kind in _MOVES_ONLY or set(stage.written_as) <= _MOVES_ONLY)


def _cache_after(
    prefix: list[PipelineStage], work: dict[int, float], share: float
) -> PipelineStage:
    expensive = [s for s in prefix if work[id(s)] >= _EXPENSIVE_WITHIN_PREFIX * share]
    return (expensive or prefix)[-1]


def _memory_limit(tfdata: TfDataFacts, fraction: float) -> float | None:
    if not tfdata.host_memory_bytes:
        return None
    limit = fraction * tfdata.host_memory_bytes
    if tfdata.host_memory_available_bytes is not None:
        limit = min(limit, tfdata.host_memory_available_bytes)
    return limit


def _fix(after: PipelineStage, stop: PipelineStage | None, size: float) -> str:
    lines = [
        f"# {stage_label(after)} and the stages before it are the same every pass: keep"
        f' their output, ~{_size(size)}, in memory (or on a local disk: .cache("<path>"))',
        *pipeline_code.cached(after),
    ]
    if stop is not None:
        lines.append(
            f"# then {stage_label(stop)} and what follows, after the cache: they change every pass"
        )
    return "\n".join(lines)


def _helper_fix(
    pipeline: PipelineFacts,
    after: PipelineStage,
    reshuffled: PipelineStage | None,
    size: float,
    per_pass: float,
) -> str:
    """``.cache()`` on the helper's output, in place of the helper call as written; a
    helper that shuffles is built unshuffled and unbatched, and shuffled after the cache."""
    call = pipeline.helper_call or "<the dataset helper's call>"
    where = f"{after.location}: " if after.location else ""
    name = call.split("(", 1)[0]
    head = (
        f"# the stages {name} builds ({after.location or 'its call'}) give the same "
        f"elements every pass: keep its output, ~{_size(size)}, in memory (or on a local "
        'disk: .cache("<path>"))'
    )
    # no .prefetch(tf.data.AUTOTUNE) written: a Keras-only program has no `tf` to name,
    # and TF's inject_prefetch adds one after a final cache or batch by itself
    if reshuffled is None:
        new = dataset_calls.chained(call, ".cache()")
        return "\n".join([head, f"# {where}{pipeline_code.IN_PLACE_OF}{call}", new])
    batch = _helper_batch(pipeline, call)
    ran = batch if batch.isdigit() else _ran_batch(pipeline)
    examples = round(per_pass * int(ran)) if ran is not None else "<examples per epoch>"
    # a validation_split is made from the files as the helper's shuffle (and its seed)
    # orders them: unshuffled, each subset would hold other files (sorted by class)
    split = dataset_calls.keyword(call, "validation_split") is not None
    built = (
        dataset_calls.with_keywords(call, batch_size="None")
        if split
        else dataset_calls.with_keywords(call, batch_size="None", shuffle="False")
    )
    how = (
        "Built unbatched (its own shuffle then runs once, into the cache, and splits the "
        "files as before), cached, then shuffled anew every epoch"
        if split
        else "Built unshuffled and unbatched, cached, then shuffled anew every epoch"
    )
    # the helper's seed goes to the shuffle that takes its place: the same runs again
    seed = dataset_calls.keyword(call, "seed")
    shuffle = f".shuffle({examples}, seed={seed})" if seed else f".shuffle({examples})"
    lines = [
        head,
        "# it shuffles inside (shuffle=True): a cache after it would keep the first "
        f"epoch's order and batches. {how} (the buffer holds one epoch's examples):",
        f"# {where}{pipeline_code.IN_PLACE_OF}{call}",
    ]
    if not _both_subsets(call):
        new = dataset_calls.chained(built, ".cache()", shuffle, f".batch({batch})")
        return "\n".join([*lines, new])
    names = _assigned_pair(after)
    if names is None:  # the pair, cached where it is made: (training, validation)
        train = f".cache(){shuffle}.batch({batch})"
        validation = f".cache().batch({batch})"
        pair = f"tuple(d{train} if i == 0 else d{validation} for i, d in enumerate({built}))"
        return "\n".join([*lines, pair])
    # subset="both" returns (training, validation): each cached on its own
    train, validation = names
    return "\n".join(
        [
            *lines,
            built,
            pipeline_code.THEN_AFTER,
            f"{train} = {train}.cache(){shuffle}.batch({batch})",
            f"{validation} = {validation}.cache().batch({batch})",
        ]
    )


def _both_subsets(call: str) -> bool:
    """The call returns (training, validation): ``subset="both"``."""
    subset = dataset_calls.keyword(call, "subset")
    return subset is not None and subset.strip("'\"") == "both"


def _assigned_pair(after: PipelineStage) -> tuple[str, str] | None:
    """The two names the program assigns a helper's (training, validation) pair to, read
    at its line; None where they are not read (no source here, not two names)."""
    path, _, line = (after.location or "").rpartition(":")
    names = assigned_names(path, int(line)) if path and line.isdigit() else ()
    return (names[0], names[1]) if len(names) == 2 else None


def _helper_batch(pipeline: PipelineFacts, call: str) -> str:
    """The helper's batch size: as written (a number, or the program's name for it),
    else the batch its stages ran with."""
    written = dataset_calls.keyword(call, "batch_size")
    if written is not None:
        return written
    ran = _ran_batch(pipeline)
    return ran if ran is not None else "<batch size>"


def _ran_batch(pipeline: PipelineFacts) -> str | None:
    """The batch the helper's stages ran with (elements in per element out)."""
    for stage in pipeline.stages:
        if stage.by_library and "batch" in stage.written_as and stage.ratio > 1:
            return str(round(stage.ratio))
    return None


def _size(size: float) -> str:
    if size < 2**20:
        return f"{size / 1024:,.0f} KiB"
    return f"{size / GiB:,.1f} GiB" if size >= GiB else f"{size / 2**20:,.0f} MiB"
