"""What grows in the program's Python heap, by the name the program gives it.

The timeline reads the program's resident memory once a second; when it rises along a
line while the program trains (``host.memory-growth``), the question is *what* grows.
A census counts the objects the garbage collector tracks by type and records the length
of every list, dict, set and deque; between two censuses, the containers that gained
the most elements are the candidates, and each is named as the program names it: a
global of its module, a local of a running function, or an attribute of an object
(the referrers of the container and the threads' frames), with the type of its last
elements and the line of the program that adds to it (its source read back). A dict
holding only numbers, strings or arrays (``losses[step] = float(loss)``) is not tracked
by the collector: those among the other threads' locals, their modules' globals and
their ``self``'s attributes are counted too. Containers of gpuwhy's own (its collectors'
sketches, its live metrics) are never named, nor those of the libraries (TensorFlow,
Keras, NumPy, the standard library, anything installed in site-packages): a local of
TF's ``quick_execute`` or the captures list a ``tf.function`` rebuilds as it traces is
TF's bookkeeping, which the program cannot change where the finding would point; a
container the program passes into a library is named by the program's own frame.

A census holds the GIL while it walks the heap: on this project's 2-core machine (shared,
load 3-5), a Keras program's heap after ``fit`` (288,000 objects the collector tracks,
39,000 non-empty containers) took 0.13-0.22 s a census, naming what grew included
(medians of 7 over three runs of ``benchmarks/bench_heap_census.py``); naming alone is
one pass over the dicts and the objects with attributes (0.09 s profiled, without
``gc.get_referrers``: see :func:`_in_referrers`); a heap of 600k objects (a list of 300k
dicts) took 0.65 s, and the program's steps slowed while it ran: each census is recorded
as gpuwhy's own pause (the activity collector), so the stalls it makes are never
reported as the program's. Listing the heap without the tuples other threads may still
be filling (:func:`heap`) adds two passes at C speed, the program held meanwhile (0.07 s
each over 480,000 objects, load 4-5); what the census freed is given back to the OS
after it (:func:`release_freed`). It is kept rare. Once the
program has made its first steps (3 calls of its tf.functions) and 8 s have passed (16 s
for a program without tf.functions), and 2 s since those steps (a program that loads its
data first: its loop's own start is no growth), the resident memory read a poll (a
second) earlier is the *mark*; the baseline census comes once the memory has grown ``BASELINE_GROWTH`` past the
mark (a program whose memory stays flat pays for no census at all: on a 20 s loop of
0.5 ms steps a baseline held the program 1-3 % of its run; one whose memory grows that
fast at 8 s has its baseline then, as when every program had one). Then a census comes only when the
memory has grown past the mark by what ``host.memory-growth`` could report
(``REPORTABLE_GROWTH``, ``REPORTABLE_SHARE``) and the
resident memory has grown past the last census's by a threshold that doubles each time
(12 MiB, 24 MiB, 48 MiB ...), or by 4 MiB after an
interval that doubles each time (10 s, 20 s, 40 s ...: a slow leak after start-up's
creep spent the first thresholds), at most ``MAX_CENSUSES`` a run: one that grows
without end pays for 10 censuses, whatever the run's length; and past the first three,
only while all of them hold the program at most ``COST_SHARE`` of the run so far.

Between censuses only the last one's lengths are kept (an id and a length per
container, at most ``MAX_RECORDED`` of the longest), never a reference: the census keeps
nothing alive. A container the last census did not record (new, empty, or shorter than
the ones kept) counts from 0.
"""

from __future__ import annotations

import collections
import ctypes
import functools
import gc
import heapq
import inspect
import itertools
import operator
import os
import sys
import threading
import time
import types
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from gpuwhy.facts import GrowingObject
from gpuwhy.source_calls import growth_sites
from gpuwhy.tfapi.frames import current_frames
from gpuwhy.tfapi.graph_ops import is_library_file, relative

MiB = 2**20
FIRST_THRESHOLD = 12 * MiB  # growth past the baseline that takes the second census (the
# memory rule speaks from 16 MiB: a leak it reports has been looked at)
MAX_CENSUSES = 10
# Past the first three (the baseline, the one that names what grew since, one that sees
# it grow on), a census comes only while the censuses, the next one counted at the last
# one's length, hold the program at most this share of the run so far: a Keras fit over
# images (a heap of a million objects, 0.7-1.3 s a census) paid 3.6-4.0 s in 5 censuses
# of a 60-70 s run (6 %), and found nothing
COST_SHARE = 0.02
FREE_CENSUSES = 3
# Past the baseline, no census before the memory has grown past the mark by what
# host.memory-growth could report (its min_growth_mib and min_growth_share, of the memory
# as training began): a census at less names a container no finding will. Reviewed
# public Keras programs (a DCGAN, a TFRecord classifier, an attention NMT: 1.2-1.4 GiB
# resident) crept 16 MiB past their marks and stopped, and paid a second census of
# 0.3-0.7 s for nothing (2 % of the wall and what item 5 of #50 asks of all of it)
REPORTABLE_GROWTH = 16 * MiB
REPORTABLE_SHARE = 0.02
# A slow leak grows less than the threshold while start-up's creep spent the first
# censuses: a census is also due when the memory grew at all since the last one, after
# an interval that doubles each time (10 s, 20 s, 40 s ...).
FIRST_INTERVAL_S = 10.0
QUIET_GROWTH = 4 * MiB
BASELINE_CALLS = 3  # tf.function calls before the baseline: the first steps have run
# and never before this long after the start: a census of a large heap holds the GIL for
# up to a second, and most of a TF program's start-up creep (allocator arenas, tf.data
# buffers) is over by then; a run shorter than this pays for none
BASELINE_AFTER_S = 8.0
# ... nor before this long after the first steps: a program that loads its data first
# begins its loop later than that, and the loop's own start (tf.data's buffers, the
# allocator's arenas for its tensors: 12 MiB on a loop of 0.34 ms steps begun 13 s in)
# read as growth past a mark taken before it: two censuses held that loop 0.5 s in its
# first two seconds (a plain run's memory flat after its first 0.1 s)
MARK_AFTER_STEPS_S = 2.0
# growth past the mark (the memory as start-up ended) that takes the baseline: a
# flat program never pays for a census; the next census comes FIRST_THRESHOLD past the
# baseline's memory, or past the mark's and this where the memory outran the polls
BASELINE_GROWTH = 4 * MiB
MARK_LOOKBACK_S = 1.5  # the reading the mark is taken from: a poll (a second) before
MAX_RECORDED = 100_000  # containers whose length is kept between censuses
MIN_GROWTH = 8  # elements gained below which a container is not named
CANDIDATES = 16  # the most grown in elements, sized by their last element
NAMED_PER_CENSUS = 3  # of those, the most grown in bytes
MAX_TRACKED = 8
TOP_TYPES = 64  # types whose counts a census keeps
DEEP_SIZE_OBJECTS = 2_000  # objects walked to size one element
# What an EagerTensor holds beyond its Python object and its buffer (TF's tensor handle,
# buffer and allocation): a scalar one kept costs ~944 bytes of resident memory, its
# Python object 184 (TF 2.21, 100,000 kept; [64] float32: ~1,220)
TENSOR_OVERHEAD = 760

KINDS: dict[type, tuple[int, str]] = {
    list: (1, "list"),
    dict: (2, "dict"),
    set: (3, "set"),
    collections.deque: (4, "deque"),
    collections.OrderedDict: (5, "dict"),
    collections.defaultdict: (6, "dict"),
}
_GPUWHY_DIR = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
_SHARED = (type, types.ModuleType, types.FunctionType, types.BuiltinFunctionType, types.CodeType)
_ARRAYS = ("tensorflow", "numpy", "keras", "jax", "torch")
# gpuwhy's and the packages only gpuwhy uses in the program: their containers are its own
# (the step-time sketches' bins, the live metrics' registry)
OWN_PACKAGES = frozenset({"gpuwhy", "ddsketch", "prometheus_client", "pynvml"})


@dataclass
class _Holder:
    """How the program names a container, and where to look for what adds to it."""

    name: str
    holder: str
    attribute: bool
    filename: str | None
    lines: tuple[int, int] | None = None
    module: str | None = None  # of the global, or of the attribute owner's class


@dataclass
class _Tracked:
    """A container seen growing, followed from census to census by its id."""

    kind_index: int
    kind: str
    holder: _Holder
    first_length: int
    first_at_s: float
    last_length: int
    last_at_s: float
    element_type: str | None
    element_detail: str | None
    element_bytes: int | None
    key_type: str | None

    def fact(self) -> GrowingObject:
        sites = (
            growth_sites(
                self.holder.filename, self.holder.name, self.holder.attribute, self.holder.lines
            )
            if self.holder.filename
            else []
        )
        line, written = sites[0] if sites else (None, None)
        return GrowingObject(
            what=self.kind,
            name=self.holder.name,
            holder=self.holder.holder,
            where=relative(self.holder.filename, line) if self.holder.filename and line else None,
            written=written,
            length_first=self.first_length,
            length_last=self.last_length,
            first_at_s=round(self.first_at_s, 3),
            last_at_s=round(self.last_at_s, 3),
            element_type=self.element_type,
            element_detail=self.element_detail,
            element_bytes=self.element_bytes,
            key_type=self.key_type,
        )


class HeapCensus:
    """Censuses of the heap taken as the program's memory grows; fed by the timeline's
    poll thread (:meth:`observe`, once a second) with the resident memory it read."""

    def __init__(self, t0: float, calls: Callable[[], int] | None = None) -> None:
        self.t0 = t0
        self.calls = calls  # tf.function calls so far: the first steps' clock
        self.censuses = 0
        self.seconds = 0.0  # CPU seconds of the censuses' thread in them (and naming)
        self.wall_s = 0.0  # their wall time: what they held the program for
        self.last_wall_s = 0.0  # the last one's: what the next is expected to take
        self._rss = 0
        self._mark: int | None = None  # resident bytes as start-up ended (see observe)
        self._previous: tuple[float, int] | None = None  # the last reading before the mark
        self._began_at: float | None = None  # the first reading that saw the steps begun
        self._threshold = FIRST_THRESHOLD
        self._interval = FIRST_INTERVAL_S
        self._at_s = 0.0
        self._lengths: dict[int, int] = {}  # id -> length << 3 | kind, last census
        self._types_first: dict[str, int] = {}
        self._types_last: dict[str, int] = {}
        self._types_before: dict[str, int] = {}  # at the census before the last
        self._tracked: dict[int, _Tracked] = {}
        self._lock = threading.Lock()

    def due(self, t: float, rss: int) -> bool:
        """Whether a census is due at ``t`` (perf_counter) with ``rss`` bytes resident."""
        if self.censuses >= MAX_CENSUSES:
            return False
        since = t - self.t0
        if self._mark is None:
            return False
        if self.censuses == 0:
            return rss >= self._mark + BASELINE_GROWTH
        if rss < self._mark + max(REPORTABLE_GROWTH, REPORTABLE_SHARE * self._mark):
            return False  # nothing the memory rule could say yet
        if self.censuses >= FREE_CENSUSES and self.wall_s + self.last_wall_s > COST_SHARE * since:
            return False  # over the cost budget: later, or never in a short run
        if rss >= self._rss + self._threshold:
            return True
        return rss >= self._rss + QUIET_GROWTH and since - self._at_s >= self._interval

    def observe(self, t: float, rss: int) -> bool:
        """Takes a census when one is due at ``t`` (perf_counter) with ``rss`` bytes
        resident; whether it took one. The first reading once the steps have begun sets
        the mark."""
        if self._mark is None:
            previous, self._previous = self._previous, (t, rss)
            if self._began_at is None:
                # begun by the first reading: at some time before it, long enough ago
                self._began_at = self._steps_began(t if previous is not None else self.t0)
            began = self._began_at
            if t - self.t0 < BASELINE_AFTER_S or began is None or t - began < MARK_AFTER_STEPS_S:
                return False  # start-up, the loop's own start: their creep is no growth
            # the reading a poll before this one: a memory growing fast now has its
            # baseline now (one read longer ago saw start-up's creep), where the steps
            # had begun by then
            recent = (
                previous is not None and t - previous[0] <= MARK_LOOKBACK_S and previous[0] > began
            )
            self._mark = min(previous[1], rss) if recent and previous else rss
        if not self.due(t, rss):
            return False
        if self.censuses:
            if rss >= self._rss + self._threshold:
                self._threshold *= 2
            else:
                self._interval *= 2
        baseline = self.censuses == 0
        self.take(t, rss)
        if baseline:
            # the next census's threshold counts from where the baseline became due: a
            # memory that grew fast since gets its next census as soon as before
            self._rss = min(rss, self._mark + BASELINE_GROWTH)
        return True

    def _steps_began(self, t: float) -> float | None:
        """When the program made its first steps (``BASELINE_CALLS`` tf.function calls),
        as a reading at ``t`` sees it; an eager program (no tf.function calls) is taken
        to have begun them at the start, once twice ``BASELINE_AFTER_S`` passed. None:
        not yet."""
        calls = self.calls() if self.calls is not None else 0
        if calls >= BASELINE_CALLS:
            return t
        return self.t0 if t - self.t0 >= 2 * BASELINE_AFTER_S else None

    def take(self, t: float, rss: int) -> None:
        """One census now: types counted, containers' lengths, the most grown named."""
        started, began = time.thread_time(), time.perf_counter()
        at_s = t - self.t0
        with self._lock:
            grown, objects = self._count(at_s)
            self._name(grown, at_s, objects)
            objects.clear()  # it holds itself (see heap()): no cycle left to collect
            del objects
            release_freed()
            self._rss = rss
            self._at_s = at_s
            self.censuses += 1
            self.seconds += time.thread_time() - started
            self.last_wall_s = time.perf_counter() - began
            self.wall_s += self.last_wall_s

    def _count(self, at_s: float) -> tuple[list[tuple[int, int, Any]], list[Any]]:
        """Counts the heap; the containers that gained most since the last census
        (elements gained, id, the container), most first, and the objects counted."""
        objects, tuples = heap()
        objects.extend(untracked_dicts())
        counts: dict[type, int] = {tuple: tuples} if tuples else {}
        lengths: dict[int, int] = {}
        previous = self._lengths
        baseline = self.censuses == 0
        tracked = self._tracked
        own = {id(objects), id(counts), id(lengths), id(previous), id(tracked), id(self.__dict__)}
        best: list[tuple[int, int, Any]] = []  # a heap of the most grown
        for obj in objects:
            kind = type(obj)
            counts[kind] = counts.get(kind, 0) + 1
            known = KINDS.get(kind)
            if known is None:
                continue
            length = len(obj)
            if not length:
                continue
            key = id(obj)
            if key in own:
                continue
            index = known[0]
            lengths[key] = length << 3 | index
            if baseline:
                continue
            then = previous.get(key)
            before = then >> 3 if then is not None and then & 7 == index else 0
            follow = tracked.get(key)
            if follow is not None and follow.kind_index == index and length >= follow.last_length:
                follow.last_length, follow.last_at_s = length, at_s
            gained = length - before
            if gained >= MIN_GROWTH and (len(best) < CANDIDATES or gained > best[0][0]):
                entry = (gained, key, obj)
                if len(best) < CANDIDATES:
                    heapq.heappush(best, entry)
                else:
                    heapq.heapreplace(best, entry)
        if len(lengths) > MAX_RECORDED:
            kept = sorted(lengths.items(), key=lambda item: item[1], reverse=True)
            lengths = dict(kept[:MAX_RECORDED])
        self._lengths = lengths
        names = {kind: _type_name(kind) for kind in counts}
        theirs = [  # gpuwhy's own objects (its bounded step records) are not the program's
            (kind, n)
            for kind, n in counts.items()
            if str(getattr(kind, "__module__", "")).split(".")[0] not in OWN_PACKAGES
        ]
        top = sorted(theirs, key=lambda item: item[1], reverse=True)[:TOP_TYPES]
        self._types_before = self._types_last
        self._types_last = {names[kind]: n for kind, n in top}
        if baseline:
            self._types_first = {names[kind]: n for kind, n in counts.items()}
        grown = sorted(best, key=lambda entry: entry[0], reverse=True)
        best.clear()
        grown = [(gained, key, obj) for gained, key, obj in grown if key not in tracked]
        return grown, objects

    def _name(self, grown: list[tuple[int, int, Any]], at_s: float, objects: list[Any]) -> None:
        """Names the candidates that gained the most bytes (their elements times the
        last one's size), in one pass over the heap; those gpuwhy holds or that cannot
        be named are left."""
        sized = []
        for gained, key, container in grown:
            element, key_type = _last_element(container)
            detail, size = describe(element) if element is not _NOTHING else (None, None)
            sized.append(
                (gained * (size or 1), gained, key, container, element, key_type, detail, size)
            )
        grown.clear()
        sized.sort(key=lambda entry: entry[0], reverse=True)
        room = min(NAMED_PER_CENSUS, MAX_TRACKED - len(self._tracked))
        holders = names_of([entry[3] for entry in sized], objects, skip={id(self._lengths)})
        for _, gained, key, container, element, key_type, detail, size in sized:
            holder = holders.get(key)
            if holder is None or room <= 0:
                continue
            room -= 1
            index, kind = KINDS[type(container)]
            length = len(container)
            self._tracked[key] = _Tracked(
                kind_index=index,
                kind=kind,
                holder=holder,
                first_length=max(0, length - gained),
                first_at_s=self._at_s,
                last_length=length,
                last_at_s=at_s,
                element_type=_type_name(type(element)) if element is not _NOTHING else None,
                element_detail=detail,
                element_bytes=size,
                key_type=key_type,
            )
        sized.clear()

    def growing(self) -> tuple[GrowingObject, ...]:
        """The containers seen growing, most bytes gained first (elements where their
        size is unknown)."""
        with self._lock:
            tracked = [t for t in self._tracked.values() if t.last_length > t.first_length]

        def gained(t: _Tracked) -> tuple[int, int]:
            elements = t.last_length - t.first_length
            return (elements * (t.element_bytes or 0), elements)

        return tuple(t.fact() for t in sorted(tracked, key=gained, reverse=True))

    def growing_types(self, top: int = 8) -> tuple[tuple[str, int, int], ...]:
        """The types whose objects grew most in number from the baseline to the last
        census: (type, count at the baseline, at the last census). From three censuses
        on, only those that still grew between the last two: a burst of objects made
        once (a function traced, a module imported) is not a growth."""
        with self._lock:
            if self.censuses < 2:
                return ()
            before = self._types_before if self.censuses >= 3 else self._types_first
            rows = [
                (name, self._types_first.get(name, 0), n)
                for name, n in self._types_last.items()
                if n > self._types_first.get(name, 0) and n > before.get(name, 0)
            ]
        rows.sort(key=lambda row: row[2] - row[1], reverse=True)
        return tuple(rows[:top])


_NOTHING = object()


def _type_name(kind: type) -> str:
    return str(getattr(kind, "__qualname__", None) or getattr(kind, "__name__", "?"))


def _last_element(container: Any) -> tuple[Any, str | None]:
    """The container's last element (a dict's last value) and a dict's key type; the
    program may change it meanwhile: nothing then."""
    try:
        if isinstance(container, dict):
            key, value = next(reversed(container.items()))
            return value, _type_name(type(key))
        if isinstance(container, set):
            return next(iter(container)), None
        return container[-1], None
    except (IndexError, StopIteration, RuntimeError, TypeError):
        return _NOTHING, None


def describe(element: Any) -> tuple[str | None, int | None]:
    """A tensor's or an array's dtype and shape, and the bytes one element holds (its
    buffer for tensors and arrays, and TF's own handle for a tensor; for other objects,
    what it reaches, up to ``DEEP_SIZE_OBJECTS`` objects)."""
    module = type(element).__module__.split(".")[0]
    if module in _ARRAYS:
        try:
            dtype, shape = element.dtype, tuple(element.shape)
            name = getattr(dtype, "name", None) or str(dtype)
            items = 1
            for dim in shape:
                items *= int(dim) if dim is not None else 0
            itemsize = getattr(dtype, "size", None) or getattr(dtype, "itemsize", None) or 0
            shown = "(" + ", ".join(str(d) for d in shape) + ("," if len(shape) == 1 else "") + ")"
            overhead = TENSOR_OVERHEAD if module == "tensorflow" else 0
            return f"{name} {shown}", sys.getsizeof(element) + items * int(itemsize) + overhead
        except Exception:  # noqa: BLE001 - an array-like we do not know: sized as an object
            pass
    return None, deep_size(element)


def deep_size(root: Any, limit: int = DEEP_SIZE_OBJECTS) -> int:
    """The bytes of ``root`` and of what it reaches (classes, modules and functions,
    shared by all, left out), walking at most ``limit`` objects."""
    seen: set[int] = set()
    todo = [root]
    total = 0
    while todo and len(seen) < limit:
        obj = todo.pop()
        if id(obj) in seen or isinstance(obj, _SHARED):
            continue
        seen.add(id(obj))
        total += sys.getsizeof(obj, 0)
        todo.extend(gc.get_referents(obj))
    return total


def heap() -> tuple[list[Any], int]:
    """The objects the garbage collector tracks, tuples left out, and the tuples' count.

    The collector tracks a tuple from its creation, and one that another thread is
    still filling (``tuple(generator)`` while the generator runs, a C extension's
    arguments) must get no second reference: resized or set once that thread runs again,
    it raises ``SystemError: Objects/tupleobject.c: bad argument to internal function``
    in the program (CPython's gh-39117 and gh-107137; a census during a tf.function
    retrace storm did, Python 3.11 and TF 2.21). A census walks what it holds in Python,
    letting the other threads run every switch interval, so it holds no tuple: the list
    of the heap is made, filtered and dropped inside one call that runs no bytecode (C
    iterators only, each drawing the one list ``gc.get_objects()`` made; no ``zip``,
    whose reused result tuple would keep it), with the collector off so that no
    collection runs ``gc.callbacks`` or finalizers meanwhile: no other thread runs until
    it returns. Tuples are no containers a census measures; they are counted as the
    length of a second listing (read in C, dropped at once) less the objects kept: the
    census's few objects made between the two count with them. The list returned holds
    itself (it existed when the heap was listed): clear it once done. 0.09-0.11 s over
    350,000 objects (0.13 when the tuples were counted by their types, a pass more)."""
    objects: list[Any] = []
    # the heap's list, twice: the objects, and their types
    heaps = itertools.chain.from_iterable(map(itertools.repeat, map(gc.get_objects, (None,)), (2,)))
    kept = map(
        map,
        itertools.repeat(operator.is_not),
        map(map, itertools.repeat(type), heaps),
        itertools.repeat(itertools.repeat(tuple)),
    )
    # the tuples' count: the heap's length less the objects kept, the length read at C
    # speed off a listing of its own (its types mapped and compared again were a third of
    # a census: 0.06 of 0.21 s over 350,000 objects)
    listed = map(len, map(gc.get_objects, (None,)))
    enabled = gc.isenabled()
    gc.disable()
    try:
        objects.extend(itertools.chain.from_iterable(map(itertools.compress, heaps, kept)))
        count = max(0, sum(listed) - len(objects))
    finally:
        if enabled:
            gc.enable()
    return objects, count


def release_freed() -> None:
    """Gives the memory a census freed back to the OS (glibc's ``malloc_trim``; nothing
    elsewhere). Its lists and dicts take tens of MiB for a few hundred thousand
    objects; kept by the allocator, they are the next memory the program's growth
    fills, and its resident memory, read once a second, stands still meanwhile: a
    leak's line bent after each census (the last third of a run flattened below half
    its slope, host.memory-growth's sign of growth that stopped)."""
    trim = _malloc_trim()
    if trim is not None:
        trim(0)


@functools.cache
def _malloc_trim() -> Callable[[int], int] | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        return ctypes.CDLL("libc.so.6").malloc_trim
    except (OSError, AttributeError):  # musl: no glibc
        return None


def name_of(container: Any, objects: list[Any] | None = None) -> _Holder | None:
    """How the program names ``container`` (see :func:`names_of`)."""
    if objects is not None:
        return names_of([container], objects).get(id(container))
    listed = heap()[0]
    try:
        return names_of([container], listed).get(id(container))
    finally:
        listed.clear()


def names_of(
    containers: list[Any], objects: list[Any], skip: set[int] | frozenset = frozenset()
) -> dict[int, _Holder]:
    """How the program names each container (by id): a local of a running function or
    a global (the other threads' frames), else a global of an imported module or an
    attribute of an object (among ``objects``; dicts in ``skip`` left out). Those
    unnamed, gpuwhy's own or a library's (held by a library's module, class or
    function: not the program's to change) are left out."""
    wanted = {id(c): c for c in containers}
    found = _in_frames(wanted)
    rest = {key: c for key, c in wanted.items() if key not in found}
    if rest:
        found.update(_in_referrers(rest, objects, skip))
    return {
        key: holder
        for key, holder in found.items()
        if not _ours(holder.filename)
        and not _library(holder.filename)
        and not (holder.module and holder.module.split(".")[0] in OWN_PACKAGES)
    }


def _ours(filename: str | None) -> bool:
    return bool(filename) and os.path.abspath(filename or "").startswith(_GPUWHY_DIR + os.sep)


def _library(filename: str | None) -> bool:
    """A file of a library's rather than of the program's (the frames gpuwhy never blames)."""
    return bool(filename) and is_library_file(filename or "")


def _other_threads() -> list[types.FrameType]:
    """The frame each other thread runs. This thread's own is dropped at once: a
    variable of a census function holding it would make a cycle that keeps the census's
    frames, and all they hold, until the next garbage collection."""
    frames = current_frames()
    frames.pop(threading.get_ident(), None)
    return list(frames.values())


def untracked_dicts() -> list[dict]:
    """The dicts the garbage collector does not track (holding only numbers, strings or
    arrays: ``losses[step] = float(loss)``) among the globals and locals of the frames
    running in other threads, and the attributes of their ``self``: the places a
    program keeps what it records per step."""
    found: dict[int, dict] = {}
    spaces: dict[int, Any] = {}
    for frame in _other_threads():
        current: types.FrameType | None = frame
        while current is not None:
            if not _ours(current.f_code.co_filename):
                spaces.setdefault(id(current.f_globals), current.f_globals)
                local = _locals(current)
                owner = local.get("self")
                if owner is not None:
                    try:
                        namespace = getattr(owner, "__dict__", None)
                    except Exception:  # noqa: BLE001 - an object whose attribute lookup fails
                        namespace = None
                    if isinstance(namespace, dict):
                        spaces.setdefault(id(namespace), namespace)
                for value in local.values():
                    if type(value) in KINDS and not gc.is_tracked(value):
                        found[id(value)] = value
            current = current.f_back
    for space in spaces.values():
        try:
            values = list(space.values())
        except RuntimeError:  # changed while read
            continue
        for value in values:
            if type(value) in KINDS and not gc.is_tracked(value):
                found[id(value)] = value
    return list(found.values())


def _locals(frame: types.FrameType) -> dict:
    """A frame's locals, copied; a function frame's snapshot emptied after the read
    (before 3.13 the frame keeps it until it ends, and with it every local's value at
    the time of the read; :func:`gpuwhy.tfapi.frames.frame_values` does the same)."""
    local = frame.f_locals
    copied = dict(local)
    optimized = bool(frame.f_code.co_flags & inspect.CO_OPTIMIZED)
    if optimized and sys.version_info < (3, 13) and type(local) is dict:
        local.clear()
    return copied


def _in_frames(wanted: dict[int, Any]) -> dict[int, _Holder]:
    """Locals (or a module's globals) of the frames running in other threads, innermost
    first, the libraries' frames passed over: a list the program hands to Keras is named
    by the program's frame that holds it, not by Keras' argument. Before 3.13 a
    function frame's ``f_locals`` is a snapshot the frame keeps: emptied after the
    read, as :func:`gpuwhy.tfapi.frames.frame_values` does."""
    found: dict[int, _Holder] = {}
    for frame in _other_threads():
        current: types.FrameType | None = frame
        while current is not None and len(found) < len(wanted):
            code = current.f_code
            if not _ours(code.co_filename) and not _library(code.co_filename):
                for name, value in _locals(current).items():
                    key = id(value)
                    if key not in wanted or key in found or wanted[key] is not value:
                        continue
                    found[key] = _frame_holder(current, name)
            current = current.f_back
    return found


def _frame_holder(frame: types.FrameType, name: str) -> _Holder:
    code = frame.f_code
    if code.co_name == "<module>":
        return _global(name, code.co_filename, frame.f_globals.get("__name__"))
    lines = [line for _, _, line in code.co_lines() if line is not None]
    return _Holder(
        name=name,
        holder=f"local of {getattr(code, 'co_qualname', code.co_name)}()",
        attribute=False,
        filename=code.co_filename,
        lines=(code.co_firstlineno, max(lines, default=code.co_firstlineno)),
    )


def _global(name: str, filename: str | None, module: str | None) -> _Holder:
    shown = os.path.basename(filename) if filename else f"module {module}"
    return _Holder(
        name=name,
        holder=f"global of {shown}",
        attribute=False,
        filename=filename,
        module=module,
    )


def _in_referrers(
    wanted: dict[int, Any], objects: list[Any], skip: set[int] | frozenset
) -> dict[int, _Holder]:
    """Globals of modules, or attributes of objects, found among ``objects``.

    Not with ``gc.get_referrers``: in a TensorFlow program it can crash the process (a
    segfault after a Keras ``fit`` with TF 2.21 on Python 3.11, unless a collection ran
    just before: it walks the collector's own lists while the objects' traversal may
    change them). Here each dict's values are compared by identity (a module's dict
    gives a global), then the referents of the objects that have attributes: a
    container itself, or a dict found holding one (the object's ``__dict__``)."""
    modules = {id(vars(m)): m for m in list(sys.modules.values()) if m is not None}
    ids = set(wanted)
    found: dict[int, _Holder] = {}
    holding: dict[int, list[tuple[int, str]]] = {}  # a dict holding some -> (id, key)
    for obj in objects:
        if type(obj) is not dict or id(obj) in skip or not _holds(obj, ids):
            continue
        for key, value in _items(obj):
            if id(value) not in ids or wanted[id(value)] is not value or not isinstance(key, str):
                continue
            module = modules.get(id(obj))
            if module is not None:
                found.setdefault(
                    id(value), _global(key, getattr(module, "__file__", None), module.__name__)
                )
            else:
                holding.setdefault(id(obj), []).append((id(value), key))
    targets = (ids - set(found)) | set(holding)
    offsets: dict[type, bool] = {}
    for obj in objects:
        if not targets:
            break
        kind = type(obj)
        has = offsets.get(kind)
        if has is None:
            has = offsets[kind] = bool(getattr(kind, "__dictoffset__", 0)) and not issubclass(
                kind, _SHARED
            )
        if not has:
            continue
        referents = gc.get_referents(obj)
        if targets.isdisjoint(map(id, referents)):
            continue
        try:
            namespace = vars(obj)
        except TypeError:
            continue
        for key, value in _items(namespace):
            if id(value) in ids and id(value) not in found and wanted[id(value)] is value:
                found[id(value)] = _attribute(key, obj)
        for key, name in holding.pop(id(namespace), ()):
            found.setdefault(key, _attribute(name, obj))
        targets = (ids - set(found)) | set(holding)
    return found


def _holds(mapping: dict, ids: set[int]) -> bool:
    """Whether one of the dict's values has one of ``ids`` (at C speed)."""
    try:
        return not ids.isdisjoint(map(id, mapping.values()))
    except RuntimeError:  # changed while read
        return False


def _items(mapping: dict) -> list[tuple[Any, Any]]:
    """A dict's items, or none where the program changed it while they were read."""
    try:
        return list(mapping.items())
    except RuntimeError:
        return []


def _attribute(name: str, owner: Any) -> _Holder:
    cls = type(owner)
    module = sys.modules.get(cls.__module__)
    return _Holder(
        name=name,
        holder=f"attribute of {_type_name(cls)}",
        attribute=True,
        filename=getattr(module, "__file__", None),
        module=cls.__module__,
    )
