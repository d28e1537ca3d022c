"""Reading a pipeline for the optimiser: element fingerprints, timed passes, statistics.

Elements are compared exactly: each element becomes a digest of every component's
dtype, shape and bytes (ragged and sparse tensors through their component tensors), so
two pipelines agree only if they give bit-identical tensors. Keeping 16-byte digests
instead of the tensors lets a whole epoch of large batches be compared.

Throughput is measured the way a training loop that never waits would see it: a
``Dataset.reduce`` that counts elements inside one traced function (no Python per
element, a fresh iterator per pass, TF's options and rewrites applied as for any
iterator: reduce_dataset_op.cc finalises the dataset like MakeIterator does).
"""

from __future__ import annotations

import hashlib
import statistics
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from gpuwhy.collect.host_memory import host_memory
from gpuwhy.facts import PipelineRate


class UncomparableElement(Exception):
    """An element with a component gpuwhy cannot fingerprint (a nested dataset, a variant)."""


def element_digest(element: Any) -> bytes:
    """A 16-byte fingerprint of a nested element: equal iff every component is equal bitwise."""
    import numpy as np
    import tensorflow as tf

    h = hashlib.blake2b(digest_size=16)
    try:
        flat = tf.nest.flatten(element, expand_composites=True)
    except Exception as e:  # noqa: BLE001
        raise UncomparableElement(f"{type(e).__name__}: {e}") from None
    h.update(str(tf.nest.map_structure(lambda _: 0, element, expand_composites=False)).encode())
    for leaf in flat:
        if isinstance(leaf, tf.Tensor):
            if leaf.dtype in (tf.variant, tf.resource):
                raise UncomparableElement(f"a {leaf.dtype.name} component")
            value = np.asarray(leaf.numpy())
        else:
            value = np.asarray(leaf)
        h.update(f"{value.dtype.str}{value.shape}".encode())
        if value.dtype == object:  # tf.string
            for item in value.reshape(-1):
                data = item if isinstance(item, bytes) else str(item).encode()
                h.update(len(data).to_bytes(8, "little"))
                h.update(data)
        else:
            h.update(np.ascontiguousarray(value).tobytes())
    return h.digest()


def element_bytes(element: Any) -> int:
    """Host memory one element takes (what a cache of it holds)."""
    import numpy as np
    import tensorflow as tf

    total = 0
    for leaf in tf.nest.flatten(element, expand_composites=True):
        value = np.asarray(leaf.numpy() if isinstance(leaf, tf.Tensor) else leaf)
        if value.dtype == object:
            total += (
                sum(len(v) if isinstance(v, bytes) else 8 for v in value.reshape(-1))
                + 16 * value.size
            )
        else:
            total += value.nbytes
    return total


@dataclass
class Digests:
    """The fingerprints of one pass: ``complete`` when the pass reached the end."""

    values: list[bytes] = field(default_factory=list)
    complete: bool = False
    skipped: str | None = None  # why elements could not be fingerprinted
    seconds: float = 0.0
    count: int = 0  # elements read (fingerprinted or not)


def collect(
    dataset: Any,
    limit: int | None,
    *,
    fingerprint: bool = True,
    at_least: int = 0,
    time_limit_s: float | None = None,
) -> Digests:
    """One pass over ``dataset`` from a fresh iterator, up to ``limit`` elements (None: to
    the end). Reads on past ``limit`` up to ``at_least`` elements without fingerprinting
    (to finish an epoch that fills a cache). ``time_limit_s`` stops the pass early, after
    at least 20 elements (used to size passes over infinite datasets)."""
    out = Digests()
    start = time.perf_counter()
    count = 0
    stop_at = None if limit is None else max(limit, at_least)
    iterator = iter(dataset)
    while stop_at is None or count < stop_at:
        try:
            element = next(iterator)
        except StopIteration:
            out.complete = True
            break
        if fingerprint and out.skipped is None and (limit is None or count < limit):
            try:
                out.values.append(element_digest(element))
            except UncomparableElement as e:
                out.skipped, out.values = str(e), []
        count += 1
        if time_limit_s is not None and count >= 20 and time.perf_counter() - start > time_limit_s:
            break
    out.seconds = time.perf_counter() - start
    if not fingerprint:
        out.values = []
    out.count = count
    return out


def compare(a: Sequence[bytes], b: Sequence[bytes], *, keep_order: bool) -> str | None:
    """None when equal (as sequences, or as multisets when order may change); else what differs."""
    if keep_order:
        for i, (x, y) in enumerate(zip(a, b)):
            if x != y:
                return f"element {i} differs"
        if len(a) != len(b):
            return f"{len(a)} elements against {len(b)}"
        return None
    if len(a) != len(b):
        return f"{len(a)} elements against {len(b)}"
    ca, cb = Counter(a), Counter(b)
    if ca != cb:
        missing = sum((ca - cb).values())
        return f"{missing} of {len(a)} elements have no equal in the rewritten pipeline"
    return None


class Drain:
    """Timed passes over one dataset: a traced ``reduce`` that counts its elements.

    ``elements``: read only the first N of each pass (a fresh iterator each time).
    ``epochs``: passes per timed sample, back to back, so that a short epoch is still
    timed over a span the clock can resolve on a busy machine.
    """

    def __init__(self, dataset: Any, elements: int | None = None, epochs: int = 1) -> None:
        import numpy as np
        import tensorflow as tf

        source = dataset.take(elements) if elements is not None else dataset
        self.epochs = max(1, int(epochs))
        self._fn = tf.function(lambda: source.reduce(np.int64(0), lambda count, *_: count + 1))
        self._fn.get_concrete_function()  # trace now, never inside a timed pass

    def __call__(self) -> tuple[int, float]:
        start = time.perf_counter()
        n = 0
        for _ in range(self.epochs):
            n += int(self._fn())
        return n, time.perf_counter() - start


@dataclass(frozen=True, kw_only=True)  # after PipelineRate's defaulted ``first``
class Throughput(PipelineRate):
    """Elements per second over the timed passes of one pipeline: the record's
    :class:`~gpuwhy.facts.PipelineRate` (median, slowest and fastest pass) with the
    quartiles and each pass's rate, which only the measuring needs."""

    q1: float
    q3: float
    rates: tuple[float, ...] = ()
    epochs_per_pass: int = 1  # short epochs are timed several in a row

    @classmethod
    def of(cls, samples: Sequence[tuple[int, float]], epochs: int = 1) -> Throughput:
        rates = [n / s if s > 0 else float("inf") for n, s in samples]
        ordered = sorted(rates)
        if len(ordered) >= 4:
            q = statistics.quantiles(ordered, n=4, method="inclusive")
            q1, q3 = q[0], q[2]
        else:
            q1, q3 = ordered[0], ordered[-1]
        return cls(
            median=statistics.median(ordered),
            min=ordered[0],
            max=ordered[-1],
            q1=q1,
            q3=q3,
            passes=len(ordered),
            elements_per_pass=int(statistics.median([n for n, _ in samples]) / max(epochs, 1)),
            rates=tuple(rates),
            epochs_per_pass=epochs,
        )

    def rate(self) -> PipelineRate:
        """As the record keeps it."""
        return PipelineRate(
            median=self.median,
            min=self.min,
            max=self.max,
            passes=self.passes,
            elements_per_pass=self.elements_per_pass,
            first=self.first,
        )


def timed_passes(drains: dict[str, Drain], repeats: int) -> dict[str, Throughput]:
    """``repeats`` passes of each pipeline, interleaved and in a rotating order, so that a
    noisy machine's slow moments fall on all of them alike."""
    names = list(drains)
    samples: dict[str, list[tuple[int, float]]] = {name: [] for name in names}
    for r in range(repeats):
        order = names[r % len(names) :] + names[: r % len(names)]
        for name in order:
            samples[name].append(drains[name]())
    return {name: Throughput.of(s, drains[name].epochs) for name, s in samples.items()}


def available_memory_bytes() -> int | None:
    """Memory available now (MemAvailable on Linux); None if unknown."""

    return host_memory()[1]
