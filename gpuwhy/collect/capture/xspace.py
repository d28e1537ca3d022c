"""The one reader of XProf's capture format (XSpace, ``*.xplane.pb``): planes, their lines
and their events as columns, in memory bounded by a chunk, not by the file.

A capture is ``XSpace{planes: [XPlane{name, lines: [XLine{name, timestamp_ns,
events: [XEvent{metadata_id, offset_ps, duration_ps, stats}]}], event_metadata,
stat_metadata, stats}]}`` (tsl/profiler/protobuf/xplane.proto; TensorFlow's profiler and
JAX's write it). Parsing a 100 MB file whole holds it twice or more; instead the file is
mapped and walked at the wire level: each plane's lines are parsed a chunk of events at a
time (``CHUNK_BYTES``), their columns kept as numpy arrays (start and duration in ps on
the capture's clock, the event's name by metadata id), and the stats read only for the
events the caller names (``wants(plane, event_name)``: the copies' sizes, a kernel's op),
since reading every event's stats costs more than the rest of the read together.

The message types come from the descriptor TensorFlow's wheel compiles
(xplane_descriptor.py, generated), in a pool of their own: no TensorFlow import.
"""

from __future__ import annotations

import mmap
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from itertools import chain
from operator import attrgetter
from pathlib import Path
from typing import Any

import numpy as np
from google.protobuf.message import DecodeError

from gpuwhy.collect.capture.errors import FormatError
from gpuwhy.collect.capture.xplane_descriptor import SERIALIZED

CHUNK_BYTES = 4 << 20  # events parsed at a time in a line longer than
WHOLE_LINE_BYTES = 16 << 20  # (shorter lines are parsed whole: the walk costs more)
# wire-format field numbers (xplane.proto)
SPACE_PLANES, SPACE_ERRORS, SPACE_WARNINGS, SPACE_HOSTNAMES = 1, 2, 3, 4
PLANE_LINES = 3
LINE_EVENTS = 4
EVENT_TAG = LINE_EVENTS << 3 | 2  # an event's tag byte: field 4, length-delimited
HEADER_BYTES = 11  # a tag byte and a length varint
SAMPLE_EVENTS = 64  # events of one kind on a line whose alike stats settle theirs
LENGTH_DELIMITED, VARINT, FIXED64, FIXED32 = 2, 0, 1, 5

_COLUMNS = attrgetter("offset_ps", "duration_ps", "metadata_id")
Stats = dict[str, Any]
Wants = Callable[[str, str], bool]


@dataclass
class Line:
    """One line of a plane: a CUDA stream on a device, a thread on the host. ``starts`` and
    ``durations`` in ps (the capture's clock), ``ids`` the events' metadata ids (their
    name: the plane's ``names``). The stats the reader was asked for: ``constant`` by
    metadata id, for the events whose first ``SAMPLE_EVENTS`` on the line carried the
    same (a kernel XLA compiled for one instruction: every launch says the same, and
    the rest are taken to say it too); ``stats`` by event index for the others (a
    copy's size, a step's number), read one by one. ``stats_of`` gives either."""

    id: int
    name: str
    starts: np.ndarray
    durations: np.ndarray
    ids: np.ndarray
    stats: dict[int, Stats] = field(default_factory=dict)
    constant: dict[int, Stats] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.starts)

    def stats_of(self, index: int) -> Stats:
        found = self.stats.get(index)
        return found if found is not None else self.constant.get(int(self.ids[index]), {})


@dataclass
class Plane:
    """One plane: ``/device:GPU:0``, ``/host:CPU``, ``Task Environment``... ``names`` and
    ``metadata_stats`` by metadata id (a TF op kernel's metadata carries its type as the
    display name, in ``display``); ``stats`` the plane's own (the GPU's model, cores)."""

    name: str
    lines: list[Line]
    names: dict[int, str]
    display: dict[int, str]
    metadata_stats: dict[int, Stats]
    stats: Stats


@dataclass
class Space:
    """A capture: its planes, hostnames and the profiler's own errors and warnings."""

    planes: list[Plane]
    hostnames: list[str]
    errors: list[str]
    warnings: list[str]

    def plane(self, name: str) -> Plane | None:
        return next((p for p in self.planes if p.name == name), None)


def _message_classes() -> tuple[Any, Any, Any]:
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

    pool = descriptor_pool.DescriptorPool()
    pool.Add(descriptor_pb2.FileDescriptorProto.FromString(SERIALIZED))
    classes = [
        message_factory.GetMessageClass(pool.FindMessageTypeByName(f"tensorflow.profiler.{n}"))
        for n in ("XPlane", "XLine", "XSpace")
    ]
    return classes[0], classes[1], classes[2]


_CLASSES: tuple[Any, Any, Any] | None = None


def classes() -> tuple[Any, Any, Any]:
    """(XPlane, XLine, XSpace) message classes, made once."""
    global _CLASSES
    if _CLASSES is None:
        _CLASSES = _message_classes()
    return _CLASSES


def read(path: str | Path, wants: Wants | None = None, keep: frozenset[str] | None = None) -> Space:
    """The capture at ``path``; stats read for the events ``wants(plane, name)`` accepts,
    only those named in ``keep`` (None: all): an event carries a dozen stats, and
    turning each into Python costs more than the rest of the read."""
    with open(path, "rb") as handle:
        size = handle.seek(0, 2)
        if size == 0:
            raise FormatError(f"{path} is empty")
        with mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as mapped:
            view = memoryview(mapped)
            try:
                return _space(view, wants or (lambda plane, name: False), keep, _releaser(mapped))
            finally:
                view.release()


def _releaser(mapped: mmap.mmap) -> Callable[[int, int], None]:
    """Gives the pages of ``[start, end)`` back once read (they are the file's: reading
    them again maps them again), so a read holds a line's pages, not the file's."""

    def release(start: int, end: int) -> None:
        first = start - start % mmap.PAGESIZE
        if hasattr(mmap, "MADV_DONTNEED") and end > first:
            mapped.madvise(mmap.MADV_DONTNEED, first, end - first)

    return release


def _space(
    buf: memoryview,
    wants: Wants,
    keep: frozenset[str] | None,
    release: Callable[[int, int], None],
) -> Space:
    planes: list[Plane] = []
    origin = _Origin()
    texts: dict[int, list[str]] = {SPACE_ERRORS: [], SPACE_WARNINGS: [], SPACE_HOSTNAMES: []}
    try:
        for number, start, end, _ in _raw_fields(buf, 0, len(buf)):
            if number == SPACE_PLANES:
                planes.append(_plane(buf, start, end, wants, keep, release, origin))
            elif number in texts:
                texts[number].append(bytes(buf[start:end]).decode("utf-8", "replace"))
    # a torn varint, a length past the end; bytes protobuf reads as no XPlane
    except (IndexError, ValueError, DecodeError) as error:
        raise FormatError(f"not an XSpace capture or cut short ({error})") from None
    return Space(planes, texts[SPACE_HOSTNAMES], texts[SPACE_ERRORS], texts[SPACE_WARNINGS])


def _plane(
    buf: memoryview,
    start: int,
    end: int,
    wants: Wants,
    keep: frozenset[str] | None,
    release: Callable[[int, int], None],
    origin: _Origin,
) -> Plane:
    xplane, xline, _ = classes()
    shell = bytearray()
    line_spans: list[tuple[int, int]] = []
    for number, field_start, field_end, raw_start in _raw_fields(buf, start, end):
        if number == PLANE_LINES:
            line_spans.append((field_start, field_end))
        else:
            shell += buf[raw_start:field_end]
    plane = xplane.FromString(bytes(shell))
    stat_names = {k: m.name for k, m in plane.stat_metadata.items()}
    names = {k: m.name for k, m in plane.event_metadata.items()}
    display = {k: m.display_name for k, m in plane.event_metadata.items() if m.display_name}
    metadata_stats = {
        k: _stats(m.stats, stat_names) for k, m in plane.event_metadata.items() if m.stats
    }
    wanted_ids = {k for k, name in names.items() if wants(plane.name, name)}
    kept = stat_names if keep is None else {k: n for k, n in stat_names.items() if n in keep}
    lines = [
        _line(buf, s, e, xline, (stat_names, kept), wanted_ids, release, origin)
        for s, e in line_spans
    ]
    return Plane(
        name=plane.name,
        lines=lines,
        names=names,
        display=display,
        metadata_stats=metadata_stats,
        stats=_stats(plane.stats, stat_names),
    )


def _line(
    buf: memoryview,
    start: int,
    end: int,
    xline: Any,
    stat_names: tuple[dict[int, str], dict[int, str]],
    wanted_ids: set[int],
    release: Callable[[int, int], None],
    origin: _Origin,
) -> Line:
    names, kept = stat_names  # all the plane's, and those to read
    if end - start <= WHOLE_LINE_BYTES:  # no walk: parsed at once, its head with its events
        head = xline.FromString(buf[start:end])
        total = len(head.events)
        parts: Iterator[Any] = iter([head])
    else:
        shell, chunks, total = _event_chunks(buf, start, end)
        head = xline.FromString(shell)
        parts = (_parsed(buf, xline, s, e, release) for s, e in chunks)
    starts = np.empty(total, np.int64)
    durations = np.empty(total, np.int64)
    ids = np.empty(total, np.int64)
    sampling = _Sampling()
    wanted = list(wanted_ids)
    seen = 0
    for part in parts:
        events = part.events
        count = len(events)
        columns = np.fromiter(chain.from_iterable(map(_COLUMNS, events)), np.int64, 3 * count)
        columns = columns.reshape(count, 3)
        starts[seen : seen + count] = columns[:, 0]
        durations[seen : seen + count] = columns[:, 1]
        ids[seen : seen + count] = columns[:, 2]
        if wanted_ids and kept:
            for index in np.flatnonzero(np.isin(columns[:, 2], wanted)).tolist():
                metadata = int(columns[index, 2])
                if not sampling.skip(metadata):
                    found = _stats(events[index].stats, names, kept)
                    sampling.add(metadata, seen + index, found)
        seen += count
        del events, columns, part
    np.maximum(durations, 0, out=durations)  # a negative length is no length
    starts += _line_base_ps(head.timestamp_ns, origin)
    release(start, end)
    return Line(
        id=head.id,
        name=head.display_name or head.name or f"line {head.id}",
        starts=starts,
        durations=durations,
        ids=ids,
        stats=sampling.varying,
        constant=sampling.constant(),
    )


class _Sampling:
    """The stats of one line's events, read until each kind of event shows whether its
    stats vary: ``SAMPLE_EVENTS`` alike settle it (``settled``; after that, every
    ``SAMPLE_EVENTS``-th is read again); one different reads all of its later events one
    by one (``varying``, by event index, an empty dict where an event carries none).
    The events of a kind that was settled and then differed, skipped before, are taken
    to carry what it settled on (``constant``)."""

    def __init__(self) -> None:
        self.first: dict[int, Stats] = {}
        self.pending: dict[int, list[int]] = {}  # metadata id -> event indices read, alike
        self.settled: set[int] = set()
        self.since: dict[int, int] = {}  # events of a settled kind since it settled
        self.different: set[int] = set()  # differed before settling: all read
        self.drifted: set[int] = set()  # differed after settling
        self.varying: dict[int, Stats] = {}

    def skip(self, metadata: int) -> bool:
        """Whether this event of its kind goes unread (settled, not a spot check)."""
        if metadata not in self.settled:
            return False
        self.since[metadata] = seen = self.since.get(metadata, 0) + 1
        return seen % SAMPLE_EVENTS != 0

    def add(self, metadata: int, index: int, found: Stats) -> None:
        if metadata in self.different or metadata in self.drifted:
            self.varying[index] = found
            return
        first = self.first.setdefault(metadata, found)
        if found == first:
            if metadata not in self.settled:
                alike = self.pending.setdefault(metadata, [])
                alike.append(index)
                if len(alike) >= SAMPLE_EVENTS:
                    self.settled.add(metadata)
                    del self.pending[metadata]
            return
        if metadata in self.settled:  # a spot check differs: read every later one
            self.settled.discard(metadata)
            self.drifted.add(metadata)
        else:  # the alike ones read so far are kept one by one
            self.different.add(metadata)
            for earlier in self.pending.pop(metadata, []):
                self.varying[earlier] = first
        self.varying[index] = found

    def constant(self) -> dict[int, Stats]:
        return {m: s for m, s in self.first.items() if m not in self.different and s}


@dataclass
class _Origin:
    """Where a capture's absolute clock starts: TF and JAX write each line's
    ``timestamp_ns`` from the profiler's start, but the format allows ns since the
    epoch, which in ps overflows 64 bits: such lines are read from the first one's."""

    ns: int | None = None


ABSOLUTE_NS = 1 << 52  # a line timestamp past this (52 days) is from the epoch


def _line_base_ps(timestamp_ns: int, origin: _Origin) -> int:
    if timestamp_ns < ABSOLUTE_NS:
        return timestamp_ns * 1000
    if origin.ns is None:
        origin.ns = timestamp_ns
    return (timestamp_ns - origin.ns) * 1000


def _parsed(
    buf: memoryview, xline: Any, start: int, end: int, release: Callable[[int, int], None]
) -> Any:
    part = xline.FromString(buf[start:end])
    release(start, end)
    return part


def _event_chunks(
    buf: memoryview, start: int, end: int
) -> tuple[bytes, list[tuple[int, int]], int]:
    """A line's fields other than its events (to parse as its head), the spans of its
    events cut every ``CHUNK_BYTES``, and how many events it has."""
    shell = bytearray()
    chunks: list[tuple[int, int]] = []
    chunk_start = -1
    events = 0
    position = start
    while position < end:
        raw_start = position
        if buf[position] == EVENT_TAG:  # a run of events: the fast walk, to the chunk's end
            if chunk_start < 0:
                chunk_start = position
            stop = min(end, chunk_start + CHUNK_BYTES)
            count, position = _walk_events(buf, position, stop, end)
            events += count
            if position > end:
                raise ValueError(f"an event runs past its line at byte {raw_start}")
            if position >= stop:
                chunks.append((chunk_start, position))
                chunk_start = -1
            continue
        _, _, position = _field(buf, position, end)
        if chunk_start >= 0:  # a head field among the events closes the chunk
            chunks.append((chunk_start, raw_start))
            chunk_start = -1
        shell += buf[raw_start:position]
    if chunk_start >= 0:
        chunks.append((chunk_start, end))
    return bytes(shell), chunks, events


def _walk_events(buf: memoryview, position: int, stop: int, end: int) -> tuple[int, int]:
    """(events, where the walk ended) over consecutive events from ``position`` until
    one would start at or past ``stop``, or a field that is no event. The reader's inner
    loop, one step per event: it reads the events' headers (their starts are before
    ``stop``, their headers within ``HEADER_BYTES`` of it) from a copy of that window,
    as bytes index faster than a memoryview."""
    window = bytes(buf[position : min(end, stop + HEADER_BYTES)])
    limit = stop - position
    offset = count = 0
    while offset < limit and window[offset] == EVENT_TAG:
        length = window[offset + 1]
        if length < 0x80:
            offset += 2 + length
        else:
            length, after = _varint(memoryview(window), offset + 1)
            offset = after + length
        count += 1
    return count, position + offset


def _stats(stats: Any, stat_names: dict[int, str], kept: dict[int, str] | None = None) -> Stats:
    """An event's (or a plane's) stats by name, those in ``kept`` (all: None); a
    reference reads as the name it refers to."""
    out: Stats = {}
    for stat in stats:
        if kept is not None and stat.metadata_id not in kept:
            continue
        kind = stat.WhichOneof("value")
        if kind is None:
            continue
        value = getattr(stat, kind)
        if kind == "ref_value":
            value = stat_names.get(value, "")
        elif kind == "bytes_value":
            value = bytes(value)
        out[stat_names.get(stat.metadata_id, str(stat.metadata_id))] = value
    return out


def _raw_fields(buf: memoryview, start: int, end: int) -> Iterator[tuple[int, int, int, int]]:
    """Every field of the message in ``buf[start:end]``: (number, value start, value end,
    the field's start with its tag). Scalars' values are their encoded bytes."""
    position = start
    while position < end:
        raw_start = position
        number, value_start, position = _field(buf, position, end)
        yield number, value_start, position, raw_start


def _field(buf: memoryview, position: int, end: int) -> tuple[int, int, int]:
    """The field at ``position`` of a message ending at ``end``: (its number, where its
    value starts, where the field ends)."""
    raw_start = position
    tag, position = _varint(buf, position)
    number, wire = tag >> 3, tag & 7
    if wire == LENGTH_DELIMITED:
        length, position = _varint(buf, position)
        value_start, position = position, position + length
    elif wire == VARINT:
        value_start = position
        _, position = _varint(buf, position)
    elif wire == FIXED64:
        value_start, position = position, position + 8
    elif wire == FIXED32:
        value_start, position = position, position + 4
    else:
        raise ValueError(f"wire type {wire} at byte {raw_start}")
    if position > end or number == 0:
        raise ValueError(f"field {number} runs past its message at byte {raw_start}")
    return number, value_start, position


def _varint(buf: memoryview, position: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        byte = buf[position]
        position += 1
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return result, position
        shift += 7
        if shift > 63:
            raise ValueError(f"a varint longer than 10 bytes at byte {position}")
