"""Small facts objects for rule tests: a healthy CUDA machine, changed one fact at a time.

The healthy baseline mirrors what `gpuwhy check` records on a working Linux machine with
the pip `tensorflow[and-cuda]` 2.21 wheel (build info as read from the real wheel here).
"""

from __future__ import annotations

from dataclasses import replace

from gpuwhy.facts import (
    DriverFacts,
    EnvironmentFacts,
    Facts,
    GpuDevice,
    GpuProcess,
    LibraryProbe,
    TensorFlowFacts,
    TracedFunction,
    TraceSignature,
)

GiB = 1024**3
BUILD_2_21 = {
    "cpu_compiler": "clang",
    "cuda_compute_capabilities": ["sm_60", "sm_70", "sm_80", "sm_89", "compute_90"],
    "cuda_version": "12.5.1",
    "cudnn_version": "9",
    "is_cuda_build": True,
    "is_rocm_build": False,
    "is_tensorrt_build": False,
}
CPU_BUILD = {"is_cuda_build": False, "is_rocm_build": False, "is_tensorrt_build": False}
SONAMES = [
    ("cudart", "libcudart.so.12", "nvidia-cuda-runtime-cu12"),
    ("cublas", "libcublas.so.12", "nvidia-cublas-cu12"),
    ("cudnn", "libcudnn.so.9", "nvidia-cudnn-cu12"),
]


def libraries(missing=(), other_versions=None):
    rows = []
    for name, soname, pip in SONAMES:
        ok = name not in missing
        rows.append(
            LibraryProbe(
                name=name,
                wanted=soname,
                loaded=ok,
                path=f"/venv/lib/python3.11/site-packages/nvidia/{name}/lib/{soname}"
                if ok
                else None,
                error=None
                if ok
                else f"{soname}: cannot open shared object file: No such file or directory",
                other_versions=tuple((other_versions or {}).get(name, ())),
                pip_package=pip,
                apt_package=f"lib{name}-12-5",
            )
        )
    return tuple(rows)


def tensorflow(**changes) -> TensorFlowFacts:
    base = TensorFlowFacts(
        installed=True,
        import_ok=True,
        version="2.21.0",
        distribution="tensorflow",
        import_seconds=2.9,
        build=dict(BUILD_2_21),
        gpus=("/physical_device:GPU:0",),
        gpu_details=(
            {
                "name": "/physical_device:GPU:0",
                "device_name": "NVIDIA H100 80GB HBM3",
                "compute_capability": [9, 0],
                "confirm_device": "/job:localhost/replica:0/task:0/device:GPU:0",
            },
        ),
        confirm_device="/job:localhost/replica:0/task:0/device:GPU:0",
        libraries=libraries(),
    )
    return replace(base, **changes)


def no_gpu_tf(**changes) -> TensorFlowFacts:
    """TF imported fine but listed no GPU."""
    return tensorflow(**{"gpus": (), "gpu_details": (), "confirm_device": None, **changes})


def driver(**changes) -> DriverFacts:
    base = DriverFacts(
        nvml_ok=True,
        libcuda_loaded=True,
        driver_version="550.54.15",
        cuda_driver_version="12.4",
        device_count=1,
        device_nodes=True,
    )
    return replace(base, **changes)


NO_DRIVER = DriverFacts(
    nvml_ok=False,
    nvml_error="LibraryNotFound",
    libcuda_loaded=False,
    libcuda_error="libcuda.so.1: cannot open shared object file: No such file or directory",
)


def gpu(index=0, **changes) -> GpuDevice:
    base = GpuDevice(
        index=index,
        name="NVIDIA H100 80GB HBM3",
        uuid=f"GPU-{index}aaa-bbbb",
        pci_bus_id=f"00000000:0{index}:00.0",
        compute_capability="9.0",
        memory_total_bytes=80 * GiB,
        memory_used_bytes=GiB // 2,
        utilization_percent=0.0,
    )
    return replace(base, **changes)


def process(pid=4242, gib=30.0, name="python notebook_kernel.py") -> GpuProcess:
    return GpuProcess(pid=pid, name=name, used_bytes=int(gib * GiB))


def environment(tf=None, drv=None, env_vars=None, **changes) -> EnvironmentFacts:
    base = EnvironmentFacts(
        python_version="3.11.7",
        python_executable="/venv/bin/python",
        platform="linux",
        machine="x86_64",
        cpu_count=16,
        env_vars=dict(env_vars or {}),
        tensorflow=tf if tf is not None else tensorflow(),
        driver=drv if drv is not None else driver(),
    )
    return replace(base, **changes)


def facts(tf=None, drv=None, devices=None, env_vars=None, **env_changes) -> Facts:
    return Facts(
        environment=environment(tf, drv, env_vars, **env_changes),
        devices=tuple(devices) if devices is not None else (gpu(),),
    )


# -- placement section ---------------------------------------------------------------------
# A tf.function audited for a one-GPU machine: op groups, host<->device copies and tensor
# ops, as `gpuwhy audit` records them. Defaults follow collect/placement/placer.py: ops
# placed for a reason other than "gpu"/"gpu-host-memory" sit on the CPU.

from gpuwhy.facts import (  # noqa: E402
    AuditedFunction,
    HostDeviceCopy,
    OpGroup,
    PlacementFacts,
    ProjectionFacts,
    TensorOp,
)

_GPU_REASONS = ("gpu", "gpu-host-memory")
_DTYPE_BYTES = {
    "float16": 2,
    "half": 2,
    "bfloat16": 2,
    "float32": 4,
    "float64": 8,
    "int32": 4,
    "int64": 8,
    "uint8": 1,
    "bool": 1,
}
_UNSET = object()


def op_group(
    op, reason="gpu", device=None, computes_on=None, in_dtypes=("float32",), count=1, **kw
) -> OpGroup:
    """One op group of the step; out_dtypes default to in_dtypes, one example node per op."""
    device = device or ("GPU" if reason in _GPU_REASONS else "CPU")
    computes_on = computes_on or ("host" if reason == "gpu-host-memory" else device)
    kw.setdefault("out_dtypes", tuple(in_dtypes))
    kw.setdefault("examples", tuple(f"train_step/{op}_{i}" for i in range(min(count, 3))))
    return OpGroup(
        op=op,
        in_dtypes=tuple(in_dtypes),
        device=device,
        computes_on=computes_on,
        reason=reason,
        count=count,
        **kw,
    )


def host_copy(
    direction="to-host",
    kind="step",
    src="train_step/dense/BiasAdd",
    src_op="BiasAdd",
    dst="train_step/PyFunc",
    dst_op="PyFunc",
    dtype="float32",
    shape=(256, 128),
    bytes=_UNSET,
    **kw,
) -> HostDeviceCopy:
    """One host<->device copy; bytes follow from a fully known shape unless given."""
    if bytes is _UNSET:
        bytes = None
        if shape is not None and all(d is not None for d in shape) and dtype in _DTYPE_BYTES:
            bytes = _DTYPE_BYTES[dtype]
            for d in shape:
                bytes *= d
    return HostDeviceCopy(
        direction=direction,
        kind=kind,
        src=src,
        src_op=src_op,
        dst=dst,
        dst_op=dst_op,
        dtype=dtype,
        shape=tuple(shape) if shape is not None else None,
        bytes=bytes,
        **kw,
    )


def tensor_op(
    op="MatMul", dtype="float32", dims=None, flops=_UNSET, node=None, layer="dense", **kw
) -> TensorOp:
    """A matmul (dims m/n/k, default 256 x 512 x 1024) or convolution; FLOPs from m, n, k."""
    dims = dict(dims if dims is not None else {"m": 256, "n": 512, "k": 1024})
    if flops is _UNSET:
        m, n, k = dims.get("m"), dims.get("n"), dims.get("k")
        flops = 2 * m * n * k if None not in (m, n, k) else None
    return TensorOp(
        node=node or f"train_step/{layer or 'op'}/{op}",
        op=op,
        dtype=dtype,
        dims=dims,
        layer=layer,
        flops=flops,
        **kw,
    )


def placement(groups=(), copies=(), tensor_ops=(), predicted=True, **kw) -> PlacementFacts:
    """Placement of one audited `train_step`; its node counts follow from the groups."""
    groups, copies = tuple(groups), tuple(copies)
    if "functions" not in kw:
        count = {
            where: sum(g.count for g in groups if g.computes_on == where)
            for where in ("GPU", "host", "CPU")
        }
        kw["functions"] = (
            AuditedFunction(
                name="train_step",
                nodes=sum(count.values()),
                gpu=count["GPU"],
                host=count["host"],
                cpu=count["CPU"],
                location="train.py:12",
                input_copies=sum(1 for c in copies if c.kind == "input"),
                step_copies=sum(1 for c in copies if c.kind == "step"),
            ),
        )
    return PlacementFacts(
        predicted=predicted, groups=groups, copies=copies, tensor_ops=tuple(tensor_ops), **kw
    )


def placement_facts(**kw) -> Facts:
    """Facts with only the placement section, as `gpuwhy audit` records on a machine with no GPU."""
    return Facts(placement=placement(**kw))


def projection(
    gpu="A100",
    function="train_step (train.py:40)",
    step=(0.0007, 0.0005, 0.001),
    parts=(0.0001, 0.0005, 0.0001),
    **changes,
) -> ProjectionFacts:
    """A step projected onto ``gpu`` (named, not "auto"): the step's time and its band,
    ``(middle, low, high)`` in seconds, and what it is made of, ``(tensor cores, other
    kernels, copies)``; by default a 0.7 ms step on an A100. Each test names only the
    GPU, the step and the parts of the projection it is about."""
    step_s, step_low_s, step_high_s = step
    tensor_s, kernels_s, copies_s = parts
    return ProjectionFacts(
        gpu=gpu,
        requested=gpu,
        function=function,
        step_s=step_s,
        step_low_s=step_low_s,
        step_high_s=step_high_s,
        tensor_s=tensor_s,
        kernels_s=kernels_s,
        copies_s=copies_s,
        **changes,
    )


def retraced_by_scalars(traces: int = 180) -> TracedFunction:
    """``train_step`` (train.py:12) retraced by two Python scalars that change each call:
    ``lr`` a float, ``step`` an int (their first three traces kept)."""
    signatures = tuple(
        TraceSignature(
            float(k), (("x", "float32[32,4]"), ("lr", f"0.{k} (float)"), ("step", f"{k} (int)"))
        )
        for k in range(1, 4)
    )
    return TracedFunction(
        "train_step",
        "train.py:12",
        traces=traces,
        changed_args=("lr", "step"),
        signatures=signatures,
    )
