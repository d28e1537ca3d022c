"""input.shuffle-memory: a shuffle buffer of large decoded elements holds host memory."""

from __future__ import annotations

from typing import Any

from gpuwhy.facts import Facts, PipelineFacts, PipelineStage
from gpuwhy.finding import Finding
from gpuwhy.fixes import dataset_calls
from gpuwhy.fixes.pipeline_code import ALTERNATIVE, in_place_of
from gpuwhy.fixes.pipeline_evidence import pipeline_name
from gpuwhy.formatting import byte_size, stage_label
from gpuwhy.rules.base import Rule

# The smaller buffer the fix offers holds this share of the host's memory.
FIX_SHARE = 0.10


class ShuffleMemory(Rule):
    """A shuffle buffer of large decoded elements takes a large share of host memory.

    ## What it detects
    A `shuffle(buffer_size)` whose buffer, `buffer_size` elements of the size its
    element spec gives (a decoded, resized image: height x width x channels x dtype),
    would hold at least `medium_share` of the host's memory (medium), or more than
    the memory still available at the end of the run (high). The size comes from the
    pipeline as written, so it holds whatever machine runs it next: a buffer that
    fits a 512 GB training node is reported against the host this run measured.
    Elements whose size the spec does not fix (an image of any height, strings) are not
    judged.

    ## Why is this slow?
    The buffer is filled before the first element comes out and refilled as elements
    leave: 2048 decoded 1024x1024x3 float32 images are about 25 GB held in host memory.
    When that does not fit, the host swaps or the process is killed; when it barely
    fits, the first step of every epoch waits for the buffer to fill (every element
    decoded before training starts) and the page cache that made file reads fast is
    gone. The GPU idles through both.

    ## Example
    ```python
    ds = (tf.data.TFRecordDataset(files, num_parallel_reads=tf.data.AUTOTUNE)
          .map(decode_and_resize, num_parallel_calls=tf.data.AUTOTUNE)   # 12 MB each
          .shuffle(2048)                                                   # ~25 GB
          .batch(32))
    ```

    Use instead: shuffle the small encoded records (or the file names), then decode:
    ```python
    ds = (tf.data.TFRecordDataset(files, num_parallel_reads=tf.data.AUTOTUNE)
          .shuffle(2048)                                                   # ~2048 records
          .map(decode_and_resize, num_parallel_calls=tf.data.AUTOTUNE)
          .batch(32))
    ```

    ## Options
    - `medium_share`: share of the host's memory the buffer may take before the
      finding is medium (0.25).
    """

    id = "input.shuffle-memory"
    severity = "medium"
    status = "stable"
    since = "0.2.0"
    needs = ("tfdata",)
    options = {"medium_share": 0.25}
    question = "What will the GPU wait for?"

    def check(self, facts: Facts, options: dict[str, Any]) -> list[Finding]:
        tfdata = facts.tfdata
        assert tfdata is not None  # in `needs`: never run without it
        if not tfdata.host_memory_bytes:
            return []
        findings = []
        for pipeline in tfdata.pipelines:
            for index, stage in enumerate(pipeline.stages):
                size = _buffer_bytes(stage)
                if size is None:
                    continue
                share = size / tfdata.host_memory_bytes
                available = tfdata.host_memory_available_bytes
                over = available is not None and size > available
                if not over and share < options["medium_share"]:
                    continue
                findings.append(
                    self._finding(pipeline, index, size, share, over, tfdata.host_memory_bytes)
                )
        return findings

    def _finding(
        self,
        pipeline: PipelineFacts,
        index: int,
        size: int,
        share: float,
        over: bool,
        host: int,
    ) -> Finding:
        stage = pipeline.stages[index]
        decoder = _decoder_before(pipeline, index)
        evidence: dict[str, Any] = {
            "stage": stage_label(stage),
            "pipeline": pipeline_name(pipeline),
            "buffer_size": stage.buffer_size,
            "element_size": byte_size(stage.element_bytes),
            "buffer_bytes": byte_size(size),
            "host_memory": byte_size(host),
            "share_of_host_memory": round(share, 3),
        }
        if decoder is not None:
            evidence["decoded_by"] = stage_label(decoder)
        fits = "more than the memory left free" if over else f"{share:.0%} of its memory"
        title = (
            f"shuffle({stage.buffer_size}) holds {stage.buffer_size} elements of "
            f"{byte_size(stage.element_bytes)}: ~{byte_size(size)}, {fits} on this host"
        )
        return self.finding(
            title,
            severity="high" if over else self.severity,
            evidence=evidence,
            location=stage.location,
            fix="\n".join(_fix(stage, decoder, host)),
            estimated_gain=(
                "host memory back for the page cache and other jobs; no swap, and epochs "
                "start without decoding a whole buffer first"
            ),
        )


def _buffer_bytes(stage: PipelineStage) -> int | None:
    if "shuffle" not in stage.written_as or not stage.buffer_size or stage.buffer_size < 0:
        return None
    if stage.element_bytes is None:
        return None
    return stage.buffer_size * stage.element_bytes


def _decoder_before(pipeline: PipelineFacts, index: int) -> PipelineStage | None:
    """The map before the shuffle that made its elements large (a decode, a resize)."""
    for stage in reversed(pipeline.stages[:index]):
        if "map" in stage.written_as:
            return stage
    return None


def _fix(stage: PipelineStage, decoder: PipelineStage | None, host: int) -> list[str]:
    shuffle = dataset_calls.stage_call(stage, "shuffle")
    lines = [
        "# shuffle the small records (or the file names) before they are decoded: the",
        "# buffer then holds encoded bytes, and the decode runs after it",
    ]
    if decoder is not None:
        decode = dataset_calls.stage_call(decoder, "map")
        moved = (
            (dataset_calls.receiver(decode) or "")
            + dataset_calls.method_part(shuffle)
            + dataset_calls.method_part(decode)
        )
        where = f" ({stage.location})" if stage.location else ""
        lines += [
            *in_place_of(decoder, moved, "map"),
            f"# and leave out the {shuffle} after it{where}",
        ]
    fits = max(1, int(FIX_SHARE * host / (stage.element_bytes or 1)))
    lines += [
        f"# or keep the shuffle where it is, with a buffer of {FIX_SHARE:.0%} of this host's memory:",
        f"{ALTERNATIVE}{dataset_calls.with_argument(shuffle, 0, 'buffer_size', str(fits))}",
    ]
    return lines
