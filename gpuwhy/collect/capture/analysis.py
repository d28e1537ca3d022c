"""A capture read back as the ``capture`` section: the steps, the GPU's kernels and copies
in them, and what the host was doing while the GPU idled.

Steps come from, in order: TensorFlow's step markers (host events carrying ``step_num``:
``tf.profiler.experimental.Trace("train", step_num=i, _r=1)``, Keras 2's fit); the calls
of the tf.function that took the most time (``EagerLocalExecute: __inference_<fn>_N``:
Keras 3's fit and custom loops); else the device's own pattern, a kernel the GPU ran
once per step (JAX, XLA: XProf's "no step marker" case). A step runs from its start to
the next one's (the last: to its own end), so input waits between calls count in it.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from gpuwhy.collect.capture import host, intervals, kernels, xspace
from gpuwhy.collect.capture.intervals import Intervals
from gpuwhy.facts.capture import (
    HOST_ACTIVITIES,
    NOT_RECORDED,
    CaptureCopies,
    CaptureDevice,
    CaptureFacts,
    CaptureKernel,
    CaptureModule,
    CaptureStep,
    HostOp,
    HostShare,
    PythonFrame,
)

PS = 1e-12
MAX_STEPS = 200
TOP_KERNELS = 15
TOP_HOST_OPS = 30
TOP_FRAMES = 8
MIN_STEPS = 3  # a pattern seen fewer times is not a step
FRAME_SHARE = 0.1  # a Python frame is named when it covers this much of the idle time
ENVELOPES = ("python", "dispatch")  # activities whose step-long events are the step itself
NO_DEVICE = "no GPU: the capture has no device plane"
_FUNCTION_CALL = re.compile(r"^EagerLocalExecute: __inference_(?P<name>.+?)_\d+$")
_OP_STATS = ("tf_op", "hlo_op")


@dataclass
class _Device:
    """One GPU plane's events as arrays, kernels and copies apart."""

    plane: xspace.Plane
    kernel_starts: np.ndarray
    kernel_ends: np.ndarray
    kernel_names: list[str]  # per kernel
    kernel_stats: list[dict[str, object]]
    copies: list[tuple[str, int, int, dict[str, object]]]  # (direction, start, end, stats)

    @property
    def busy(self) -> Intervals:
        return intervals.union(self.kernel_starts, self.kernel_ends)


def wants(plane: str, name: str) -> bool:
    """The events whose stats are read: every GPU event (copies' sizes, kernels' ops),
    and host events that may be step markers (not Python frames, op kernels or the
    runtime's bookkeeping, which make most of a capture)."""
    if plane.startswith("/device:"):
        return True
    return (
        plane == "/host:CPU"
        and not name.startswith("$")
        and ":" not in name
        and host.activity(name, "") is not None
    )


def read_capture(files: Iterable[Path], note: str | None = None) -> CaptureFacts:
    """The capture section of the capture files of one run (one per host)."""
    paths = list(files)
    spaces = [xspace.read(p, wants) for p in paths]
    return analyse(spaces, paths, note)


def analyse(spaces: list[xspace.Space], paths: list[Path], note: str | None = None) -> CaptureFacts:
    planes = [p for s in spaces for p in s.planes]
    start_ps, span_ps = _span(planes)
    devices = [_device(p) for p in planes if p.name.startswith("/device:GPU")]
    hosts = [p for p in planes if p.name == "/host:CPU"]
    markers = _steps(hosts, devices)
    steps_from, step_name, boundaries = markers if markers else (None, None, [])
    busy = intervals.union(
        np.concatenate([d.kernel_starts for d in devices] or [np.zeros(0, np.int64)]),
        np.concatenate([d.kernel_ends for d in devices] or [np.zeros(0, np.int64)]),
    )
    copy_union = _copy_union(devices)
    steps = [_step(a, b, busy, copy_union, devices, start_ps) for a, b in boundaries[:MAX_STEPS]]
    idle = _idle(boundaries, busy)  # without a GPU: the steps' whole time
    step_ps = int(np.median([b - a for a, b in boundaries])) if boundaries else 0
    shares, frames = _host_activity(hosts, idle, step_ps) if boundaries else ((), ())
    metadata = {k: str(v) for p in planes if p.name == "/host:metadata" for k, v in p.stats.items()}
    producer = _producer(metadata, hosts)
    ops, ops_known = (
        _host_ops(hosts, devices, boundaries) if producer == "tensorflow" else ((), False)
    )
    return CaptureFacts(
        path=str(paths[0]) if len(paths) == 1 else str(paths[0].parent),
        producer=producer,
        span_s=span_ps * PS,
        host=", ".join(h for s in spaces for h in s.hostnames) or None,
        versions=tuple(sorted((k, v) for k, v in metadata.items() if "version" in k)),
        devices=tuple(_device_facts(d, boundaries) for d in devices),
        no_device=None if devices else NO_DEVICE,
        steps_from=steps_from,
        step_name=step_name,
        steps=tuple(steps),
        step_count=len(boundaries),
        idle=shares,
        python=frames,
        host_ops=ops,
        host_ops_known=ops_known,
        bytes=sum(p.stat().st_size for p in paths),
        note=note,
    )


# -- the capture's clock ---------------------------------------------------------------
def _span(planes: list[xspace.Plane]) -> tuple[int, int]:
    """(start, length) in ps of the capture: the profiler's start and stop where it
    recorded them, else its events' extent."""
    firsts = [int(line.starts.min()) for p in planes for line in p.lines if len(line)]
    lasts = [
        int((line.starts + line.durations).max()) for p in planes for line in p.lines if len(line)
    ]
    start = min(firsts, default=0)
    end = max(lasts, default=0)
    for plane in planes:
        begun, stopped = plane.stats.get("profile_start_time"), plane.stats.get("profile_stop_time")
        if isinstance(begun, int) and isinstance(stopped, int) and stopped > begun:
            # events are on the profiler's clock from its start (XProf normalises them)
            return (0 if start < begun * 1000 // 2 else begun * 1000), (stopped - begun) * 1000
    return start, max(end - start, 0)


# -- devices -----------------------------------------------------------------------------
def _device(plane: xspace.Plane) -> _Device:
    starts, ends, names, stats = [], [], [], []
    copies = []
    for line in plane.lines:
        line_names = [plane.names.get(int(i), "") for i in line.ids]
        for index, name in enumerate(line_names):
            start = int(line.starts[index])
            end = start + int(line.durations[index])
            event_stats = dict(plane.metadata_stats.get(int(line.ids[index]), {}))
            event_stats.update(line.stats.get(index, {}))
            direction = kernels.copy_direction(name)
            if direction is not None:
                copies.append((direction, start, end, event_stats))
            elif not kernels.is_memset(name):
                starts.append(start)
                ends.append(end)
                names.append(name)
                stats.append(event_stats)
    return _Device(
        plane=plane,
        kernel_starts=np.array(starts, np.int64),
        kernel_ends=np.array(ends, np.int64),
        kernel_names=names,
        kernel_stats=stats,
        copies=copies,
    )


def _device_facts(device: _Device, boundaries: Boundaries) -> CaptureDevice:
    durations = device.kernel_ends - device.kernel_starts
    time_by_name: Counter[str] = Counter()
    count_by_name: Counter[str] = Counter()
    ops: dict[str, Counter[str]] = defaultdict(Counter)
    modules: Counter[str] = Counter()
    module_kernels: Counter[str] = Counter()
    for name, duration, stats in zip(device.kernel_names, durations.tolist(), device.kernel_stats):
        time_by_name[name] += duration
        count_by_name[name] += 1
        op = _op_of(stats)
        if op:
            ops[name][op] += duration
        module = stats.get("hlo_module")
        if isinstance(module, str) and module:
            modules[module] += duration
            module_kernels[module] += 1
    tensor = {n: kernels.tensor_core(n) for n in time_by_name}
    matmul = {n: kernels.is_matmul(n) or tensor[n] is not None for n in time_by_name}
    top = [
        CaptureKernel(
            name=name,
            count=count_by_name[name],
            time_s=time * PS,
            tensor_core=tensor[name],
            matmul=matmul[name],
            op=ops[name].most_common(1)[0][0] if ops[name] else None,
            module=_module_of(device, name),
        )
        for name, time in time_by_name.most_common(TOP_KERNELS)
    ]
    busy = device.busy
    steps_busy = sum(intervals.total(intervals.clip(busy, a, b)) for a, b in boundaries)
    return CaptureDevice(
        name=device.plane.name,
        model=_text(device.plane.stats.get("gpu_device_name")),
        streams=sum(1 for line in device.plane.lines if len(line)),
        kernels=len(device.kernel_names),
        busy_s=intervals.total(busy) * PS,
        kernel_time_s=float(durations.sum()) * PS,
        tensor_core_s=sum(t for n, t in time_by_name.items() if tensor[n] is not None) * PS,
        matmul_s=sum(t for n, t in time_by_name.items() if matmul[n]) * PS,
        matmul_tensor_core_s=sum(
            t for n, t in time_by_name.items() if matmul[n] and tensor[n] is not None
        )
        * PS,
        steps_busy_s=steps_busy * PS,
        top_kernels=tuple(top),
        modules=tuple(
            CaptureModule(name=m, time_s=t * PS, kernels=module_kernels[m])
            for m, t in modules.most_common(10)
        ),
        copies=_copies(device, busy),
    )


def _op_of(stats: dict[str, object]) -> str | None:
    for key in _OP_STATS:
        value = stats.get(key)
        if isinstance(value, str) and value and value != "XlaModule:":
            return value
    return None


def _module_of(device: _Device, name: str) -> str | None:
    for kernel, stats in zip(device.kernel_names, device.kernel_stats):
        if kernel == name:
            module = stats.get("hlo_module")
            return module if isinstance(module, str) and module else None
    return None


def _text(value: object) -> str | None:
    return value if isinstance(value, str) and value else None


def _copies(device: _Device, busy: Intervals) -> tuple[CaptureCopies, ...]:
    by_direction: dict[str, list[tuple[int, int, dict[str, object]]]] = defaultdict(list)
    for direction, start, end, stats in device.copies:
        by_direction[direction].append((start, end, stats))
    out = []
    for direction, copies in sorted(by_direction.items()):
        starts = np.array([c[0] for c in copies], np.int64)
        ends = np.array([c[1] for c in copies], np.int64)
        details = [str(c[2].get("memcpy_details", "")) for c in copies]
        pageable = [kernels.copy_pageable(d) for d in details]
        out.append(
            CaptureCopies(
                direction=direction,
                count=len(copies),
                bytes=sum(kernels.copy_bytes(d) for d in details),
                time_s=float((ends - starts).sum()) * PS,
                pageable=sum(1 for p in pageable if p is True),
                pinned=sum(1 for p in pageable if p is False),
                overlapped_s=intervals.total(
                    intervals.intersect(intervals.union(starts, ends), busy)
                )
                * PS,
            )
        )
    return tuple(out)


def _copy_union(devices: list[_Device]) -> Intervals:
    starts = [c[1] for d in devices for c in d.copies]
    ends = [c[2] for d in devices for c in d.copies]
    return intervals.union(np.array(starts, np.int64), np.array(ends, np.int64))


# -- steps -------------------------------------------------------------------------------
Boundaries = list[tuple[int, int]]


def _steps(
    hosts: list[xspace.Plane], devices: list[_Device]
) -> tuple[str, str | None, Boundaries] | None:
    return _marked_steps(hosts) or _function_steps(hosts) or _device_steps(devices)


def _periods(starts: list[int], ends: list[int]) -> Boundaries:
    """Steps from their starts: each to the next one's start, the last to its own end."""
    order = sorted(range(len(starts)), key=starts.__getitem__)
    s = [starts[i] for i in order]
    e = [ends[i] for i in order]
    return [(s[i], s[i + 1]) for i in range(len(s) - 1)] + [(s[-1], max(e[-1], s[-1]))]


def _marked_steps(hosts: list[xspace.Plane]) -> tuple[str, str | None, Boundaries] | None:
    found: dict[str, tuple[list[int], list[int]]] = defaultdict(lambda: ([], []))
    for plane in hosts:
        for line in plane.lines:
            for index, stats in line.stats.items():
                if "step_num" not in stats or stats.get("_r", 1) not in (1, "1"):
                    continue
                name = plane.names.get(int(line.ids[index]), "")
                start = int(line.starts[index])
                found[name][0].append(start)
                found[name][1].append(start + int(line.durations[index]))
    best = max(found.items(), key=lambda item: len(item[1][0]), default=None)
    if best is None or len(best[1][0]) < 2:
        return None
    return "step markers", best[0], _periods(*best[1])


def _function_steps(hosts: list[xspace.Plane]) -> tuple[str, str | None, Boundaries] | None:
    calls: dict[str, tuple[list[int], list[int]]] = defaultdict(lambda: ([], []))
    for plane in hosts:
        matched = {
            i: m.group("name") for i, n in plane.names.items() if (m := _FUNCTION_CALL.match(n))
        }
        if not matched:
            continue
        for line in plane.lines:
            mask = np.isin(line.ids, list(matched))
            for index in np.flatnonzero(mask):
                name = matched[int(line.ids[index])]
                start = int(line.starts[index])
                calls[name][0].append(start)
                calls[name][1].append(start + int(line.durations[index]))
    eligible = {n: c for n, c in calls.items() if len(c[0]) >= MIN_STEPS}
    if not eligible:
        return None
    name, (starts, ends) = max(
        eligible.items(), key=lambda item: sum(e - s for s, e in zip(*item[1]))
    )
    return "function calls", name, _periods(starts, ends)


def _device_steps(devices: list[_Device]) -> tuple[str, str | None, Boundaries] | None:
    """A kernel the GPU ran once per step: of the kernel names seen the same number of
    times (at least MIN_STEPS), the count most names share is the step count; the
    earliest of those names starts each step."""
    if not devices:
        return None
    device = max(devices, key=lambda d: len(d.kernel_names))
    counts = Counter(device.kernel_names)
    by_count = Counter(c for c in counts.values() if c >= MIN_STEPS)
    if not by_count:
        return None
    steps = max(by_count.items(), key=lambda item: (item[1], item[0]))[0]
    once_per_step = {n for n, c in counts.items() if c == steps}
    first_seen: dict[str, int] = {}
    for name, start in zip(device.kernel_names, device.kernel_starts.tolist()):
        if name in once_per_step and name not in first_seen:
            first_seen[name] = start
    leader = min(first_seen, key=first_seen.__getitem__)
    starts = [s for n, s in zip(device.kernel_names, device.kernel_starts.tolist()) if n == leader]
    last_end = int(device.kernel_ends.max())
    module = _module_of(device, leader)
    return "device pattern", module or leader, _periods(starts, [last_end] * len(starts))


def _step(
    start: int,
    end: int,
    busy: Intervals,
    copies: Intervals,
    devices: list[_Device],
    origin: int,
) -> CaptureStep:
    inside = intervals.clip(busy, start, end)
    durations = np.concatenate(
        [
            (d.kernel_ends - d.kernel_starts)[(d.kernel_starts >= start) & (d.kernel_starts < end)]
            for d in devices
        ]
        or [np.zeros(0, np.int64)]
    )
    gaps = inside[0][1:] - inside[1][:-1]
    return CaptureStep(
        start_s=(start - origin) * PS,
        duration_s=(end - start) * PS,
        busy_s=intervals.total(inside) * PS,
        copy_s=intervals.total(intervals.clip(copies, start, end)) * PS,
        kernels=len(durations),
        median_kernel_s=float(np.median(durations)) * PS if len(durations) else None,
        median_gap_s=float(np.median(gaps)) * PS if len(gaps) else None,
    )


def _idle(boundaries: Boundaries, busy: Intervals) -> Intervals:
    """The GPU's idle time inside the steps."""
    steps = intervals.union(
        np.array([a for a, _ in boundaries], np.int64),
        np.array([b for _, b in boundaries], np.int64),
    )
    return intervals.subtract(steps, busy)


# -- the host ----------------------------------------------------------------------------
def _covered(idle: Intervals, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """Per event ``[starts[i], ends[i])``, its time inside ``idle`` (vectorised: the idle
    time before t is a piecewise-linear function of t)."""
    idle_starts, idle_ends = idle
    before = np.concatenate(([0], np.cumsum(idle_ends - idle_starts)))

    def idle_before(t: np.ndarray) -> np.ndarray:
        k = np.searchsorted(idle_starts, t, side="right")  # idle intervals begun by t
        last = np.maximum(k - 1, 0)
        inside = np.clip(t - idle_starts[last], 0, idle_ends[last] - idle_starts[last])
        return np.where(k > 0, before[last] + inside, 0)

    return idle_before(ends) - idle_before(starts)


def _host_activity(
    hosts: list[xspace.Plane], idle: Intervals, step_ps: int
) -> tuple[tuple[HostShare, ...], tuple[PythonFrame, ...]]:
    """The steps' GPU idle time by what the host was doing, each moment to the most
    specific activity covering it; and the Python frames that covered it. A Python or
    dispatch event as long as half a step (``step_ps``: the median) is the step's own
    envelope (its marker, the function call, the loop's frame): it says nothing of what
    the host waited for, and is left out of those two."""
    idle_total = intervals.total(idle)
    if idle_total <= 0:
        return (), ()
    kinds = (*HOST_ACTIVITIES, host.BACKGROUND_INPUT)
    by_activity: dict[str, tuple[list[np.ndarray], list[np.ndarray]]] = {a: ([], []) for a in kinds}
    seconds_by_name: dict[str, defaultdict[str, float]] = {a: defaultdict(float) for a in kinds}
    background: list[tuple[str, np.ndarray, np.ndarray]] = []  # tf.data's producers' events
    frames: defaultdict[str, float] = defaultdict(float)
    frame_length: defaultdict[str, float] = defaultdict(float)
    roots: set[str] = set()  # the files of the Python threads' outermost frames
    for plane in hosts:
        for line in plane.lines:
            if not len(line):
                continue
            ids = line.ids
            unique, inverse = np.unique(ids, return_inverse=True)
            names = [plane.names.get(int(i), "") for i in unique]
            classes = [
                host.activity(n, line.name, plane.display.get(int(i)))
                for n, i in zip(names, unique)
            ]
            ends = line.starts + line.durations
            roots.update(_outermost_file(plane, line, unique, names))
            covered = _covered(idle, line.starts, ends)
            per_name = np.bincount(inverse, weights=covered, minlength=len(unique))
            lengths = np.bincount(inverse, weights=line.durations, minlength=len(unique))
            for k, (name, activity) in enumerate(zip(names, classes)):
                if activity is None:
                    continue
                mask = inverse == k
                if activity in ENVELOPES:
                    mask &= line.durations < step_ps // 2
                by_activity[activity][0].append(line.starts[mask])
                by_activity[activity][1].append(ends[mask])
                if activity == host.BACKGROUND_INPUT:
                    background.append((name, line.starts[mask], ends[mask]))
                seconds_by_name[activity][name] += float(per_name[k])
                if host.frame(name):
                    frames[name] += float(per_name[k])
                    frame_length[name] += float(lengths[k])
    shares = []
    left = idle
    for activity in HOST_ACTIVITIES:
        starts, ends = by_activity[activity]
        if not starts:
            continue
        mine = intervals.intersect(
            left, intervals.union(np.concatenate(starts), np.concatenate(ends))
        )
        seconds = intervals.total(mine)
        if seconds <= 0:
            continue
        left = intervals.subtract(left, mine)
        named = sorted(seconds_by_name[activity].items(), key=lambda item: -item[1])
        if activity == "input" and background:
            named = _busiest(background, mine) or named  # what the wait waited for
        top = tuple(n for n, t in named[:3] if t > 0)
        shares.append(HostShare(activity, seconds * PS, seconds / idle_total, top))
    rest = intervals.total(left)
    if rest > 0:
        shares.append(HostShare(NOT_RECORDED, rest * PS, rest / idle_total))
    shares.sort(key=lambda s: -s.seconds)
    covering = [n for n, t in frames.items() if t >= FRAME_SHARE * idle_total]
    # the program's own files first (those of a Python thread's outermost frame: the
    # script), then the innermost (shortest) frames: the most specific
    covering.sort(key=lambda n: ((host.frame(n) or ("", "", 0))[1] not in roots, frame_length[n]))
    python = []
    for name in covering[:TOP_FRAMES]:
        function, file, line_number = host.frame(name) or (name, None, None)
        python.append(PythonFrame(function, file, line_number, frames[name] * PS))
    return tuple(shares), tuple(python)


def _busiest(
    events: list[tuple[str, np.ndarray, np.ndarray]], during: Intervals
) -> list[tuple[str, float]]:
    """Event names by their time inside ``during``, most first."""
    seconds: defaultdict[str, float] = defaultdict(float)
    for name, starts, ends in events:
        seconds[name] += float(_covered(during, starts, ends).sum())
    return sorted(((n, t) for n, t in seconds.items() if t > 0), key=lambda item: -item[1])


def _outermost_file(
    plane: xspace.Plane, line: xspace.Line, unique: np.ndarray, names: list[str]
) -> set[str]:
    """The file of a Python thread's outermost frame past Python's own (the script, on
    the main thread: the frames open when the capture began all start at its start, so
    the longest is the outermost)."""
    frame_ids = [
        int(i)
        for i, n in zip(unique, names)
        if (found := host.frame(n)) and found[1] not in host.RUNTIME_FILES
    ]
    if not frame_ids:
        return set()
    positions = np.flatnonzero(np.isin(line.ids, frame_ids))
    longest = positions[int(np.argmax(line.durations[positions]))]
    found = host.frame(plane.names.get(int(line.ids[longest]), ""))
    return {found[1]} if found is not None else set()


def _host_ops(
    hosts: list[xspace.Plane], devices: list[_Device], boundaries: Boundaries
) -> tuple[tuple[HostOp, ...], bool]:
    """TensorFlow op kernels that ran on host threads inside the steps (all of the
    capture without steps); whether each ran on the CPU, where GPU kernels name their
    ops (an op that launches GPU kernels runs its host side on a host thread too)."""
    gpu_nodes = {
        op.rsplit(":", 1)[0]
        for d in devices
        for stats in d.kernel_stats
        if (op := _op_of(stats)) and ":" in op
    }
    known = bool(devices) and bool(gpu_nodes)
    lo = boundaries[0][0] if boundaries else None
    hi = boundaries[-1][1] if boundaries else None
    time: Counter[tuple[str, str]] = Counter()
    count: Counter[tuple[str, str]] = Counter()
    for plane in hosts:
        kernels_by_id = {
            i: k for i, n in plane.names.items() if (k := host.op_kernel(n, plane.display.get(i)))
        }
        if not kernels_by_id:
            continue
        for line in plane.lines:
            mask = np.isin(line.ids, list(kernels_by_id))
            if lo is not None:
                mask &= (line.starts >= lo) & (line.starts < hi)
            for index in np.flatnonzero(mask):
                key = kernels_by_id[int(line.ids[index])]
                time[key] += int(line.durations[index])
                count[key] += 1
    ops = tuple(
        HostOp(
            name=node,
            type=kind,
            count=count[(node, kind)],
            time_s=t * PS,
            on_cpu=(node not in gpu_nodes) if known else None,
        )
        for (node, kind), t in time.most_common(TOP_HOST_OPS)
    )
    return ops, known


def _producer(metadata: dict[str, str], hosts: list[xspace.Plane]) -> str:
    if any(k.startswith("jax") for k in metadata):
        return "jax"
    for plane in hosts:
        if any(line.name.startswith("tf_") for line in plane.lines) or any(
            n.startswith(("EagerLocalExecute", "EagerExecute")) for n in plane.names.values()
        ):
            return "tensorflow"
    return "unknown"
