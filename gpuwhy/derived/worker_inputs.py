"""The datasets several workers distributed without TF's auto-shard, compared across the
workers' records (``gpuwhy merge``): whether they read the same data, overlapping files
or each their own. Read by distribute.input-sharding and by the merge mode, which drops
a worker's own guess where the comparison settles it."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from gpuwhy.facts import WorkerInput, WorkerRun

UNREAD = ("unreadable", "missing")


@dataclass(frozen=True)
class Compared:
    """One dataset the workers distributed with no auto-sharding (OFF, or a dataset
    function), compared across their records: ``same`` (every worker reads the same
    data), ``overlap`` (workers read some of the same files and nothing shards them
    further), ``sharded`` (they read different data)."""

    how: str
    place: str | None  # the source's file:line (else its call as written)
    workers: tuple[str, ...]
    inputs: tuple[WorkerInput, ...]
    verdict: str
    shared_files: tuple[str, ...] = ()


def compare_inputs(workers: Sequence[WorkerRun]) -> list[Compared]:
    """Each dataset two or more workers distributed, where every one of them recorded
    what its pipeline reads; TF's auto-shard (FILE, DATA) divides the others itself."""
    groups: dict[tuple[str, str | None], dict[str, WorkerInput]] = {}
    for worker in workers:
        if worker.state in UNREAD:
            continue
        for given in worker.inputs:
            if given.shard_applied != "OFF":
                continue
            key = (given.how, given.source_location or given.source)
            groups.setdefault(key, {}).setdefault(worker.name, given)
    compared = []
    for (how, place), by_worker in groups.items():
        inputs = tuple(by_worker.values())
        if len(inputs) < 2 or any(i.reads_digest is None for i in inputs):
            continue
        verdict, shared = _verdict(inputs)
        compared.append(Compared(how, place, tuple(by_worker), inputs, verdict, shared))
    return compared


def _verdict(inputs: Sequence[WorkerInput]) -> tuple[str, tuple[str, ...]]:
    if len({i.reads_digest for i in inputs}) == 1:
        return "same", ()
    files = [set(i.read_files) for i in inputs]
    if all(files) and not any(i.sharded_by == "shard()" for i in inputs):
        seen: set[str] = set()
        shared: set[str] = set()
        for names in files:
            shared |= seen & names
            seen |= names
        if shared and any(names != files[0] for names in files):
            return "overlap", tuple(sorted(shared))
    return "sharded", ()
