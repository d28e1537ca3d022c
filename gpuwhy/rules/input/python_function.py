"""input.python-function: the input pipeline calls back into Python."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from gpuwhy.derived.cache_filling import CacheFilling
from gpuwhy.derived.input_wait import InputWait
from gpuwhy.derived.pipeline import culprit_location
from gpuwhy.derived.pipeline_stages import is_bottleneck, stage_share
from gpuwhy.derived.steps_input import beside_steps, input_wait, steps_wait_at
from gpuwhy.facts import Facts, PipelineFacts, PipelineStage
from gpuwhy.finding import SEVERITY_RANK, Finding
from gpuwhy.fixes import pipeline_code
from gpuwhy.fixes.pipeline_evidence import (
    gain_text,
    pipeline_name,
    stage_gain_text,
    stage_row,
    wait_evidence,
    waits_for_input,
)
from gpuwhy.formatting import stage_label
from gpuwhy.rules.base import Rule

# Said of a Python stage: what holds is known, what parallel calls gain is not measured.
_WHY_SEQUENTIAL = (
    "TF runs Python one element at a time (the stage is stateful); parallel calls may "
    "overlap where the Python releases the GIL (sleeps, I/O, NumPy on large arrays) and "
    "take turns where it is pure Python"
)
_WHY_PARALLEL = (
    "parallel calls of Python may take turns on one core where the Python holds the GIL "
    "(pure-Python code), and overlap only where it releases it (sleeps, I/O, NumPy)"
)
# a generator Keras made from what fit was given (a PyDataset, a generator): TF reads
# it one batch at a time; a PyDataset's own workers, where it has them, make the batches
_WHY_KERAS = (
    "Keras reads the data source one batch at a time through a Python generator; a "
    "PyDataset's worker threads make batches ahead of it but take turns where "
    "__getitem__ is pure Python (worker processes, use_multiprocessing=True, do not)"
)


class PythonFunction(Rule):
    """The input pipeline runs Python code (py_function, numpy_function, from_generator).

    ## What it detects
    A stage of the tf.data pipeline, as TF ran it, that calls back into the Python
    interpreter: `tf.py_function` or `tf.numpy_function` inside a `map`/`filter`/
    `interleave` function, or a `tf.data.Dataset.from_generator` source. The finding
    names the stage and the file:line of its function, with its time per element, its
    threads and its share of the pipeline's time (TF's own per-stage timers).
    One finding per pipeline: where several of its stages call Python (a
    `from_generator` source and a `py_function` map), the most severe leads the
    finding, the others are named in its title and listed in `python_stages`, and the
    fix covers each of them.

    Severity follows what the stage costs the GPU: high when it is the pipeline's
    slowest stage and the consumer waits for input at least `min_input_wait` of its
    time, medium when it is the slowest stage of a pipeline the GPU does not wait for
    (or whose wait was not measured), low when it takes at least `min_share` of the
    pipeline's time without being the slowest; the finding takes its lead stage's. A
    cheaper Python stage is not reported.
    Where TF's per-stage timers could not be read, its cost is unknown and it is
    reported as low (high where it is the pipeline's only stage and the steps wait
    `high_input_wait` of their time, measured around its calls: a Keras `PyDataset`
    with `workers`), as is a stage of a pipeline read beside the training steps
    (Keras fit's `validation_data`): its wait is not the steps'.

    ## Why is this slow?
    Python bytecode runs under the GIL: `num_parallel_calls` threads running pure-Python
    code take turns on one core instead of using all of them, and compete with the
    training loop's own Python thread. Python that sleeps, waits on files or the
    network, or hands large arrays to NumPy, OpenCV or PIL releases the GIL while it
    does, and parallel calls of it may overlap: the finding says "may", since how much
    of a function holds the GIL is not measured here; `gpuwhy fix --input --assume-pure`
    times the map with and without parallel calls and keeps them only where they gain.
    The fix therefore leads with the rewrite in TF ops. The stage is stateful, so TF's
    map_parallelization leaves it sequential;
    tensors are converted to NumPy and back on every call; and the pipeline cannot run
    on tf.data service workers, since the Python function exists only in this process.
    When it is the slowest stage, the GPU idles until Python has produced the batch.

    ## Example
    ```python
    def load(path):
        img = PIL.Image.open(path.numpy().decode()).convert("RGB").resize((224, 224))
        return np.asarray(img, np.float32) / 255.0

    ds = paths.map(lambda p: tf.py_function(load, [p], tf.float32),
                   num_parallel_calls=tf.data.AUTOTUNE)      # PIL's Python parts: the GIL
    ```

    Use instead:
    ```python
    def load(path):
        img = tf.io.decode_jpeg(tf.io.read_file(path), channels=3)
        return tf.image.resize(img, (224, 224)) / 255.0   # TF ops: no GIL, all cores

    ds = paths.map(load, num_parallel_calls=tf.data.AUTOTUNE).prefetch(tf.data.AUTOTUNE)
    ```

    A `from_generator` source becomes `from_tensor_slices` over arrays that fit in
    memory, TFRecord shards read with `num_parallel_reads`, or, where the generator must
    stay, one generator per shard under `interleave(..., num_parallel_calls=AUTOTUNE)`.

    ## Options
    - `min_share`: share of the pipeline's time (TF's self time of each stage) a Python
      stage that is not the slowest needs to be reported (0.10).
    - `min_input_wait`: input-wait fraction of the consumer's time from which the steps
      wait for the pipeline (0.05, XProf's input-bound threshold): its slowest Python
      stage is then medium at least.
    - `high_input_wait`: input-wait fraction from which that stage is high (0.20, as
      input.bound's high): a wait of a tenth of the step is not the run's worst problem.
    """

    id = "input.python-function"
    measured_thresholds = {
        "min_share": "floor",
        "min_input_wait": "floor",
        "high_input_wait": "floor",
    }
    severity = "medium"
    status = "stable"
    needs = ("tfdata",)  # steps, when present, give the measured input wait
    options = {"min_share": 0.10, "min_input_wait": 0.05, "high_input_wait": 0.20}
    question = "Why is the pipeline slow?"

    def check(self, facts: Facts, options: dict[str, Any]) -> list[Finding]:
        assert facts.tfdata is not None  # in `needs`: never run without it
        findings = []
        for pipeline in facts.tfdata.pipelines:
            finding = self._pipeline_finding(facts, pipeline, options)
            if finding is not None:
                findings.append(finding)
        return findings

    def _pipeline_finding(
        self, facts: Facts, pipeline: PipelineFacts, options: dict[str, Any]
    ) -> Finding | None:
        """One finding per pipeline, led by its costliest Python stage: a pipeline with a
        generator source and a py_function map is one problem (the pipeline runs Python
        under the GIL), with one fix per stage listed in it, not one finding each."""
        wait = input_wait(facts, pipeline)
        bound = wait is not None and wait.fraction >= options["min_input_wait"]
        high = wait is not None and wait.fraction >= options["high_input_wait"]
        beside = beside_steps(facts, pipeline)  # fit's validation_data: its own wait
        filling = _cache_filling(facts, pipeline, options)
        cache_at = next((i for i, s in enumerate(pipeline.stages) if s.kind == "cache"), -1)
        judged = [
            _judge(
                pipeline,
                index,
                "high" if high else "medium",
                beside,
                options,
                filling is not None and index < cache_at,
            )
            for index, stage in enumerate(pipeline.stages)
            if stage.python
        ]
        reported = sorted((j for j in judged if j is not None), key=_PythonStage.rank)
        if not reported:
            return None
        lead, others = reported[0], reported[1:]
        shares = [r.share for r in reported if r.share is not None]
        gain = (
            wait.fraction * sum(shares)
            if wait is not None and len(shares) == len(reported) and not beside
            else None
        )
        first_pass_only = filling is not None and lead.index < cache_at
        title = _title(facts, pipeline, lead, others, None if first_pass_only else wait, bound)
        if filling is not None and first_pass_only:
            where = f" at {filling.cache_location}" if filling.cache_location else ""
            title += f"; it runs in the first pass only, which fills the cache{where}: "
            title += filling.text
        return self.finding(
            title,
            severity=lead.severity,
            evidence=_evidence(pipeline, lead, reported, wait),
            location=culprit_location(lead.stage),
            fix=_fix(pipeline, lead, others),
            estimated_gain=_gain_text(gain, len(reported)),
            gain_value=None if gain is None else round(gain, 4),
        )


@dataclass(frozen=True)
class _PythonStage:
    """A Python stage worth reporting, with the severity it alone would have."""

    index: int
    stage: PipelineStage
    share: float | None  # of the pipeline's work; None: not measured
    slowest: bool
    severity: str

    def rank(self) -> tuple[int, bool, float]:
        """The lead first: the most severe, the slowest stage, the largest share."""
        return (SEVERITY_RANK[self.severity], not self.slowest, -(self.share or 0.0))

    @property
    def label(self) -> str:
        return stage_label(self.stage)

    @property
    def generator(self) -> bool:
        return self.stage.kind == "generator" or "from_generator" in self.stage.written_as


def _cache_filling(
    facts: Facts, pipeline: PipelineFacts, options: dict[str, Any]
) -> CacheFilling | None:
    """The steps' wait was the first pass over ``pipeline`` filling its cache (what
    input.bound reports, low): the Python before the cache runs in that pass only."""
    reading = steps_wait_at(facts, options["min_input_wait"])
    if reading is None or reading.pipeline is not pipeline:
        return None
    return reading.cache_filling


def _judge(
    pipeline: PipelineFacts,
    index: int,
    slowest_severity: str,
    beside: bool,
    options: dict[str, Any],
    filled: bool = False,
) -> _PythonStage | None:
    """Its severity: ``slowest_severity`` when it is the slowest stage (high where the
    steps wait ``high_input_wait`` of their time, else medium; beside the steps, or
    ``filled``: a stage before a cache whose first pass made the steps' wait: low), low
    when it takes ``min_share`` of the pipeline's work or its cost is unknown; None
    below."""
    stage = pipeline.stages[index]
    share = stage_share(pipeline, stage)
    slowest = is_bottleneck(pipeline, index)
    if slowest and (beside or filled):
        severity = "low"
    elif slowest and share is None and slowest_severity != "high":
        # the slowest by elimination (a pipeline of one stage, TF's timers unread): its
        # cost is not measured, and the steps' wait does not say it is large
        severity = "low"
    elif slowest:
        severity = slowest_severity
    elif share is None or share >= options["min_share"]:
        severity = "low"
    else:
        return None
    return _PythonStage(index, stage, share, slowest, severity)


def _what(python: _PythonStage) -> str:
    return "the Python generator" if python.generator else "Python"


def _title(
    facts: Facts,
    pipeline: PipelineFacts,
    lead: _PythonStage,
    others: list[_PythonStage],
    wait: InputWait | None,
    bound: bool,
) -> str:
    title = f"Input stage {lead.label} runs {_what(lead)}"
    if lead.share is not None:
        title += f": {lead.share:.0%} of the pipeline's time"
    if lead.slowest:
        title += ", its slowest stage"
        if bound and wait is not None:  # bound implies wait
            title += f" ({waits_for_input(facts, pipeline, wait)})"
        elif wait is not None:
            # measured: not a wait on this run, the pace a faster step meets
            title += (
                f"; the steps waited {wait.fraction:.0%} for input on this run, "
                "a faster step (a GPU's) may wait for it"
            )
    if others:
        title += "; in the same pipeline, " + ", ".join(_also(other) for other in others)
    return title


def _also(python: _PythonStage) -> str:
    """``Generator(rows at a.py:9) runs the Python generator (36%)``: another stage."""
    share = f" ({python.share:.0%})" if python.share is not None else ""
    return f"{python.label} runs {_what(python)} too{share}"


def _evidence(
    pipeline: PipelineFacts,
    lead: _PythonStage,
    reported: list[_PythonStage],
    wait: InputWait | None,
) -> dict[str, Any]:
    """The lead stage's numbers, and a row for each Python stage of the pipeline."""
    evidence: dict[str, Any] = {
        "stage": lead.label,
        "pipeline": pipeline_name(pipeline),
        "why": _why(lead.stage),
        "slowest_stage": lead.slowest,
        **_row_numbers(stage_row(pipeline, lead.index)),
        "python_stages": [
            {
                "stage": python.label,
                "severity": python.severity,
                "location": culprit_location(python.stage),
                **_row_numbers(stage_row(pipeline, python.index)),
            }
            for python in reported
        ],
    }
    if lead.share is None:
        evidence["time"] = "not measured" + (
            f": {pipeline.model_error}" if pipeline.model_error else ""
        )
    if wait is not None:
        evidence.update(wait_evidence(wait))
    return evidence


def _fix(pipeline: PipelineFacts, lead: _PythonStage, others: list[_PythonStage]) -> str:
    """The lead stage's fix, then each other Python stage's under a line naming it."""
    made_in = pipeline_code.made_files(pipeline)
    lines = _stage_fix(lead, made_in)
    for other in others:
        lines += ["", f"# and {other.label}, also Python:", *_stage_fix(other, made_in)]
    return "\n".join(lines)


def _stage_fix(python: _PythonStage, made_in: tuple[str, ...]) -> list[str]:
    if python.generator:
        return pipeline_code.generator(python.stage, made_in)
    return pipeline_code.python_function(python.stage)


def _gain_text(gain: float | None, stages: int) -> str:
    if gain is None or gain < 0.005:
        return "the stage's time moves off the GIL onto every core"
    if stages == 1:
        return stage_gain_text(gain)
    return gain_text(gain, "the wait times these stages' share of the pipeline's work")


def _why(stage: PipelineStage) -> str:
    if stage.by_library and stage.kind == "generator":
        return _WHY_KERAS
    return _WHY_PARALLEL if _runs_in_parallel(stage) else _WHY_SEQUENTIAL


def _runs_in_parallel(stage: PipelineStage) -> bool:
    """Parallel as run (threads) or as written (num_parallel_calls other than 1)."""
    written = stage.parallelism_written
    return (stage.parallelism or 1) > 1 or (written is not None and written not in (0, 1))


def _row_numbers(row: dict[str, Any]) -> dict[str, Any]:
    return {
        k: row[k]
        for k in (
            "kind",
            "written_as",
            "elements",
            "ms_per_element",
            "threads",
            "share_of_pipeline_time",
        )
    }
