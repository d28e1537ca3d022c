"""What is kept of each live tf.data iterator while the program runs: the nodes of TF's
model at each place of its chain (banked across the instances TF makes anew under a
``repeat``), when it was read, and the pipeline it belongs to."""

from __future__ import annotations

import dataclasses
import threading
from dataclasses import dataclass, field
from typing import Any

FIRST_POLL_S = 0.1  # first read of a new iterator's model (then doubling up to the poll)


class Position:
    """One place in an iterator's chain: the node instance there now, and what the
    earlier instances at that place did (TF makes the nodes under a ``repeat`` anew
    for every pass)."""

    __slots__ = ("node", "done_elements", "done_time")

    def __init__(self, node: Any) -> None:
        self.node = node
        self.done_elements = 0
        self.done_time = 0.0

    @property
    def elements(self) -> int:
        return self.done_elements + self.node.num_elements

    @property
    def seconds(self) -> float:
        return self.done_time + self.node.total_time_s

    def update(self, node: Any) -> None:
        if node.id != self.node.id:  # a new instance: bank the old one's work
            self.done_elements += self.node.num_elements
            self.done_time += self.node.total_time_s
        elif not node.inner and self.node.inner:
            # the same instance, whose inner datasets ended (a generator, the last file):
            # keep them, scaled by RunNode.total_time_s to the elements it made since
            node = dataclasses.replace(
                node, inner=self.node.inner, inner_elements=self.node.inner_elements
            )
        self.node = node


def observe(positions: list, model: Any) -> list:
    """The positions after a new read, aligned from the consumer's end by node names.
    A node missing at the source end left the model (its input ran out): its place
    and counts are kept until a new instance appears there."""
    new = list(model.nodes)
    if not positions:
        return [Position(n) for n in new]
    shared = 0
    while (
        shared < min(len(positions), len(new))
        and positions[-1 - shared].node.name == new[-1 - shared].name
    ):
        shared += 1
    matched = positions[len(positions) - shared :]
    for position, node in zip(matched, new[len(new) - shared :]):
        position.update(node)
    fresh = new[: len(new) - shared]
    if not fresh:
        return positions[: len(positions) - shared] + matched
    return [Position(n) for n in fresh] + matched


class IteratorState:
    """One iterator: its chain as read so far, and when its element count last changed."""

    __slots__ = (
        "ref",
        "key",
        "created",
        "consumer",
        "positions",
        "gaps",
        "seen_at",
        "first_t",
        "first_count",
        "reads",
        "last_read",
        "error",
        "done",
        "thread",
        "branches",
        "end_unread",
        "__weakref__",
    )

    def __init__(self, ref: Any, key: int, created: float) -> None:
        self.ref, self.key, self.created = ref, key, created
        self.consumer = ""  # its pipeline's: "keras-fit", "loop" ...
        self.thread = threading.get_ident()  # the thread that created it
        self.positions: list[Position] = []  # source first, Root last
        self.gaps: tuple[float, ...] = ()
        self.seen_at = created  # when the latest element count was first seen
        self.first_t: float | None = None  # the first read that saw elements
        self.first_count = 0
        self.reads = 0
        self.last_read = created
        self.error: str | None = None
        self.done = False  # freed: no more reads
        self.branches: tuple[int, ...] = ()  # its pipeline's zip inputs (Pipeline.branches)
        # freed without a last read of TF's count: the elements it gave after its last
        # poll are not in ``root_elements`` (a lower bound then)
        self.end_unread = False

    @property
    def root_elements(self) -> int:
        return self.positions[-1].node.num_elements if self.positions else 0

    @property
    def root_bytes(self) -> int:
        """Bytes of the elements the consumer got (0 where TF did not count them)."""
        return getattr(self.positions[-1].node, "bytes_produced", 0) if self.positions else 0

    def observe(self, model: Any, now: float) -> None:
        before = self.root_elements
        self.positions = observe(self.positions, model)
        self.gaps = model.gap_times_s
        count = self.root_elements
        if self.reads <= 1 or count != before:
            self.seen_at = now
        if self.first_t is None and count > 0:
            self.first_t, self.first_count = now, count

    def due(self, now: float, poll_s: float) -> bool:
        """Read young iterators more often (0.1 s, 0.2 s, 0.4 s ... then ``poll_s``):
        TF drops an input's nodes from the model once the input runs out, so a short
        iterator read only at its end would lose its source. Until its first element,
        every 0.1 s: a shuffle whose buffer holds the whole epoch (``.cache().shuffle(
        1000)`` over 500 images) reads all of its input, decoding every image, before
        that element, and the stages below it leave the model then (read every second,
        the decode was seen in some runs and not in others)."""
        return now >= self.next_read(poll_s)

    def next_read(self, poll_s: float) -> float:
        """When :meth:`due` says it is due next (perf_counter)."""
        if self.root_elements == 0:
            return self.last_read + min(poll_s, FIRST_POLL_S)
        return self.last_read + min(poll_s, FIRST_POLL_S * 2**self.reads)

    def window(self) -> tuple[float, int]:
        """(seconds, elements) over which the consumer read: from the first read that
        saw elements (leaving out the start, e.g. Keras tracing its train step) to the
        moment the final count was first seen; from creation when no read came between."""
        final = self.root_elements
        if (
            self.first_t is not None
            and 0 < self.first_count < final
            and self.seen_at > self.first_t
        ):
            return self.seen_at - self.first_t, final - self.first_count
        return max(0.0, self.seen_at - self.created), final


@dataclass
class Pipeline:
    id: int
    consumer: str
    written: list
    location: str | None
    callers: tuple[str, ...]  # the user's lines that led to the function that built it
    autotune: bool
    cardinality: int | None
    element_bytes: int | None
    example_bytes: int | None = None  # one example, where every component is a batch of
    # unknown size (a Keras generator's batches): the bytes per element of its batch dim
    iterators: list = field(default_factory=list)
    dropped_iterators: int = 0
    error: str | None = None
    # the input followed at each zip, from the final dataset down: where the written
    # chain went (gpuwhy.tfapi.tfdata.dataset_chain.zip_branches), for TF's model to go too
    branches: tuple[int, ...] = ()
    # where the user's code read it outside Keras (the loop's file:line), and the
    # library call that did where it did not itself ("TextVectorization.adapt"): of the
    # places that made its iterators, the one that made the most (an epochs' loop, not a
    # next(iter(ds)) that looked at one batch first)
    read_at: str | None = None
    read_via: str | None = None
    # iterators made at each such place, at most MAX_READ_SITES places
    read_sites: dict[tuple[str | None, str | None], int] = field(default_factory=dict)
    deterministic: bool | None = None  # options().deterministic as set (None: unset)
    # with_options made by a library (Keras, for a PyDataset with workers), not the program
    options_by_library: bool = False
    # a from_generator source's own timer of the consumer (tfapi/tfdata/generator_gaps.py)
    generator_gaps: Any = None
