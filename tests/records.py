"""TFRecord files for tests: real files written with TF's own writer."""

from collections.abc import Iterable
from pathlib import Path


def write_tfrecords(
    folder, shards: Iterable[Iterable[bytes]], compression: str = "", name: str = "part"
) -> list[str]:
    """One file per shard (``part0.tfrecord`` ...), each holding its records; returns the
    paths. ``compression``: "", "GZIP" or "ZLIB"."""
    import tensorflow as tf

    paths = []
    for number, records in enumerate(shards):
        path = str(Path(folder) / f"{name}{number}.tfrecord")
        with tf.io.TFRecordWriter(path, options=compression or None) as writer:
            for record in records:
                writer.write(record)
        paths.append(path)
    return paths
