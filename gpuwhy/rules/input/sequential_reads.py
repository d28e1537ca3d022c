"""input.sequential-reads: a file reader given many files reads them one at a time."""

from __future__ import annotations

from typing import Any

from gpuwhy.derived.pipeline_stages import stage_share
from gpuwhy.derived.stage import derived
from gpuwhy.derived.steps_input import input_wait
from gpuwhy.facts import Facts, PipelineFacts, PipelineStage
from gpuwhy.finding import Finding
from gpuwhy.fixes import dataset_calls
from gpuwhy.fixes.dataset_calls import AUTOTUNE
from gpuwhy.fixes.pipeline_code import in_place_of, is_reader, reader_api
from gpuwhy.fixes.pipeline_evidence import pipeline_name, wait_evidence
from gpuwhy.formatting import stage_label
from gpuwhy.rules.base import Rule


class SequentialReads(Rule):
    """A file reader given many files reads them one after the other, on one thread.

    ## What it detects
    A `tf.data.TFRecordDataset`, `TextLineDataset` or `FixedLengthRecordDataset` given
    at least `min_files` files, written without `num_parallel_reads` (or with 1) and
    not under a parallel `interleave`. TF then reads the files in order, one open file
    and one thread at a time (the reader is a `flat_map` over the file names,
    readers.py), whatever the host has.

    It is judged from the code as written, because a CPU run rarely shows it: there the
    model's step is so slow that a single reader keeps up, while on a GPU the step is
    tens of times shorter and the same reader sets the pace. Medium when the run
    measured a cost (the reader takes at least `min_share` of the pipeline's work, TF's
    own stage timers), low otherwise, said as what a GPU machine would show; the
    consumer's input wait is given as evidence.

    ## Why is this slow?
    One file read at a time means one stream of disk or network reads, one
    decompression stream for GZIP/ZLIB records, and the next file opened only when the
    previous one ends: on network file systems and cloud buckets each read waits for
    its round trip. The stages after the reader may run on every core, but they can go
    no faster than the records arrive. Parallel reads keep several files open and read
    them on their own threads; with `deterministic=False` (tf.data.Options) a slow file
    does not hold up the others.

    ## Example
    ```python
    files = tf.io.gfile.glob("gs://bucket/train-*.tfrecord")   # 256 shards
    ds = tf.data.TFRecordDataset(files)                       # one file at a time
    ds = ds.map(parse, num_parallel_calls=tf.data.AUTOTUNE).batch(64)
    ```

    Use instead:
    ```python
    ds = tf.data.TFRecordDataset(files, num_parallel_reads=tf.data.AUTOTUNE)
    ```

    or, for control over how many files are open at once:
    ```python
    ds = tf.data.Dataset.from_tensor_slices(files).interleave(
        tf.data.TFRecordDataset, cycle_length=8, num_parallel_calls=tf.data.AUTOTUNE)
    ```

    ## Options
    - `min_files`: files a reader must be given for the finding (2; one file has no
      other file to read in parallel: shard it).
    - `min_share`: the reader's share of the pipeline's work (TF's stage timers) that
      makes the finding medium (0.10).
    """

    id = "input.sequential-reads"
    severity = "medium"
    status = "stable"
    since = "0.2.0"
    needs = ("tfdata",)
    options = {"min_files": 2, "min_share": 0.10}
    question = "What will the GPU wait for?"

    def check(self, facts: Facts, options: dict[str, Any]) -> list[Finding]:
        assert facts.tfdata is not None  # in `needs`: never run without it
        findings = []
        # the steps' own pipeline first, then the most read: of one reader in several
        # pipelines (one cause), the finding that leads speaks of the training's reads,
        # not of a batch taken once to look at (0.0% of that pipeline's work)
        feeding = derived(facts).steps_pipeline
        ordered = sorted(facts.tfdata.pipelines, key=lambda p: (p is not feeding, -p.elements))
        for pipeline in ordered:
            for stage in pipeline.stages:
                if not _reads_one_at_a_time(stage, options["min_files"]):
                    continue
                findings.append(self._finding(facts, pipeline, stage, options))
        return findings

    def _finding(
        self, facts: Facts, pipeline: PipelineFacts, stage: PipelineStage, options: dict
    ) -> Finding:
        share = stage_share(pipeline, stage)
        wait = input_wait(facts, pipeline)
        # Medium where this run measured the reader's cost; the wait alone may be
        # another stage's, so it is evidence, not the judge.
        measured = share is not None and share >= options["min_share"]
        api = reader_api(stage)
        evidence: dict[str, Any] = {
            "stage": stage_label(stage),
            "pipeline": pipeline_name(pipeline),
            "files": stage.files,
            "num_parallel_reads": "not written"
            if stage.parallelism_written is None
            else stage.parallelism_written,
            "judged_from": "the code as written: a CPU run rarely waits for its reader, a "
            "GPU step tens of times shorter does",
        }
        if share is not None:
            evidence["share_of_pipeline_time"] = round(share, 3)
        if wait is not None:
            evidence.update(wait_evidence(wait))
        cost = f" ({share:.1%} of the pipeline's work on this run)" if share is not None else ""
        title = f"{api} reads its {stage.files} files one at a time, on one thread{cost}"
        if not measured:  # a step tens of times shorter on a GPU may wait for it
            title += "; a GPU machine's shorter steps may wait for it (judged from the code)"
        call = dataset_calls.stage_call(stage, api)
        fix = [
            f"# read several of the {stage.files} files at once, each on its own thread",
            *in_place_of(
                stage, dataset_calls.with_keywords(call, num_parallel_reads=AUTOTUNE), api
            ),
        ]
        if pipeline.deterministic is not False:  # not said where the program already set it
            fix.append("# (options.deterministic = False lets a slow file not hold up the others)")
        return self.finding(
            title,
            severity=self.severity if measured else "low",
            evidence=evidence,
            location=stage.location,
            fix="\n".join(fix),
            estimated_gain=(
                "reads overlap: up to one file's reading time per file read in parallel; "
                "measured again on the GPU machine"
            ),
        )


def _reads_one_at_a_time(stage: PipelineStage, min_files: int) -> bool:
    """A reader given ``min_files`` files or more, with no parallel reads written and
    none as run (a reader under a parallel interleave is another stage's input)."""
    if not is_reader(stage) or stage.files is None or stage.files < min_files:
        return False
    written = stage.parallelism_written
    if written is not None and written not in (0, 1):
        return False
    return not (stage.parallelism or 1) > 1
