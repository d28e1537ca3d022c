"""Every input fix template, pasted into a real tf.data program and run.

Each case is a small program written the way users write pipelines (a variable
reassigned per step, a chain over several lines, lambdas, GZIP TFRecords, a generator).
Its stages are described the way the collectors describe them, with the calls read from
the program's file by gpuwhy.source_calls; the template's fix is pasted where it says
(tests/rules/input/paste.py) and the pasted program must run and yield the same element
spec (and, where the fix keeps them, as many elements) as the original.
"""

from __future__ import annotations

import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from gpuwhy.facts import Facts, PipelineFacts, PipelineStage, TfDataFacts
from gpuwhy.fixes import pipeline_code
from gpuwhy.rules.distribute.cpu_starved_input import _fix as cpu_starved_fix
from gpuwhy.rules.input.no_cache import _fix as no_cache_fix
from gpuwhy.rules.input.sequential_reads import SequentialReads
from gpuwhy.rules.input.shuffle_memory import ShuffleMemory
from gpuwhy.source_calls import written_call
from tests.rules.input import paste

tf = pytest.importorskip("tensorflow")

PRELUDE = """\
import numpy as np
import tensorflow as tf

filenames = {filenames!r}
shard_files = {shard_files!r}
pngs = [tf.io.encode_png(tf.fill([4, 4, 3], tf.constant(i, tf.uint8))) for i in range(8)]
signature = tf.TensorSpec([], tf.float32)


def parse_record(record):
    return tf.io.parse_single_example(record, {{"x": tf.io.FixedLenFeature([], tf.float32)}})["x"]


def parse(x):
    return tf.cast(x, tf.float32) * 2.0


def scale(x):
    return x * 3


def slow(x):
    return x + 1


def augment(x, seed=None):
    x = tf.cast(x, tf.float32)
    if seed is None:
        return x + tf.random.uniform([])
    return x + tf.random.stateless_uniform([], seed)


def decode(data):
    return tf.io.decode_png(data)


def batches(shard=b""):
    for i in range(64):
        yield np.float32(i)


"""

# what a reader fills in for each placeholder a fix may carry
PLACEHOLDERS = {
    "<dataset>": "ds",
    "<the arrays the generator yields from>": "np.arange(64, dtype=np.float32)",
    "<shard files>": "shard_files",
    "<shard names>": "shard_files",
    "<parse>": "parse_record",
    "<your function>": "parse",
    "<batch size>": "8",
    "<path>": "{cache}",
}


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> dict[str, object]:
    root = tmp_path_factory.mktemp("records")
    options = tf.io.TFRecordOptions(compression_type="GZIP")
    filenames = []
    for shard in range(2):
        path = str(root / f"train-{shard}.tfrecord.gz")
        with tf.io.TFRecordWriter(path, options) as writer:
            for i in range(32):
                feature = {"x": tf.train.Feature(float_list=tf.train.FloatList(value=[i]))}
                example = tf.train.Example(features=tf.train.Features(feature=feature))
                writer.write(example.SerializeToString())
        filenames.append(path)
    plain = str(root / "shard-0.tfrecord")
    with tf.io.TFRecordWriter(plain) as writer:
        for i in range(64):
            feature = {"x": tf.train.Feature(float_list=tf.train.FloatList(value=[i]))}
            writer.write(
                tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString()
            )
    return {"filenames": filenames, "shard_files": [plain], "root": root}


class Program:
    """One user program on disk, and its stages as the collectors see them."""

    def __init__(self, tmp: Path, data: dict, body: str) -> None:
        self.source = PRELUDE.format(**data) + body
        # a new name per program: linecache (and so autograph, reading a lambda's
        # source) would give an earlier program's line for a rewritten file
        self.name = f"train_{len(list(tmp.glob('train_*.py')))}.py"
        self.path = paste.write(tmp, self.name, self.source)

    def line_of(self, needle: str) -> int:
        for number, line in enumerate(self.source.splitlines(), start=1):
            if needle in line:
                return number
        raise AssertionError(f"{needle!r} not in the program")

    def stage(self, needle: str, written_as: tuple[str, ...], **fields) -> PipelineStage:
        """The stage whose first call's method name is on the line holding ``needle``;
        further calls of a fused stage are found by their own needles."""
        needles = fields.pop("needles", (needle,) * len(written_as))
        function = fields.get("function")
        calls, location = [], None
        for api, each in zip(written_as, needles, strict=True):
            line = self.line_of(each)
            location = location or f"{self.name}:{line}"
            calls.append(written_call(str(self.path), line, api, function) or "")
        base = PipelineStage(
            name=fields.pop("name", "Map"),
            kind=fields.pop("kind", "map"),
            written_as=written_as,
            written_calls=tuple(calls),
            location=location,
            elements=1000,
            self_time_s=1.0,
        )
        return replace(base, **fields)

    def run(self, source: str) -> tuple[object, int | None]:
        namespace: dict[str, object] = {"__name__": "__main__"}
        exec(compile(source, str(self.path), "exec"), namespace)
        ds = namespace["ds"]
        count = sum(1 for _ in ds) if ds.cardinality() != tf.data.INFINITE_CARDINALITY else None
        return ds.element_spec, count

    def check(self, fix: str, same_count: bool = True, **placeholders: str) -> list[str]:
        """Paste ``fix``; every version runs and yields what the original yields."""
        assert fix.strip(), "an empty fix"
        spec, count = self.run(self.source)
        filled = {**PLACEHOLDERS, **placeholders}
        filled["<path>"] = str(self.path.parent / "cache")
        versions = paste.pasted(self.source, fix, filled)
        assert len(versions) >= 1
        for version in versions:
            assert version != self.source, f"nothing pasted:\n{fix}"
            new_spec, new_count = self.run(version)
            assert new_spec == spec, f"{new_spec} != {spec} after\n{fix}\n---\n{version}"
            if same_count:
                assert new_count == count, f"{new_count} != {count} after\n{fix}"
        return versions


@pytest.fixture()
def program(tmp_path, data):
    return lambda body: Program(tmp_path, data, body)


def test_parallel_map_keeps_the_variable_and_function(program):
    p = program("ds = tf.data.Dataset.range(64)\nds = ds.map(parse)\nds = ds.batch(8)\n")
    stage = p.stage("ds.map(parse)", ("map",), function="parse")
    fix = "\n".join(pipeline_code.parallel_map(stage))
    assert "ds.map(parse, num_parallel_calls=tf.data.AUTOTUNE)" in fix
    (pasted,) = p.check(fix)
    assert "ds = ds.map(parse, num_parallel_calls=tf.data.AUTOTUNE)\n" in pasted


def test_a_chained_lambda_written_sequential_is_replaced_where_it_is(program):
    p = program(
        "ds = (tf.data.Dataset.range(64)\n"
        "      .map(lambda x: x * 2,\n"
        "           num_parallel_calls=1)\n"
        "      .batch(8))\n"
    )
    stage = p.stage(".map(lambda", ("map",), function="<lambda>", parallelism_written=1)
    fix = "\n".join(pipeline_code.parallel_map(stage))
    assert ".map(lambda x: x * 2, num_parallel_calls=tf.data.AUTOTUNE)" in fix
    assert "num_parallel_calls=1" not in fix.splitlines()[-1]  # replaced, not repeated
    p.check(fix)


def test_a_call_whose_source_is_unknown_gets_placeholders(program):
    p = program("ds = tf.data.Dataset.range(64)\nds = ds.map(parse)\n")
    stage = replace(p.stage("ds.map(parse)", ("map",), function="parse"), written_calls=())
    fix = "\n".join(pipeline_code.parallel_map(stage))
    assert "<dataset>.map(parse, num_parallel_calls=tf.data.AUTOTUNE)" in fix
    p.check(fix)


def test_nothing_is_suggested_that_is_already_written(program):
    p = program("ds = tf.data.Dataset.range(64).map(parse, num_parallel_calls=tf.data.AUTOTUNE)\n")
    stage = p.stage(".map(parse", ("map",), function="parse", name="ParallelMapV2")
    assert pipeline_code.parallel_map(stage) == []
    batched = program("ds = tf.data.Dataset.range(64).batch(8, num_parallel_calls=4)\n")
    batch = batched.stage(".batch(8", ("batch",), kind="batch", name="ParallelBatch")
    assert "num_parallel_calls" not in "\n".join(pipeline_code.batch(batch))


def test_vectorise_moves_the_written_batch_before_the_map(program):
    p = program("ds = tf.data.Dataset.range(64)\nds = ds.map(scale)\nds = ds.batch(8)\n")
    stages = (
        p.stage("ds.map(scale)", ("map",), function="scale", self_time_s=0.02),
        p.stage("ds.batch(8)", ("batch",), kind="batch", name="BatchV2"),
    )
    pipeline = PipelineFacts(id=1, stages=stages)
    fix = "\n".join(pipeline_code.vectorise(pipeline, 0))
    assert "\nds.batch(8).map(scale, num_parallel_calls=tf.data.AUTOTUNE)\n" in fix
    (pasted,) = p.check(fix)
    assert "ds.batch(8)\nds = ds.batch(8)" not in pasted


@pytest.mark.parametrize(
    "body, needle",
    [
        ("ds = tf.data.Dataset.range(64).map(augment)\n", ".map(augment)"),
        ("ds = tf.data.Dataset.range(64)\nds = ds.map(augment)\n", "ds.map(augment)"),
    ],
)
def test_stateful_random_map_parallel_or_seeded(program, body, needle):
    p = program(body)
    stage = p.stage(needle, ("map",), function="augment", random=True, stateful=True)
    versions = p.check("\n".join(pipeline_code.stateless_random(stage)))
    assert len(versions) == 2  # parallel as it is; seeded with stateless ops


def test_python_map_and_python_flat_map(program):
    p = program(
        "ds = tf.data.Dataset.range(64)\n"
        "ds = ds.map(lambda x: tf.py_function(slow, [x], tf.int64))\n"
    )
    stage = p.stage("ds.map(lambda", ("map",), function="<lambda>", python=True)
    fix = "\n".join(pipeline_code.python_function(stage))
    assert "the lambda calls Python" in fix and "fn" not in fix.split()
    p.check(fix)
    nested = program(
        "ds = tf.data.Dataset.range(8)\n"
        "ds = ds.flat_map(lambda x: tf.data.Dataset.from_tensors("
        "tf.py_function(slow, [x], tf.int64)).repeat(4))\n"
    )
    stage = nested.stage(
        "ds.flat_map",
        ("flat_map",),
        kind="flat_map",
        name="FlatMap",
        python=True,
        function="<lambda>",
    )
    fix = "\n".join(pipeline_code.python_function(stage))
    assert ".interleave(" in fix and ".map(" not in fix  # never a map template here
    nested.check(fix)


def test_generator_alternatives_each_run(program):
    p = program("ds = tf.data.Dataset.from_generator(batches, output_signature=signature)\n")
    stage = p.stage(
        "from_generator",
        ("from_generator",),
        kind="generator",
        name="Generator",
        function="batches",
        python=True,
    )
    fix = "\n".join(pipeline_code.generator(stage))
    assert "output_signature=signature" in fix  # the program's own signature
    versions = p.check(fix)
    assert len(versions) == 3


def test_reader_gets_parallel_reads_with_its_own_arguments(program):
    p = program(
        'ds = tf.data.TFRecordDataset(filenames, compression_type="GZIP")\n'
        "ds = ds.map(parse_record)\n"
    )
    stage = p.stage(
        "TFRecordDataset(",
        ("TFRecordDataset",),
        kind="source",
        name="TFRecord",
        codec_ops=("GZIP",),
    )
    fix = "\n".join(pipeline_code.reader(stage))
    assert (
        "tf.data.TFRecordDataset(filenames, compression_type='GZIP', "
        "num_parallel_reads=tf.data.AUTOTUNE)"
    ) in fix
    p.check(fix)


def test_flat_map_over_files_becomes_a_parallel_interleave(program):
    p = program(
        "ds = tf.data.Dataset.from_tensor_slices(filenames)\n"
        'ds = ds.flat_map(lambda f: tf.data.TFRecordDataset(f, compression_type="GZIP"))\n'
        "ds = ds.map(parse_record)\n"
    )
    stage = p.stage(
        "ds.flat_map", ("flat_map",), kind="flat_map", name="FlatMap", function="<lambda>"
    )
    fix = "\n".join(pipeline_code.interleave(stage))
    assert "ds.interleave(lambda f:" in fix and "num_parallel_calls=tf.data.AUTOTUNE" in fix
    p.check(fix)  # the same elements, in another order


@pytest.mark.parametrize("random", [False, True])
def test_decode_map_parallel_and_cached_unless_random(program, random):
    p = program("ds = tf.data.Dataset.from_tensor_slices(pngs)\nds = ds.map(decode)\n")
    stage = p.stage(
        "ds.map(decode)",
        ("map",),
        function="decode",
        codec_ops=("DecodePng",),
        random=random,
        stateful=random,
    )
    fix = "\n".join(pipeline_code.decode(stage))
    assert (".cache()" in fix) is not random
    p.check(fix)


def test_decode_after_a_shuffle_is_not_cached_where_it_would_freeze_the_order(program):
    """A cache after the decode would replay the shuffle's first order every epoch: the
    fix says to cache before the shuffle instead, and what it pastes still runs."""
    p = program(
        "ds = tf.data.Dataset.from_tensor_slices(pngs)\nds = ds.shuffle(8)\nds = ds.map(decode)\n"
    )
    shuffle = p.stage("ds.shuffle(8)", ("shuffle",), kind="shuffle", name="Shuffle")
    decode = p.stage("ds.map(decode)", ("map",), function="decode", codec_ops=("DecodePng",))
    pipeline = PipelineFacts(
        id=1, stages=(replace(shuffle, repeats=False), replace(decode, repeats=True))
    )
    fix = "\n".join(pipeline_code.decode(pipeline.stages[1], pipeline))
    assert ".cache()" not in [line for line in fix.splitlines() if not line.startswith("#")]
    assert "with ds.shuffle(8)" in fix and "moved after the cache" in fix
    p.check(fix)
    alone = PipelineFacts(id=1, stages=(replace(decode, repeats=True),))
    assert "ds.map(decode, num_parallel_calls=tf.data.AUTOTUNE).cache()" in "\n".join(
        pipeline_code.decode(alone.stages[0], alone)
    )


def test_decode_fused_with_its_batch_caches_after_the_map_whose_line_is_known(program):
    p = program(
        "ds = tf.data.Dataset.from_tensor_slices(pngs)\nds = ds.map(decode)\nds = ds.batch(4)\n"
    )
    stage = p.stage(
        "",
        ("map", "batch"),
        function="decode",
        codec_ops=("DecodePng",),
        name="MapAndBatch",
        needles=("ds.map(decode)", "ds.batch(4)"),
    )
    fix = "\n".join(pipeline_code.decode(stage))
    assert "ds.map(decode, num_parallel_calls=tf.data.AUTOTUNE).cache()" in fix
    assert "batch(4).cache()" not in fix
    p.check(fix)


def test_batch_filter_and_an_already_parallel_map(program):
    p = program(
        "ds = tf.data.Dataset.range(64)\n"
        "ds = ds.filter(lambda x: x % 2 == 0)\n"
        "ds = ds.map(parse, num_parallel_calls=tf.data.AUTOTUNE)\n"
        "ds = ds.batch(8)\n"
    )
    batch = p.stage("ds.batch(8)", ("batch",), kind="batch", name="BatchV2")
    p.check("\n".join(pipeline_code.batch(batch)))
    kept = p.stage("ds.filter", ("filter",), kind="filter", name="Filter", function="<lambda>")
    p.check("\n".join(pipeline_code.filter_(kept)))
    mapped = p.stage("ds.map(parse", ("map",), function="parse", name="ParallelMapV2")
    pipeline = PipelineFacts(id=1, stages=(replace(mapped, parallelism=4),))
    fix = "\n".join(pipeline_code.for_stage(pipeline, 0, 0.0))
    assert "num_parallel_calls=tf.data.AUTOTUNE, num_parallel_calls" not in fix
    p.check(fix)


def test_cache_and_prefetch_go_after_the_calls_as_written(program):
    p = program(
        "ds = tf.data.TFRecordDataset(filenames, compression_type='GZIP')\n"
        "ds = ds.map(parse_record)\n"
        "ds = ds.shuffle(16).batch(8)\n"
    )
    mapped = p.stage("ds.map(parse_record)", ("map",), function="parse_record")
    shuffle = p.stage(".shuffle(16)", ("shuffle",), kind="shuffle", name="Shuffle")
    batch = p.stage(".batch(8)", ("batch",), kind="batch", name="BatchV2")
    fix = no_cache_fix(mapped, shuffle, 2**20)
    assert "ds.map(parse_record).cache()" in fix
    p.check(fix)
    pipeline = PipelineFacts(id=1, stages=(mapped, shuffle, batch))
    fix = "\n".join(pipeline_code.prefetch_at_end(pipeline))
    assert ".batch(8).prefetch(tf.data.AUTOTUNE)" in fix
    p.check(fix)


def test_the_generic_advice_runs_once_filled(program):
    p = program("ds = tf.data.Dataset.range(64)\n")
    (line,) = paste.parse("\n".join(pipeline_code.generic())).statements
    namespace = {"tf": tf, "ds": p.run(p.source) and tf.data.Dataset.range(64)}
    exec(paste.fill(line, {**PLACEHOLDERS, "<your function>": "lambda x: x"}), namespace)


def test_tf_data_service_fix_runs_against_a_real_dispatcher(program):
    service = tf.data.experimental.service
    dispatcher = service.DispatchServer(service.DispatcherConfig(port=0))
    address = dispatcher.target.split("://")[1]
    worker = service.WorkerServer(service.WorkerConfig(dispatcher_address=address))
    try:
        p = program("ds = tf.data.Dataset.range(64)\nds = ds.map(parse).batch(8)\n")
        batch = p.stage(".batch(8)", ("batch",), kind="batch", name="BatchV2")
        fix = cpu_starved_fix(PipelineFacts(id=1, stages=(batch,)), None, False)
        p.check(fix, **{"<dispatcher host>:5050": address})
    finally:
        worker.stop()
        dispatcher._stop()


def test_sequential_reads_fix_reads_the_same_files_in_parallel(program):
    p = program(
        'ds = tf.data.TFRecordDataset(filenames, compression_type="GZIP")\n'
        "ds = ds.map(parse_record)\n"
    )
    reader = p.stage(
        "TFRecordDataset(", ("TFRecordDataset",), kind="source", name="TFRecord", files=2
    )
    tfdata = TfDataFacts(pipelines=(PipelineFacts(id=1, stages=(reader,)),))
    (finding,) = SequentialReads().check(Facts(tfdata=tfdata), dict(SequentialReads.options))
    p.check(finding.fix)


def test_shuffle_memory_fix_moves_the_shuffle_before_the_decode_or_shrinks_it(program):
    p = program(
        "ds = tf.data.Dataset.from_tensor_slices(pngs)\nds = ds.map(decode)\nds = ds.shuffle(8)\n"
    )
    stages = (
        p.stage("ds.map(decode)", ("map",), function="decode"),
        p.stage(
            "ds.shuffle(8)",
            ("shuffle",),
            kind="shuffle",
            name="Shuffle",
            buffer_size=8,
            element_bytes=2**30,
        ),
    )
    tfdata = TfDataFacts(
        pipelines=(PipelineFacts(id=1, stages=stages),),
        host_memory_bytes=16 * 2**30,
        host_memory_available_bytes=4 * 2**30,
    )
    (finding,) = ShuffleMemory().check(Facts(tfdata=tfdata), dict(ShuffleMemory.options))
    moved, smaller = p.check(finding.fix)
    assert "ds = ds.shuffle(8).map(decode)\nds = ds\n" in moved
    assert "ds = ds.shuffle(1)\n" in smaller  # 10% of 16 GiB holds one 1 GiB element


def test_a_keras_py_dataset_s_fix_runs_with_its_workers(tmp_path):
    """fit given a keras.utils.PyDataset: the fix line goes into its __init__."""
    stage = PipelineStage(
        name="Generator",
        kind="generator",
        written_as=("from_generator",),
        function="_get_iterator",
        python=True,
        by_library=True,
    )
    fix = pipeline_code.generator(stage)
    (line,) = [code for code in fix if not code.startswith("#")]
    statement = line.split("#")[0].strip()
    script = tmp_path / "pyds.py"
    script.write_text(
        "import math\n"
        "import numpy as np\n"
        "import keras\n\n"
        "class Batches(keras.utils.PyDataset):\n"
        "    def __init__(self, n, **kwargs):\n"
        f"        {statement}\n"
        "        self.n = n\n\n"
        "    def __len__(self):\n"
        "        return math.ceil(self.n / 8)\n\n"
        "    def __getitem__(self, idx):\n"
        "        return np.ones((8, 4), 'float32'), np.ones((8, 1), 'float32')\n\n"
        "if __name__ == '__main__':\n"
        "    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(1)])\n"
        "    model.compile(optimizer='sgd', loss='mse')\n"
        "    history = model.fit(Batches(64), epochs=1, verbose=0)\n"
        "    print(len(history.history['loss']))\n"
    )
    result = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.strip().endswith("1")
    (alternative,) = paste.parse("\n".join(fix)).alternatives
    filled = paste.fill(
        alternative,
        {
            **PLACEHOLDERS,
            "<features>": "np.ones((64, 4), 'float32')",
            "<labels>": "np.ones((64, 1), 'float32')",
        },
    )
    dataset = eval(filled, {"tf": tf, "np": np})
    assert dataset.element_spec[0].shape.as_list() == [None, 4]


def _keras_generator_stage(function: str, location: str) -> PipelineStage:
    return PipelineStage(
        name="Generator",
        kind="generator",
        written_as=("from_generator",),
        function=function,
        function_location=location,
        self_time_per_element_s=0.0221,
        python=True,
        by_library=True,
    )


def test_a_generator_fit_reads_is_named_with_no_class_or_placeholder_it_lacks():
    """fit given the program's generator: the fix names it and its pace, and asks for no
    __init__ the program does not have, nor for arrays it cannot name."""
    fix = pipeline_code.generator(_keras_generator_stage("batches", "train.py:5"))
    text = "\n".join(fix)
    assert "the generator batches (train.py:5)" in text and "22.1 ms a batch" in text
    assert all(line.startswith("#") for line in fix)  # nothing to paste in place of it
    assert "<" not in text
    # a trial pasted the PyDataset it suggests: fit shuffled its batches, and the losses
    # changed where the generator had given them in order
    assert "fit(..., shuffle=False) keeps that order" in text


def test_a_py_dataset_fit_reads_is_named_by_its_class():
    fix = pipeline_code.generator(_keras_generator_stage("Tiles.__getitem__", "train.py:15"))
    assert fix[0].startswith("# fit reads Tiles (train.py:15) one batch at a time")
    # its __init__ may call super().__init__ already: said in words, never a second call
    assert all(line.startswith("#") for line in fix)
    assert "give Tiles's super().__init__(...) call\n# workers=4" in "\n".join(fix)


def test_a_py_dataset_made_with_workers_gets_them_raised_where_they_are_given(tmp_path):
    """The class passes **kwargs on to PyDataset and the script makes it with workers=1:
    workers=4 in its super().__init__ would be a TypeError (given twice), so the fix is
    the script's call, raised; a call with as many already is left alone."""
    classes = tmp_path / "my_classes.py"
    classes.write_text(
        "import keras\n\n\nclass Tiles(keras.utils.PyDataset):\n"
        "    def __init__(self, ids, **kwargs):\n        super().__init__(**kwargs)\n"
    )
    script = tmp_path / "train.py"
    script.write_text(
        "from my_classes import Tiles\n\ntrain = Tiles(ids, workers=1, use_multiprocessing=False)\n"
        "val = Tiles(ids, workers=8)\n"
    )
    stage = _keras_generator_stage("Tiles.__getitem__", f"{classes}:8")
    fix = pipeline_code.generator(stage, (str(script),))
    assert fix[-2:] == [
        f"# {script}:3: in place of: Tiles(ids, workers=1, use_multiprocessing=False)",
        "Tiles(ids, workers=4, use_multiprocessing=False)",
    ]
    assert "super().__init__" not in "\n".join(fix)
    # a call that passes a ** mapping may give workers through it: not given them twice
    script.write_text(
        "from my_classes import Tiles\n\ntrain = Tiles(ids, workers=2)\nval = Tiles(ids, **params)\n"
    )
    fix = pipeline_code.generator(stage, (str(script),))
    assert fix[-1] == "Tiles(ids, workers=4)" and "**params" not in "\n".join(fix)
    # every call has as many workers: the batch itself is what to make cheaper
    script.write_text("from my_classes import Tiles\n\ntrain = Tiles(ids, workers=8)\n")
    fix = pipeline_code.generator(stage, (str(script),))
    assert f"already has worker threads (workers=8 at {script}:3)" in "\n".join(fix)
    assert "use_multiprocessing=True for pure-Python work" in "\n".join(fix)
    assert all(line.startswith("#") for line in fix)
    # processes passed already: said as processes, not asked for again
    script.write_text(
        "from my_classes import Tiles\n\ntrain = Tiles(ids, workers=8, use_multiprocessing=True)\n"
    )
    fix = pipeline_code.generator(stage, (str(script),))
    assert f"already has worker processes (workers=8 at {script}:3)" in "\n".join(fix)
    assert "use_multiprocessing" not in "\n".join(fix)


def test_a_written_call_that_is_not_one_falls_back_to_placeholders():
    from gpuwhy.fixes.dataset_calls import stage_call

    stage = PipelineStage(
        name="Map", kind="map", written_as=("map",), written_calls=("x = (",), function="parse"
    )
    assert stage_call(stage) == "<dataset>.map(parse)"
    assert "<dataset>.map(parse, num_parallel_calls=tf.data.AUTOTUNE)" in "\n".join(
        pipeline_code.parallel_map(stage)
    )


def test_a_library_built_stage_gets_the_helper_call_not_a_template():
    """The slowest stage of a dataset keras.utils built (a Zip of its windows): no map
    template the program never wrote; the helper's call and where to cache after it."""
    zipped = PipelineStage(
        name="Zip", kind="other", written_as=("zip",), location="train.py:9", by_library=True
    )
    pipeline = PipelineFacts(
        id=1,
        stages=(zipped,),
        helper_call="keras.utils.timeseries_dataset_from_array(x, y, sequence_length=48)",
    )
    fix = "\n".join(pipeline_code.for_stage(pipeline, 0, 0.0))
    assert "keras.utils.timeseries_dataset_from_array(x, y, sequence_length=48) builds" in fix
    assert "<dataset>" not in fix and ".cache() after that" in fix


def test_an_interleave_inside_a_library_built_dataset_gets_the_helper_call_not_a_template():
    """TF's custom training walkthrough: make_csv_dataset's own interleave over its one
    CSV file was the slowest stage, and input.bound's fix read "in place of:
    <dataset>.interleave(filename_to_dataset)", a call the program never wrote."""
    interleave = PipelineStage(
        name="LegacyParallelInterleaveV2", kind="interleave", written_as=("interleave",),
        location="train.py:24", function="filename_to_dataset", by_library=True,
    )  # fmt: skip
    pipeline = PipelineFacts(
        id=1,
        stages=(interleave,),
        helper_call="tf.data.experimental.make_csv_dataset(train_dataset_fp, batch_size)",
    )
    fix = "\n".join(pipeline_code.for_stage(pipeline, 0, 0.0))
    assert "make_csv_dataset(train_dataset_fp, batch_size) builds at train.py:24" in fix
    assert "<dataset>" not in fix and ".interleave(" not in fix


def test_a_map_inside_a_library_built_dataset_gets_the_helper_call_not_a_template():
    """TF's time-series tutorial: timeseries_dataset_from_array's own ParallelMapV2
    (<lambda>) was the slowest stage, and input.bound's fix read
    '<dataset>.map(<your function>).cache()'."""
    lambda_map = PipelineStage(
        name="ParallelMapV2(<lambda>)",
        kind="map",
        written_as=("map",),
        function="<lambda>",
        parallelism=2,
        location="ts.py:257",
        by_library=True,
    )
    pipeline = PipelineFacts(
        id=1,
        stages=(lambda_map,),
        helper_call="tf.keras.utils.timeseries_dataset_from_array(data=data, targets=None)",
    )
    fix = "\n".join(pipeline_code.for_stage(pipeline, 0, 0.0))
    assert "timeseries_dataset_from_array(data=data, targets=None) builds at ts.py:257" in fix
    assert "<dataset>" not in fix and "<your function>" not in fix


def test_in_memory_slices_get_no_template_of_stages_the_program_lacks(program):
    """A slowest stage that slices arrays is tf.data's own per-element cost: no map to
    parallelise, nothing to cache; the prefetch where there is none, pasted and run."""
    p = program(
        "x = np.arange(64, dtype=np.float32)\n"
        "ds = tf.data.Dataset.from_tensor_slices((x, x * 2)).shuffle(16).batch(8)\n"
    )
    stages = (
        p.stage("from_tensor_slices", ("from_tensor_slices",), kind="source",
                name="TensorSlice", self_time_per_element_s=2.5e-6),
        p.stage(".shuffle(16)", ("shuffle",), kind="shuffle", name="Shuffle"),
        p.stage(".batch(8)", ("batch",), kind="batch", name="BatchV2", ratio=8.0),
    )  # fmt: skip
    pipeline = PipelineFacts(id=1, stages=stages, bottleneck=0)
    fix = "\n".join(pipeline_code.for_stage(pipeline, 0, 1e-4))
    assert fix.startswith(
        f"# TensorSlice at {p.name}:{p.line_of('from_tensor_slices')} makes each element from memory (2.5 µs an element, "
        "20 µs a batch of 8): tf.data's own\n"
    )
    assert "<" not in fix and ".map(" not in fix and ".cache()" not in fix
    (pasted,) = p.check(fix)
    assert ".batch(8).prefetch(tf.data.AUTOTUNE)" in pasted
    prefetched = replace(pipeline, prefetch_run=True)
    said = pipeline_code.for_stage(prefetched, 0, 1e-4)
    assert all(line.startswith("# ") for line in said)  # nothing to paste: said so
    assert "the pipeline already prefetches" in "\n".join(said)


def test_a_py_dataset_s_own_init_gets_workers_where_its_source_says(tmp_path):
    """Where the class's source is read: its super().__init__(...) call with workers
    added after what it passes, or, where its __init__ makes none (a review's
    keras.utils.Sequence subclass, told "give its super().__init__(...) call workers=4,
    or where its __init__ has none..."), the call as its first line. Each pasted and run."""
    source = tmp_path / "pets.py"
    source.write_text(
        "import keras\n\n\nclass Pets(keras.utils.Sequence):\n"
        "    def __init__(self, batch_size, paths):\n"
        "        self.batch_size = batch_size\n        self.paths = paths\n\n"
        "    def __len__(self):\n        return 2\n\n"
        "    def __getitem__(self, i):\n        return i\n"
    )
    stage = _keras_generator_stage("Pets.__getitem__", f"{source}:12")
    fix = pipeline_code.generator(stage)
    assert fix[-2:] == [
        f"# {source}:5: Pets.__init__ calls no super().__init__(): as its first line",
        "super().__init__(workers=4)",
    ]
    pasted = source.read_text().replace(
        "        self.batch_size = batch_size\n",
        f"        {fix[-1]}\n        self.batch_size = batch_size\n",
    )
    namespace: dict = {}
    exec(compile(pasted, str(source), "exec"), namespace)
    assert namespace["Pets"](32, []).workers == 4
    # a call with arguments of its own: workers after them
    source.write_text(
        "import keras\n\n\nclass Pets(keras.utils.PyDataset):\n"
        "    def __init__(self, paths, shuffle=False):\n"
        "        super().__init__(use_multiprocessing=False)\n        self.paths = paths\n\n"
        "    def __len__(self):\n        return 2\n\n"
        "    def __getitem__(self, i):\n        return i\n"
    )
    fix = pipeline_code.generator(stage)
    assert fix[-2:] == [
        f"# {source}:6: in place of: super().__init__(use_multiprocessing=False)",
        "super().__init__(use_multiprocessing=False, workers=4)",
    ]
    namespace = {}
    exec(
        compile(source.read_text().replace(fix[-2].split(": ")[-1], fix[-1]), "p", "exec"),
        namespace,
    )
    assert namespace["Pets"]([]).workers == 4
    # a call with nothing in it, and one whose arguments are calls of their own
    for written, added in (
        ("super().__init__()", "super().__init__(workers=4)"),
        (
            "super().__init__(max_queue_size=int(8))",
            "super().__init__(max_queue_size=int(8), workers=4)",
        ),
    ):
        source.write_text(
            "import keras\n\n\nclass Pets(keras.utils.PyDataset):\n"
            f"    def __init__(self, paths):\n        {written}\n"
        )
        assert pipeline_code.generator(stage)[-1] == added
    source.write_text(
        "import keras\n\n\nclass Pets(keras.utils.PyDataset):\n"
        "    def __init__(self, paths, **kwargs):\n        super().__init__(**kwargs)\n"
    )
    # one that passes a ** mapping may give workers through it: said in words
    assert "give Pets's super().__init__(...) call" in "\n".join(pipeline_code.generator(stage))
