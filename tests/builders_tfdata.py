"""Small ``tfdata`` facts for the input rules: stages, pipelines and the runs around them.

The stage names, kinds and numbers follow what TF 2.21's ``get_model_proto`` shows for
these pipelines on a CPU host (self times summed over threads, MapAndBatch's ratio = the
batch size, an injected Prefetch with no ``written_as``), so each scenario reads like a
real run: change one fact at a time to make the near-miss.
"""

from __future__ import annotations

from dataclasses import replace

from gpuwhy.facts import Facts, PipelineFacts, PipelineStage, StepFacts, TfDataFacts

GiB = 1024**3


def stage(
    name: str = "ParallelMapV2",
    kind: str = "map",
    elements: int = 3200,
    self_time_s: float = 1.0,
    **changes,
) -> PipelineStage:
    """A stage; its time per element follows from elements and self time unless given."""
    per_element = changes.pop(
        "self_time_per_element_s", self_time_s / elements if elements else None
    )
    return PipelineStage(
        name=name,
        kind=kind,
        elements=elements,
        self_time_s=self_time_s,
        self_time_per_element_s=per_element,
        **changes,
    )


def tfrecord(compression: str = "", **changes) -> PipelineStage:
    base = dict(
        written_as=("TFRecordDataset",),
        written_calls=(
            f"tf.data.TFRecordDataset(filenames, compression_type='{compression}')"
            if compression
            else "tf.data.TFRecordDataset(filenames)",
        ),
        location="train.py:60",
        self_time_s=0.4,
        codec_ops=(compression,) if compression else (),
    )
    return stage(**{"name": "TFRecord", "kind": "source", **base, **changes})


def parse(**changes) -> PipelineStage:
    """The decode map TF parallelised by itself (written without num_parallel_calls)."""
    base = dict(
        written_as=("map",),
        written_calls=("ds.map(parse)",),
        location="train.py:61",
        function="parse",
        function_location="train.py:41",
        parallelism=4,
        self_time_s=2.0,
        codec_ops=("DecodePng",),
    )
    return stage(**{"name": "ParallelMapV2", "kind": "map", **base, **changes})


def augment(**changes) -> PipelineStage:
    """A random augmentation with stateful ops: TF leaves it sequential (a Map node)."""
    base = dict(
        written_as=("map",),
        written_calls=("ds.map(augment)",),
        location="train.py:62",
        function="augment",
        function_location="train.py:47",
        self_time_s=6.0,
        random=True,
        stateful=True,
    )
    return stage(**{"name": "Map", "kind": "map", **base, **changes})


def py_map(**changes) -> PipelineStage:
    """``map(lambda x: tf.py_function(slow, [x], tf.int64))``: sequential, in Python."""
    base = dict(
        written_as=("map",),
        written_calls=("ds.map(lambda x: tf.py_function(slow, [x], tf.int64))",),
        location="train.py:30",
        function="<lambda>",
        function_location="train.py:30",
        self_time_s=6.0,
        python=True,
        stateful=True,
    )
    return stage(**{"name": "Map", "kind": "map", **base, **changes})


def generator_source(**changes) -> PipelineStage:
    base = dict(
        written_as=("from_generator",),
        written_calls=("tf.data.Dataset.from_generator(batches, output_signature=signature)",),
        location="train.py:20",
        function="batches",
        function_location="train.py:12",
        self_time_s=6.0,
        python=True,
        stateful=True,
    )
    return stage(**{"name": "Generator", "kind": "generator", **base, **changes})


def shuffle(**changes) -> PipelineStage:
    base = dict(
        written_as=("shuffle",),
        written_calls=("ds.shuffle(1000)",),
        location="train.py:63",
        self_time_s=0.05,
        random=True,
    )
    return stage(**{"name": "Shuffle", "kind": "shuffle", **base, **changes})


def batch(**changes) -> PipelineStage:
    base = dict(
        written_as=("batch",),
        written_calls=("ds.batch(32)",),
        location="train.py:64",
        elements=100,
        ratio=32.0,
        self_time_s=0.1,
    )
    return stage(**{"name": "BatchV2", "kind": "batch", **base, **changes})


def repeat(**changes) -> PipelineStage:
    base = dict(
        written_as=("repeat",),
        written_calls=("ds.repeat()",),
        location="train.py:65",
        elements=100,
        self_time_s=0.01,
    )
    return stage(**{"name": "Repeat", "kind": "repeat", **base, **changes})


def prefetch(injected: bool = True, **changes) -> PipelineStage:
    base = dict(
        written_as=() if injected else ("prefetch",),
        written_calls=() if injected else ("ds.prefetch(tf.data.AUTOTUNE)",),
        location=None if injected else "train.py:66",
        elements=100,
        self_time_s=0.02,
        buffer_size=4,
    )
    return stage(**{"name": "Prefetch", "kind": "prefetch", **base, **changes})


def pipeline(*stages: PipelineStage, bottleneck=None, **changes) -> PipelineFacts:
    """A Keras fit pipeline read for three epochs of 100 batches; waits 40% by default
    (10 ms per batch against 15 ms of work on it)."""
    base = PipelineFacts(
        id=1,
        location="train.py:66",
        consumer="keras-fit",
        iterators=3,
        elements=300,
        stages=tuple(stages),
        bottleneck=bottleneck,
        prefetch_run=any(s.kind == "prefetch" for s in stages[-1:]),
        cardinality=100,
        element_bytes=32 * 64 * 64 * 3 * 4 + 32 * 8,
        gap_median_s=0.015,
        wait_per_element_s=0.010,
        consume_s=7.5,
        throughput_per_s=40.0,
    )
    return replace(base, **changes)


def example_pipeline(**changes) -> PipelineFacts:
    """examples/slow_input_fit.py as TF runs it: GZIP records, a parallel PNG decode, a
    sequential random augmentation (the bottleneck), shuffle, batch, repeat, and the
    prefetch TF injected."""
    stages = (tfrecord("GZIP"), parse(), augment(), shuffle(), batch(), repeat(), prefetch())
    return pipeline(*stages, **{"bottleneck": 2, **changes})


def in_memory_pipeline(**changes) -> PipelineFacts:
    """Arrays in memory, batched, prefetched by TF, read by a Python loop: 0.2 ms of
    work per batch, far below any step. Every stage counted over the three passes (no
    shuffle: TF drops none of its nodes before the iterator ends)."""
    source = stage(
        name="TensorSlice",
        kind="source",
        written_as=("from_tensor_slices",),
        self_time_s=0.03,
        elements=9600,
    )
    return pipeline(
        source,
        batch(self_time_s=0.03, elements=300),
        prefetch(elements=300),
        **{"consumer": "python-loop", "bottleneck": 1, **changes},
    )


def py_function_pipeline(**changes) -> PipelineFacts:
    """The preamble's experiment: Range <- Map (py_function) <- MapAndBatch(parse) <- Prefetch."""
    stages = (
        stage(
            name="Range",
            kind="source",
            written_as=("range",),
            location="train.py:29",
            self_time_s=0.01,
        ),
        py_map(),
        stage(
            name="MapAndBatch",
            kind="map",
            written_as=("map", "batch"),
            location="train.py:31",
            function="parse",
            function_location="train.py:25",
            parallelism=2,
            elements=100,
            ratio=32.0,
            self_time_s=0.5,
        ),
        prefetch(injected=False),
    )
    return pipeline(*stages, **{"bottleneck": 1, "prefetch_written": True, **changes})


def tfdata(*pipelines: PipelineFacts, **changes) -> TfDataFacts:
    """An 8-core host with 64 GiB, half busy."""
    base = TfDataFacts(
        pipelines=tuple(pipelines),
        host_cores=8,
        host_cpu_busy_fraction=0.50,
        process_cpu_fraction=0.45,
        host_memory_bytes=64 * GiB,
        host_memory_available_bytes=48 * GiB,
    )
    return replace(base, **changes)


def fit_steps(wait=0.40, **changes) -> StepFacts:
    """Keras fit steps whose wait came from the fit pipeline's gap timer."""
    base = StepFacts(
        source="keras-fit",
        marker="Model.fit at train.py:80",
        count=301,
        warmup=1,
        median_s=0.025,
        total_s=7.5,
        input_wait_fraction=wait,
        input_wait_median_s=None if wait is None else 0.025 * wait,
        input_wait_source=None if wait is None else "tf.data gap timer",
    )
    return replace(base, **changes)


def loop_steps(wait=0.40, **changes) -> StepFacts:
    """A Python loop over the dataset: the time inside next() is the wait."""
    base = StepFacts(
        source="tf-data",
        marker="next() on a tf.data iterator at train.py:90",
        count=301,
        warmup=1,
        median_s=0.020,
        total_s=6.0,
        input_wait_fraction=wait,
        input_wait_median_s=None if wait is None else 0.020 * wait,
        input_wait_source=None if wait is None else "next() timing",
    )
    return replace(base, **changes)


def facts(*pipelines: PipelineFacts, steps: StepFacts | None = None, **tfdata_changes) -> Facts:
    return Facts(steps=steps, tfdata=tfdata(*pipelines, **tfdata_changes))
