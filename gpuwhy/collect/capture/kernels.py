"""What a GPU event in a capture is, from its name and stats: a copy (which direction, from
pageable or pinned memory, how many bytes), a memset, or a kernel; whether a kernel runs
on tensor cores and in which precision, and whether it is a convolution or a matrix
product (one that could).

Tensor-core kernels name their instruction family: ``xmma``/``gmma``/``wgmma`` (cuDNN's and
cuBLAS's Hopper/Ampere kernels, ``sm90_xmma_fprop_implicit_gemm_…tf32…``), ``hmma``/``imma``
(Volta/Turing), ``s16816gemm``/``s1688gemm``, ``tensorop``, CUTLASS's ``_tensorop_``,
XLA's Triton GEMMs (``triton_gemm``/``gemm_fusion``: tensor cores wherever the operands'
type allows, which the name does not say). The precision is the first type the name
spells (``tf32``, ``bf16``, ``f16``/``fp16``/``h``, ``e4m3``/``fp8``, ``i8``/``imma``).
"""

from __future__ import annotations

import re

COPY_DIRECTIONS = {
    "h2d": "host_to_device",
    "d2h": "device_to_host",
    "d2d": "device_to_device",
    "p2p": "peer",
    "htod": "host_to_device",
    "dtoh": "device_to_host",
    "dtod": "device_to_device",
    "peer": "peer",
}
_COPY = re.compile(r"^(?:cuda)?memcpy\s*(h2d|d2h|d2d|p2p|htod|dtoh|dtod|peer)", re.IGNORECASE)
_TENSOR_CORE = re.compile(
    r"xmma|wgmma|gmma|hmma|imma|[shi](?:16816|1688|884|16832|8816)|tensorop|_tc_|^nvjet_"
    r"|cutlass.*(?:sm80|sm90|sm100)|sm(?:80|86|89|90|100|120)_.*gemm",
    re.IGNORECASE,
)
_MATMUL = re.compile(
    r"gemm|conv|fprop|dgrad|wgrad|matmul|dot|cublas|cudnn.*engine|winograd|implicit|scudnn"
    r"|\d+cudnn|^nvjet_",
    re.IGNORECASE,
)
# cuBLAS/cuDNN kernels on the CUDA cores whatever family their name is of
_CUDA_CORES = re.compile(r"ffma|simt|_sgemm|scudnn", re.IGNORECASE)
# kernels a library runs beside its matmuls that compute none (cuDNN's workspace set-up)
_NOT_A_PRODUCT = re.compile(r"init_device_workspace|workspace_kernel", re.IGNORECASE)
_PRECISIONS = (
    ("tf32", re.compile(r"tf32", re.IGNORECASE)),
    ("bf16", re.compile(r"bf16|bfloat16", re.IGNORECASE)),
    ("fp8", re.compile(r"e4m3|e5m2|fp8|f8f8", re.IGNORECASE)),
    ("fp16", re.compile(r"fp16|f16f16|f16|half|_h\d|hmma|h(?:16816|1688|884)", re.IGNORECASE)),
    ("int8", re.compile(r"imma|i8i8|int8|s8|i(?:16832|8816)", re.IGNORECASE)),
)
# XLA's GEMM fusions lowered through Triton: tensor cores whenever the types allow
_TRITON_GEMM = re.compile(r"triton_gemm|gemm_fusion|__triton_gemm", re.IGNORECASE)
_NOT_MATMUL = re.compile(r"convert|transpose|memcpy|memset|copy|reduce", re.IGNORECASE)
_SIZE = re.compile(r"size:(\d+)")
_SOURCE = re.compile(r"kind_src:(\w+)")
_DESTINATION = re.compile(r"kind_dst:(\w+)")


def copy_direction(name: str) -> str | None:
    """``host_to_device``... for a copy's event name (``MemcpyH2D``), else None."""
    match = _COPY.match(name)
    return COPY_DIRECTIONS[match.group(1).lower()] if match else None


def is_memset(name: str) -> bool:
    return name.lower().startswith("memset")


def base_name(name: str) -> str:
    """A kernel's name without its return type, template arguments and parameters: a
    cast's ``Eigen::TensorConversionOp<...>`` argument says nothing of the kernel."""
    name = name.removeprefix("void ")
    return re.split(r"[<(]", name, maxsplit=1)[0]


def tensor_core(name: str) -> str | None:
    """The precision a tensor-core kernel's name says ("" where it does not say), None for
    a kernel the name shows uses none (an ``ffma``/``simt`` kernel computes on the CUDA
    cores, even in cuBLAS's ``xmma`` family)."""
    base = base_name(name)
    if _NOT_A_PRODUCT.search(base) or _CUDA_CORES.search(base):
        return None
    if not (_TENSOR_CORE.search(base) or _TRITON_GEMM.search(base)):
        return None
    for precision, pattern in _PRECISIONS:
        if pattern.search(base):
            return precision
    return ""


def is_matmul(name: str) -> bool:
    """A convolution or a matrix product: a kernel tensor cores could run."""
    base = base_name(name)
    if _NOT_A_PRODUCT.search(base):
        return False
    return bool(_MATMUL.search(base)) and not _NOT_MATMUL.search(base)


def copy_bytes(details: str) -> int:
    """The bytes of a copy, from its ``memcpy_details`` stat ("kind_src:pinned
    kind_dst:device size:3145728 dest:0 async:1")."""
    match = _SIZE.search(details)
    return int(match.group(1)) if match else 0


def copy_pageable(details: str) -> bool | None:
    """Whether the host side of a copy is pageable memory (None: the stat does not say)."""
    found = (_SOURCE.search(details), _DESTINATION.search(details))
    kinds = [m.group(1).lower() for m in found if m is not None]
    kinds = [k for k in kinds if k not in ("device", "unknown")]
    if not kinds:
        return None
    return any(k == "pageable" for k in kinds)
