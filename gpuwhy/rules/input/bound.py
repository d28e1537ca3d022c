"""input.bound: the training step waits for the input pipeline."""

from __future__ import annotations

import dataclasses
import re
import statistics
from dataclasses import dataclass
from typing import Any

from gpuwhy.derived.pipeline import NEXT_TIMING, bottleneck, culprit_location, steps_pipeline
from gpuwhy.facts import EagerFacts, Facts, PipelineFacts, StepFacts
from gpuwhy.finding import Finding
from gpuwhy.formatting import duration
from gpuwhy.rules.base import Rule
from gpuwhy.rules.input import snippets
from gpuwhy.rules.input.common import (
    CONSUMER_NAMES,
    InputWait,
    ends_buffered,
    pipeline_name,
    pipeline_wait,
    stage_label,
    stage_row,
    stage_table,
    steps_wait,
)
from gpuwhy.rules.launch.snippets import rebound, wrap

# A wait is a burst when it is this many times the median wait (and at least BURST_MIN_S);
# the waits are bursty when bursts, at most BURSTY_STEP_SHARE of the steps, hold at
# least half of the wait.
BURST_OVER_MEDIAN = 10.0
BURST_MIN_S = 0.001
BURSTY_STEP_SHARE = 0.20


@dataclass(frozen=True)
class Bursts:
    """The few long waits that make most of a wait share."""

    count: int
    shortest_s: float
    longest_s: float
    share: float  # of the recorded wait
    steps: int
    median_s: float
    kept: int | None = None  # a long run: read over its first ``kept`` calls only

    @property
    def text(self) -> str:
        if self.kept is not None:  # the title's share is the whole run's: these are not
            return (
                f"in the first {self.kept:,} steps, {self.count} of {self.steps} waits, of "
                f"{duration(self.shortest_s)}–{duration(self.longest_s)}, make "
                f"{self.share:.0%} of their wait (median wait {duration(self.median_s)})"
            )
        return (
            f"{self.count} of {self.steps} waits, of {duration(self.shortest_s)}–"
            f"{duration(self.longest_s)}, make {self.share:.0%} of it (median wait "
            f"{duration(self.median_s)})"
        )


def bursts(steps: StepFacts) -> Bursts | None:
    """The waits far above the median wait, where they are few and make most of the
    recorded wait: a share made of bursts reads very unlike the typical step, and a
    reader comparing it with the median must see why. Single waits are kept for a long
    run's first steps only: there they are read, and the text says so."""
    waits = [w for w in steps.input_waits[steps.warmup :] if w is not None]
    total = sum(waits)
    if len(waits) < 10 or total <= 0:
        return None
    median = statistics.median(waits)
    long = [w for w in waits if w >= max(BURST_OVER_MEDIAN * median, BURST_MIN_S)]
    if not long or len(long) > BURSTY_STEP_SHARE * len(waits) or sum(long) < total / 2:
        return None
    kept = None if steps.all_kept else len(steps.input_waits)
    return Bursts(len(long), min(long), max(long), sum(long) / total, len(waits), median, kept)


@dataclass(frozen=True)
class HostLoad:
    """Other processes' use of the host's CPUs over the run: busy (all processes, from
    /proc/stat) minus the program's own CPU time (process and children), as shares of
    the cores, and the load average at the end."""

    others: float
    busy: float
    own: float
    cores: int | None
    load_average: float | None
    large_wait: bool = False  # a wait of high_at or more: more than the load explains

    @property
    def text(self) -> str:
        cores = f"{self.cores} cores" if self.cores else "cores"
        load = f", load average {self.load_average:.1f}" if self.load_average is not None else ""
        return (
            f"other processes kept {self.others:.0%} of the host's {cores} busy during the "
            f"run (the program itself {self.own:.0%}{load})"
        )

    def evidence(self) -> dict[str, Any]:
        return {
            "other_processes_cpu_fraction": round(self.others, 3),
            "host_cpu_busy_fraction": round(self.busy, 3),
            "program_cpu_fraction": round(self.own, 3),
            "host_cores": self.cores,
            "host_load_average": self.load_average,
        }


def host_load(facts: Facts, at: float, saturated_at: float) -> HostLoad | None:
    """Other processes' share of the host's cores, where it is at least ``at`` and the
    host's cores were at least ``saturated_at`` busy (no idle core left to the input)."""
    tfdata = facts.tfdata
    if tfdata is None or tfdata.host_cpu_busy_fraction is None:
        return None
    if tfdata.process_cpu_fraction is None or tfdata.host_cpu_busy_fraction < saturated_at:
        return None
    others = tfdata.host_cpu_busy_fraction - tfdata.process_cpu_fraction
    if others < at:
        return None
    return HostLoad(
        others,
        tfdata.host_cpu_busy_fraction,
        tfdata.process_cpu_fraction,
        tfdata.host_cores,
        tfdata.host_load_average,
    )


# Steps recorded after the first pass over a cached pipeline, at least, to judge that
# the later passes keep up; and how many times slower the first pass's steps must be.
CACHE_LATER_STEPS = 20
CACHE_FIRST_PASS_SLOWER = 3.0


@dataclass(frozen=True)
class CacheFilling:
    """Where the steps' wait is the first pass over a pipeline that caches: the pass
    that runs the preprocessing and fills the cache, against the passes that read it."""

    pass_steps: int  # steps in one pass (the pipeline's cardinality)
    first_steps: int  # the first pass's steps after warm-up
    first_s: float  # their time, in seconds
    first_step_s: float  # their mean
    later_steps: int  # steps recorded after the first pass
    later_step_s: float  # their mean
    later_wait: float | None  # their measured wait share, where each step's is recorded
    cache_location: str | None
    steps: int  # steps recorded after warm-up

    @property
    def text(self) -> str:
        later = (
            f", waiting {self.later_wait:.0%} of the time" if self.later_wait is not None else ""
        )
        return (
            f"its {self.first_steps:,} steps after warm-up took {duration(self.first_s)} "
            f"({duration(self.first_step_s)} each), the {self.later_steps:,} after it "
            f"{duration(self.later_step_s)} each{later}"
        )

    def evidence(self) -> dict[str, Any]:
        return {
            "first_pass_steps": self.pass_steps,
            "first_pass_s": round(self.first_s, 3),
            "first_pass_step_mean_ms": _round_ms(self.first_step_s),
            "later_steps": self.later_steps,
            "later_step_mean_ms": _round_ms(self.later_step_s),
            "later_input_wait_fraction": (
                None if self.later_wait is None else round(self.later_wait, 3)
            ),
            "cache_at": self.cache_location,
        }


def cache_filling(
    steps: StepFacts, pipeline: PipelineFacts | None, medium_at: float
) -> CacheFilling | None:
    """The steps' wait belongs to the first pass over a cached pipeline, measured: the
    steps after that pass (at least CACHE_LATER_STEPS of them) wait less than
    ``medium_at`` where each step's wait is recorded, else their steps are at least
    CACHE_FIRST_PASS_SLOWER times faster than the first pass's and that difference
    covers the wait measured over the run. None otherwise, or where steps cannot be
    matched to passes (several loops, several steps per call, an unknown pass length, a
    first pass longer than the steps a long run keeps one by one). The steps after the
    first pass are the whole run's (:func:`_after_first_pass`)."""
    if pipeline is None or not pipeline.cache_written or not pipeline.cardinality:
        return None
    if len(steps.loops) > 1 or steps.steps_per_call != 1 or pipeline.iterators < 2:
        return None
    per_pass = pipeline.cardinality
    first = steps.durations[steps.warmup : per_pass]
    later = _after_first_pass(steps, per_pass)
    if later is None or later.steps < CACHE_LATER_STEPS or not first:
        return None
    if steps.input_wait_fraction is None:
        return None
    first_mean = sum(first) / len(first)
    later_mean = later.seconds / later.steps
    later_wait: float | None = None
    if later.waited is not None:
        later_wait = later.waited / max(later.seconds, 1e-12)
        if later_wait >= medium_at:
            return None
    else:
        waited = steps.input_wait_fraction * steps.total_s
        excess = sum(first) - len(first) * later_mean
        if first_mean < CACHE_FIRST_PASS_SLOWER * later_mean or excess < 0.8 * waited:
            return None
    cache = next((s for s in pipeline.stages if s.kind == "cache"), None)
    return CacheFilling(
        pass_steps=per_pass,
        first_steps=len(first),
        first_s=sum(first),
        first_step_s=first_mean,
        later_steps=later.steps,
        later_step_s=later_mean,
        later_wait=later_wait,
        cache_location=cache.location if cache is not None else None,
        steps=later.counted,
    )


@dataclass(frozen=True)
class _Later:
    """The steps after a first pass: how many, their time, their wait (None: not
    timed step by step), and every step after warm-up."""

    steps: int
    seconds: float
    waited: float | None
    counted: int


def _after_first_pass(steps: StepFacts, per_pass: int) -> _Later | None:
    """The steps after the first ``per_pass``: one by one where the record keeps every
    step; in a longer run, the whole run's sums (every step after warm-up, its wait)
    less the first pass, which must be among the steps kept one by one. None where it
    is not."""
    durations = steps.durations
    if steps.all_kept:
        later = durations[per_pass:]
        waits = steps.input_waits[per_pass : len(durations)]
        timed = bool(waits) and all(w is not None for w in waits)
        return _Later(
            steps=len(later),
            seconds=sum(later),
            waited=sum(w or 0.0 for w in waits) if timed else None,
            counted=len(durations) - steps.warmup,
        )
    if per_pass > len(durations):
        return None
    first = durations[steps.warmup : per_pass]
    first_waits = steps.input_waits[steps.warmup : per_pass]
    timed = (  # every step's wait was timed: the run's wait less the first pass's
        steps.input_wait_source == NEXT_TIMING
        and steps.input_wait_fraction is not None
        and len(first_waits) == len(first)
        and all(w is not None for w in first_waits)
    )
    return _Later(
        steps=steps.count - per_pass,
        seconds=steps.total_s - sum(first),
        waited=(
            (steps.input_wait_fraction or 0.0) * steps.total_s - sum(w or 0.0 for w in first_waits)
            if timed
            else None
        ),
        counted=steps.count - steps.warmup,
    )


# The pipeline makes a batch in less than this share of the measured wait: the wait is
# the iterator call, not the pipeline's work.
OVERHEAD_PRODUCTION_SHARE = 0.5


def fetch_overhead(
    pipeline: PipelineFacts | None, steps: StepFacts, share: float, mean_step: float | None
) -> float | None:
    """The pipeline's work per batch (TF's stage timers, buffers left out) where it is
    far below what the loop waited per batch and a buffer keeps a batch ready; else None.

    The wait per batch is the pipeline's own, timed around its next() calls where the
    run has it, and the pipeline must hold most of the steps' wait: with several
    pipelines (one per loop) another one's waits are not this one's fetch overhead."""
    if pipeline is None or mean_step is None or steps.input_wait_source != "next() timing":
        return None
    if not ends_buffered(pipeline) or not pipeline.elements or pipeline.model_error:
        return None
    waited = share * mean_step
    if pipeline.wait_source == NEXT_TIMING and pipeline.wait_per_element_s is not None:
        waited = pipeline.wait_per_element_s
        steps_wait = share * steps.total_s
        if steps_wait > 0 and waited * pipeline.elements < 0.5 * steps_wait:
            return None  # most of the waiting was for other pipelines
    work = sum(s.self_time_s for s in pipeline.stages if s.kind != "prefetch" and s.kind != "cache")
    production = work / pipeline.elements
    if production <= 0 or production >= OVERHEAD_PRODUCTION_SHARE * waited:
        return None
    return production


class InputBound(Rule):
    """The step waits for its next batch: the GPU idles while tf.data prepares input.

    ## What it detects
    The fraction of each training step spent waiting for the next batch is at least
    `medium_at` (medium) or `high_at` (high). It is measured, not estimated: where the
    loop fetches batches from Python (`for x, y in dataset:`) the time inside `next()`
    is the wait; for Keras `fit`, which reads each batch inside its compiled step, the
    step minus tf.data's own consumer timer (the gap between two `GetNext` calls) is.
    Where the steps carry no measured wait, a pipeline's own timers decide (its wait per
    element against its consumer's time per element), one finding per pipeline.

    Where a Python loop's `next()` calls take the time but the pipeline, buffered by a
    prefetch, makes a batch in under half of that (TF's stage timers), the pipeline is
    not what the loop waits for: the finding (medium) says the cost is the Python call
    per step and the fix is fewer calls (a larger batch; the step, not the loop over the
    dataset, in a tf.function where it runs eagerly).

    When gpuwhy read the pipeline as TF ran it, the finding names its slowest stage
    (`ParallelMapV2(parse at train.py:41)`) with its time per element, threads and share
    of the pipeline's work, points at the file:line of the function that stage runs,
    and tailors the fix to it: parallel calls for a sequential map, stateless random
    ops for a stateful augmentation, TF ops for a Python function, parallel reads for a
    file reader, batching before a cheap per-element map (`vectorise_below_us`).

    When the host's cores were saturated (at least `saturated_at` busy over the run)
    and other processes kept at least `others_busy_at` of them busy (the host's busy CPU
    time from the OS minus the program's own), the pipeline had to share the cores with
    them: the finding says so with the figures and its fix starts by measuring again on
    a host to itself. A wait under `high_at` is then low and its title names no stage
    (a load takes that much from any pipeline); a larger one stays high, the load
    beside it.

    When the pipeline caches (`.cache()`) and the steps after its first pass keep up
    (their measured wait under `medium_at`, or, where each step's wait is not recorded,
    steps at least 3x faster than the first pass's, a difference that covers the wait),
    the wait is the first pass filling the cache: the finding is low, says so, and
    offers nothing to add.

    ## Why is this slow?
    A GPU step can only start once its batch is on the device. When producing a batch
    takes longer than computing on it, the GPU is idle for the difference on every step,
    however fast the GPU is: `nvidia-smi` shows low utilisation and a bigger GPU does
    not help. The slowest stage sets the pace of the whole pipeline: a faster model, a
    prefetch buffer or parallel calls on other stages do not change it.

    ## Example
    ```python
    def parse(record):                       # train.py:41
        ...
    ds = tf.data.TFRecordDataset(files).map(parse).batch(64)
    model.fit(ds, epochs=10)          # 40% of every step waits for `parse`
    ```

    Use instead:
    ```python
    ds = (tf.data.TFRecordDataset(files, num_parallel_reads=tf.data.AUTOTUNE)
          .map(parse, num_parallel_calls=tf.data.AUTOTUNE)
          .batch(64)
          .prefetch(tf.data.AUTOTUNE))
    ```

    ## Options
    - `medium_at`: input-wait fraction of step time that makes the finding medium (0.05,
      XProf's threshold).
    - `high_at`: input-wait fraction that makes it high (0.20).
    - `vectorise_below_us`: a map's self time per call, in microseconds, below which
      its cost is mostly tf.data's per-element overhead and the fix batches before
      mapping (50; needs 1,000 calls or more to judge).
    - `others_busy_at`: share of the host's cores other processes kept busy over the
      run that makes the finding about the load (0.25).
    - `saturated_at`: the host's busy share of its cores (all processes) above which
      other processes' load counts (0.90).
    """

    id = "input.bound"
    severity = "high"
    status = "stable"
    needs = ("steps",)  # tfdata, when present, names the slowest stage
    options = {
        "medium_at": 0.05,
        "high_at": 0.20,
        "vectorise_below_us": 50,
        "others_busy_at": 0.25,
        "saturated_at": 0.90,
    }
    question = "Why is the GPU idle?"

    def check(self, facts: Facts, options: dict[str, Any]) -> list[Finding]:
        steps = facts.steps
        measured = steps_wait(steps) if steps is not None else None
        if steps is not None and measured is not None:
            if measured.fraction < options["medium_at"]:
                return []
            return [self._from_steps(facts, steps, measured, options)]
        if facts.tfdata is None:
            return []
        findings = []
        load = host_load(facts, options["others_busy_at"], options["saturated_at"])
        for pipeline in facts.tfdata.pipelines:
            wait = pipeline_wait(pipeline)
            if wait is not None and wait.fraction >= options["medium_at"]:
                findings.append(self._from_pipeline(pipeline, wait, options, load))
        return findings

    def _from_steps(
        self, facts: Facts, steps: StepFacts, wait: InputWait, options: dict[str, Any]
    ) -> Finding:
        share = wait.fraction
        pipeline = steps_pipeline(facts.tfdata, facts.steps)
        site = re.search(r" at (\S+:\d+)$", steps.marker)
        measured = steps.count - steps.warmup
        mean_step = steps.total_s / measured if measured > 0 and steps.total_s > 0 else None
        title = f"Steps wait for input {share:.0%} of the time"
        if mean_step is not None:
            # the share is of the total: the figures beside it are means, as it is
            title += f" (a mean {duration(share * mean_step)} of a {duration(mean_step)} step)"
        evidence: dict[str, Any] = {
            "input_wait_fraction": round(share, 3),
            "input_wait_mean_ms": _round_ms(share * mean_step if mean_step else None),
            "step_mean_ms": _round_ms(mean_step),
            "input_wait_median_ms": _round_ms(steps.input_wait_median_s),
            "step_median_ms": _round_ms(steps.median_s),
            "steps_measured": measured,
            "measured_at": steps.marker,
        }
        burst = bursts(steps)
        if burst is not None:
            title += f"; {burst.text}"
            evidence["wait_bursts"] = burst.text
        filling = cache_filling(steps, pipeline, options["medium_at"])
        if pipeline is not None and filling is not None:
            return self._cache_filling(title, share, pipeline, filling, evidence)
        overhead = fetch_overhead(pipeline, steps, share, mean_step)
        load = host_load(facts, options["others_busy_at"], options["saturated_at"])
        if pipeline is not None and overhead is not None and burst is None:
            fix = _fewer_calls(facts.eager)
            return self._fetch_overhead(title, share, pipeline, overhead, evidence, site, fix, load)
        if steps.input_wait_source:
            evidence["measured_by"] = steps.input_wait_source
        return self._finding(
            title,
            share,
            pipeline,
            evidence,
            site.group(1) if site else None,
            options,
            load,
        )

    def _cache_filling(
        self,
        title: str,
        share: float,
        pipeline: PipelineFacts,
        filling: CacheFilling,
        evidence: dict[str, Any],
    ) -> Finding:
        """The wait is the first pass filling the pipeline's cache: later passes read
        the cache and keep up, so the finding reports the one-off cost, low."""
        where = f" at {filling.cache_location}" if filling.cache_location else ""
        title = title.replace("Steps wait for input", "Steps waited for input", 1)
        title += f", in the first pass over the data, which fills its cache{where}: {filling.text}"
        evidence["pipeline"] = pipeline_name(pipeline)
        evidence.update(filling.evidence())
        return self.finding(
            title,
            severity="low",
            location=filling.cache_location or pipeline.location,
            evidence=evidence,
            fix=(
                f"# nothing to add: the cache{where} already serves every pass after the first;\n"
                "# the first pass's preprocessing is paid once per run (a longer run amortises it)"
            ),
            estimated_gain=(
                f"none after the first pass; the first pass's {duration(filling.first_s)} "
                "is paid once"
            ),
            gain_value=round(share * filling.later_steps / max(filling.steps, 1), 4),
        )

    def _fetch_overhead(
        self,
        title: str,
        share: float,
        pipeline: PipelineFacts,
        production_s: float,
        evidence: dict[str, Any],
        site: re.Match | None,
        fix: list[str],
        load: HostLoad | None = None,
    ) -> Finding:
        """The steps wait in next(), but the pipeline, buffered, makes a batch in a
        fraction of that: the time is the Python call per step, not tf.data's work
        (low where other processes held the host's cores: they slow that call too)."""
        title = title.replace("Steps wait for input", "Steps spend", 1).replace(
            " of the time", " of the time fetching their batch", 1
        )
        title += (
            f", though the pipeline makes a batch in {duration(production_s, microseconds=True)}"
            " (TF's stage "
            "timers) and keeps one ready: the cost is the Python call per step"
        )
        evidence["pipeline"] = pipeline_name(pipeline)
        evidence["production_ms_per_batch"] = _round_ms(production_s)
        evidence["why"] = (
            "a prefetch buffer holds the next batch and the pipeline makes one far faster "
            "than a step: what the loop waits for is next() itself (Python, once per step)"
        )
        if load is not None:
            evidence.update(load.evidence())
            title += f", while {load.text}"
            fix = [f"# {load.text}: run again with the host to itself first", *fix]
        return self.finding(
            title,
            severity="medium" if load is None else "low",
            location=site.group(1) if site else pipeline.location,
            evidence=evidence,
            fix="\n".join(fix),
            estimated_gain=f"estimate: up to {share:.0%} of step time, the Python per step",
            gain_value=round(share, 4),
        )

    def _from_pipeline(
        self,
        pipeline: PipelineFacts,
        wait: InputWait,
        options: dict[str, Any],
        load: HostLoad | None,
    ) -> Finding:
        who = CONSUMER_NAMES.get(pipeline.consumer, pipeline.consumer)
        title = (
            f"{who} waits for input {wait.fraction:.0%} of the time "
            f"({duration(wait.per_element_s)} per batch beside {duration(wait.consumer_s)} "
            "of work on it)"
        )
        evidence: dict[str, Any] = {
            "input_wait_fraction": round(wait.fraction, 3),
            "input_wait_ms_per_element": _round_ms(wait.per_element_s),
            "consumer_ms_per_element": _round_ms(wait.consumer_s),
            "elements_read": pipeline.elements,
            "measured_by": wait.measured_by,
        }
        return self._finding(
            title, wait.fraction, pipeline, evidence, pipeline.location, options, load
        )

    def _finding(
        self,
        title: str,
        share: float,
        pipeline: PipelineFacts | None,
        evidence: dict[str, Any],
        site: str | None,
        options: dict[str, Any],
        load: HostLoad | None = None,
    ) -> Finding:
        location, fix = site, snippets.generic()
        if load is not None and share >= options["high_at"]:
            load = dataclasses.replace(load, large_wait=True)
        # a small wait under others' load: the stage is not shown to be the cause
        slowest_in_title = load is None or load.large_wait
        stage = bottleneck(pipeline) if pipeline is not None else None
        if pipeline is not None:
            evidence["pipeline"] = pipeline_name(pipeline)
        # bottleneck() found a stage only where pipeline.bottleneck indexes one
        if pipeline is not None and pipeline.bottleneck is not None and stage is not None:
            label = stage_label(stage)
            if slowest_in_title:
                title += f"; the slowest stage is {label}"
            row = stage_row(pipeline, pipeline.bottleneck)
            evidence["bottleneck"] = f"stage {label}"
            evidence["bottleneck_ms_per_element"] = row["ms_per_element"]
            evidence["bottleneck_threads"] = row["threads"]
            evidence["bottleneck_share_of_pipeline_time"] = row["share_of_pipeline_time"]
            evidence["stages"] = stage_table(pipeline)
            location = culprit_location(stage) or site
            fix = snippets.for_stage(
                pipeline, pipeline.bottleneck, options["vectorise_below_us"] * 1e-6
            )
            if not ends_buffered(pipeline):
                fix = fix + snippets.prefetch_at_end(pipeline)
        if load is not None:
            return self._loaded_host(title, share, load, location, evidence, fix)
        speedup = 1 / (1 - share) if share < 0.99 else None
        return self.finding(
            title,
            severity="high" if share >= options["high_at"] else "medium",
            location=location,
            evidence=evidence,
            fix="\n".join(fix),
            estimated_gain=(
                f"estimate: up to {share:.0%} of step time, steps up to "
                f"{speedup:.1f}x faster once input keeps up with compute"
                if speedup
                else f"estimate: up to {share:.0%} of step time"
            ),
            gain_value=round(share, 4),
        )

    def _loaded_host(
        self,
        title: str,
        share: float,
        load: HostLoad,
        location: str | None,
        evidence: dict[str, Any],
        fix: list[str],
    ) -> Finding:
        """The steps waited while other processes held much of the host's CPU: the
        pipeline shared the cores with them, so the wait is not (only) its own."""
        evidence.update(load.evidence())
        lead = [
            f"# {load.text}:",
            "# run again with the host to itself (stop the other jobs, or a machine of its",
            "# own) to see the pipeline's own wait; if it stays, then:",
        ]
        if load.large_wait:
            title += f", while {load.text}: part of the wait may be the load's"
        else:
            title += f", while {load.text}: the wait may be the load's, not the pipeline's"
        return self.finding(
            title,
            severity="high" if load.large_wait else "low",
            location=location,
            evidence=evidence,
            fix="\n".join(lead + fix),
            estimated_gain=(
                f"unknown: up to {share:.0%} of step time, of which other processes' load "
                "may be much"
            ),
            gain_value=round(share, 4),
        )


# Eager ops per step from which the step itself runs eagerly (a traced step issues
# none; a few metric updates around it stay below this).
EAGER_STEP_OPS = 20


def _fewer_calls(eager: EagerFacts | None) -> list[str]:
    """The fix for a loop whose Python call per step costs more than its batch: the step
    as one graph where it runs eagerly, fewer steps otherwise. Not the loop over the
    dataset in a tf.function: on TF's custom-training walkthrough (an eager step, Python
    metrics) that ran 3x to 14x slower than a tf.function around the step alone, in
    six paired runs on a loaded 2-core machine (benchmarks/bench_epoch_function.py)."""
    code = eager.step_code if eager is not None else None
    per_step = eager.per_step if eager is not None else None
    fix = []
    if code is not None and code.signature is not None and (per_step or 0) >= EAGER_STEP_OPS:
        fix += [
            "# the step runs eagerly: trace the step (not the loop over the dataset)",
            *wrap(code, Facts(), ["@tf.function"]),
            *rebound(code),  # objects the loop re-creates: made once, or the graph keeps the first
        ]
    return fix + [
        "# fewer Python calls per example: a larger batch (each call then fetches more);",
        "# keep the loop over the dataset in Python: a tf.function around the whole loop",
        "# ran 3x-14x slower than one around the step on TF's custom-training walkthrough",
    ]


def _round_ms(seconds):
    return None if seconds is None else round(seconds * 1000, 2)
