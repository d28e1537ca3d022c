"""input.bound: the training step waits for the input pipeline."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable
from typing import Any

from gpuwhy.derived import capture as capture_facts
from gpuwhy.derived.cache_filling import CacheFilling
from gpuwhy.derived.epoch_starts import EpochStarts, shuffle_refill
from gpuwhy.derived.host_load import HostLoad, judged_for_input
from gpuwhy.derived.input_wait import InputWait, StepsWait, pipeline_wait
from gpuwhy.derived.op_classes import KERAS_TRAIN_FUNCTIONS
from gpuwhy.derived.pipeline import bottleneck, culprit_location
from gpuwhy.derived.pipeline_stages import ends_buffered
from gpuwhy.derived.stage import derived
from gpuwhy.derived.steps_input import side_loop_share, steps_wait_at
from gpuwhy.facts import CaptureFacts, EagerFacts, Facts, PipelineFacts, PythonFrame, StepFacts
from gpuwhy.finding import Finding
from gpuwhy.fixes import pipeline_code
from gpuwhy.fixes.epoch_start_code import epoch_start_fix, refilled_shuffle
from gpuwhy.fixes.pipeline_evidence import pipeline_name, stage_row, stage_table
from gpuwhy.fixes.traced_step import rebound, wrap
from gpuwhy.formatting import consumer_words, duration, milliseconds, stage_label
from gpuwhy.rules.base import Rule


class InputBound(Rule):
    """The step waits for its next batch: the GPU idles while tf.data prepares input.

    ## What it detects
    The fraction of each training step spent waiting for the next batch is at least
    `medium_at` (medium) or `high_at` (high). It is measured, not estimated: where the
    loop fetches batches from Python (`for x, y in dataset:`) the time inside `next()`
    is the wait; for Keras `fit`, which reads each batch inside its compiled step, the
    step minus tf.data's own consumer timer (the gap between two `GetNext` calls) is.
    Where the steps carry no measured wait, a pipeline's own timers decide (its wait per
    element against its consumer's time per element), one finding per pipeline. A loop
    beside the steps (a pipeline they do not read: a few images plotted, an evaluation
    loop after fit, a test set gathered once into a list) counts only where its waits
    add up to `medium_at` of the run's time (the program's, at least the steps'), and
    that share is its severity and its gain: its own share is of its own short loop
    (a one-pass gather "waits for input 67% of the time" over 62 ms of a 4.4 s run).
    A preprocessing layer's `adapt` pass
    (one read to learn a vocabulary or a mean, nothing beside it) is never the steps'
    wait. Where the loop reads a `tf.distribute` dataset, whose pipeline TF runs in a
    MultiDeviceIterator and times no stage of, the finding names that dataset's batch
    line and how to time its stages on their own.

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

    From a profiler capture (`gpuwhy report CAPTURE`, `gpuwhy run --capture N`) without
    the watched steps, the wait is the share of the captured steps' time the GPU idled
    (the whole step where the capture has no GPU) while the host waited for its next
    batch: tf.data's consumer (`IteratorGetNext`) or Python's `next()` of a generator,
    each moment counted once, input first. tf.data's producer threads explain the wait
    (the evidence names their busiest stages) but never make one: they run ahead of the
    step. The program's own Python function under the wait (the profiler's Python
    tracer) is the location, never a library's: a frame is a library's where a file
    of its name in site-packages or Python's own library defines it (the tracer gives
    no folder). Where Keras' fit on in-memory arrays slices each batch out of them
    (its array adapter's frames under the wait, `slice_and_convert_to_jax`), the
    finding says so, at the program's function that calls fit, and the fix takes the
    slicing off the training thread (the arrays on the device, a tf.data pipeline)
    rather than making batches in worker processes.

    Keras fit's wait is the mean step less tf.data's mean gap, two means that one
    outlying step or gap moves (an epoch's new iterator, a thread that waited for a
    core): where the share is not above its uncertainty (three standard errors of that
    difference, from the steps' and the gaps' spread), it is not resolved from no wait,
    and nothing is found; the report gives it with its uncertainty.

    Where the first step of each epoch of a fit holds at least half of its wait (each
    one's time over its own epoch's median step), the wait is each epoch's new iterator
    starting: the finding says so, is low below `high_at` (paid once an epoch, nothing
    to parallelise), points at the pipeline's shuffle where one refills its buffer at
    every epoch (no repeat before it), and its fix, in comments, is one iterator for
    the run (a repeated dataset with `steps_per_epoch`) or the shuffle after a repeat,
    filled once (its reads then run beside every step: slower where the steps use every
    core). A custom loop that makes an iterator each epoch (`for x, y in ds:` inside the
    epochs' loop), its reads timed one by one, is read the same way where the longest
    reads, one per iterator, hold half its wait: the finding points at the loop, and its
    fix makes one repeated iterator for the run and rewrites the loop's `for` line to take
    each epoch's batches from it (`itertools.islice`). Where a shuffle the repeat comes
    after still refills at every pass, its refill stays in that wait: estimated as its
    buffer at the rate of the slowest stage under it (TF's timers), it is taken out of
    the gain and said to stay until a `.repeat()` goes before the shuffle.

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
    - `keeps_up_below`: the slowest stage's time per element, as a share of a step,
      under which the pipeline keeps up by its own work, so a wait is the host's
      scheduling, not the pipeline's speed (0.25).
    - `others_busy_keeping_up_at`: other processes' share of the host's cores that
      makes the finding about the load where the pipeline keeps up, whatever the
      host's busy share (0.10: a process that takes a core for a moment makes a fast
      pipeline's threads wait, and a run's average hides the moment).
    """

    id = "input.bound"
    measured_thresholds = {"medium_at": "floor", "high_at": "floor"}
    severity = "high"
    status = "stable"
    # steps (a watched run; tfdata, when present, names the slowest stage), or a
    # profiler capture (gpuwhy report CAPTURE: the host's events while the GPU idled)
    needs_any = ("steps", "capture")
    options = {
        "medium_at": 0.05,
        "high_at": 0.20,
        "vectorise_below_us": 50,
        "others_busy_at": 0.25,
        "saturated_at": 0.90,
        "keeps_up_below": 0.25,
        "others_busy_keeping_up_at": 0.10,
    }
    question = "Why is the GPU idle?"

    def check(self, facts: Facts, options: dict[str, Any]) -> list[Finding]:
        if facts.steps is None:
            return self._from_capture(facts.capture, options) if facts.capture else []
        reading = steps_wait_at(facts, options["medium_at"])
        if facts.steps is not None and reading is not None:
            if reading.wait.fraction < options["medium_at"]:
                return []
            return [self._from_steps(facts, facts.steps, reading, options)]
        if facts.tfdata is None:
            return []
        # a fit's steps whose wait was measured, but not resolved from none: its
        # pipelines' own clocks (their iterators' windows) are no better a judge
        steps = facts.steps
        unresolved = (
            steps is not None
            and steps.input_wait_fraction is not None
            and not steps.input_wait_resolved
        )
        findings = []
        feeding = derived(facts).steps_pipeline
        for pipeline in facts.tfdata.pipelines:
            if unresolved and pipeline.consumer == "keras-fit":
                continue
            wait = pipeline_wait(pipeline)
            if wait is None or wait.fraction < options["medium_at"]:
                continue
            if pipeline is not feeding and _read_once_by_a_library_call(pipeline):
                continue
            # a loop beside the steps counts by what it cost the run, not its own share
            side = side_loop_share(facts, pipeline, wait)
            if side is not None and side < options["medium_at"]:
                continue
            step = (wait.per_element_s or 0.0) + (wait.consumer_s or 0.0)
            load = _host_load(facts, options, pipeline, step)
            findings.append(self._from_pipeline(pipeline, wait, options, load, side))
        return findings

    def _from_capture(self, capture: CaptureFacts, options: dict[str, Any]) -> list[Finding]:
        """A profiler capture's steps: the share of their time the GPU idled while the
        host waited for input (the consumer's GetNext, Python's ``next()``)."""
        share = capture_facts.activity_share(capture, "input")
        if not capture_facts.decides(capture) or share < options["medium_at"]:
            return []
        slicing = capture_facts.keras_array_slicing_s(capture)
        if slicing is not None:
            return [self._array_slicing(capture, share, slicing, options)]
        step = capture.median_step_s
        waited = capture_facts.activity(capture, "input")
        frame = capture_facts.own_frame(capture)
        where = f"{frame.file}:{frame.line}" if frame and frame.line else None
        gpu = "the GPU idled while " if capture.devices else ""
        title = (
            f"Steps wait for input {share:.0%} of the time: {gpu}the host waited "
            f"for the next batch (measured in {len(capture.steps)} captured steps of "
            f"{duration(step)})"
        )
        if frame is not None:
            title += (
                f"; the wait is at {where}, in the script's top level"
                if frame.function == "<module>"
                else f"; the wait is inside {frame.function}() at {where}"
            )
        evidence: dict[str, Any] = {
            "input_wait_fraction": round(share, 3),
            "step_median_ms": milliseconds(step, 2),
            "steps_measured": len(capture.steps),
            "measured_at": f"profiler capture {capture.path}",
        }
        if capture.busy_share is not None:
            evidence["gpu_busy_fraction"] = round(capture.busy_share, 3)
        if waited is not None and waited.top:
            evidence["host_events_in_the_wait"] = ", ".join(map(_host_event, waited.top))
        if capture.input_stages:
            evidence["tf_data_stages_in_the_wait"] = ", ".join(capture.input_stages)
        if frame is not None:
            evidence["python_frame"] = f"{frame.function} at {where}"
        return [
            self.finding(
                title,
                severity="high" if share >= options["high_at"] else "medium",
                location=where,
                evidence=evidence,
                fix=_capture_fix(capture, frame),
                estimated_gain=f"up to {share:.0%} of step time, if input keeps up",
                gain_value=round(share, 4),
            )
        ]

    def _array_slicing(
        self, capture: CaptureFacts, share: float, slicing_s: float, options: dict[str, Any]
    ) -> Finding:
        """Keras' fit on in-memory arrays: the wait is fit's own slicing of each batch out
        of the arrays and its conversion to a device array, on the training thread
        between steps (its array adapter's frames under the wait). Named as that, at the
        program's own frame that calls fit (a Keras frame is no line to change), with
        the fixes for arrays: no generator of the user's to parallelise, and a PyDataset
        in worker processes would pickle every batch across."""
        steps = len(capture.steps)
        frame = capture_facts.own_frame(capture)
        where = f"{frame.file}:{frame.line}" if frame is not None and frame.line else None
        meanwhile = ", the GPU idle meanwhile" if capture.devices else ""
        title = (
            f"The training thread slices and converts each NumPy batch, {share:.0%} of the "
            f"step: Keras' fit on in-memory arrays{meanwhile} (measured in {steps} captured "
            f"steps of {duration(capture.median_step_s)})"
        )
        if frame is not None:
            title += f"; fit is called in {frame.function} ({where})"
        keras_frames = [f"{f.function} ({f.file}:{f.line})" for f in capture.input_frames[:3]]
        evidence: dict[str, Any] = {
            "input_wait_fraction": round(share, 3),
            "array_slicing_ms_per_step": milliseconds(slicing_s / steps, 3),
            "step_median_ms": milliseconds(capture.median_step_s, 2),
            "steps_measured": steps,
            "measured_at": f"profiler capture {capture.path}",
            "keras_frames_in_the_wait": ", ".join(keras_frames),
        }
        if capture.busy_share is not None:
            evidence["gpu_busy_fraction"] = round(capture.busy_share, 3)
        if frame is not None:
            evidence["python_frame"] = f"{frame.function} at {where}"
        return self.finding(
            title,
            severity="high" if share >= options["high_at"] else "medium",
            location=where,
            evidence=evidence,
            fix="\n".join(_array_fix(capture.producer == "jax")),
            estimated_gain=f"up to {share:.0%} of step time, once no batch is sliced between steps",
            gain_value=round(share, 4),
        )

    def _from_steps(
        self, facts: Facts, steps: StepFacts, reading: StepsWait, options: dict[str, Any]
    ) -> Finding:
        share = reading.wait.fraction
        pipeline = reading.pipeline
        site = re.search(r" at (\S+:\d+)$", steps.marker)
        measured = steps.count - steps.warmup
        mean_step = reading.mean_step_s
        title = f"Steps wait for input {share:.0%} of the time"
        if mean_step is not None:
            # the share is of the total: the figures beside it are means, as it is
            title += f" (a mean {duration(share * mean_step)} of a {duration(mean_step)} step)"
        evidence: dict[str, Any] = {
            "input_wait_fraction": round(share, 3),
            "input_wait_mean_ms": milliseconds(share * mean_step if mean_step else None, 2),
            "step_mean_ms": milliseconds(mean_step, 2),
            "input_wait_median_ms": milliseconds(steps.input_wait_median_s, 2),
            "step_median_ms": milliseconds(steps.median_s, 2),
            "steps_measured": measured,
            "measured_at": steps.marker,
        }
        burst = reading.bursts
        if burst is not None:
            title += f"; {burst.text}"
            evidence["wait_bursts"] = burst.text
        filling = reading.cache_filling
        if pipeline is not None and filling is not None:
            return self._cache_filling(title, share, pipeline, filling, evidence)
        starts = reading.epoch_starts
        if starts is not None:
            title += f", {starts.text}"
            evidence.update(starts.evidence())
            high = share >= options["high_at"]
            return self._epoch_starts(title, share, starts, evidence, site, pipeline, high)
        overhead = reading.fetch_overhead_s
        load = _host_load(facts, options, pipeline, mean_step)
        if pipeline is not None and overhead is not None:
            fix = _fewer_calls(facts.eager)
            return self._fetch_overhead(title, share, pipeline, overhead, evidence, site, fix, load)
        if steps.input_wait_source:
            evidence["measured_by"] = steps.input_wait_source
        finding = self._finding(
            title,
            share,
            pipeline,
            evidence,
            site.group(1) if site else None,
            options,
            load,
        )
        distributed = _distributed_read(facts, site.group(1) if site else None)
        return finding if pipeline is not None or distributed is None else distributed(finding)

    def _epoch_starts(
        self,
        title: str,
        share: float,
        starts: EpochStarts,
        evidence: dict[str, Any],
        site: re.Match | None,
        pipeline: PipelineFacts | None,
        high: bool,
    ) -> Finding:
        """The wait is each epoch's new iterator starting (a shuffle buffer filling
        above all), the typical step finding its batch ready: a cost paid once an
        epoch, low below ``high_at``, with no stage to parallelise: the fix is fewer
        iterators and no refill, at the shuffle where the pipeline has one."""
        shuffle = refilled_shuffle(pipeline)
        loop = site.group(1) if site else None
        refill = None
        if pipeline is not None and pipeline.consumer == "python-loop":
            # the fix is the loop's: one iterator for its epochs. A shuffle the repeat
            # comes after still refills at every pass: that part of the wait stays
            if shuffle is not None and not shuffle.by_library:
                refill = shuffle_refill(pipeline, shuffle)
            shuffle = None
        excess = starts.excess_s
        estimated_gain = (
            f"up to {share:.0%} of step time, paid once an epoch: {duration(excess)} each"
        )
        saved = 1.0
        if refill is not None:
            kept = min(refill.seconds, excess)
            saved = 1 - kept / excess
            estimated_gain = (
                f"up to {share * saved:.0%} of step time with the code below, paid once an "
                f"epoch: {duration(excess - kept)} of its {duration(excess)}; about "
                f"{duration(kept)} of it is the shuffle's refill ({refill.buffer:,} elements "
                f"at the rate of {stage_label(refill.slowest)}), which stays until a "
                ".repeat() goes before the shuffle"
            )
        return self.finding(
            title,
            severity="high" if high else "low",
            location=(shuffle.location if shuffle else None) or loop,
            evidence=evidence,
            fix="\n".join(epoch_start_fix(starts, pipeline, loop)),
            estimated_gain=estimated_gain,
            gain_value=round(share * starts.share * saved, 4),
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
        evidence["production_ms_per_batch"] = milliseconds(production_s, 2)
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
        side: float | None = None,
    ) -> Finding:
        """``side``: the share of the run a loop beside the steps waited (None: the
        steps' own pipeline, or no steps)."""
        who = consumer_words(pipeline.consumer, True, pipeline.read_at, pipeline.read_via)
        title = (
            f"{who} waits for input {wait.fraction:.0%} of the time "
            f"({duration(wait.per_element_s)} per batch beside {duration(wait.consumer_s)} "
            "of work on it)"
        )
        evidence: dict[str, Any] = {
            "input_wait_fraction": round(wait.fraction, 3),
            "input_wait_ms_per_element": milliseconds(wait.per_element_s, 2),
            "consumer_ms_per_element": milliseconds(wait.consumer_s, 2),
            "elements_read": pipeline.elements,
            "measured_by": wait.measured_by,
        }
        if side is not None:
            waited = (wait.per_element_s or 0.0) * pipeline.elements
            title += f", beside the training steps: {duration(waited)}, {side:.0%} of the run"
            evidence["waited_s"] = round(waited, 3)
            evidence["share_of_run"] = round(side, 3)
        return self._finding(
            title, wait.fraction, pipeline, evidence, pipeline.location, options, load, side
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
        side: float | None = None,
    ) -> Finding:
        location, fix = site, pipeline_code.generic()
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
            fix = pipeline_code.for_stage(
                pipeline, pipeline.bottleneck, options["vectorise_below_us"] * 1e-6
            )
            if not ends_buffered(pipeline):
                fix = fix + pipeline_code.prefetch_at_end(pipeline)
        if load is not None:
            return self._loaded_host(title, share, load, location, evidence, fix)
        judged, speedup = share, (1 / (1 - share) if share < 0.99 else None)
        gain = (
            f"estimate: up to {share:.0%} of step time, steps up to "
            f"{speedup:.1f}x faster once input keeps up with compute"
            if speedup
            else f"estimate: up to {share:.0%} of step time"
        )
        if side is not None:  # no steps of its own: what it cost the run
            judged = side
            gain = (
                f"estimate: up to {side:.0%} of the run, the time this loop waited for its "
                "input (not the training steps': they read another pipeline)"
            )
        return self.finding(
            title,
            severity="high" if judged >= options["high_at"] else "medium",
            location=location,
            evidence=evidence,
            fix="\n".join(fix),
            estimated_gain=gain,
            gain_value=round(judged, 4),
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


def _capture_fix(capture: CaptureFacts, frame: PythonFrame | None) -> str:
    """The fix for an input wait seen in a capture, by the tf.data stages busiest in the
    wait (a generator, a py_function, a sequential map, no prefetch) or, for JAX and
    Keras generators, the function that makes the batches. The capture names stages and
    functions, not the dataset's variable: ``ds`` stands for it."""
    name = frame.function if frame is not None and frame.function.isidentifier() else None
    if capture.producer == "tensorflow" or capture.input_stages:
        keras = capture.step_name in KERAS_TRAIN_FUNCTIONS  # the steps are a fit's
        return "\n".join(_tf_data_fix(capture.input_stages, name, keras))
    made = (
        f"the batches `{name}` ({frame.file}:{frame.line}) makes"
        if name and frame
        else "the batches"
    )
    return "\n".join(
        [
            f"# {made} are made one at a time on the training thread's critical path:",
            "# make them in parallel, ahead of the step, e.g. with Keras' PyDataset:",
            "class Batches(keras.utils.PyDataset):",
            "    def __init__(self, **kwargs):",
            "        super().__init__(workers=8, use_multiprocessing=True, **kwargs)",
            "    def __len__(self):",
            "        return steps_per_epoch",
            "    def __getitem__(self, index):",
            f"        ...  # one batch, as {name or 'the generator'} makes it",
            "# or a tf.data / grain pipeline with parallel maps and prefetch",
        ]
    )


def _array_fix(jax: bool) -> list[str]:
    """The fix for fit on in-memory arrays whose per-batch slicing the steps wait for:
    on JAX, the arrays on the device and each batch gathered there, from a generator
    (Keras 3 copies device arrays given to fit back to NumPy to slice them); a tf.data
    pipeline that slices ahead on its own threads (each batch's conversion stays on
    the training thread); a larger batch and steps_per_execution for fit's own cost per
    step. steps_per_execution alone is no fix on JAX: its fit still takes each batch
    from the array adapter in Python, one at a time."""
    lines = [
        "# fit(x, y) on NumPy arrays: Keras slices each batch out of them and converts it",
        "# on the training thread, between steps, so the steps wait for it every time.",
    ]
    if jax:
        lines += [
            "# Keep the arrays on the device and gather each batch there (where they fit in",
            "# its memory; fit on device arrays would copy them back to NumPy to slice them):",
            "batch_size = 64  # fit's batch_size",
            "xd, yd = jax.device_put(x), jax.device_put(y)",
            "take = jax.jit(lambda xd, yd, index: (xd[index], yd[index]))",
            "def batches(seed=0):",
            "    key = jax.random.key(seed)",
            "    while True:",
            "        key, shuffle = jax.random.split(key)",
            "        order = jax.random.permutation(shuffle, len(xd))",
            "        for start in range(0, len(xd) - batch_size + 1, batch_size):",
            "            yield take(xd, yd, order[start:start + batch_size])",
            "model.fit(batches(), steps_per_epoch=len(x) // batch_size, epochs=epochs)",
            "# or a pipeline that slices ahead on its own threads (the conversion stays):",
        ]
    else:
        lines += ["# A pipeline that slices ahead on its own threads:", "batch_size = 64"]
    return lines + [
        "ds = tf.data.Dataset.from_tensor_slices((x, y)).shuffle(len(x)).batch(batch_size)",
        "model.fit(ds.prefetch(tf.data.AUTOTUNE), epochs=epochs)",
        "# a larger batch_size, and compile(..., steps_per_execution=8) (the callbacks once",
        "# per 8 batches), spread fit's own cost per step; each batch is still sliced",
    ]


def _tf_data_fix(stages: tuple[str, ...], generator: str | None, keras: bool) -> list[str]:
    """What to change in the tf.data pipeline whose stages the capture names."""
    path = " ".join(stages)
    segments = {part.split("[")[0] for stage in stages for part in stage.split("::")}
    lines = [f"# busiest in the wait: {', '.join(stages[:3])}" if stages else "# the pipeline:"]
    if "Generator" in segments or "PyFunc:PyFunc" in path:
        source = generator or "gen"
        lines += [
            "# a Python generator yields one element at a time under the GIL: slice arrays",
            "# that fit in memory (tf.data.Dataset.from_tensor_slices), read TFRecord shards,",
            "# or run one generator per shard on several threads:",
            "ds = tf.data.Dataset.from_tensor_slices(shards).interleave(",
            f"    lambda shard: tf.data.Dataset.from_generator({source}, args=(shard,),"
            " output_signature=signature),",
            "    num_parallel_calls=tf.data.AUTOTUNE)",
        ]
    if "EagerPyFunc" in path:
        lines += [
            "# a tf.py_function in a map runs Python per element: write it with TF ops",
            "# (tf.image, tf.strings, tf.io), or at least run it on several threads:",
            "ds = ds.map(fn, num_parallel_calls=tf.data.AUTOTUNE)",
        ]
    elif "Map" in segments:
        lines += [
            "# a map runs one element at a time: run it on several threads",
            "ds = ds.map(fn, num_parallel_calls=tf.data.AUTOTUNE)",
        ]
    if "Prefetch" not in segments:
        lines += [
            "# nothing prepares the next batch while the step runs: prefetch",
            "ds = ds.prefetch(tf.data.AUTOTUNE)",
        ]
    if len(lines) == 1:
        lines += [
            "# the stages already run in parallel and ahead of the step: each batch costs",
            "# its fixed overhead; a larger batch, or several steps per call, spread it:",
            "model.compile(..., steps_per_execution=32)"
            if keras
            else "ds = ds.rebatch(4 * batch_size)  # or .batch(...) with a larger size",
        ]
    lines.append(
        "# `gpuwhy run train.py` names the stage's file:line; `gpuwhy fix --input` measures it"
    )
    return lines


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


def _host_event(name: str) -> str:
    """A host event of the capture as a reader knows it: TF's Python tracer writes a
    call as ``$module function`` (``$builtins next``, ``$data_adapter_utils.py:246
    get_jax_iterator``), said as ``next (builtins)``; TF's own events as they are."""
    if not name.startswith("$"):
        return name
    where, _, function = name[1:].partition(" ")
    return f"{function} ({where})" if function else where


def _host_load(
    facts: Facts, options: dict[str, Any], pipeline: PipelineFacts | None, step_s: float | None
) -> HostLoad | None:
    """Other processes' load on the host (the derivation stage's), where this rule's
    options say it counts for steps of ``step_s`` reading ``pipeline``."""
    return judged_for_input(derived(facts).host_load, options, pipeline, step_s)


def _read_once_by_a_library_call(pipeline: PipelineFacts) -> bool:
    """A pipeline a preprocessing layer's ``adapt`` read (one pass to learn a vocabulary
    or a mean): its wait is that call's, a setup pass with nothing beside it to wait,
    never the steps'. The structured-data tutorial's 13 ``adapt`` calls read as two
    HIGH findings, "StringLookup.adapt ... waits for input 84% of the time", with a
    parallel batch as the fix (which gained nothing: the shuffle's refill was the time).
    Only ``adapt``: a loop of the program's that reads through a library's generator
    (``tfds.as_numpy``) is read "via" it too, and may be what the steps wait for."""
    via = pipeline.read_via or ""
    return pipeline.consumer == "python-loop" and (via == "adapt" or via.endswith(".adapt"))


def _distributed_read(facts: Facts, loop: str | None) -> Callable[[Finding], Finding] | None:
    """Where the steps' loop reads a tf.distribute dataset: what a finding with no
    pipeline says of it. TF runs such a pipeline inside a MultiDeviceIterator and keeps
    no model of it, so no stage is timed: the finding names the dataset the strategy
    distributes, where it is built, and how to time its stages, in place of a template
    about a pipeline it does not know (a MirroredStrategy loop over a map of
    ``tf.py_function``: "<dataset>.map(<your function>, ...)")."""
    if facts.tfdata is None or loop is None or loop not in facts.tfdata.distributed_reads:
        return None
    inputs = facts.distribute.inputs if facts.distribute is not None else ()
    built = next((i for i in inputs if i.location), None)
    where = f" (its batch at {built.location}: {built.written})" if built and built.written else ""
    if built is not None and not where:
        where = f" (its batch at {built.location})"
    # the dataset's own name where its batch call says it ("ds.batch(64)"), else the
    # placeholder: a chain written in one expression names none
    name = pipeline_code.DATASET
    if built is not None and built.written and "." in built.written:
        name = built.written.split(".", 1)[0] or name

    def said(finding: Finding) -> Finding:
        note = (
            f"the loop reads a tf.distribute dataset{where}: TF runs its pipeline inside a "
            "MultiDeviceIterator and times none of its stages, so the slowest is not named"
        )
        fix = [
            f"# {note}.",
            f"# Time {name} on its own, undistributed, to find its slowest stage:",
            "import time",
            "start = time.perf_counter()",
            f"for _ in {name}.take(200):",
            "    pass",
            'print(f"{200 / (time.perf_counter() - start):.1f} batches/s")',
            "# then, in it: num_parallel_calls=tf.data.AUTOTUNE on each map, TF ops in",
            "# place of Python, a .cache() where the data fits, .prefetch(tf.data.AUTOTUNE)",
            "# last (`gpuwhy run` on a copy that loops over it undistributed names the stage)",
        ]
        evidence = {**finding.evidence, "distributed_input": note}
        if built is not None and built.location:
            evidence["distributed_dataset_at"] = built.location
        return dataclasses.replace(
            finding,
            evidence=evidence,
            fix="\n".join(fix),
            title=f"{finding.title}; {note}",
            location=(built.location if built is not None else None) or finding.location,
        )

    return said
