"""compression.cpu-codec: compression, decode or encode ops run on the CPU in the hot path."""

from __future__ import annotations

from typing import Any

from gpuwhy.facts import Facts
from gpuwhy.rules.base import Finding, Rule
from gpuwhy.rules.placement.common import group_row, op_list, prediction_note

CODEC_OPS = frozenset({
    "DecodeJpeg", "DecodeAndCropJpeg", "DecodePng", "DecodeGif", "DecodeBmp", "DecodeImage",
    "DecodeWebP", "EncodeJpeg", "EncodeJpegVariableQuality", "EncodePng", "DecodeCompressed",
    "DecodeWav", "EncodeWav",
})
# tensorflow-compression's entropy coders (its custom op library).
_CODEC_PREFIXES = ("RangeEncode", "RangeDecode", "EntropyEncode", "EntropyDecode", "RunLength")


def is_codec(op: str) -> bool:
    return op in CODEC_OPS or op.startswith(_CODEC_PREFIXES)


class CpuCodec(Rule):
    """Compression, decoding or encoding runs on the CPU inside the step or the input path.

    ## What it detects
    Codec ops that TensorFlow runs on the host only, found in the step or in the
    slowest input stage with at least `min_fraction` of its time: `DecodeJpeg`,
    `DecodePng`, `DecodeImage`, `EncodeJpeg`/`EncodePng`, `DecodeCompressed`
    (`tf.io.decode_compressed`), GZIP/ZLIB `TFRecordDataset` reading, and the range
    coders of tensorflow-compression (`compress()`/`decompress()` of its entropy
    models). None of these has a GPU kernel, whatever GPU is present.

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

    Inside the step any codec op counts: it has no GPU kernel, so it forces a host
    round trip whatever its own time. In the input pipeline the stage's measured share
    of time decides.

    ## Options
    - `min_fraction`: share of the slowest input stage's time spent in codec ops needed
      for the finding (0.05).
    """

    id = "compression.cpu-codec"
    severity = "medium"
    status = "stable"
    needs = ("placement",)
    options = {"min_fraction": 0.05}
    question = "Why doesn't compression use the GPU?"

    def check(self, facts: Facts, options: dict[str, Any]) -> list[Finding]:
        placement = facts.placement
        groups = sorted((g for g in placement.groups if is_codec(g.op)), key=lambda g: (-g.count, g.op))
        if not groups:
            return []
        total = sum(g.count for g in groups)
        location = next((g.locations[0] for g in groups if g.locations), None)
        decode = any(g.op.startswith("Decode") for g in groups)
        fix = [
            "# decode/encode on the host, in parallel, before the step: tf.data overlaps it",
            "ds = ds.map(decode_fn, num_parallel_calls=tf.data.AUTOTUNE, deterministic=False)",
            "ds = ds.batch(batch_size).prefetch(tf.data.AUTOTUNE)",
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
