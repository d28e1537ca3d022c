"""Facts: the plain data that collectors produce and rules read.

Collectors never decide and rules never touch TensorFlow or NVML; this module is the
contract between them. Every section is a frozen dataclass made only of JSON-friendly
values, so a saved run record can be loaded on another machine and checked again with
the current rules (``gpuwhy report --recheck``) without filling anything from the
machine that loads it.
"""

from __future__ import annotations

import dataclasses
import functools
import types
import typing
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class LibraryProbe:
    """One shared library the TensorFlow build loads for the GPU, and whether it loads here.

    ``wanted`` is the exact soname the build asks for (``libcudnn.so.9``); ``other_versions``
    lists sonames of the same library with another major version that *are* on the loader
    path, which is how "CUDA 13 installed, TF built for CUDA 12" shows up.
    """

    name: str  # short name: cudart, cublas, cudnn ...
    wanted: str  # soname the build needs
    loaded: bool  # dlopen succeeded (or TF already had it mapped)
    path: str | None = None  # where it was found
    error: str | None = None  # dlerror text when it did not load
    other_versions: tuple[str, ...] = ()  # other majors found on the loader path
    pip_package: str | None = None  # pip package that ships it (nvidia-cudnn-cu12)
    apt_package: str | None = None  # Debian/Ubuntu package (NVIDIA's CUDA repository)


@dataclass(frozen=True)
class TensorFlowFacts:
    """What a child Python process saw when it imported TensorFlow and asked for GPUs."""

    installed: bool
    probe_status: str = "ok"  # ok | timeout | crashed | error
    python_version: str | None = None  # of the interpreter that was checked
    import_ok: bool = False
    import_error: str | None = None  # last line of the exception, or the crash signal
    import_traceback: str | None = None
    hung_in: str | None = None  # stage the child was in when it timed out / crashed
    signal: str | None = None  # SIGILL, SIGSEGV ... when the child died of one
    version: str | None = None
    distribution: str | None = None  # pip distribution that owns the package (tensorflow-cpu)
    location: str | None = None  # package directory
    import_seconds: float | None = None
    build: dict[str, Any] = field(default_factory=dict)  # tf.sysconfig.get_build_info()
    gpus: tuple[str, ...] = ()  # tf.config.list_physical_devices("GPU") names
    gpu_details: tuple[dict[str, Any], ...] = ()  # name, compute_capability, pci_bus_id per TF GPU
    confirm_device: str | None = None  # device a real matmul ran on (None: not tried)
    confirm_error: str | None = None
    loaded_libraries: tuple[str, ...] = ()  # CUDA-related .so files mapped in the child
    libraries: tuple[LibraryProbe, ...] = ()
    log_lines: tuple[str, ...] = ()  # TF's own GPU-related log lines (stderr)


@dataclass(frozen=True)
class DriverFacts:
    """The NVIDIA driver as NVML and libcuda report it, independent of TensorFlow."""

    nvml_ok: bool
    nvml_error: str | None = None  # NVML error name: LibraryNotFound, DriverNotLoaded ...
    libcuda_loaded: bool = False
    libcuda_error: str | None = None
    driver_version: str | None = None  # "550.54.15"
    cuda_driver_version: str | None = None  # highest CUDA the driver supports: "12.4"
    device_count: int = 0
    in_container: bool = False
    device_nodes: bool = False  # /dev/nvidiactl exists


@dataclass(frozen=True)
class GpuProcess:
    """A process holding memory on a GPU (from NVML), other than gpuwhy's own."""

    pid: int
    name: str | None = None
    used_bytes: int | None = None


@dataclass(frozen=True)
class GpuDevice:
    """One physical NVIDIA GPU as NVML sees it, before TensorFlow allocates anything."""

    index: int
    name: str
    uuid: str | None = None
    pci_bus_id: str | None = None
    compute_capability: str | None = None  # "9.0"
    memory_total_bytes: int | None = None
    memory_used_bytes: int | None = None  # by everyone, sampled before TF started
    utilization_percent: float | None = None
    processes: tuple[GpuProcess, ...] = ()


@dataclass(frozen=True)
class EnvironmentFacts:
    """Section ``environment``: the machine, the TF build, the driver and the settings."""

    python_version: str
    python_executable: str
    platform: str  # sys.platform: linux, darwin, win32
    machine: str  # x86_64, aarch64, arm64
    wsl: bool = False
    cpu_count: int | None = None
    env_vars: dict[str, str] = field(default_factory=dict)  # the GPU-relevant ones that are set
    tensorflow: TensorFlowFacts | None = None
    driver: DriverFacts | None = None


# Why an op is where it is: the codes in OpGroup.reason (collect/placement/placer.py).
PLACEMENT_REASONS = {
    "gpu": "runs on the GPU",
    "xla": "inside a function XLA compiles (jit_compile): one GPU cluster, no per-op placement",
    "gpu-host-memory": "GPU kernel keeps every argument in host memory (computed on the host by design)",
    "no-gpu-kernel": "the op has no GPU kernel",
    "no-gpu-kernel-for-dtype": "the op has GPU kernels, none for these dtypes",
    "host-by-design": (
        "works on host state by design (an iterator, a handle, a checkpoint, a summary, "
        "the log): on the CPU on every machine"
    ),
    "forced-cpu": "an explicit tf.device('/CPU:0') pins it, though a GPU kernel exists",
    "colocated": "colocated with an op that must stay on the CPU",
    "resource-on-gpu-no-kernel": (
        "uses a resource that lives on the GPU but has no GPU kernel: TensorFlow fails with "
        "'Cannot assign a device for operation'"
    ),
    "follows-consumer": "a generator (constant) placed with its consumers",
    "follows-input": "a Shape/Size/Rank or Identity placed with its input",
    "input": "an input of the function (tf.data and NumPy inputs arrive in host memory)",
    "captured": "a value captured by the function",
}


def is_input_boundary(op: str) -> bool:
    """tf.data's iterator ops: on the host by design, the input batch's way into the step."""
    return op.startswith(
        (
            "Iterator",
            "Optional",
            "MultiDeviceIterator",
            "AnonymousIterator",
            "MakeIterator",
            "DeleteIterator",
        )
    ) or op.endswith(("Dataset", "DatasetV2", "DatasetV3"))


@dataclass(frozen=True)
class OpGroup:
    """Ops of one kind that TensorFlow places the same way, for the same reason.

    500 ``ReadVariableOp`` nodes read as one line; the examples and locations say where.
    """

    op: str
    in_dtypes: tuple[str, ...]
    out_dtypes: tuple[str, ...]
    device: str  # GPU | CPU (predicted, or seen with --verify)
    computes_on: str  # GPU | CPU | host (on the GPU, arguments in host memory)
    reason: str  # a PLACEMENT_REASONS code
    count: int
    in_loop: bool = False  # inside a while loop: runs once per iteration
    examples: tuple[str, ...] = ()  # node names, function-qualified
    locations: tuple[str, ...] = ()  # distinct "file:line" of the user code that created them
    requested: str | None = None  # device type asked for with tf.device
    colocated_with: str | None = None  # the op whose placement decided this one
    by_library: bool = False  # created by a library's code (its device request is its own)
    functions: tuple[str, ...] = ()  # the audited functions they are in: "f (train.py:9)"
    function_counts: tuple[int, ...] = ()  # of count, in each of ``functions``
    # the most elements a float64 tensor of these ops holds (their examples' static
    # shapes); None: no float64, or a size not known
    float64_elements: int | None = None


@dataclass(frozen=True)
class HostDeviceCopy:
    """One tensor that crosses between host and GPU memory each time the function runs.

    TF's graph partitioner adds one Send/Recv pair per tensor and destination
    (graph/graph_partition.cc), so a tensor read by ten GPU ops is one copy.
    """

    direction: str  # to-device | to-host
    kind: str  # input (function arguments) | step (inside the function)
    src: str  # producing node, function-qualified
    src_op: str
    dst: str  # first consuming node
    dst_op: str
    dtype: str
    consumers: int = 1
    shape: tuple[int | None, ...] | None = None  # static shape, None dims unknown
    bytes: int | None = None  # when the shape is fully known
    in_loop: bool = False
    location: str | None = None  # file:line of the op that makes the copy necessary
    cause: str | None = None  # that op's name
    cause_op: str | None = None  # its op type
    # its PLACEMENT_REASONS code: on the CPU (no-gpu-kernel, forced-cpu, ...), or a GPU
    # op whose kernel keeps this argument in host memory (gpu, gpu-host-memory: int32)
    cause_reason: str | None = None

    def sizeable(self, min_bytes: int = 1024) -> bool:
        """Large enough to matter: a known size of at least ``min_bytes``, or a tensor
        (rank > 0) of unknown size. Scalars and shape vectors are not."""
        if self.bytes is not None:
            return self.bytes >= min_bytes
        return self.shape is None or len(self.shape) > 0


@dataclass(frozen=True)
class TensorOp:
    """A matmul or convolution: what tensor cores would run, with its dtype and sizes."""

    node: str
    op: str
    dtype: str
    dims: dict[str, int | None] = field(default_factory=dict)  # m/n/k or batch/in/out channels
    layer: str | None = None  # Keras layer / name scope that created it
    location: str | None = None
    flops: int | None = None  # multiply-adds x 2, from static shapes
    in_loop: bool = False
    jit_compile: bool = False
    gradient: bool = False  # part of the backward pass
    function: str | None = None  # the audited tf.function: "train_step (train.py:40)"
    flops_batch: int | None = None  # the batch size the run delivered, standing in for a
    # leading dimension the trace left unknown (Keras fit); None: FLOPs from the trace
    output_bytes: int | None = None  # its output (sized like its FLOPs); None: unknown
    # times it runs per call: the iterations of the while loops around it, where the
    # graph fixes them (maximum_iterations: Keras' RNN over a static sequence length);
    # None in a loop whose iterations it does not fix (then costed once)
    runs: int | None = 1
    loop: str | None = None  # the outermost while loop around it (its While op)


@dataclass(frozen=True)
class Disagreement:
    """A node TensorFlow placed somewhere other than predicted (``--verify``)."""

    node: str
    op: str
    predicted: str
    actual: str


@dataclass(frozen=True)
class PlacementCheck:
    """``--verify``: the function run with TensorFlow's real placer on this machine's GPU."""

    ran: bool
    reason: str | None = None  # why it could not run
    device: str | None = None
    nodes_compared: int = 0
    disagreements: tuple[Disagreement, ...] = ()


@dataclass(frozen=True)
class KernelWork:
    """The GPU kernels of one op type in an audited function, and the bytes they write.

    Ops that launch no kernel (constants, identities, variable reads, shape queries)
    are left out. ``bytes`` adds up the outputs whose static shape is known (a leading
    dimension the trace left unknown taken as the batch the run delivered); ``sized``
    says how many of ``count`` that was; ``float32_bytes`` how many of ``bytes`` are
    float32 outputs (in a mixed-precision step, the casts up around normalisations and
    losses that XLA fuses away). Kernels in a while loop are a row of their own per
    loop (``loop``, its While op), counted per call: ``runs`` times each (the loop's
    iterations where the graph fixes them, else once)."""

    op: str
    count: int
    bytes: int = 0
    sized: int = 0
    float32_bytes: int = 0
    loop: str | None = None
    runs: int = 1


@dataclass(frozen=True)
class AuditedFunction:
    name: str  # tf.function / Keras step name
    nodes: int  # after inlining nested bodies
    gpu: int  # nodes computing on the GPU
    host: int  # on the GPU device, arguments in host memory
    cpu: int
    jit_compile: bool = False
    location: str | None = None  # where the Python function is defined
    input_copies: int = 0  # host<->device copies of its arguments per call
    step_copies: int = 0  # copies between its own ops per call (loop bodies once)
    unaudited: tuple[str, ...] = ()  # bodies it runs elsewhere (tf.data functions)
    note: str | None = None  # what the audit could not know about how it runs
    kernels: tuple[KernelWork, ...] = ()  # its GPU kernels other than matmul/conv


@dataclass(frozen=True)
class FloatIndex:
    """A float input of the step used as integer indices (token ids through a float
    ``keras.Input``): under mixed precision it would be cast to 16 bits first."""

    op: str  # the gather or one-hot: GatherV2, ResourceGather, OneHot
    node: str
    layer: str | None  # the Keras layer scope that made it: "token_emb/embedding"
    dtype: str  # the float type the ids arrive in: float32
    location: str | None = None  # user file:line that made the cast
    input_name: str | None = None  # the program's name for that Input: "inputs"
    input_location: str | None = None  # file:line of its keras.Input call
    input_written: str | None = None  # that call as written: "layers.Input(shape=(maxlen,))"


@dataclass(frozen=True)
class PlacementFacts:
    """Section ``placement``: where each op of the audited functions runs, and the copies.

    ``predicted`` is True when no GPU was here: the devices are what TensorFlow's kernel
    registry says a GPU machine would choose, not what was observed.
    """

    predicted: bool
    functions: tuple[AuditedFunction, ...] = ()
    groups: tuple[OpGroup, ...] = ()
    copies: tuple[HostDeviceCopy, ...] = ()
    tensor_ops: tuple[TensorOp, ...] = ()
    tf32_enabled: bool | None = None
    mixed_precision_policy: str | None = None  # Keras global policy name
    compute_capability: tuple[int, int] | None = None  # GPU here; None when predicting
    gpu_name: str | None = None
    verification: PlacementCheck | None = None
    seconds: float | None = None  # the audit's own time
    float_indices: tuple[FloatIndex, ...] = ()  # float inputs used as ids (token ids)


# ---------------------------------------------------------------------------
# Sections of a watched run (``gpuwhy run``, ``gpuwhy.session()``, ``gpuwhy watch``).
# Times are seconds since the run started (time.perf_counter() at start), so steps,
# traces and GPU samples line up on one axis.


@dataclass(frozen=True)
class ProgramFacts:
    """Section ``program``: what was watched and how it ended."""

    command: tuple[str, ...]  # argv as the program saw it
    ended: str = "completed"  # completed | exception | interrupted | exit
    exit_code: int = 0
    error: str | None = None  # the exception's last line
    seconds: float = 0.0
    tensorflow_imported: bool = False
    tensorflow_version: str | None = None
    keras_version: str | None = None
    gpus_seen_by_tf: tuple[str, ...] = ()  # logical GPUs TF created in the program
    # Keras compile(jit_compile="auto") (the default): True where Keras would XLA-compile
    # the train step on a GPU machine (it does not on one without a GPU)
    keras_auto_jit: bool | None = None
    # Keras LSTM/GRU layers (names) that a GPU runs with cuDNN's RNN kernels (and for
    # which Keras compiles no step with XLA there); here, without a GPU, a while loop
    keras_cudnn_rnn: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()  # what gpuwhy could not watch, and why


@dataclass(frozen=True)
class StepLoop:
    """One loop whose steps are in :class:`StepFacts` (a script may train in several:
    a warm-up loop, one per model, a custom loop then ``fit``)."""

    source: str  # keras-fit, tf-data, tf-function or optimizer
    name: str  # the loop's site or function: "train.py:40", "train_step (train.py:12)"
    count: int  # its steps
    first_s: float  # when its first step started, from the run's start
    median_s: float | None = None  # per step, after its warm-up


@dataclass(frozen=True)
class StepFacts:
    """Section ``steps``: the training steps found without step markers.

    ``source`` says what marked them: ``keras-fit`` (Keras' per-batch callbacks),
    ``tf-data`` (next() on a tf.data iterator in a Python loop), ``tf-function`` (calls
    of the hottest tf.function) or ``optimizer`` (eager ``apply_gradients`` calls).
    ``warmup`` first steps of each loop (tracing, autotune ramp-up) are left out of the
    statistics.
    ``input_waits`` holds, per step, the seconds spent waiting for the next batch where
    that was measured (None: not measurable for this source). The steps of every
    training loop of the program are counted, on one time line; ``source`` and
    ``marker`` name the loop with the most steps, ``loops`` each of them.
    """

    source: str
    marker: str  # what was timed, for people: "Model.fit (train.py:40)"
    count: int  # steps seen (a Keras batch of steps_per_execution N is N)
    warmup: int = 0
    median_s: float | None = None  # per step, after warm-up
    p90_s: float | None = None
    total_s: float = 0.0  # wall time inside steps after warm-up
    input_wait_fraction: float | None = None  # of total_s, None when not measured
    input_wait_median_s: float | None = None
    input_wait_source: str | None = None  # how the wait was measured: "next() timing"
    # (Python loops) or "tf.data gap timer" (Keras fit)
    steps_per_call: int = 1  # Keras steps_per_execution
    run_s: float = 0.0  # the whole run, start-up included
    first_step_s: float | None = None  # when the first step started
    starts: tuple[float, ...] = ()  # per step (kept for the first MAX_STEPS)
    durations: tuple[float, ...] = ()
    input_waits: tuple[float | None, ...] = ()
    phases: tuple[
        tuple[str, float, float], ...
    ] = ()  # (name, start, end): fit, evaluate, epochs...
    # every loop counted above, most steps first; evaluation loops (none of their steps
    # trains, while another loop's do) are left out of the steps and of this list
    loops: tuple[StepLoop, ...] = ()


@dataclass(frozen=True)
class EagerOpSite:
    """Eager ops of one type issued from one source line, within the sampled steps."""

    op: str
    location: str | None  # user file:line that issued them
    count: int
    median_elements: int | None = None  # of the largest output
    device: str | None = None  # where TF ran them (CPU / GPU)


@dataclass(frozen=True)
class ReboundName:
    """A name the step's code reads whose object the program creates anew in a loop: a
    ``tf.function`` traced over that code would keep the first object for good."""

    name: str
    location: str  # file:line where the loop creates it
    loop: str  # file:line of that loop
    metric: bool = False  # a Keras metric (the script calls update_state/reset_state/result)


@dataclass(frozen=True)
class StepCode:
    """The code the eager ops come from, read from the source: what a fix wraps."""

    function: str | None  # the def holding most of them; None: a loop body in no def
    location: str  # the def's (or the loop's) file:line
    # "def train_step(x, y):" as written; for a loop body, a def over the loop's variables
    signature: str | None = None
    rebound: tuple[ReboundName, ...] = ()
    body: tuple[str, ...] = ()  # a loop's body as written, dedented, where it can move as is
    before: str | None = None  # a loop body's function goes before this loop (file:line)


@dataclass(frozen=True)
class EagerFacts:
    """Section ``eager``: ops dispatched one by one from Python, counted over windows of
    steps (a per-op callback is not free, so it is switched on for part of the run)."""

    sampled_steps: int  # steps wholly inside counting windows
    ops: int  # eager ops counted inside those steps
    per_step: float | None = None
    dispatch_fraction: float | None = None  # estimated share of step time issuing them
    median_gap_us: float | None = None  # between consecutive eager ops
    counted_s: float = 0.0  # seconds the counter was on
    sites: tuple[EagerOpSite, ...] = ()  # the top sites by count
    outside_steps: int = 0  # eager ops counted outside any step
    note: str | None = None  # what the count cannot see (other threads ...)
    step_code: StepCode | None = None  # where the small ops' code is, for the fix


@dataclass(frozen=True)
class TraceSignature:
    """The arguments of one trace, as TF's function type describes them."""

    at_s: float
    args: tuple[tuple[str, str], ...]  # (name, "float32[32,784]" | "3 (int)" ...)
    seconds: float | None = None  # time spent tracing
    caller: str | None = None  # user file:line whose call caused the trace


@dataclass(frozen=True)
class TracedFunction:
    """One tf.function: how often it ran, how often it was traced, and why again."""

    name: str
    location: str | None = None  # def file:line
    calls: int = 0  # calls from eager code
    call_s: float = 0.0  # wall time in those calls
    traces: int = 0
    trace_s: float = 0.0
    changed_args: tuple[str, ...] = ()  # arguments whose spec differed between traces
    signatures: tuple[TraceSignature, ...] = ()  # the first few traces
    reduce_retracing: bool = False
    jit_compile: bool | None = None
    library: bool = False  # defined by Keras/TF, not the user's code
    instances: int = 1  # Function objects with this name and place (a tf.function
    # re-created in a loop, a method per instance)


@dataclass(frozen=True)
class TracingFacts:
    """Section ``tracing``: every tf.function the run traced or called."""

    functions: tuple[TracedFunction, ...] = ()


@dataclass(frozen=True)
class GpuSeries:
    """NVML samples of one GPU over the run (None: not supported on this GPU/driver).

    Utilisation and activities are fractions 0-1. PCIe rates come from NVML's cumulative
    byte counters, differenced between samples. The GPM activities exist on Hopper and
    newer only.
    """

    index: int
    name: str
    memory_total_bytes: int | None = None
    t: tuple[float, ...] = ()
    utilization: tuple[float | None, ...] = ()
    memory_used_bytes: tuple[int | None, ...] = ()  # by every process
    own_memory_bytes: tuple[int | None, ...] = ()  # by the watched processes (<= 1 Hz)
    pcie_tx_bytes_per_s: tuple[float | None, ...] = ()
    pcie_rx_bytes_per_s: tuple[float | None, ...] = ()
    sm_clock_mhz: tuple[float | None, ...] = ()
    power_w: tuple[float | None, ...] = ()
    sm_activity: tuple[float | None, ...] = ()  # GPM
    sm_occupancy: tuple[float | None, ...] = ()  # GPM
    tensor_activity: tuple[float | None, ...] = ()  # GPM, any tensor pipe
    others: tuple[GpuProcess, ...] = ()  # other processes seen on this GPU during the run


@dataclass(frozen=True)
class GpuSamplesFacts:
    """Section ``gpu_samples``: the background NVML sampler's series, per GPU."""

    hz: float
    gpus: tuple[GpuSeries, ...] = ()
    error: str | None = None  # why there are no samples (no driver ...)
    gpm: bool = False  # GPM metrics were read
    tf_peak_memory_bytes: dict[str, int] = field(default_factory=dict)  # "GPU:0" -> peak
    watched_pids: tuple[int, ...] = ()


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
    # stages a library built (by_library): the user's call into it, as written at their
    # location ("keras.utils.image_dataset_from_directory(root, batch_size=32)")
    helper_call: str | None = None
    iterators: int = 0  # iterators created over it (epochs, restarts)
    elements: int = 0  # elements the program read from it
    stages: tuple[PipelineStage, ...] = ()
    bottleneck: int | None = None  # index into stages of the slowest stage
    prefetch_written: bool = False  # a prefetch the user wrote at the end
    prefetch_run: bool = False  # a prefetch at the end as TF ran it (written or injected)
    cache_written: bool = False
    autotune: bool = True  # options.autotune.enabled
    cardinality: int | None = None  # elements per pass (None: infinite or unknown)
    element_bytes: int | None = None  # one output element (batch), from its spec
    # a generator's batches of unknown size (Keras fit on a generator or PyDataset): one
    # example's bytes from the spec, and the bytes TF counted the consumer getting
    example_bytes: int | None = None
    delivered_bytes: int | None = None
    gap_median_s: float | None = None  # consumer time per element (TF's gap timer)
    gap_mean_s: float | None = None  # its mean: what adds up over the run
    wait_per_element_s: float | None = None  # measured wait for one element
    # how: "next() timing" (a Python loop's reads, timed one by one: direct), else the
    # wall-clock windows its iterators were read over less the consumer's time
    wait_source: str | None = None
    consume_s: float = 0.0  # wall time over which elements were read
    throughput_per_s: float | None = None  # elements per second the model got
    model_error: str | None = None  # why TF's per-stage model could not be read


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
    notes: tuple[str, ...] = ()


@dataclass(frozen=True)
class PipelineRate:
    """Elements per second over the timed passes of one pipeline (median, slowest and
    fastest pass)."""

    median: float
    min: float
    max: float
    passes: int
    elements_per_pass: int


@dataclass(frozen=True)
class PipelineChange:
    """One fix gpuwhy applied to a rewritten pipeline, with the code that makes it stay."""

    kind: str  # parallel-map | parallel-interleave | cache | prefetch |
    # parallel-reads | any-order
    stage: str  # the transformation as written: "map(parse)"
    location: str | None  # file:line where the user wrote it
    code: str  # what to write there
    why: str
    source_line: str | None = None  # that line, as written


@dataclass(frozen=True)
class InputFix:
    """One pipeline rewritten with the fixes that cannot change its elements, checked and
    timed against the original and the ideal (the original's output cached in memory)."""

    dataset: str  # for people: "dataset created at train.py:75"
    location: str | None = None  # where the final dataset was built
    iterated_at: tuple[str, ...] = ()
    iterators: int = 0  # iterators the script made over it (0: not counted)
    before: PipelineRate | None = None
    after: PipelineRate | None = None
    ideal: PipelineRate | None = None
    gap_closed: float | None = None  # (after - before) / (ideal - before)
    speedup: float | None = None  # after / before
    same_elements: bool | None = None  # None: not compared
    elements_checked: str = ""  # how the elements were compared
    changes: tuple[PipelineChange, ...] = ()
    left_alone: tuple[str, ...] = ()  # "file:line stage: why not"
    refused: str | None = None  # why the rewrite was not kept
    worth_it: bool = True  # False: measured no faster than the original
    error: str | None = None  # the pipeline itself failed
    notes: tuple[str, ...] = ()


@dataclass(frozen=True)
class InputFixFacts:
    """Section ``input_fixes``: what ``gpuwhy fix --input`` rewrote and measured."""

    fixes: tuple[InputFix, ...] = ()
    keep_order: bool = True
    library_only: tuple[str, ...] = ()  # iterated datasets a library built: not optimised
    views: tuple[str, ...] = ()  # "created at a.py:3, iterated at a.py:9": views of one above
    stopped_early: bool = False  # --stop-early ended the script at its first iterator


@dataclass(frozen=True)
class ReducedValue:
    """One value the strategy all-reduces each step: a variable's gradient (or a pack of
    several), in the dtype actually sent."""

    name: str  # the variable it updates ("dense/kernel"), or the reducing op's name
    shape: tuple[int | None, ...] = ()
    dtype: str = "float32"  # as sent (a mixed-precision policy may send float16)
    bytes: int = 0  # per replica, per step


@dataclass(frozen=True)
class DistributedInput:
    """One dataset a loop distributed with the strategy (Keras fit does it too)."""

    how: str  # experimental_distribute_dataset | distribute_datasets_from_function
    global_batch: int | None = None  # the last batch its chain applies
    location: str | None = None  # file:line of that batch call
    auto_shard: str | None = None  # the policy its options ask for: AUTO, FILE, DATA, OFF
    written: str | None = None  # the batch call as written there: "ds.batch(64)"
    # its size names num_replicas_in_sync (directly or through the names it is computed
    # from); None where the source does not tell (a size from an argument or a config)
    scaled: bool | None = None
    # across workers (a cluster of two or more): what TF's auto-shard rewrite does to it
    shard_applied: str | None = None  # FILE, DATA, OFF, HINT (None: one worker, or unread)
    shard_reason: str | None = None  # why AUTO fell back to DATA, in TF's words
    shard_error: str | None = None  # FILE asked for where TF cannot apply it: its error
    shard_files: int | None = None  # FILE: the files the workers divide
    sharded_in_code: bool = False  # the pipeline shards itself (ds.shard, input_context)
    # how: "shard()" (anywhere in it, an interleave's function too) or "input_pipeline_id"
    # (its dataset function reads it: files or records sliced, a filter, by pipeline)
    sharded_by: str | None = None
    # what this worker's pipeline reads, to compare workers (gpuwhy merge): a digest of
    # its sources and selections (None: a generator, unknowable), and its files
    reads_digest: str | None = None
    read_files: tuple[str, ...] = ()
    repeated_work: tuple[str, ...] = ()  # DATA: stages every worker runs on all the data
    repeated_heavy: bool = False  # ... and one of them reads files, decodes or runs Python
    shuffled: bool = False  # the pipeline shuffles (workers reading it all see other orders)
    source: str | None = None  # the pipeline's source as written: "tf.data.Dataset.from_..."
    source_location: str | None = None


@dataclass(frozen=True)
class DistributeFacts:
    """Section ``distribute``: the tf.distribute strategy the program made, how it
    reduces across devices, and how its loops feed the replicas."""

    strategy: str  # class name: MirroredStrategy, MultiWorkerMirroredStrategy ...
    replicas: int  # num_replicas_in_sync
    devices: tuple[str, ...] = ()
    cross_device: str | None = None  # the cross-device ops class (NcclAllReduce ...)
    cross_device_why: str | None = None  # who chose it: given to the strategy, TF's default
    communication: str | None = None  # collective implementation asked for (AUTO, RING, NCCL)
    task_type: str | None = None  # this process's task in the cluster
    task_index: int | None = None
    workers: int = 0  # workers (and chief) in the cluster spec
    parameter_servers: int = 0
    strategies: int = 1  # strategies the program made (the one with most replicas is here)
    runs: int = 0  # strategy.run calls (a custom loop's steps)
    run_function: str | None = None  # the function strategy.run was given: "train_step"
    run_args: int | None = None  # how many positional args it was given
    inputs: tuple[DistributedInput, ...] = ()
    scaled_by_replicas: bool | None = None  # the script's code names num_replicas_in_sync
    variable: str | None = None  # the name the script gives the strategy: "strategy"
    # -- what crosses devices each step (all-reduce of the gradients) ------------------
    reduced: tuple[ReducedValue, ...] = ()  # largest first (capped; totals below are whole)
    reduced_values: int = 0  # values all-reduced per step
    reduced_bytes: int | None = None  # per step, all values, in the dtype sent
    link: str | None = None  # what the all-reduce crosses: NVLink, PCIe, network, host memory
    link_source: str | None = None  # "NVML topology" (measured) or "predicted: why"
    link_gb_per_s: float | None = None  # the link's bandwidth used for the expectation
    allreduce_expected_s: float | None = None  # predicted per step (ring: 2(N-1)/N x bytes / bw)
    # measured where TF lets it be: seconds per step inside collective/all-reduce ops
    # (including any wait for a late peer), their share of the step, and how
    collective_step_s: float | None = None
    collective_share: float | None = None
    collective_measured_by: str | None = None
    collective_wait_s: float | None = None  # of collective_step_s: replicas of this process
    # entering the collective apart (a late peer), where they can be told apart
    # ParameterServerStrategy: variable bytes held by each parameter server, by index
    ps_bytes: tuple[int, ...] = ()


@dataclass(frozen=True)
class ProjectionFacts:
    """Section ``projection``: the traced training step as it would run on a named GPU.

    Predicted: a cost model of the audited graph (gpuwhy/projection/cost.py) at the
    target's published peaks (gpus.py), plus the ops that stay on the CPU at their time
    measured on this host's CPU (a few profiled steps). Every time is a band
    (``*_low_s`` .. ``*_high_s`` around the middle estimate). The input side joins what
    this run measured: the pipeline's time to make one batch on this host."""

    gpu: str  # the table's name: "A100"
    requested: str  # as asked: "A100", "auto"
    function: str  # the projected tf.function: "train_step (train.py:40)"
    step_s: float
    step_low_s: float
    step_high_s: float
    tensor_s: float  # matmuls and convolutions
    kernels_s: float  # other GPU kernels (memory bandwidth or launches)
    copies_s: float  # host<->device copies
    # ops that stay on the CPU on any GPU (no GPU kernel, or pinned there), at the time
    # a few profiled steps measured on this host's CPU: the middle and the band for the
    # target's host; how many ops there are, how many were measured, and how
    cpu_ops_s: float = 0.0
    cpu_ops_low_s: float | None = None
    cpu_ops_high_s: float | None = None
    cpu_ops: int = 0
    cpu_ops_measured: int = 0
    cpu_ops_measured_by: str | None = None
    tensor_ops: int = 0
    tensor_ops_unsized: int = 0  # of unknown FLOPs: left out
    kernels: int = 0
    kernels_unsized: int = 0  # of unknown bytes: launches only
    launch_bound_s: float = 0.0  # of kernels_s: op types whose launches outweigh their bytes
    launch_bound_kernels: int = 0
    jit_compile: bool = False  # the projected function is compiled by XLA
    cudnn_rnn: tuple[str, ...] = ()  # Keras LSTM/GRU layers costed as cuDNN runs them
    batch: int | None = None  # the batch size the FLOPs were sized with, where needed
    input_batch_s: float | None = None  # the pipeline alone per batch, this host (TF's
    # stage timers: the slowest stage at the threads it ran with)
    input_batch_measured_s: float | None = None  # per batch as the steps got them here,
    # where they waited for input (the mean step: the pipeline shared the cores with the
    # model, so this is an upper bound)
    input_wait_fraction: float | None = None  # projected share of a step waiting for input
    input_wait_low: float | None = None  # the slowest step, the pipeline alone
    input_wait_high: float | None = None  # the fastest step, the pipeline as measured here
    calibrated: bool = False  # the model's path for this function was fitted to published
    # throughputs (XLA-compiled functions; docs/projection.md)
    # where this run trained on the target GPU itself: its median step less its median
    # input wait (what the projection models), to put beside the projected step
    measured_step_s: float | None = None
    # Python issuing eager ops each step (measured here: ops per step x the median gap
    # between two of them); a GPU runs their kernels while Python issues the next, so
    # the step is at least this long, whatever the GPU
    eager_s: float = 0.0
    eager_ops_per_step: float | None = None
    graph: bool = True  # False: no traced function in the step, only eager ops (the
    # device work is then unknown and the step a lower bound)
    notes: tuple[str, ...] = ()


@dataclass(frozen=True)
class Facts:
    """All fact sections of one run. A section is ``None`` when it was not collected;
    rules that need it are then skipped and listed as not checked."""

    environment: EnvironmentFacts | None = None
    devices: tuple[GpuDevice, ...] | None = None
    placement: PlacementFacts | None = None
    program: ProgramFacts | None = None
    steps: StepFacts | None = None
    eager: EagerFacts | None = None
    tracing: TracingFacts | None = None
    gpu_samples: GpuSamplesFacts | None = None
    tfdata: TfDataFacts | None = None
    input_fixes: InputFixFacts | None = None
    projection: ProjectionFacts | None = None
    distribute: DistributeFacts | None = None
    task: TaskFacts | None = None
    workers: WorkersFacts | None = None

    def has(self, section: str) -> bool:
        return getattr(self, section, None) is not None


# ---------------------------------------------------------------------------
# JSON round trip. asdict() goes out; from_dict() rebuilds the frozen classes from
# their type hints, so adding a field to a section needs no serialisation code.


def to_dict(obj: Any) -> Any:
    """Dataclass tree -> JSON-friendly dicts/lists (tuples become lists)."""
    if dataclasses.is_dataclass(obj):
        return {f.name: to_dict(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
    if isinstance(obj, (list, tuple)):
        return [to_dict(v) for v in obj]
    if isinstance(obj, dict):
        return {str(k): to_dict(v) for k, v in obj.items()}
    return obj


def from_dict(cls: Any, data: Any) -> Any:
    """Rebuild ``cls`` (a dataclass or a typing form over dataclasses) from JSON data.

    Unknown keys are ignored so that a record written by a newer minor version of
    gpuwhy with extra fields still loads; the schema number guards real breaks.
    """
    if data is None:
        return None
    origin = typing.get_origin(cls)
    if origin in (typing.Union, types.UnionType):  # only Optional[X] is used in facts
        (inner,) = [a for a in typing.get_args(cls) if a is not type(None)]
        return from_dict(inner, data)
    if origin in (tuple, list):
        (item,) = typing.get_args(cls)[:1]
        values = [from_dict(item, v) for v in data]
        return tuple(values) if origin is tuple else values
    if origin is dict:
        return dict(data)
    if isinstance(cls, type) and dataclasses.is_dataclass(cls):
        kwargs = {
            name: from_dict(hint, data[name]) for name, hint in _field_hints(cls) if name in data
        }
        return cls(**kwargs)
    return data


@functools.cache
def _field_hints(cls: type) -> tuple[tuple[str, Any], ...]:
    """A dataclass's fields with their resolved types, resolved once per class (resolving
    them is about half the time of loading a record when done per object)."""
    hints = typing.get_type_hints(cls)
    return tuple((f.name, hints[f.name]) for f in dataclasses.fields(cls))


# ---------------------------------------------------------------------------
# Many workers, one report: which task of a cluster a record is (section ``task``, in
# every watched run) and what ``gpuwhy merge`` read from a directory of them (section
# ``workers``). Type hints resolve lazily, so ``Facts`` above may name them.


@dataclass(frozen=True)
class TaskFacts:
    """Section ``task``: which task of a training cluster this process was, from the
    launcher's environment (TF_CONFIG, else Slurm), so that ``gpuwhy run --out-dir DIR``
    names its record after it and ``gpuwhy merge DIR`` knows who is missing.

    ``name`` is TF_CONFIG's ``<type>-<index>`` (``chief-0``, ``worker-1``), else Slurm's
    ``worker-<SLURM_PROCID>``, else ``<hostname>-<pid>`` (``source`` says which).
    ``cluster`` lists every task the cluster spec names, the same way."""

    name: str
    source: str  # TF_CONFIG | Slurm | process
    task_type: str | None = None
    task_index: int | None = None
    hostname: str | None = None
    pid: int | None = None
    slurm_job_id: str | None = None
    cluster: tuple[str, ...] = ()


@dataclass(frozen=True)
class WorkerInput:
    """One dataset a worker distributed, as ``gpuwhy merge`` compares it with the other
    workers' (DistributedInput, reduced to what the comparison needs)."""

    how: str  # experimental_distribute_dataset | distribute_datasets_from_function
    source: str | None = None  # the pipeline's source as written, and where
    source_location: str | None = None
    shard_applied: str | None = None  # what TF's auto-shard does to it (OFF: nothing)
    sharded_by: str | None = None  # shard() | input_pipeline_id | None
    shuffled: bool = False
    reads_digest: str | None = None  # what its pipeline reads (None: unknowable)
    read_files: tuple[str, ...] = ()


@dataclass(frozen=True)
class WorkerRun:
    """One task's record as ``gpuwhy merge`` read it: how the task ended and its per-step
    figures (means over the steps after warm-up unless named median or p90)."""

    name: str  # the task (worker-1), or the file's name where the record does not say
    state: str  # ok | interrupted | failed | unreadable | missing
    file: str | None = None  # the record's file name in the directory (None: missing)
    note: str | None = None  # what is wrong with it: the read error, how the run ended
    hostname: str | None = None
    ended: str | None = None  # as the record's program section says (completed ...)
    exit_code: int | None = None
    strategy: str | None = None  # the tf.distribute strategy it ran
    step_source: str | None = None  # what marked its steps (keras-fit, tf-data ...)
    steps: int = 0  # steps it ran (the record's count: all of them, not only those kept)
    counted_steps: int = 0  # of those, after warm-up
    step_median_s: float | None = None
    step_p90_s: float | None = None
    step_mean_s: float | None = None
    input_wait_s: float | None = None  # per step, waiting for its input (mean)
    input_wait_median_s: float | None = None  # its median (where timed step by step)
    input_wait_by: str | None = None  # how: "next() timing", "tf.data gap timer", or
    # "outside <fn>": the time per step outside the step function (its Python loop:
    # next() on a distributed iterator, logging), where the wait itself was not timed
    gpu_busy: float | None = None  # NVML utilisation over the run, mean of its GPUs
    collective_step_s: float | None = None  # inside collective ops per step (measured)
    collective_share: float | None = None
    inputs: tuple[WorkerInput, ...] = ()  # the datasets it distributed (multi-worker)
    # its host's CPU use over the run (all processes, all cores) and its cores: a host
    # whose cores were all busy slows every worker on it alike
    host_cores: int | None = None
    host_cpu_busy: float | None = None


@dataclass(frozen=True)
class MergedFinding:
    """A finding of the workers' own records, once: the same id, title and place on
    several workers, listing the workers it holds on (evidence and fix are the first
    worker's, in task order)."""

    id: str
    severity: str
    title: str
    workers: tuple[str, ...]
    evidence: dict[str, Any] = field(default_factory=dict)
    fix: str | None = None
    estimated_gain: str | None = None
    location: str | None = None
    gain_value: float | None = None


@dataclass(frozen=True)
class WorkersFacts:
    """Section ``workers``: the records of a cluster's tasks that ``gpuwhy merge``
    read from one directory, in task order, with those the cluster spec names that
    left none (state ``missing``), and their findings deduplicated."""

    directory: str
    workers: tuple[WorkerRun, ...] = ()
    findings: tuple[MergedFinding, ...] = ()
