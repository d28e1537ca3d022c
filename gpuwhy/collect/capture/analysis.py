"""A capture read back as the ``capture`` section: the steps, the GPU's kernels and copies
in them, and what the host was doing while the GPU idled.

Steps come from, in order: TensorFlow's step markers (host events carrying ``step_num``:
``tf.profiler.experimental.Trace("train", step_num=i, _r=1)``, Keras 2's fit, Keras 3's
"Profiled batch" of the TensorBoard callback), one marker being one step; the calls of
the tf.function that took the most time (``EagerLocalExecute: __inference_<fn>_N``:
Keras 3's fit and custom loops; a single call of Keras' step function is a step); else
the device's own pattern, a kernel the GPU ran once per step (JAX, XLA: XProf's "no step
marker" case); else the calls of a jitted function (``PjitFunction(train_step)``: JAX
without a GPU); else an op an eager loop ran once per step. A step runs from its start to
the next one's (the last: to its own end), so input waits between calls count in it.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

from gpuwhy.collect.capture import EAGER, host, intervals, kernels, xspace
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
# the lines XProf derives on a device plane from its streams' annotations
DERIVED_LINES = frozenset(
    {
        "Steps",
        "XLA Modules",
        "XLA Ops",
        "Async XLA Ops",
        "TensorFlow Ops",
        "TensorFlow Name Scope",
        "Framework Ops",
        "Framework Name Scope",
        "Source code",
        "Launch Stats",
        "XLA TraceMe",
    }
)
MAX_STAGES = 6
SLICE = 1 << 18  # host events handled at a time
ENVELOPES = ("python", "dispatch")  # activities whose step-long events are the step itself
NO_DEVICE = "no GPU: the capture has no device plane"
_EAGER_OP = "EagerLocalExecute: "
EAGER_OVER_CALLS = 2.0  # an eager loop's steps over a function's calls that span this less
_FUNCTION_CALL = re.compile(r"^EagerLocalExecute: __inference_(?P<name>.+?)_\d+$")
# a call of a jax.jit function, as JAX's profiler names it (twice, one inside the other)
_JIT_CALL = re.compile(r"^PjitFunction\((?P<name>[^()]+)\)$")
_OP_STATS = ("tf_op", "hlo_op")


@dataclass
class _Device:
    """One GPU plane's events as arrays, kernels (sorted by start) and copies apart."""

    plane: xspace.Plane
    kernel_starts: np.ndarray
    kernel_ends: np.ndarray
    kernel_ids: np.ndarray  # each kernel's metadata id: its name is plane.names[id]
    kernel_stats: dict[int, xspace.Stats]  # by kernel index, where its own are read
    id_stats: dict[int, xspace.Stats]  # by metadata id: every other kernel of that name
    copies: list[tuple[str, int, int, xspace.Stats]]  # (direction, start, end, stats)
    modules: dict[int, str]  # metadata id -> its XLA module, where a kernel names one

    @property
    def busy(self) -> Intervals:
        return intervals.union(self.kernel_starts, self.kernel_ends)

    def name(self, metadata_id: int) -> str:
        return self.plane.names.get(metadata_id, "")

    def all_stats(self) -> list[xspace.Stats]:
        """Every distinct stats a kernel carries (the joins' input: op names)."""
        return [*self.kernel_stats.values(), *self.id_stats.values()]


# the stats the analysis reads (a GPU event carries a dozen): the op and XLA module a
# kernel ran for, a copy's kind and size, a step marker's number and root flag
KEPT_STATS = frozenset({"tf_op", "hlo_op", "hlo_module", "memcpy_details", "step_num", "_r"})


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


def read_capture(
    files: Iterable[Path], note: str | None = None, prefer: str | None = None
) -> CaptureFacts:
    """The capture section of a run's capture file (``prefer``: the steps a watched run
    knows, its training function's name or EAGER, a loop without one, over what the
    capture alone would take for them). A run of several hosts has a file each, each
    on its own clock: the first is read, and the note names the others."""
    paths = list(files)
    if len(paths) > 1:
        others = ", ".join(p.name for p in paths[1:4]) + (" ..." if len(paths) > 4 else "")
        read = (
            f"the run holds {len(paths)} hosts' captures: read {paths[0].name}; name "
            f"another file to read it ({others})"
        )
        note = f"{note}; {read}" if note else read
        paths = paths[:1]
    return analyse(xspace.read(paths[0], wants, KEPT_STATS), paths[0], note, prefer)


def analyse(
    space: xspace.Space, path: Path, note: str | None = None, prefer: str | None = None
) -> CaptureFacts:
    planes = space.planes
    start_ps, span_ps = _span(planes)
    devices = [_device(p) for p in planes if p.name.startswith("/device:GPU")]
    hosts = [p for p in planes if p.name == "/host:CPU"]
    markers = _steps(hosts, devices, prefer)
    steps_from, step_name, found = markers if markers else (None, None, [])
    boundaries = found[:MAX_STEPS]  # every figure below is of these steps
    busy = intervals.union(
        np.concatenate([d.kernel_starts for d in devices] or [np.zeros(0, np.int64)]),
        np.concatenate([d.kernel_ends for d in devices] or [np.zeros(0, np.int64)]),
    )
    copy_union = _copy_union(devices)
    steps = [_step(a, b, busy, copy_union, devices, start_ps) for a, b in boundaries]
    idle = _idle(boundaries, busy)  # without a GPU: the steps' whole time
    step_ps = int(np.median([b - a for a, b in boundaries])) if boundaries else 0
    reading = _host_activity(hosts, idle, step_ps) if boundaries else _HostReading()
    steps = [
        _with_host(step, a, b, idle, reading.exclusive) for step, (a, b) in zip(steps, boundaries)
    ]
    metadata = {k: str(v) for p in planes if p.name == "/host:metadata" for k, v in p.stats.items()}
    producer = _producer(metadata, hosts)
    ops, ops_known, cpu_ops_ps = (
        _host_ops(hosts, devices, boundaries) if producer == "tensorflow" else ((), False, 0)
    )
    return CaptureFacts(
        path=str(path),
        producer=producer,
        span_s=span_ps * PS,
        host=", ".join(space.hostnames) or None,
        versions=tuple(sorted((k, v) for k, v in metadata.items() if "version" in k)),
        devices=tuple(_device_facts(d, boundaries) for d in devices),
        no_device=None if devices else NO_DEVICE,
        steps_from=steps_from,
        step_name=step_name,
        steps=tuple(steps),
        step_count=len(found),
        idle=reading.shares,
        python=reading.frames,
        input_frames=reading.input_frames,
        input_stages=reading.stages,
        host_ops=ops,
        host_ops_known=ops_known,
        cpu_ops_s=cpu_ops_ps * PS,
        bytes=path.stat().st_size,
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
def stream_lines(plane: xspace.Plane) -> list[xspace.Line]:
    """A GPU plane's lines of real work: its CUDA streams (``Stream #14(...)``). Lines XProf
    derives from them (``XLA Modules``, ``TensorFlow Ops``, ``Steps``...: spans that cover
    many kernels each) would count their time twice, and wider: they are left out."""
    streams = [line for line in plane.lines if line.name.startswith("Stream")]
    return streams or [line for line in plane.lines if line.name not in DERIVED_LINES]


def _device(plane: xspace.Plane) -> _Device:
    directions = {i: kernels.copy_direction(n) for i, n in plane.names.items()}
    copy_ids = [i for i, d in directions.items() if d is not None]
    not_kernels = copy_ids + [i for i, n in plane.names.items() if kernels.is_memset(n)]
    starts, ends, ids = [], [], []
    stats: dict[int, xspace.Stats] = {}
    id_stats: dict[int, xspace.Stats] = {}
    copies = []
    seen = 0
    for line in stream_lines(plane):
        if not len(line):
            continue
        for position in np.flatnonzero(np.isin(line.ids, copy_ids)).tolist():
            metadata = int(line.ids[position])
            start = int(line.starts[position])
            event_stats = {**plane.metadata_stats.get(metadata, {}), **line.stats_of(position)}
            direction = directions[metadata] or ""
            copies.append((direction, start, start + int(line.durations[position]), event_stats))
        mask = ~np.isin(line.ids, not_kernels)
        positions = np.cumsum(mask) - 1  # each kept event's index among the line's kernels
        for event, event_stats in line.stats.items():
            if mask[event]:
                stats[seen + int(positions[event])] = event_stats
        for metadata, event_stats in line.constant.items():
            if id_stats.setdefault(metadata, event_stats) != event_stats:
                # another stream ran this kernel for something else: its own, one by one
                for event in np.flatnonzero(mask & (line.ids == metadata)).tolist():
                    stats[seen + int(positions[event])] = event_stats
        starts.append(line.starts[mask])
        ends.append(line.starts[mask] + line.durations[mask])
        ids.append(line.ids[mask])
        seen += int(mask.sum())
    all_starts = np.concatenate(starts) if starts else np.zeros(0, np.int64)
    order = np.argsort(all_starts, kind="stable")
    rank = np.empty_like(order)
    rank[order] = np.arange(len(order))
    all_ids = np.concatenate(ids)[order] if ids else np.zeros(0, np.int64)
    sorted_stats = {int(rank[i]): v for i, v in stats.items()}
    modules: dict[int, str] = {}
    sources = [*((int(all_ids[i]), v) for i, v in sorted_stats.items()), *id_stats.items()]
    for metadata, event_stats in sources:
        module = event_stats.get("hlo_module")
        if isinstance(module, str) and module:
            modules.setdefault(metadata, module)
    return _Device(
        plane=plane,
        kernel_starts=all_starts[order],
        kernel_ends=(np.concatenate(ends) if ends else np.zeros(0, np.int64))[order],
        kernel_ids=all_ids,
        kernel_stats=sorted_stats,
        id_stats=id_stats,
        copies=copies,
        modules=modules,
    )


def _device_facts(device: _Device, boundaries: Boundaries) -> CaptureDevice:
    durations = device.kernel_ends - device.kernel_starts
    unique, inverse = np.unique(device.kernel_ids, return_inverse=True)
    time_by_id = np.bincount(inverse, weights=durations, minlength=len(unique))
    count_by_id = np.bincount(inverse, minlength=len(unique))
    names = [device.name(int(i)) for i in unique]
    ops: dict[str, Counter[str]] = defaultdict(Counter)
    modules: Counter[str] = Counter()
    module_kernels: Counter[str] = Counter()
    # the kernels whose own stats were read, one by one; every other kernel by its name's
    own = np.zeros(len(durations), bool)
    own[list(device.kernel_stats)] = True
    shared_time = np.bincount(inverse[~own], weights=durations[~own], minlength=len(unique))
    shared_count = np.bincount(inverse[~own], minlength=len(unique))
    weighted = [
        (device.id_stats.get(int(unique[k]), {}), int(shared_time[k]), int(shared_count[k]), k)
        for k in np.flatnonzero(shared_count).tolist()
    ]
    weighted += [
        (stats, int(durations[i]), 1, int(inverse[i])) for i, stats in device.kernel_stats.items()
    ]
    for stats, duration, count, k in weighted:
        name = device.name(int(unique[k]))
        op = _op_of(stats)
        if op:
            ops[name][op] += duration
        module = stats.get("hlo_module")
        if isinstance(module, str) and module:
            modules[module] += duration
            module_kernels[module] += count
    time_by_name: Counter[str] = Counter()
    count_by_name: Counter[str] = Counter()
    module_by_name: dict[str, str] = {}
    for k, name in enumerate(names):
        time_by_name[name] += int(time_by_id[k])
        count_by_name[name] += int(count_by_id[k])
        if int(unique[k]) in device.modules:
            module_by_name.setdefault(name, device.modules[int(unique[k])])
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
            module=module_by_name.get(name),
        )
        for name, time in time_by_name.most_common(TOP_KERNELS)
    ]
    busy = device.busy
    steps_busy = sum(intervals.total(intervals.clip(busy, a, b)) for a, b in boundaries)
    return CaptureDevice(
        name=device.plane.name,
        model=_text(device.plane.stats.get("gpu_device_name")),
        streams=sum(1 for line in stream_lines(device.plane) if len(line)),
        kernels=len(device.kernel_ids),
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
    hosts: list[xspace.Plane], devices: list[_Device], prefer: str | None = None
) -> tuple[str, str | None, Boundaries] | None:
    if prefer == EAGER:  # a watched eager loop: its tf.functions (an evaluation) are not it
        found = _marked_steps(hosts) or _eager_steps(hosts) or _device_steps(devices)
        if found:
            return found
    marked = _marked_steps(hosts)
    if marked:
        return marked
    calls = _function_steps(hosts, prefer)
    if calls and prefer is None:
        # the capture alone: an eager loop that evaluates with a tf.function calls it
        # for a moment only; the steps are those that cover the capture
        eager = _eager_steps(hosts)
        if eager and _spanned(eager[2]) > EAGER_OVER_CALLS * _spanned(calls[2]):
            return eager
    return calls or _device_steps(devices) or _jit_steps(hosts, prefer) or _eager_steps(hosts)


def _spanned(boundaries: Boundaries) -> int:
    return sum(b - a for a, b in boundaries)


def _periods(starts: list[int], ends: list[int]) -> Boundaries:
    """Steps from their starts: each to the next one's start, the last to its own end."""
    order = sorted(range(len(starts)), key=starts.__getitem__)
    s = [starts[i] for i in order]
    e = [ends[i] for i in order]
    return [(s[i], s[i + 1]) for i in range(len(s) - 1)] + [(s[-1], max(e[-1], s[-1]))]


def _marked_steps(hosts: list[xspace.Plane]) -> tuple[str, str | None, Boundaries] | None:
    """The steps the program marked (``step_num``), the most-used marker's. One marker
    is a step: Keras' TensorBoard(profile_batch=3) traces one batch, its "Profiled
    batch" around the training function's call, and the eager ops of its callbacks
    repeat more often than that."""
    found: dict[str, tuple[list[int], list[int]]] = defaultdict(lambda: ([], []))
    for plane in hosts:
        for line in plane.lines:
            for index in _marker_indices(line):
                name = plane.names.get(int(line.ids[index]), "")
                start = int(line.starts[index])
                found[name][0].append(start)
                found[name][1].append(start + int(line.durations[index]))
    best = max(found.items(), key=lambda item: len(item[1][0]), default=None)
    if best is None:
        return None
    return "step markers", best[0], _periods(*best[1])


def _marker_indices(line: xspace.Line) -> list[int]:
    """The events of ``line`` that mark a step: a ``step_num`` and a root flag (``_r``)
    of 1 or none, read one by one, or for a marker whose events all carry the same
    stats (a single marked step: its number is the same in every one) from its
    metadata id."""

    def marks(stats: xspace.Stats) -> bool:
        return "step_num" in stats and stats.get("_r", 1) in (1, "1")

    found = [index for index, stats in line.stats.items() if marks(stats)]
    same = [i for i, stats in line.constant.items() if marks(stats)]
    if same:
        alike = np.flatnonzero(np.isin(line.ids, same)).tolist()
        found += [index for index in alike if index not in line.stats]
    return found


def _function_steps(
    hosts: list[xspace.Plane], prefer: str | None = None
) -> tuple[str, str | None, Boundaries] | None:
    """The calls of one traced function (each trace of it apart: Keras' training and
    evaluation functions share a name): ``prefer``'s where it was called, else the one
    with the most time in calls."""
    calls = _events_by_name(hosts, lambda n: n if _FUNCTION_CALL.match(n) else None)
    eligible = {n: c for n, c in calls.items() if len(c[0]) >= _fewest_calls(n)}
    if not eligible:
        return None
    preferred = {n: c for n, c in eligible.items() if prefer and _function_name(n) == prefer}
    traced, (starts, ends) = max(
        (preferred or eligible).items(),
        key=lambda item: (
            len(item[1][0]) if preferred else 0,
            sum(e - s for s, e in zip(*item[1])),
        ),
    )
    return "function calls", _function_name(traced), _periods(starts, ends)


# Keras 3's step functions (fit's, and evaluate's and predict's of the same names): each
# call is one step (or ``steps_per_execution`` of them), traced whole
KERAS_STEP_FUNCTIONS = frozenset(
    {"multi_step_on_iterator", "one_step_on_iterator", "one_step_on_data"}
)


def _fewest_calls(traced: str) -> int:
    """The calls that make a function's calls steps: one for Keras' step functions (a
    capture of one batch holds a single call, and the eager ops of the callbacks around
    it repeat more), MIN_STEPS for any other function (called a few times, it may be a
    helper of the step, not the step)."""
    return 1 if _function_name(traced) in KERAS_STEP_FUNCTIONS else MIN_STEPS


def _function_name(traced: str) -> str:
    """``train_step`` of ``EagerLocalExecute: __inference_train_step_191``."""
    match = _FUNCTION_CALL.match(traced)
    return match.group("name") if match else traced


def _jit_steps(
    hosts: list[xspace.Plane], prefer: str | None = None
) -> tuple[str, str | None, Boundaries] | None:
    """A JAX program's steps where the capture has no GPU to find them by (XLA on the
    CPU runs no kernel a device plane shows): the calls of one jitted function
    (``PjitFunction(train_step)``: Keras 3's fit on JAX, a loop's ``jax.jit`` step),
    ``prefer``'s where it was called, else the one with the most time in calls."""
    calls = _events_by_name(hosts, lambda n: m.group("name") if (m := _JIT_CALL.match(n)) else None)
    eligible = {n: _outermost(*c) for n, c in calls.items()}
    eligible = {n: c for n, c in eligible.items() if len(c[0]) >= MIN_STEPS}
    if not eligible:
        return None
    name, (starts, ends) = max(
        eligible.items(),
        key=lambda item: (item[0] == prefer, sum(e - s for s, e in zip(*item[1]))),
    )
    return "function calls", name, _periods(starts, ends)


def _outermost(starts: list[int], ends: list[int]) -> tuple[list[int], list[int]]:
    """The events not inside an earlier one: JAX records each jitted call twice, the
    second within the first; one call is one step."""
    kept: tuple[list[int], list[int]] = ([], [])
    for start, end in sorted(zip(starts, ends), key=lambda e: (e[0], -e[1])):
        if kept[1] and start < kept[1][-1]:
            continue
        kept[0].append(start)
        kept[1].append(end)
    return kept


def _device_steps(devices: list[_Device]) -> tuple[str, str | None, Boundaries] | None:
    """A kernel the GPU ran once per step: of the kernel names seen the same number of
    times (at least MIN_STEPS), the count most names share is the step count; the
    earliest of those names starts each step."""
    if not devices:
        return None
    device = max(devices, key=lambda d: len(d.kernel_ids))
    unique, first, counts = np.unique(device.kernel_ids, return_index=True, return_counts=True)
    by_count = Counter(int(c) for c in counts if c >= MIN_STEPS)
    if not by_count:
        return None
    steps = _step_count(by_count)
    once = counts == steps
    leader = int(unique[once][np.argmin(first[once])])  # kernels are sorted by start
    starts = device.kernel_starts[device.kernel_ids == leader].tolist()
    last_end = int(device.kernel_ends.max())
    module = device.modules.get(leader)
    return (
        "device pattern",
        module or device.name(leader),
        _periods(starts, [last_end] * len(starts)),
    )


def _step_count(by_count: Counter[int]) -> int:
    """The count most kinds of event share (the fewest repeats among equals: a kernel or
    op run once per step, not the one run three times in it)."""
    return max(by_count.items(), key=lambda item: (item[1], -item[0]))[0]


def _eager_steps(hosts: list[xspace.Plane]) -> tuple[str, str | None, Boundaries] | None:
    """An eager loop's steps on a host-only capture: an op TF ran eagerly once per step
    (``EagerLocalExecute: <op>``), as the device pattern finds a kernel."""
    ops = _events_by_name(hosts, lambda n: n[len(_EAGER_OP) :] if n.startswith(_EAGER_OP) else None)
    by_count = Counter(len(starts) for starts, _ in ops.values() if len(starts) >= MIN_STEPS)
    if not by_count:
        return None
    steps = _step_count(by_count)
    once = [n for n, (starts, _) in ops.items() if len(starts) == steps]
    leader = min(once, key=lambda n: min(ops[n][0]))
    return "eager op pattern", leader, _periods(*ops[leader])


def _events_by_name(
    hosts: list[xspace.Plane], key_of: Callable[[str], str | None]
) -> dict[str, tuple[list[int], list[int]]]:
    """(starts, ends) of the host events ``key_of`` names, by that key (None: not one)."""
    found: dict[str, tuple[list[int], list[int]]] = defaultdict(lambda: ([], []))
    for plane in hosts:
        keys = {i: k for i, n in plane.names.items() if (k := key_of(n)) is not None}
        if not keys:
            continue
        for line in plane.lines:
            for index in np.flatnonzero(np.isin(line.ids, list(keys))).tolist():
                start = int(line.starts[index])
                starts, ends = found[keys[int(line.ids[index])]]
                starts.append(start)
                ends.append(start + int(line.durations[index]))
    return found


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
        [_started_in(d, start, end) for d in devices] or [np.zeros(0, np.int64)]
    )
    gaps = inside[0][1:] - inside[1][:-1]
    return CaptureStep(
        start_s=(start - origin) * PS,
        duration_s=(end - start) * PS,
        busy_s=intervals.total(inside) * PS,
        copy_s=intervals.total(intervals.clip(copies, start, end)) * PS,
        exposed_copy_s=intervals.total(
            intervals.subtract(intervals.clip(copies, start, end), inside)
        )
        * PS,
        kernels=len(durations),
        median_kernel_s=float(np.median(durations)) * PS if len(durations) else None,
        median_gap_s=float(np.median(gaps)) * PS if len(gaps) else None,
    )


def _started_in(device: _Device, start: int, end: int) -> np.ndarray:
    """The lengths of the kernels that started in ``[start, end)``."""
    lo, hi = np.searchsorted(device.kernel_starts, (start, end), side="left")
    return device.kernel_ends[lo:hi] - device.kernel_starts[lo:hi]


def _within(boundaries: Boundaries) -> Intervals:
    """The steps' time as intervals."""
    return intervals.union(
        np.array([a for a, _ in boundaries], np.int64),
        np.array([b for _, b in boundaries], np.int64),
    )


def _idle(boundaries: Boundaries, busy: Intervals) -> Intervals:
    """The GPU's idle time inside the steps."""
    return intervals.subtract(_within(boundaries), busy)


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


class _LineCodes:
    """A host line's events by activity code (an index into ``kinds``, -1: none), from
    tables over the plane's event kinds: one lookup per event, no loop per name. Kinds
    are numbered densely (``index``): metadata ids are the writer's, of any size; an id
    the plane does not name is the last, nameless kind."""

    def __init__(self, plane: xspace.Plane, thread: str, kinds: tuple[str, ...]) -> None:
        self.kinds = kinds
        self.keys = np.array(sorted(plane.names), np.int64)
        self.names = [plane.names[int(k)] for k in self.keys] + [""]
        size = len(self.names)
        self.table = np.full(size, -1, np.int64)
        self.frame = np.zeros(size, bool)  # the program's own Python frame (not a library's)
        self.input_frame = np.zeros(size, bool)  # a Python frame that is input (a library's too)
        self.tracer = np.zeros(size, bool)  # any Python frame with a file
        input_code = kinds.index("input")
        for k, name in enumerate(self.names[:-1]):
            activity = host.activity(name, thread, plane.display.get(int(self.keys[k])))
            if activity is not None:
                self.table[k] = kinds.index(activity)
            self.frame[k] = host.program_frame(name) is not None
            self.tracer[k] = host.frame(name) is not None
            self.input_frame[k] = self.table[k] == input_code and self.tracer[k]
        # the kinds of a thread that waits for input or makes it (tf.data's producers)
        self.waiting = np.isin(self.table, [input_code, kinds.index(host.BACKGROUND_INPUT)])

    def index(self, ids: np.ndarray) -> np.ndarray:
        """Each event's kind, densely numbered."""
        if not len(self.keys):
            return np.zeros(len(ids), np.int64)
        found = np.minimum(np.searchsorted(self.keys, ids), len(self.keys) - 1)
        return np.where(self.keys[found] == ids, found, len(self.keys))


@dataclass
class _HostReading:
    """What the host did in the GPU's idle time: each activity's share (``shares``) and
    own intervals (``exclusive``), the Python frames over it, tf.data's busiest stages
    in the input wait."""

    shares: tuple[HostShare, ...] = ()
    frames: tuple[PythonFrame, ...] = ()
    exclusive: dict[str, Intervals] = field(default_factory=dict)
    stages: tuple[str, ...] = ()
    input_frames: tuple[PythonFrame, ...] = ()


def _host_activity(hosts: list[xspace.Plane], idle: Intervals, step_ps: int) -> _HostReading:
    """The steps' GPU idle time by what the host was doing, each moment to the most
    specific activity covering it; and the Python frames that covered it. A Python or
    dispatch event as long as half a step (``step_ps``: the median) is the step's own
    envelope (its marker, the function call, the loop's frame): it says nothing of what
    the host waited for, and is left out of those two. Lines are read ``SLICE`` events
    at a time, each activity's events merged as they come: memory follows the slice,
    not a Python tracer's millions of events."""
    idle_total = intervals.total(idle)
    if idle_total <= 0:
        return _HostReading()
    kinds = (*HOST_ACTIVITIES, host.BACKGROUND_INPUT)
    envelopes = np.array([k in ENVELOPES for k in kinds] + [False])
    merged = dict.fromkeys(range(len(kinds)), intervals.EMPTY)
    seconds: dict[tuple[int, str], float] = defaultdict(float)  # (activity, name) in idle
    frames: defaultdict[str, float] = defaultdict(float)
    frame_length: defaultdict[str, float] = defaultdict(float)
    roots: set[str] = set()  # the files of the Python threads' outermost own frames
    producers: list[tuple[xspace.Line, _LineCodes]] = []
    # the tracer's Python threads that waited for input (or made it), and the program's
    # main thread: the frames of a pool's thread meanwhile (Keras' callbacks) are not the wait's
    python_lines: list[tuple[xspace.Line, _LineCodes]] = []
    tables: dict[tuple[int, str], _LineCodes] = {}  # one per plane and kind of thread
    for plane in hosts:
        for line in plane.lines:
            if not len(line):
                continue
            key = (id(plane), host.thread_kind(line.name))
            codes = tables.get(key) or tables.setdefault(key, _LineCodes(plane, line.name, kinds))
            size = len(codes.table)
            covered_by_id = np.zeros(size)
            length_by_id = np.zeros(size)
            longest_frame: tuple[int, int] = (-1, -1)  # (duration, kind): the program's
            outermost: tuple[int, int] = (-1, -1)  # any Python frame's
            waits = False
            for lo in range(0, len(line), SLICE):
                ids = codes.index(line.ids[lo : lo + SLICE])
                starts = line.starts[lo : lo + SLICE]
                durations = line.durations[lo : lo + SLICE]
                ends = starts + durations
                code = codes.table[ids]
                code[envelopes[code] & (durations >= step_ps // 2)] = -1
                waits = waits or bool(codes.waiting[ids].any())
                covered_by_id += np.bincount(ids, _covered(idle, starts, ends), size)
                length_by_id += np.bincount(ids, durations, size)
                for k in np.unique(code[code >= 0]).tolist():
                    mask = code == k
                    merged[k] = intervals.union(
                        np.concatenate((merged[k][0], starts[mask])),
                        np.concatenate((merged[k][1], ends[mask])),
                    )
                longest_frame = _longest(codes.frame, ids, durations, longest_frame)
                outermost = _longest(codes.tracer, ids, durations, outermost)
            if longest_frame[1] >= 0:
                found = host.frame(codes.names[longest_frame[1]])
                if found is not None:
                    roots.add(found[1])
            for kind in np.flatnonzero(covered_by_id > 0).tolist():
                k = int(codes.table[kind])
                name = codes.names[kind]
                if k >= 0:
                    seconds[(k, name)] += float(covered_by_id[kind])
                if codes.frame[kind]:
                    frames[name] += float(covered_by_id[kind])
                    frame_length[name] += float(length_by_id[kind])
            if _producing(codes).any():
                producers.append((line, codes))
            if (waits or not _pooled(codes, outermost)) and codes.tracer.any():
                python_lines.append((line, codes))
    shares = []
    stage_names: list[str] = []  # tf.data's stages busiest during the input wait
    exclusive: dict[str, Intervals] = {}  # each activity's own share of the idle time
    left = idle
    for k, activity in enumerate(HOST_ACTIVITIES):
        mine = intervals.intersect(left, merged[k])
        spent = intervals.total(mine)
        if spent <= 0:
            continue
        exclusive[activity] = mine
        left = intervals.subtract(left, mine)
        named = sorted(
            ((n, t) for (a, n), t in seconds.items() if a == k), key=lambda item: -item[1]
        )
        if activity == "input" and producers:  # what the wait waited for
            named = _time_in(producers, mine, _producing) or named
            stage_names = [n for n, t in named if t > 0 and _is_stage(n)][:MAX_STAGES]
        top = tuple(n for n, t in named[:3] if t > 0)
        shares.append(HostShare(activity, spent * PS, spent / idle_total, top))
    rest = intervals.total(left)
    if rest > 0:
        shares.append(HostShare(NOT_RECORDED, rest * PS, rest / idle_total))
    shares.sort(key=lambda s: -s.seconds)
    waited = exclusive.get("input")
    input_frames: tuple[PythonFrame, ...] = ()
    if waited is not None and python_lines:  # the frames under the input wait, not the idle
        frames = defaultdict(float, _time_in(python_lines, waited, lambda c: c.frame))
        idle_total = intervals.total(waited)
        input_frames = _frames(_time_in(python_lines, waited, lambda c: c.input_frame))
    covering = [n for n, t in frames.items() if t >= FRAME_SHARE * idle_total]
    # the program's own files first (those of a Python thread's outermost frame: the
    # script), then the innermost (shortest) frames: the most specific
    covering.sort(key=lambda n: ((host.frame(n) or ("", "", 0))[1] not in roots, frame_length[n]))
    python = []
    for name in covering[:TOP_FRAMES]:
        function, file, line_number = host.frame(name) or (name, None, None)
        python.append(PythonFrame(function, file, line_number, frames[name] * PS))
    return _HostReading(tuple(shares), tuple(python), exclusive, tuple(stage_names), input_frames)


def _frames(spent: list[tuple[str, float]]) -> tuple[PythonFrame, ...]:
    """The first TOP_FRAMES tracer frames of ``spent`` ((name, ps), most first)."""
    found = ((host.frame(name), ps) for name, ps in spent)
    return tuple(
        PythonFrame(f[0], f[1], f[2], ps * PS) for f, ps in found if f is not None and ps > 0
    )[:TOP_FRAMES]


def _longest(
    kinds: np.ndarray, ids: np.ndarray, durations: np.ndarray, best: tuple[int, int]
) -> tuple[int, int]:
    """(duration, kind) of the longest event of ``ids`` whose kind ``kinds`` marks, or
    ``best`` where it is longer."""
    marked = np.flatnonzero(kinds[ids])
    if not len(marked):
        return best
    longest = marked[int(np.argmax(durations[marked]))]
    return max(best, (int(durations[longest]), int(ids[longest])))


def _pooled(codes: _LineCodes, outermost: tuple[int, int]) -> bool:
    """Whether a Python thread is one a pool started (its outermost frame Python's
    thread bootstrap: Keras' callbacks, an executor's workers), not the program's main
    thread, whose outermost frame is the program's or a library's it called."""
    found = host.frame(codes.names[outermost[1]]) if outermost[1] >= 0 else None
    return found is not None and found[1] in host.RUNTIME_FILES


def _time_in(
    lines: list[tuple[xspace.Line, _LineCodes]],
    during: Intervals,
    counted: Callable[[_LineCodes], np.ndarray],
) -> list[tuple[str, float]]:
    """The event kinds ``counted(codes)`` marks (a table over kinds), by their time
    inside ``during``, most first."""
    spent: defaultdict[str, float] = defaultdict(float)
    for line, codes in lines:
        table = counted(codes)
        for lo in range(0, len(line), SLICE):
            ids = codes.index(line.ids[lo : lo + SLICE])
            starts = line.starts[lo : lo + SLICE]
            covered = _covered(during, starts, starts + line.durations[lo : lo + SLICE])
            covered[~table[ids]] = 0
            by_id = np.bincount(ids, covered, len(codes.table))
            for kind in np.flatnonzero(by_id > 0).tolist():
                spent[codes.names[kind]] += float(by_id[kind])
    return sorted(spent.items(), key=lambda item: -item[1])


def _producing(codes: _LineCodes) -> np.ndarray:
    """The event kinds of tf.data's producer threads."""
    return codes.table == codes.kinds.index(host.BACKGROUND_INPUT)


def _is_stage(name: str) -> bool:
    """A tf.data stage's event (``Iterator::Root::Prefetch::FlatMap[0]::Generator``) or
    the Python a stage runs (``PyFunc``, ``EagerPyFunc``)."""
    return name.startswith("Iterator::") or "PyFunc" in name


def _with_host(
    step: CaptureStep, start: int, end: int, idle: Intervals, exclusive: dict[str, Intervals]
) -> CaptureStep:
    """The step with its GPU idle time and what the host did in most of it."""
    idle_ps = intervals.total(intervals.clip(idle, start, end))
    if idle_ps <= 0:
        return replace(step, idle_s=0.0)
    spent = {a: intervals.total(intervals.clip(v, start, end)) for a, v in exclusive.items()}
    spent[NOT_RECORDED] = idle_ps - sum(spent.values())
    return replace(step, idle_s=idle_ps * PS, host=max(spent, key=spent.__getitem__))


def _host_ops(
    hosts: list[xspace.Plane], devices: list[_Device], boundaries: Boundaries
) -> tuple[tuple[HostOp, ...], bool, int]:
    """TensorFlow op kernels that ran on host threads inside the steps (all of the
    capture without steps), tf.data's producer threads left out; whether each ran on
    the CPU, where GPU kernels name their ops: an op that launches GPU kernels runs its
    host side on a host thread too, and is on the GPU where a kernel carries its node
    name or where a CUDA launch or copy starts inside it on its thread (the join that
    does not depend on which kernels' stats were read)."""
    gpu_nodes = {
        op.rsplit(":", 1)[0]
        for d in devices
        for stats in d.all_stats()
        if (op := _op_of(stats)) and ":" in op
    }
    known = bool(devices) and bool(gpu_nodes)
    steps = _within(boundaries)
    time: Counter[tuple[str, str]] = Counter()
    count: Counter[tuple[str, str]] = Counter()
    spans: dict[str, list[tuple[int, int]]] = defaultdict(list)  # by node, no launch in it
    launchers: set[str] = set()  # nodes seen launching GPU work from the host
    for plane in hosts:
        kernels_by_id = {
            i: k for i, n in plane.names.items() if (k := host.op_kernel(n, plane.display.get(i)))
        }
        if not kernels_by_id:
            continue
        launch_ids = [i for i, n in plane.names.items() if host.is_launch(n)]
        for line in plane.lines:
            if host.is_producer(line.name):  # tf.data's own threads: on the CPU by design
                continue
            launches = np.sort(line.starts[np.isin(line.ids, launch_ids)])
            mask = np.isin(line.ids, list(kernels_by_id))
            if boundaries:
                inside = np.searchsorted(steps[1], line.starts, side="right")
                mask &= inside < len(steps[0])
                mask &= line.starts >= steps[0][np.minimum(inside, len(steps[0]) - 1)]
            chosen = np.flatnonzero(mask)
            # an op that launched a CUDA kernel or copy from inside its own interval, on
            # its own thread, ran on the GPU, whatever the kernels' sampled stats say
            first = np.searchsorted(launches, line.starts[chosen], side="left")
            last = np.searchsorted(
                launches, line.starts[chosen] + line.durations[chosen], side="left"
            )
            launched = (last > first).tolist()
            for index, did_launch in zip(chosen.tolist(), launched):
                key = kernels_by_id[int(line.ids[index])]
                time[key] += int(line.durations[index])
                count[key] += 1
                if did_launch:
                    launchers.add(key[0])
                elif known and key[0] not in gpu_nodes:
                    start = int(line.starts[index])
                    spans[key[0]].append((start, start + int(line.durations[index])))
    ops = tuple(
        HostOp(
            name=node,
            type=kind,
            count=count[(node, kind)],
            time_s=t * PS,
            on_cpu=(node not in gpu_nodes and node not in launchers) if known else None,
        )
        for (node, kind), t in time.most_common(TOP_HOST_OPS)
    )
    # the nodes that never launched GPU work; ops on several threads at once count once
    on_cpu = [
        span for node, node_spans in spans.items() if node not in launchers for span in node_spans
    ]
    cpu = intervals.union(
        np.array([a for a, _ in on_cpu], np.int64), np.array([b for _, b in on_cpu], np.int64)
    )
    return ops, known, intervals.total(cpu)


def _producer(metadata: dict[str, str], hosts: list[xspace.Plane]) -> str:
    """Who wrote the capture: JAX by its metadata plane's versions, or, where it wrote
    none (``ProfileOptions.enable_hlo_proto=False`` drops the plane), by its jitted
    calls (its CPU threads are named ``tf_XLA…`` as TensorFlow's are); else TensorFlow
    by its threads and eager calls."""
    if any(k.startswith("jax") for k in metadata):
        return "jax"
    if any(_JIT_CALL.match(n) for plane in hosts for n in plane.names.values()):
        return "jax"
    for plane in hosts:
        if any(line.name.startswith("tf_") for line in plane.lines) or any(
            n.startswith(("EagerLocalExecute", "EagerExecute")) for n in plane.names.values()
        ):
            return "tensorflow"
    return "unknown"
