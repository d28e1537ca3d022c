"""What a strategy's all-reduce crosses, and how long the ring all-reduce of a step's
bytes would take on it: predicted, never measured.

Local GPUs: NVML's topology (gpuwhy.collect.nvml.topology) says NVLink or PCIe, and the
GPU table (gpuwhy.gpu_specs) the link's bandwidth. Otherwise the link is predicted
from where the replicas are (CPU devices of one process, workers on one host or several
per the cluster spec) at an assumed bandwidth the source text states.

The expectation is the TF GPU performance guide's: gradient bytes / link bandwidth,
times 2(N-1)/N for a ring over N replicas (each sends and receives that share of the
bytes).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from gpuwhy.gpu_specs import UnknownGpuError, find_gpu

GB = 1e9
# assumed bandwidths, bytes/s, one direction (stated with every prediction)
HOST_MEMORY = 10 * GB  # a memory copy between CPU devices of one process
LOOPBACK = 2 * GB  # gRPC between processes of one host
NETWORK = 1.25 * GB  # 10 Gb/s Ethernet
PCIE = 12 * GB  # PCIe 3.0 x16, effective


@dataclass(frozen=True)
class Link:
    name: str  # NVLink, PCIe, network, loopback, host memory
    source: str  # "NVML topology" or "predicted: why"
    bytes_per_s: float | None


def link_for(
    devices: tuple[str, ...],
    workers: int,
    hosts: tuple[str, ...],
    topology: dict[str, Any] | None,
) -> Link:
    """The slowest link one step's all-reduce crosses. ``devices``: the strategy's
    worker devices; ``hosts``: the cluster spec's worker hosts; ``topology``: NVML's
    (None or not ok where there is no GPU)."""
    if workers > 1:
        names = {h.rsplit(":", 1)[0].lower() for h in hosts}
        if len(names) > 1:
            return Link(
                "network",
                f"predicted: {workers} workers on {len(names)} hosts per the cluster spec; "
                f"10 Gb/s Ethernet ({NETWORK / GB:g} GB/s) assumed",
                NETWORK,
            )
        return Link(
            "loopback",
            f"predicted: {workers} workers on one host ({', '.join(sorted(names))}) per the "
            f"cluster spec; gRPC over loopback at {LOOPBACK / GB:g} GB/s assumed",
            LOOPBACK,
        )
    gpus = sorted({int(m.group(1)) for d in devices if (m := re.search(r"GPU:(\d+)", d))})
    if len(gpus) < 2:
        return Link(
            "host memory",
            "predicted: the replicas are CPU devices of one process; a memory copy at "
            f"{HOST_MEMORY / GB:g} GB/s assumed",
            HOST_MEMORY,
        )
    if not topology or not topology.get("ok"):
        why = (topology or {}).get("error") or "no NVML"
        return Link(
            "PCIe",
            f"predicted: no NVML topology ({why}); PCIe 3.0 x16 ({PCIE / GB:g} GB/s) assumed",
            PCIE,
        )
    return _nvml_link(gpus, topology)


def _nvml_link(gpus: list[int], topology: dict[str, Any]) -> Link:
    pairs = [p for p in topology.get("pairs", ()) if p["a"] in gpus and p["b"] in gpus]
    names = {g["index"]: g["name"] for g in topology.get("gpus", ())}
    try:
        spec = find_gpu(names.get(gpus[0], ""))
    except UnknownGpuError:
        spec = None
    if pairs and all(p.get("nvlink") for p in pairs):
        bandwidth = spec.peer_link if spec is not None else None
        return Link("NVLink", "NVML topology", bandwidth)
    levels = sorted({str(p.get("level")) for p in pairs if not p.get("nvlink")})
    bandwidth = spec.host_link if spec is not None else None
    return Link(f"PCIe ({', '.join(levels)})" if levels else "PCIe", "NVML topology", bandwidth)


def ring_allreduce_s(total_bytes: int, replicas: int, bytes_per_s: float | None) -> float | None:
    """Predicted seconds for a ring all-reduce of ``total_bytes`` over ``replicas``."""
    if not total_bytes or replicas < 2 or not bytes_per_s:
        return None
    return 2 * (replicas - 1) / replicas * total_bytes / bytes_per_s
