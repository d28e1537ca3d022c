"""Reading a transformation call from the user's source, as Python reports its line."""

import sys

from gpuwhy.source_calls import written_call

SOURCE = """\
import tensorflow as tf
ds = tf.data.Dataset.range(10)
ds = ds.map(parse)
ds = (tf.data.TFRecordDataset(
          files, compression_type="GZIP")
      .map(lambda x: x,
           num_parallel_calls=4)
      .batch(32))
self.train_ds = self.train_ds.map(a).map(b)
"""


def test_calls_read_as_written(tmp_path):
    path = tmp_path / "train.py"
    path.write_text(SOURCE)
    read = lambda line, api, fn=None: written_call(str(path), line, api, fn)
    assert read(2, "range") == "tf.data.Dataset.range(10)"
    assert read(3, "map", "parse") == "ds.map(parse)"
    # a multi-line constructor: its line is its name's; keywords normalised
    assert read(4, "TFRecordDataset") == "tf.data.TFRecordDataset(files, compression_type='GZIP')"
    # inside a chain: from the dot, at the line of the method's name
    assert read(6, "map", "<lambda>") == ".map(lambda x: x, num_parallel_calls=4)"
    assert read(8, "batch") == ".batch(32)"
    # two maps on one line: told apart by the function, else not guessed
    assert read(9, "map", "b") == ".map(b)"
    assert read(9, "map", "a") == "self.train_ds.map(a)"
    assert read(9, "map") is None


def test_the_line_python_reports_for_a_chained_call_is_the_method_name_s(tmp_path):
    path = tmp_path / "chain.py"
    path.write_text(
        "import sys\n"
        "class D:\n"
        "    def map(self, f):\n"
        "        self.line = sys._getframe(1).f_lineno\n"
        "        return self\n"
        "d = (D()\n"
        "     .map(\n"
        "        abs))\n"
    )
    namespace: dict = {}
    exec(compile(path.read_text(), str(path), "exec"), namespace)
    line = namespace["d"].line
    assert line == 7 and sys.version_info >= (3, 11)
    assert written_call(str(path), line, "map", "abs") == ".map(abs)"


def test_no_source_no_call(tmp_path):
    assert written_call(str(tmp_path / "missing.py"), 3, "map") is None
    broken = tmp_path / "broken.py"
    broken.write_text("ds = ds.map(\n")
    assert written_call(str(broken), 1, "map") is None
    path = tmp_path / "ok.py"
    path.write_text("ds = ds.map(f)\n")
    assert written_call(str(path), 1, "batch") is None
    assert written_call(str(path), 0, "map") is None


def test_a_batch_size_computed_from_the_replicas_through_names(tmp_path):
    from gpuwhy.source_calls import scaled_by

    script = tmp_path / "train.py"
    script.write_text(
        "import tensorflow as tf\n"
        "strategy = tf.distribute.MirroredStrategy()\n"
        "print('devices:', strategy.num_replicas_in_sync)\n"  # a mention that scales nothing
        "BATCH_SIZE = 64\n"
        "PER_REPLICA = 32\n"
        "GLOBAL = PER_REPLICA * strategy.num_replicas_in_sync\n"
        "a = ds.batch(BATCH_SIZE)\n"
        "b = ds.batch(GLOBAL)\n"
        "c = ds.batch(batch_size=64 * strategy.num_replicas_in_sync)\n"
        "d = ds.batch(args.batch_size)\n"
        "e = ds.batch(int(os.environ['BATCH']))\n"
    )
    found = [scaled_by(str(script), line, "batch", "num_replicas_in_sync") for line in range(7, 12)]
    assert found == [False, True, True, None, None]
    assert scaled_by(str(script), 3, "batch", "num_replicas_in_sync") is None  # no call there
