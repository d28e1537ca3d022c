"""Section ``placement``: where each op of the audited functions runs, why, and the
tensors that cross between host and GPU memory each time a function runs.

``PLACEMENT_REASONS`` is the vocabulary of ``OpGroup.reason`` and of a copy's cause.
"""

from __future__ import annotations

from dataclasses import dataclass, field

# Keras 3's train functions (keras/src/backend/tensorflow/trainer.py): the one ``fit``
# calls (multi_step_on_iterator since Keras 3.8, one_step_on_iterator before) and the
# per-batch step inside it (one_step_on_data), the only one compile's jit_compile
# reaches: jit_compile="auto" XLA-compiles it on a GPU machine. A Keras that renames
# them fails tests/keras/test_keras_fit.py by name.
KERAS_TRAIN_FUNCTIONS = frozenset(
    {"multi_step_on_iterator", "one_step_on_iterator", "one_step_on_data", "train_function"}
)
KERAS_STEP_BODY = "one_step_on_data"
# Keras 3's predict functions: the per-batch step is a nested tf.function only where
# compile chose XLA (jit_compile=True); otherwise its ops sit in these functions' graphs
KERAS_PREDICT_FUNCTIONS = frozenset({"one_step_on_data_distributed", "multi_step_on_data"})
KERAS_STEP_FUNCTIONS = KERAS_TRAIN_FUNCTIONS | KERAS_PREDICT_FUNCTIONS

# The ops that call back into the user's Python (tf.py_function, tf.numpy_function,
# tf.compat.v1.py_func): always on the host, holding the GIL, and the user's own code.
PYTHON_OPS = frozenset({"EagerPyFunc", "PyFunc", "PyFuncStateless"})

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
    "forced-cpu": (
        "a tf.device('/CPU:0') block pins it (the program's own, or one in TF's or Keras' "
        "code), though a GPU kernel exists"
    ),
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
    # the same with each dimension not known (a traced batch's) counted once: the most
    # a float64 tensor holds per row of its batch (one-hot labels: the classes); None:
    # no float64, or a rank not known
    float64_row_elements: int | None = None


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
    # its trace trains (has a backward pass); False: another trace of the same name and
    # place that does not (Keras' validation step); None: not known
    trains: bool | None = None


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
    trains: bool | None = None  # a trace with a backward pass (None: no matmul to tell by)


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
    keras_floatx: str | None = None  # Keras' global float type when the audit ran
    # the program's set_floatx call that set it to float64: file:line, the call as written
    floatx_set_at: str | None = None
    floatx_written: str | None = None
