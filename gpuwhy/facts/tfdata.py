"""Section ``tfdata``: the tf.data pipelines a watched run iterated, stage by stage as
TensorFlow ran them and as the user wrote them, and the host they ran on.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class PipelineStage:
    """One stage of a tf.data pipeline, as TF ran it (after its own default rewrites).

    A stage joins two views: the *run* view from the iterator's autotune model
    (``get_model_proto``: TF's node name, elements, self time, parallelism, buffer) and
    the *written* view from the user's Python dataset objects (the transformation they
    wrote, its file:line, the function it runs and what that function contains). A fused
    stage (``MapAndBatch``) lists every written transformation it came from; a stage TF
    added by itself (an injected ``Prefetch``) has ``written_as == ()``.
    """

    name: str  # TF's node name: Map, ParallelMapV2, MapAndBatch, TFRecord ...
    kind: str  # source | generator | map | filter | flat_map | interleave |
    # batch | prefetch | cache | shuffle | repeat | other
    written_as: tuple[str, ...] = ()  # Python transformations it came from: ("map", "batch")
    location: str | None = None  # file:line where the user wrote the transformation
    function: str | None = None  # the user function it runs ("parse", "<lambda>")
    function_location: str | None = None  # file:line where that function is defined
    parallelism: int | None = None  # threads TF runs it with (None: not a parallel stage)
    parallelism_written: int | None = None  # num_parallel_calls as written (-1: AUTOTUNE)
    buffer_size: int | None = None  # prefetch / parallel-map buffer, elements
    elements: int = 0  # elements this stage produced
    self_time_s: float = 0.0  # TF's processing time of this stage alone, all threads
    self_time_per_element_s: float | None = None
    ratio: float = 1.0  # input elements per output element (a batch of 32: 32)
    root_elements_per_s: float | None = None  # how fast it alone could feed the model
    work_share: float | None = None  # its part of the pipeline's CPU work per element the
    # model gets (None: a bookkeeping stage or unmeasured)
    python: bool = False  # calls Python: py_function, numpy_function, generator
    stateful: bool = False  # its function has stateful ops (stays sequential)
    # of those, some may give an element another result in parallel or in another order
    # (a random draw, Python not declared pure, a write); reading a lookup table or a
    # variable does not. None: a record from before it was kept (judge by ``stateful``)
    order_dependent: bool | None = None
    deterministic: bool | None = None  # as written (None: the pipeline default)
    codec_ops: tuple[str, ...] = ()  # decode/encode/decompress ops it runs ("DecodeJpeg", "GZIP")
    random: bool = False  # its function draws random numbers (not cacheable)
    # its elements are the same on every pass (no random op, Python not declared pure,
    # shuffle, writing op or tf.Variable): what gpuwhy fix places a cache by; None: not
    # judged (a record from before)
    repeats: bool | None = None
    # the calls as written, one per written_as ("" where the source could not be read):
    # ("ds.map(parse)", ".batch(32)"); a fix rewrites these, so it fits the code
    written_calls: tuple[str, ...] = ()
    element_bytes: int | None = None  # one element it outputs, from its spec (None: a
    # dimension or dtype of unknown size, e.g. a decoded image of any height)
    files: int | None = None  # a file reader: how many files it was given
    by_library: bool = False  # made by Keras or another library (fit's data adapters)
    # a generator that yields slices of the program's arrays: the from_tensor_slices call
    # that yields the same elements, with the program's names ("tf.data.Dataset.
    # from_tensor_slices((x_train, y_train))"); None: not such a generator
    as_slices: str | None = None


@dataclass(frozen=True)
class PipelineFacts:
    """One tf.data pipeline the program iterated, with what its iterators measured.

    Stages run from the source (first) to the one the model reads (last). Times add up
    over every iterator of this dataset (one per Keras epoch, say). ``gap_median_s`` is
    TF's own timer of the consumer: the time between two ``GetNext`` calls, i.e. what
    the model does with an element; the wait is the rest of the time per element.
    """

    id: int  # stable within one run
    location: str | None = None  # file:line where the final dataset was built; for one
    # built inside a function of the user's (make_dataset(split)), the line calling it
    helper_location: str | None = None  # then: the line in that function that built it
    consumer: str = "python-loop"  # keras-fit | keras-evaluate | keras-predict | python-loop
    # python-loop: the user's file:line that read it, and the library call that iterated
    # it there ("TextVectorization.adapt"; None: the user's own loop or next())
    read_at: str | None = None
    read_via: str | None = None
    # stages a library built (by_library): the user's call into it, as written at their
    # location ("keras.utils.image_dataset_from_directory(root, batch_size=32)")
    helper_call: str | None = None
    iterators: int = 0  # iterators created over it (epochs, restarts)
    elements: int = 0  # elements the program read from it
    # an iterator was freed after its last read of TF's count (one older than a few
    # seconds is not read again as it is freed): ``elements`` is a lower bound
    elements_at_least: bool = False
    stages: tuple[PipelineStage, ...] = ()
    bottleneck: int | None = None  # index into stages of the slowest stage
    prefetch_written: bool = False  # a prefetch the user wrote at the end
    # a prefetch at the end as TF ran it (written or injected), or a library's own threads
    # reading ahead in its place (Keras' enqueuer for a PyDataset with workers)
    prefetch_run: bool = False
    cache_written: bool = False
    autotune: bool = True  # options.autotune.enabled
    deterministic: bool | None = None  # options.deterministic as the program set it
    # elements per pass of the data (None: infinite or unknown); behind a repeat, what
    # it repeats (ds.repeat().take(640): a pass, where TF's own count says 640)
    cardinality: int | None = None
    element_bytes: int | None = None  # one output element (batch), from its spec
    # a generator's batches of unknown size (Keras fit on a generator or PyDataset): one
    # example's bytes from the spec, and the bytes TF counted the consumer getting
    example_bytes: int | None = None
    delivered_bytes: int | None = None
    gap_median_s: float | None = None  # consumer time per element (TF's gap timer)
    gap_mean_s: float | None = None  # its mean: what adds up over the run
    gap_count: int = 0  # the gaps those are of (TF keeps each iterator's latest 100)
    gap_stdev_s: float | None = None  # their spread: how well the mean is known
    # when the first iterator those gaps come from was made (seconds from the run's
    # start): the steps they time begin there (a fit's first epoch is left out of both)
    gaps_since_s: float | None = None
    # who timed those gaps: "tf.data gap timer" (TF's model), or "generator timing" where
    # TF kept none (autotune off) and a from_generator source was timed around its calls
    gap_source: str | None = None
    wait_per_element_s: float | None = None  # measured wait for one element
    # how: "next() timing" (a Python loop's reads, timed one by one: direct), else the
    # wall-clock windows its iterators were read over less the consumer's time
    wait_source: str | None = None
    consume_s: float = 0.0  # wall time over which elements were read
    throughput_per_s: float | None = None  # elements per second the model got
    model_error: str | None = None  # why TF's per-stage model could not be read

    @property
    def elements_known(self) -> bool:
        """Whether ``elements`` counts what the program read: with autotune off TF keeps
        no model of the pipeline and no count (a Keras PyDataset with workers turns it
        off), so 0 there is unknown, not a pipeline never read."""
        return self.autotune or self.elements > 0


@dataclass(frozen=True)
class TfDataFacts:
    """Section ``tfdata``: the tf.data pipelines the program iterated, and the host.

    ``host_cpu_busy_fraction`` is the whole machine's CPU use during the run (all
    processes, all cores), read from the OS; ``process_cpu_fraction`` is the watched
    process tree's share of all cores. Both say whether more input threads could help;
    their difference is what other processes took of the host over the same interval.
    ``host_load_average`` is the OS's 1-minute load average at the end of the run.
    """

    pipelines: tuple[PipelineFacts, ...] = ()
    host_cores: int | None = None
    host_cpu_busy_fraction: float | None = None
    process_cpu_fraction: float | None = None
    host_load_average: float | None = None
    host_memory_bytes: int | None = None  # physical memory of the host
    host_memory_available_bytes: int | None = None  # free for a cache, at the end of the run
    # file:line where a loop of the program's read a tf.distribute dataset: its pipeline
    # runs inside a MultiDeviceIterator, of which TF keeps no model, so it is none of
    # ``pipelines`` (and no other pipeline is what that loop read)
    distributed_reads: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()
