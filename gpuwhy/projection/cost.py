"""A traced training step's time on a named GPU, from what the audit read of its graph.

Three kinds of GPU work, each with a band (low, mid, high seconds):

- **matmuls and convolutions** (placement.tensor_ops): FLOPs at the peak of their
  precision on the target (gpu_specs.py) times the share of that peak whole training steps
  reach on its architecture (architectures.py: by FP32 units, TF32 and FP16/BF16 tensor
  cores, convolutions apart from matmuls), less for ops whose time there is small.
- **other kernels** (placement.functions[].kernels): memory traffic at the memory
  bandwidth. Under XLA (jit_compile) it is ``XLA_TRAFFIC`` times the bytes all the
  step's ops write as traced (fusion saves some of it; reductions such as batch-norm
  statistics make their inputs be read again), a mixed-precision step's float32
  outputs at half width and casts at none (XLA fuses them), plus each fused kernel's
  start and drain (its generation's, architectures.KERNEL_FIXED_S: the step's fixed
  cost, which does not shrink with the batch); without XLA each kernel moves what it
  reads and writes (``reads_writes``: 2, 3 or 5 times its output) and is never shorter
  than its launch. Depthwise convolutions cost ``DEPTHWISE_TRAFFIC`` times their bytes
  more.
- **host<->device copies** of the step: a latency each (the audit counts them; under
  XLA only the batch's, the cluster keeps the rest on the device), and the batch
  itself over the host link.

Calibration: Volta's and Ampere's efficiencies, ``XLA_TRAFFIC`` and
``DEPTHWISE_TRAFFIC`` were fitted to fourteen of NVIDIA's published single-GPU
TensorFlow training throughputs with XLA (ResNet-50 v1.5, EfficientNet-B0 and
BERT-Large on V100 and A100, full and mixed precision), the later generations' to
measured and published steps of their own (architectures.py; docs/projection.md).
The step's band is its architecture's and precision's held-out spread
(``StepProjection.band``); each term's own band is ``TERM_SPREAD`` around its middle.
Without XLA nothing is fitted: each kernel's bytes are what it reads and writes, at the
memory bandwidth share above. Ops of unknown size count as launches only.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass

from gpuwhy.facts import (
    KERAS_TRAIN_FUNCTIONS,
    AuditedFunction,
    KernelWork,
    PlacementFacts,
    TensorOp,
)
from gpuwhy.gpu_specs import GpuSpec
from gpuwhy.projection.architectures import (
    KERNEL_FIXED_S,
    architecture,
    efficiency,
    error_band,
)

# Share of the precision's peak that the matmuls and convolutions of a training step
# reach: by architecture (architectures.EFFICIENCY), each term's own band this factor
# either side of it (the spread of the fitted figures, 0.76-1.32, with a margin)
TERM_SPREAD = (0.67, 1.53)
# Smaller ops reach less of it: too few tiles to fill the GPU's SMs in waves, and a
# start and a tail that do not shrink with the op. How small is the op's time at the
# share above (seconds from, factor on the efficiency): 1 and 0.1 GFLOP at an A100's
# float16 rate, where these were fitted as FLOP counts; a GPU three times faster runs
# an op of the same FLOPs in a third of the time, as small a kernel as a third of them.
SIZE_FACTOR = ((6.5e-6, 1.0), (0.65e-6, 0.6), (0.0, 0.25))
MEMORY_EFFICIENCY = (0.50, 0.70, 0.85)  # of the peak memory bandwidth
# Under XLA: memory traffic per byte the step's ops write as traced, before fusion
# (elementwise, reductions, matmuls and convolutions): fusion saves some, reductions
# (batch norm statistics, squeeze-excite pooling) make their inputs be read again. In a
# mixed-precision step the float32 outputs count at half their bytes: Keras computes
# normalisations, softmax and losses in float32 between casts, which XLA fuses into
# kernels that read and write the float16 activations.
XLA_TRAFFIC = (0.60, 0.92, 1.38)  # at 70% of the bandwidth: fitted with it
XLA_BANDWIDTH = 0.7
# Under XLA, ops that never write their output: a cast is computed inside the kernel
# that reads or writes its tensor (mixed precision casts every normalisation's input).
FUSED_AWAY = frozenset({"Cast"})
# Depthwise convolutions (EfficientNet's, MobileNet's) run on the ordinary cores, far
# from the memory bandwidth (cuDNN's grouped-convolution kernels, their filter gradient
# the slowest): their outputs (forward, and the gradient of their input) cost this many
# times their float32 bytes at XLA_BANDWIDTH, on top of the traffic above; as long per
# element in float16 (twice per byte).
DEPTHWISE_TRAFFIC = {"fp32": (4.7, 7.2, 10.8), "fp16": (9.4, 14.4, 21.6)}
DEPTHWISE_OPS = frozenset({"DepthwiseConv2dNative", "DepthwiseConv2dNativeBackpropInput"})
# Without XLA every op is its own kernel, reading its inputs from memory and writing its
# output: bytes moved per byte of output, by what the op reads. One input read, one
# output written (unary elementwise ops, casts, copies): 2. Two inputs of its size
# (binary elementwise ops, an activation's gradient from its output and the incoming
# gradient): 3. A fused batch norm reads its input twice (the statistics, then the
# normalisation) and writes it once: 3; its gradient reads the incoming gradient and
# the input for the statistics' gradients, then both again for the input's gradient: 5.
# The band spans broadcast inputs (smaller) and cache misses on re-reads (larger).
KERNEL_READS_WRITES = {"FusedBatchNormV3": 3.0, "FusedBatchNormGradV3": 5.0}
BINARY_OPS = frozenset(
    {
        "AddV2", "Add", "Sub", "Mul", "RealDiv", "DivNoNan", "Maximum", "Minimum",
        "SquaredDifference", "BiasAdd", "ReluGrad", "Relu6Grad", "EluGrad", "SeluGrad",
        "SigmoidGrad", "TanhGrad", "SoftplusGrad", "LeakyReluGrad", "AddN", "Select",
        "SelectV2", "Pow", "FloorDiv", "Equal", "NotEqual", "Greater", "Less",
        "GreaterEqual", "LessEqual", "LogicalAnd", "LogicalOr", "BiasAddGrad",
    }
)  # fmt: skip
KERNEL_TRAFFIC = (0.8, 1.0, 1.5)  # on the reads and writes above
LINK_EFFICIENCY = (0.50, 0.75, 0.90)  # of the host link's bandwidth
# Seconds per kernel launch, TF's executor issuing one op after another (graph mode);
# under XLA fused kernels replace several ops each.
LAUNCH_S = (6e-6, 4e-6, 2.5e-6)
XLA_OPS_PER_KERNEL = 4
COPY_LATENCY_S = 10e-6
# A GPU whose peaks were derived from NVML (derive.py), not read from a datasheet: its
# band's ends this much further out (derived peaks land within 10% of the datasheets'
# for the table's GPUs; a GeForce card's highest clock is often above its rated boost)
DERIVED_WIDTH = 1.25
# Where the fitted figures say less, the band's slow end further out: a small batch (at
# most SMALL_BATCH samples a step): costs that do not shrink with the batch (the
# optimizer's passes over every weight, loss-scale checks, launches between XLA
# clusters) weigh more; the fit's smallest mixed-precision batch (BERT-Large, 6 a step
# on a V100) was its slowest against the projection (x1.20).
SMALL_BATCH = 8
SMALL_BATCH_WIDTH = 1.3  # the step's slow end


@dataclass(frozen=True)
class Band:
    """Seconds: the highest and lowest the model allows, and its middle estimate."""

    low: float
    mid: float
    high: float

    def __add__(self, other: Band) -> Band:
        return Band(self.low + other.low, self.mid + other.mid, self.high + other.high)


# One kernel launch: the fastest launch is the band's low end.
PER_LAUNCH = Band(LAUNCH_S[2], LAUNCH_S[1], LAUNCH_S[0])


ZERO = Band(0.0, 0.0, 0.0)


@dataclass(frozen=True)
class StepProjection:
    """One step of ``function`` on ``gpu``: its parts and their sum."""

    gpu: str
    function: str
    tensor: Band  # matmuls and convolutions
    kernels: Band  # other GPU kernels
    copies: Band  # host<->device copies
    tensor_ops: int
    tensor_ops_unsized: int  # of unknown FLOPs: not in `tensor`
    kernel_count: int
    kernels_unsized: int  # of unknown bytes: launches only
    launch_bound: Band = ZERO  # of `kernels`: op types whose launches outweigh their bytes
    xla_assumed: bool = False  # costed as XLA-compiled (Keras' "auto" on a GPU), not as traced
    launch_bound_kernels: int = 0
    step_copies: int = 0  # copies between the function's own ops, as traced here
    cudnn_loops: tuple[str, ...] = ()  # RNN loops costed as cuDNN's kernels
    xla_dropped: bool = False  # compiled with XLA here, not on a GPU (a cuDNN RNN in it)

    # the step's band: (fastest, slowest) factors on its middle time, from the held-out
    # errors of its architecture and precision (architectures.ERROR_BAND)
    band: tuple[float, float] = (0.65, 1.5)

    @property
    def step(self) -> Band:
        mid = self.tensor.mid + self.kernels.mid + self.copies.mid
        low, high = self.band
        return Band(low * mid, mid, high * mid)


def _times(work: float, peak: float, efficiency: tuple[float, float, float]) -> Band:
    """``work`` at ``peak`` per second: the lowest time at the highest efficiency."""
    low_eff, mid_eff, high_eff = efficiency
    return Band(work / (peak * high_eff), work / (peak * mid_eff), work / (peak * low_eff))


def precision_class(gpu: GpuSpec, dtype: str, tf32_enabled: bool) -> str:
    """Which units run a matmul/convolution of ``dtype`` on ``gpu``."""
    if dtype in ("float16", "half") or (dtype == "bfloat16" and gpu.bfloat16_flops):
        return "fp16"
    if dtype == "float32" and tf32_enabled and gpu.tf32_flops:
        return "tf32"
    return "fp32"


def _tensor_efficiency(
    op: TensorOp, precision: str, gpu: GpuSpec, peak: float
) -> tuple[float, float, float]:
    kind = "conv" if "Conv" in op.op else "matmul"
    mid = efficiency(gpu)[(precision, kind)]
    ideal_s = (op.flops or 0) / (peak * mid)
    factor = next(f for seconds, f in SIZE_FACTOR if ideal_s >= seconds)
    low, high = TERM_SPREAD
    return low * mid * factor, mid * factor, high * mid * factor


def tensor_time(
    ops: list[TensorOp],
    gpu: GpuSpec,
    tf32_enabled: bool,
    cudnn_loops: frozenset[str] = frozenset(),
    xla: bool = False,
) -> Band:
    """Each op's FLOPs at its efficiency. An op in a while loop runs as many times as the
    loop iterates, each run as small as it is (an RNN's matmul of one timestep) and
    never shorter than its launch: a loop's iterations follow one another. In a loop
    cuDNN runs (``cudnn_loops``) only the recurrent matmul waits for the timestep
    before it: the input projections and weight gradients are batched over the
    sequence, so the loop's matmuls take at least one launch a timestep, not one each."""
    total = ZERO
    batched: dict[str, tuple[Band, int]] = {}
    for op in ops:
        if op.flops:
            peak = gpu.matmul_flops(op.dtype, tf32_enabled)
            precision = precision_class(gpu, op.dtype, tf32_enabled)
            once = _times(op.flops, peak, _tensor_efficiency(op, precision, gpu, peak))
            if xla:  # one kernel each, its start and drain beside its work
                once = once + _fixed(gpu, 1)
            elif op.loop not in cudnn_loops:  # TF's executor launches it: never shorter
                once = _larger(once, PER_LAUNCH)
            runs = op.runs or 1
            if op.loop in cudnn_loops:
                work, most = batched.get(op.loop or "", (ZERO, 0))
                batched[op.loop or ""] = (work + _scaled(once, runs), max(most, runs))
            else:
                total = total + (_scaled(_larger(once, PER_LAUNCH), runs) if runs > 1 else once)
    for work, runs in batched.values():
        total = total + _larger(work, _scaled(PER_LAUNCH, runs))
    return total


def small_batch(ops: list[TensorOp]) -> bool:
    """The step's matmuls and convolutions were sized at a batch of SMALL_BATCH or fewer."""
    batches = {op.flops_batch for op in ops if op.flops_batch}
    return bool(batches) and max(batches) <= SMALL_BATCH


def half_precision(ops: list[TensorOp]) -> bool:
    """Most of the step's matmul/convolution FLOPs are float16/bfloat16: a
    mixed-precision step, its activations half-width."""
    half = sum(_flops(op) for op in ops if op.dtype in ("float16", "half", "bfloat16"))
    return 2 * half > sum(_flops(op) for op in ops)


def _flops(op: TensorOp) -> int:
    """Per call: one run's FLOPs times its runs."""
    return (op.flops or 0) * (op.runs or 1)


def kernel_times(
    function: AuditedFunction,
    gpu: GpuSpec,
    tensor_output_bytes: int = 0,
    half: bool = False,
    cudnn_loops: frozenset[str] = frozenset(),
) -> tuple[Band, Band, int]:
    """The kernels other than matmuls and convolutions. Returns (their time, the part
    that is launches outweighing the bytes moved, how many kernels that is).

    Without XLA, each op type's kernels: ``KERNEL_TRAFFIC`` times what they read and
    write (``reads_writes`` of their output) at the
    memory bandwidth, never less than their launches. Under XLA the chains fuse: the
    traffic is ``XLA_TRAFFIC`` times what all the step's ops write (these kernels' and
    the matmuls' and convolutions', ``tensor_output_bytes``; in a ``half``-precision
    step float32 outputs at half their bytes), never less than the fused kernels'
    launches. Depthwise convolutions add ``DEPTHWISE_TRAFFIC`` times their bytes.
    The kernels of ``cudnn_loops`` (Keras' LSTM/GRU loops a GPU runs as cuDNN's RNN
    kernels) are one fused kernel an iteration (``cudnn_time``)."""
    if cudnn_loops:
        fused = [k for k in function.kernels if k.loop in cudnn_loops]
        rest = dataclasses.replace(
            function, kernels=tuple(k for k in function.kernels if k.loop not in cudnn_loops)
        )
        total, bound, kernels = kernel_times(rest, gpu, tensor_output_bytes, half)
        rnn, rnn_bound, rnn_kernels = cudnn_time(fused, gpu)
        return total + rnn, bound + rnn_bound, kernels + rnn_kernels
    bandwidth = (XLA_BANDWIDTH,) * 3
    depthwise_bytes = sum(k.bytes for k in function.kernels if k.op in DEPTHWISE_OPS)
    depthwise = _traffic(
        depthwise_bytes, DEPTHWISE_TRAFFIC["fp16" if half else "fp32"], gpu, bandwidth
    )
    if function.jit_compile:
        # each fused kernel's start and drain add to its work (KERNEL_FIXED_S)
        launches = max(1, sum(k.count for k in function.kernels) // XLA_OPS_PER_KERNEL)
        fixed = _fixed(gpu, launches)
        written = sum(
            k.bytes - (k.float32_bytes // 2 if half else 0)
            for k in function.kernels
            if k.op not in FUSED_AWAY
        )
        moved = _traffic(written + tensor_output_bytes, XLA_TRAFFIC, gpu, bandwidth)
        moved = moved + depthwise
        total = fixed + moved
        bound = fixed if fixed.mid >= moved.mid else ZERO
        return total, bound, launches if fixed.mid >= moved.mid else 0
    total, bound = depthwise, ZERO
    bound_kernels = 0
    for work in function.kernels:
        floor = _scaled(PER_LAUNCH, work.count)
        moved = _traffic(
            round(work.bytes * reads_writes(work.op)), KERNEL_TRAFFIC, gpu, MEMORY_EFFICIENCY
        )
        total = total + _larger(floor, moved)
        if floor.mid >= moved.mid:
            bound = bound + floor
            bound_kernels += work.count
    return total, bound, bound_kernels


def cudnn_time(kernels: list[KernelWork], gpu: GpuSpec) -> tuple[Band, Band, int]:
    """The elementwise work of RNN loops that cuDNN runs: its RNN kernels fuse each
    timestep's gate arithmetic into one kernel (per direction of the pass), which moves
    what the loop's ops write once in and once out (``KERNEL_TRAFFIC`` on twice
    their bytes), and costs at least a launch.
    Returns (the time, the part that is launches outweighing the bytes, their count)."""
    total, bound, bound_kernels = ZERO, ZERO, 0
    for loop in sorted({k.loop for k in kernels if k.loop}):
        rows = [k for k in kernels if k.loop == loop]
        launches = max(k.runs for k in rows)
        floor = _scaled(PER_LAUNCH, launches)
        moved = _traffic(2 * sum(k.bytes for k in rows), KERNEL_TRAFFIC, gpu, MEMORY_EFFICIENCY)
        total = total + _larger(floor, moved)
        if floor.mid >= moved.mid:
            bound, bound_kernels = bound + floor, bound_kernels + launches
    return total, bound, bound_kernels


def reads_writes(op: str) -> float:
    """Bytes an op's kernel moves per byte of its output, without XLA."""
    return KERNEL_READS_WRITES.get(op, 3.0 if op in BINARY_OPS else 2.0)


def _traffic(
    written: int,
    factor: tuple[float, float, float],
    gpu: GpuSpec,
    efficiency: tuple[float, float, float],
) -> Band:
    """``written`` bytes times the traffic ``factor`` (low, mid, high) at the share
    ``efficiency`` of the memory bandwidth."""
    low, mid, high = factor
    return Band(
        _times(low * written, gpu.memory_bandwidth, efficiency).low,
        _times(mid * written, gpu.memory_bandwidth, efficiency).mid,
        _times(high * written, gpu.memory_bandwidth, efficiency).high,
    )


def _fixed(gpu: GpuSpec, kernels: int) -> Band:
    """The fixed cost of ``kernels`` XLA kernels on ``gpu``: its generation's start and
    drain per kernel, the band the launch's (LAUNCH_S) spread around it."""
    each = KERNEL_FIXED_S[architecture(gpu)]
    low, high = LAUNCH_S[2] / LAUNCH_S[1], LAUNCH_S[0] / LAUNCH_S[1]
    return Band(low * each * kernels, each * kernels, high * each * kernels)


def _scaled(band: Band, count: int) -> Band:
    return Band(band.low * count, band.mid * count, band.high * count)


def _larger(a: Band, b: Band) -> Band:
    return Band(max(a.low, b.low), max(a.mid, b.mid), max(a.high, b.high))


def copy_time(function: AuditedFunction, input_bytes: int | None, gpu: GpuSpec) -> Band:
    """The step's copies: each costs a transfer's latency, and the batch it is given
    (``input_bytes``, the pipeline's element size) crosses the host link. An
    XLA-compiled step makes none between its own ops: the cluster keeps every tensor of
    it on the device (the int32 shape arithmetic TF's executor keeps in host memory
    too), so only the batch's copies into it are costed."""
    count = function.input_copies + (0 if function.jit_compile else function.step_copies)
    latency = Band(COPY_LATENCY_S * count, COPY_LATENCY_S * count, COPY_LATENCY_S * count)
    if not input_bytes:
        return latency
    return latency + _times(input_bytes, gpu.host_link, LINK_EFFICIENCY)


def training_function(placement: PlacementFacts) -> AuditedFunction | None:
    """The audited function that trains (its tensor ops have a backward pass), else the
    first audited one (they come most time in calls first). Of two traces of one name
    and place (Keras' training and validation steps), the one that trains. Of two
    functions that train, one whose backward pass runs only inside a loop of its graph
    (an epoch in one call: ``for x in dataset: strategy.run(step, ...)`` in a
    tf.function) comes after one that trains a step a call: the step is what is
    projected, and which of the two spent more time in calls changed from run to run
    (helper-57's distributed tutorial: "the GPU's 1.0 ms in distributed_train_epoch",
    its matmuls all of unknown size, then "2.4 ms ... distributed_train_step")."""
    training = {op.function for op in placement.tensor_ops if op.gradient}
    candidates = [f for f in placement.functions if _label(f) in training]
    looped = {_label(f) for f in candidates if _trains_in_loops_only(placement, _label(f))}
    several = len(candidates) > 1
    for function in sorted(
        candidates, key=lambda f: (f.trains is not True, several and _label(f) in looped)
    ):
        return function
    return placement.functions[0] if placement.functions else None


def _trains_in_loops_only(placement: PlacementFacts, label: str) -> bool:
    """Every backward-pass matmul or convolution of the function runs inside a while
    loop of its graph."""
    backward = [op for op in placement.tensor_ops if op.function == label and op.gradient]
    return bool(backward) and all(op.loop or op.in_loop for op in backward)


def step_ops(placement: PlacementFacts, label: str) -> list[TensorOp]:
    """The projected function's matmuls and convolutions: those of its training trace
    where another trace shares its name and place (Keras' validation step)."""
    ops = [op for op in placement.tensor_ops if op.function in (label, None)]
    if any(op.trains for op in ops):
        ops = [op for op in ops if op.trains is not False]
    return ops


def _label(function: AuditedFunction) -> str:
    return f"{function.name} ({function.location})" if function.location else function.name


def project_step(
    placement: PlacementFacts,
    gpu: GpuSpec,
    input_bytes: int | None = None,
    xla_on_gpu: bool = False,
    cudnn_layers: tuple[str, ...] = (),
) -> StepProjection | None:
    """One call of the training function on ``gpu``; None without an audited function.
    ``input_bytes``: the batch the step is given (its copy to the GPU). ``xla_on_gpu``:
    costed as XLA-compiled where its framework compiles it so on a GPU machine (Keras'
    jit_compile="auto"), though it was not here. ``cudnn_layers``: Keras' LSTM/GRU
    layers a GPU runs with cuDNN: their loops are costed as cuDNN's kernels, and Keras
    compiles no step of such a model with XLA on a GPU."""
    function = training_function(placement)
    if function is None:
        return None
    keras = function.name in KERAS_TRAIN_FUNCTIONS
    loops = {op.loop for op in placement.tensor_ops if op.loop} | {
        k.loop for k in function.kernels if k.loop
    }
    cudnn = frozenset(loop for loop in loops if rnn_layer(loop, cudnn_layers))
    # Keras' "auto" means XLA on a GPU: the run's audit placed the step so already (its
    # function is XLA-compiled), or a record from before that is costed so here
    assumed = xla_on_gpu and keras and not cudnn
    if assumed:
        function = dataclasses.replace(function, jit_compile=True)
    dropped = bool(cudnn) and function.jit_compile and keras
    if dropped:  # Keras' jit_compile setter turns it off: cuDNN's ops are not XLA's
        function = dataclasses.replace(function, jit_compile=False)
    label = _label(function)
    ops = step_ops(placement, label)
    written = sum((op.output_bytes or 0) * (op.runs or 1) for op in ops)
    kernels, launch_bound, launch_bound_kernels = kernel_times(
        function, gpu, written, half_precision(ops), cudnn
    )
    plain = [k for k in function.kernels if k.loop not in cudnn]
    fused: dict[str, int] = {}  # a cuDNN loop's kernels: one an iteration
    for k in function.kernels:
        if k.loop in cudnn:
            fused[k.loop] = max(fused.get(k.loop, 0), k.runs)
    tensor = tensor_time(
        ops, gpu, placement.tf32_enabled is not False, cudnn, xla=function.jit_compile
    )
    return StepProjection(
        gpu=gpu.name,
        function=label,
        tensor=tensor,
        kernels=kernels,
        launch_bound=launch_bound,
        launch_bound_kernels=launch_bound_kernels,
        copies=copy_time(function, input_bytes, gpu),
        tensor_ops=len(ops),
        tensor_ops_unsized=sum(1 for op in ops if not op.flops),
        kernel_count=sum(k.count for k in plain) + sum(fused.values()),
        kernels_unsized=sum(k.count - k.sized for k in plain),
        xla_assumed=assumed,
        step_copies=function.step_copies,
        cudnn_loops=tuple(sorted(cudnn)),
        xla_dropped=dropped,
        band=step_band_factors(gpu, half_precision(ops), function.jit_compile, small_batch(ops)),
    )


def step_band_factors(gpu: GpuSpec, half: bool, xla: bool, small: bool) -> tuple[float, float]:
    """The projected step's (fastest, slowest) factors: its architecture's and
    precision's held-out spread (architectures.error_band), wider where the figures
    say less: peaks derived from NVML (both ends), a small batch (the slow end: costs
    that do not shrink with the batch weigh more)."""
    low, high = error_band(gpu, "fp16" if half else "fp32", xla)
    if gpu.derived_from:
        low, high = low / DERIVED_WIDTH, high * DERIVED_WIDTH
    if small:
        high *= SMALL_BATCH_WIDTH
    return low, high


def rnn_layer(loop: str, layers: tuple[str, ...]) -> str | None:
    """The Keras layer of ``layers`` whose RNN loop ``loop`` is (a While op named
    ``model/lstm_1/while``, its gradient ``gradient_tape/model/lstm_1/while/...``): the
    name scope before its first ``while``, which TF may have made unique with ``_N``."""
    parts = loop.split("/")
    if "while" not in parts or parts.index("while") == 0:
        return None
    scope = parts[parts.index("while") - 1]
    for name in layers:
        if scope == name or re.fullmatch(re.escape(name) + r"_\d+", scope):
            return name
    return None
