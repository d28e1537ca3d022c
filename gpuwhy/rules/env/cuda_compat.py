"""Pure CUDA compatibility logic shared by the env rules (no TF, no NVML).

Kept apart from the rules so each piece of CUDA's documented behaviour is tested on its
own: cubin compatibility within a major architecture, PTX JIT for newer GPUs, the
CUDA_VISIBLE_DEVICES parsing rules, and driver/runtime version compatibility.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

# Minimum Linux driver per CUDA major, from NVIDIA's CUDA toolkit release notes
# (table "CUDA Toolkit and Minimum Required Driver Version for CUDA Minor Version
# Compatibility"). Windows numbers differ slightly; Linux is what TF's GPU wheels target.
MIN_DRIVER_FOR_CUDA_MAJOR = {11: "450.80.02", 12: "525.60.13", 13: "580.65.06"}


def version_tuple(text: str | None) -> tuple[int, ...] | None:
    if not text:
        return None
    parts = re.findall(r"\d+", str(text))
    return tuple(int(p) for p in parts) if parts else None


def arch_support(compute_capability: str, build_archs: Sequence[str]) -> tuple[str, str | None]:
    """How a GPU of ``compute_capability`` ("8.6") runs a build compiled for ``build_archs``
    (["sm_60", "sm_80", "compute_90"], from ``cuda_compute_capabilities``).

    Returns ("native", "sm_80") when a cubin runs as is (same major, minor <= GPU's; CUDA
    binary compatibility), ("ptx", "compute_90") when only PTX that the driver must JIT
    compile exists (lower or equal version), ("none", None) when nothing can run, and
    ("unknown", None) when the build lists no architectures.

    In TF/XLA builds ``compute_XY`` embeds SASS for XY *and* its PTX (XLA's build docs:
    "`compute_XY` enables PTX embedding in addition to SASS"), so it counts as native for
    the XY family too; ``sm_XY`` is SASS only.
    """
    gpu = version_tuple(compute_capability)
    if not gpu or not build_archs:
        return "unknown", None
    gpu_major, gpu_minor = (gpu + (0,))[:2]
    native, ptx = [], []
    for arch in build_archs:
        m = re.fullmatch(r"(sm|compute)_(\d+?)(\d)([af]?)", arch.strip())
        if not m:
            continue
        kind, major, minor, suffix = m.group(1), int(m.group(2)), int(m.group(3)), m.group(4)
        if kind == "sm":
            # arch-specific cubins (sm_90a) run only on exactly that GPU
            ok = (
                (major, minor) == (gpu_major, gpu_minor)
                if suffix
                else (major == gpu_major and minor <= gpu_minor)
            )
            if ok:
                native.append((major, minor, arch))
        elif not suffix and (major, minor) <= (gpu_major, gpu_minor):
            ptx.append((major, minor, arch))
            if major == gpu_major:
                native.append((major, minor, arch))
    if native:
        return "native", max(native)[2]
    if ptx:
        return "ptx", max(ptx)[2]
    return "none", None


def visible_devices(
    value: str | None, device_count: int | None, uuids: Sequence[str] = ()
) -> int | None:
    """How many GPUs CUDA exposes under ``CUDA_VISIBLE_DEVICES=value``.

    CUDA reads the comma-separated list up to the first invalid entry (an index out of
    range, ``-1``, or an unknown UUID prefix): ``"0,-1,1"`` exposes only GPU 0 and
    ``"-1"`` or ``""`` exposes none. ``None`` when unset (all visible) or when the device
    count is unknown and the value is not obviously empty.
    """
    if value is None:
        return device_count
    entries = [e.strip() for e in value.split(",")]
    if entries == [""] or entries[0] in ("-1", "none", "NoDevFiles", "void"):
        return 0
    if device_count is None:
        return None
    seen = 0
    for entry in entries:
        if entry.isdigit():
            if int(entry) >= device_count:
                break
        elif entry.startswith("MIG-") or (entry.startswith("GPU-") and not uuids):
            return None  # MIG instances and unread UUIDs cannot be judged from here
        elif entry.startswith("GPU-"):
            if not any(u.startswith(entry) for u in uuids):
                break
        else:
            break
        seen += 1
    return seen


def driver_supports(driver_cuda: str | None, build_cuda: str | None) -> str | None:
    """ "ok", "minor-compat" (same major, older minor: runs, but PTX JIT of newer PTX
    fails), "too-old" (older major), or None when a version is unknown."""
    d, b = version_tuple(driver_cuda), version_tuple(build_cuda)
    if not d or not b:
        return None
    if d[0] < b[0]:
        return "too-old"
    if d[0] == b[0] and d[:2] < b[:2]:
        return "minor-compat"
    return "ok"
