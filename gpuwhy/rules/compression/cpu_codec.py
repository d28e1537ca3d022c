"""compression.cpu-codec: compression, decode or encode ops run on the CPU in the hot path."""

from __future__ import annotations

from typing import Any

from gpuwhy.derived.op_classes import is_codec
from gpuwhy.derived.pipeline import culprit_location
from gpuwhy.derived.pipeline_stages import is_bottleneck, pass_elements, stage_share
from gpuwhy.derived.steps_input import beside_steps, input_wait
from gpuwhy.facts import Facts, PipelineFacts, PipelineStage, PlacementFacts
from gpuwhy.finding import Finding
from gpuwhy.fixes import pipeline_code
from gpuwhy.fixes.op_groups import group_row, op_list, prediction_note
from gpuwhy.fixes.pipeline_evidence import (
    pipeline_name,
    stage_gain_text,
    stage_row,
    wait_evidence,
    waits_for_input,
)
from gpuwhy.formatting import stage_label
from gpuwhy.rules.base import Rule


class CpuCodec(Rule):
    """Compression, decoding or encoding runs on the CPU inside the step or the input path.

    ## What it detects
    Two places, each read from the facts the run has (the placement audit, tf.data's
    per-stage timers, or both):

    - In the step: codec ops that TensorFlow runs on the host only: `DecodeJpeg`,
      `DecodePng`, `DecodeImage`, `EncodeJpeg`/`EncodePng`, `DecodeCompressed`
      (`tf.io.decode_compressed`), and the range coders of tensorflow-compression
      (`compress()`/`decompress()` of its entropy models). None of these has a GPU
      kernel, whatever GPU is present, so any of them counts.
    - In the input pipeline: a tf.data stage that decodes or decompresses (GZIP/ZLIB
      `TFRecordDataset` reading, `decode_png`/`decode_jpeg`/`decode_compressed` in a
      map) and is the pipeline's slowest stage or takes at least `min_fraction` of its
      time, while the consumer waits for input at least `min_input_wait` of its time.
      The stage's time includes whatever else its function does; the finding names
      the stage, its codec ops and the file:line of its function. The wait is the
      training steps' for the pipeline that feeds them; a pipeline read beside them
      (Keras fit's `validation_data`) is reported low, with its own wait named as
      such. Where the fix for a decoding map is a `.cache()` after it, the gain is a
      cache's: the stage's share of the wait on every pass after the first (what
      input.no-cache says of the same line); where a cache is written after it
      already, the decode runs in each run's first pass only: low, a cache on disk
      for the next runs. A decoding map that also runs Python (`tf.py_function`) is
      low with its gain unknown: TF times the stage, not its ops, so the decode's
      part of its time is not known (input.python-function reports the stage).

    ## Why is this slow?
    Entropy decoding (Huffman, DEFLATE, range coding) is sequential bit-level work:
    TensorFlow runs it on host cores only, and GZIP TFRecord decompression happens
    inside the reader, one stream per file. In the step it forces a copy to the host
    and back with the GPU idle in between; in the input pipeline it is often the stage
    the GPU waits for. The GPU is fast at what follows (resizing, the analysis and
    synthesis networks), not at the codec itself.

    ## Example
    ```python
    def parse(record):
        ex = tf.io.parse_single_example(record, spec)
        img = tf.io.decode_jpeg(ex["image"], channels=3)   # full image, then crop
        return tf.image.random_crop(img, (224, 224, 3)), ex["label"]

    ds = tf.data.TFRecordDataset(files, compression_type="GZIP").map(parse).batch(256)
    ```

    Use instead:
    ```python
    def parse(record):
        ex = tf.io.parse_single_example(record, spec)
        window = random_window(tf.io.extract_jpeg_shape(ex["image"]))  # [y, x, h, w]
        img = tf.image.decode_and_crop_jpeg(ex["image"], window, channels=3)
        return tf.image.resize(img, (224, 224)), ex["label"]

    ds = (tf.data.TFRecordDataset(files, num_parallel_reads=tf.data.AUTOTUNE)  # plain shards
          .map(parse, num_parallel_calls=tf.data.AUTOTUNE, deterministic=False)
          .batch(256).prefetch(tf.data.AUTOTUNE))
    ```

    For an input stage the fix follows the stage: parallel reads (`num_parallel_reads`,
    `interleave`) for a compressed reader, or shards stored uncompressed; parallel
    decode calls and `cache()` of the decoded elements for a decoding map; decoding
    on the GPU happens outside TensorFlow (NVIDIA DALI's nvJPEG decoder; PNG stays on
    the host).

    ## Options
    - `min_fraction`: share of the pipeline's time (TF's self time of each stage) an
      input stage with codec ops needs, when it is not the slowest stage (0.05).
    - `min_input_wait`: input-wait fraction of the consumer's time needed for an input
      stage to be reported (0.05, XProf's input-bound threshold).
    """

    id = "compression.cpu-codec"
    measured_thresholds = {"min_fraction": "floor", "min_input_wait": "floor"}
    severity = "medium"
    status = "stable"
    # Either the placement audit or tf.data's facts is enough: each part reads its own,
    # and the registry's `needs` means all of them, so none is listed.
    needs = ()
    options = {"min_fraction": 0.05, "min_input_wait": 0.05}
    question = "Why doesn't compression use the GPU?"

    def check(self, facts: Facts, options: dict[str, Any]) -> list[Finding]:
        findings = self._in_step(facts.placement) if facts.placement is not None else []
        if facts.tfdata is not None:
            for pipeline in facts.tfdata.pipelines:
                findings += self._in_input(facts, pipeline, options)
        return findings

    def _in_input(
        self, facts: Facts, pipeline: PipelineFacts, options: dict[str, Any]
    ) -> list[Finding]:
        wait = input_wait(facts, pipeline)
        if wait is None or wait.fraction < options["min_input_wait"]:
            return []
        # fit's validation_data waits on its own: not the steps' time, so low and no gain
        beside = beside_steps(facts, pipeline)
        findings = []
        for index, stage in enumerate(pipeline.stages):
            if not stage.codec_ops:
                continue
            share = stage_share(pipeline, stage)
            slowest = is_bottleneck(pipeline, index)
            if not slowest and (share is None or share < options["min_fraction"]):
                continue
            label = stage_label(stage)
            ops = ", ".join(stage.codec_ops)
            row = stage_row(pipeline, index)
            share_text = (
                f"{share:.0%} of the pipeline's time" if share is not None else "time not measured"
            )
            gain = wait.fraction * share if share is not None and not beside else None
            reader = pipeline_code.is_reader(stage)
            gain_words = stage_gain_text(gain) if gain is not None else None
            severity = "low" if beside else self.severity
            if stage.python and not reader:
                # TF times the stage, not its ops: how much of it is the decode and how
                # much the Python (a py_function beside it, 80 % of it in a trial) is
                # not known; input.python-function reports the stage
                share_text += ", its decode's and its Python's together"
                gain, severity = None, "low"
                gain_words = (
                    "unknown: the stage's time is its decode's and its Python's together "
                    "(input.python-function reports the stage)"
                )
            elif gain is not None and not reader:
                gain, gain_words, severity = _cache_gain(stage, pipeline, gain, severity)
            findings.append(
                self.finding(
                    f"Input stage {label} decodes on the CPU ({ops}): {share_text}"
                    + (", the slowest stage" if slowest else "")
                    + f"; {waits_for_input(facts, pipeline, wait)}",
                    severity=severity,
                    evidence={
                        "stage": label,
                        "codec_ops": list(stage.codec_ops),
                        "pipeline": pipeline_name(pipeline),
                        "slowest_stage": slowest,
                        "ms_per_element": row["ms_per_element"],
                        "threads": row["threads"],
                        "share_of_pipeline_time": row["share_of_pipeline_time"],
                        "why_cpu": "TensorFlow registers no GPU kernel for decoding or "
                        "decompression",
                        **wait_evidence(wait),
                    },
                    fix="\n".join(
                        pipeline_code.reader(stage)
                        if reader
                        else pipeline_code.decode(stage, pipeline)
                    ),
                    estimated_gain=(
                        gain_words
                        if gain_words is not None
                        else "none on the training steps: the pipeline is read beside them"
                        if beside
                        else "the decode overlaps compute on every core"
                    ),
                    location=culprit_location(stage),
                    gain_value=None if gain is None else round(gain, 4),
                )
            )
        return findings

    def _in_step(self, placement: PlacementFacts) -> list[Finding]:
        groups = sorted(
            (g for g in placement.groups if is_codec(g.op)), key=lambda g: (-g.count, g.op)
        )
        if not groups:
            return []
        total = sum(g.count for g in groups)
        location = next((g.locations[0] for g in groups if g.locations), None)
        decode = any(g.op.startswith("Decode") for g in groups)
        fix = [
            "# decode/encode on the host, in parallel, before the step: tf.data overlaps it",
            "<dataset>.map(<your decode function>, num_parallel_calls=tf.data.AUTOTUNE)"
            ".batch(<batch size>).prefetch(tf.data.AUTOTUNE)",
        ]
        if decode:
            fix += [
                "# JPEG: tf.image.decode_and_crop_jpeg decodes only the crop window",
                "# GPU decoding exists outside TensorFlow: NVIDIA DALI's fn.decoders.image(device='mixed')",
            ]
        return [
            self.finding(
                f"{total} compression/codec op{'s' if total > 1 else ''} run{'' if total > 1 else 's'} on the CPU inside the step: {op_list(groups)}",
                evidence={
                    "codec_ops_in_step": total,
                    "ops": [group_row(g) for g in groups],
                    "why_cpu": "TensorFlow registers no GPU kernel for these ops",
                    **prediction_note(placement),
                },
                fix="\n".join(fix),
                estimated_gain="the codec overlaps GPU compute instead of stalling each step",
                location=location,
            )
        ]


def _cache_gain(
    stage: PipelineStage, pipeline: PipelineFacts, gain: float, severity: str
) -> tuple[float, str, str]:
    """The gain, its words and the severity of a decoding map's finding where the fix
    is, or was, a cache: a ``.cache()`` after the map (``pipeline_code.caches_decode``)
    saves the decode on the passes after the first, as input.no-cache says of the same
    line (the same arithmetic: they name one change); one already written leaves the
    decode in each run's first pass only, which a cache on disk saves for the next runs,
    low. Elsewhere (one pass read, the pass size unknown) the stage's whole share."""
    per_pass, _ = pass_elements(pipeline)
    passes = pipeline.elements / per_pass if per_pass else None
    if pipeline_code.cached_after(stage, pipeline):
        return (
            gain,
            f"estimate: up to {gain:.0%} of this run's step time, all of it in its first "
            "pass (the cache replays the rest); a cache on disk saves it in the next runs",
            "low",
        )
    if not pipeline_code.caches_decode(stage, pipeline) or passes is None or passes <= 1:
        return gain, stage_gain_text(gain), severity
    saved = gain * (passes - 1) / passes
    return (
        saved,
        f"estimate: about {saved:.0%} of step time (the wait times this stage's share, on "
        f"every pass after the first: {passes:.1f} passes read); the fix's real gain shows "
        "when the run is measured again",
        severity,
    )
