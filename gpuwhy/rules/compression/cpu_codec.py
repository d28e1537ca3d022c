"""compression.cpu-codec: compression, decode or encode ops run on the CPU in the hot path."""

from gpuwhy.rules.base import Rule


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

    ## Options
    - `min_fraction`: share of step time, or of the slowest input stage's time, spent
      in codec ops needed for the finding (0.05).
    """

    id = "compression.cpu-codec"
    severity = "medium"
    status = "planned"
    needs = ("placement", "tfdata", "steps")
    options = {"min_fraction": 0.05}
    question = "Why doesn't compression use the GPU?"
