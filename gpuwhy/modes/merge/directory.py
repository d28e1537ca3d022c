"""A directory of task records (``gpuwhy run --out-dir DIR`` on every worker) as one
``workers`` section: every record read (read.py), the tasks its cluster spec names but
that left no record (``missing``), a record a worker was killed while writing (its
temporary file is all there is), and the workers' findings once each, with the workers
they hold on."""

from __future__ import annotations

import dataclasses
import os
import re
from collections.abc import Iterable
from typing import Any

from gpuwhy.derived.worker_inputs import compare_inputs
from gpuwhy.facts import MergedFinding, WorkerRun, WorkersFacts
from gpuwhy.finding import SEVERITY_RANK
from gpuwhy.modes.merge.read import WorkerRecord, is_merge_record, read_worker
from gpuwhy.rules.distribute.input_sharding import judged_across

# gpuwhy.commands.output_paths.write_whole's temporary file for DIR/<task>.json
_UNFINISHED = re.compile(r"^\.(?P<task>.+)\.json\..+\.tmp$")
_KINDS = {"chief": 0, "master": 1, "worker": 2, "ps": 3, "evaluator": 4}


class MergeError(ValueError):
    """The directory itself cannot be merged (missing, not a directory, no records)."""


def merge_directory(directory: str) -> WorkersFacts:
    if not os.path.isdir(directory):
        raise MergeError(
            f"{directory} is not a directory"
            if os.path.exists(directory)
            else f"{directory}: no such directory"
        )
    try:
        names = sorted(os.listdir(directory))
    except OSError as e:
        raise MergeError(f"cannot list {directory}: {e.strerror or e}") from None
    records = [
        read_worker(os.path.join(directory, n))
        for n in names
        if n.endswith(".json")
        and not n.startswith(".")
        and not is_merge_record(os.path.join(directory, n))
    ]
    if not records and not any(_UNFINISHED.match(n) for n in names):
        raise MergeError(
            f"no gpuwhy records in {directory}: run `gpuwhy run --out-dir {directory} "
            "train.py` on every worker first"
        )
    records = _unique_names(records)
    present = {r.run.name for r in records}
    unfinished = [
        WorkerRun(
            name=m["task"],
            state="unreadable",
            file=n,
            note="partial: unreadable (killed while writing its record)",
        )
        for n in names
        if (m := _UNFINISHED.match(n)) and m["task"] not in present
    ]
    present |= {w.name for w in unfinished}
    named = dict.fromkeys(c for r in records for c in r.cluster)
    missing = [
        WorkerRun(name=task, state="missing", note="named in the cluster spec, no record")
        for task in named
        if task not in present
    ]
    workers = sorted([r.run for r in records] + unfinished + missing, key=_task_order)
    return WorkersFacts(
        directory=directory,
        workers=tuple(workers),
        findings=tuple(_deduplicated(_settled_left_out(records))),
    )


def _settled_left_out(records: list[WorkerRecord]) -> list[WorkerRecord]:
    """The records without the findings the comparison across workers settles: a
    worker that judged "every worker reads the whole dataset" from its own pipeline
    alone is confirmed or refuted by what the others read (distribute.input-sharding
    on the merge says which)."""

    compared = compare_inputs([r.run for r in records])
    if not compared:
        return records
    return [
        dataclasses.replace(r, findings=[f for f in r.findings if not judged_across(f, compared)])
        for r in records
    ]


def _deduplicated(records: Iterable[WorkerRecord]) -> list[MergedFinding]:
    """One finding per id and place (its file:line, else its title), in task order:
    the first worker's text and evidence, the most severe worker's severity."""
    groups: dict[tuple[str, str], list[tuple[str, dict[str, Any]]]] = {}
    for record in sorted(records, key=lambda r: _task_order(r.run)):
        for f in record.findings:
            key = (f["id"], f.get("location") or f["title"])
            groups.setdefault(key, []).append((record.run.name, f))
    merged = []
    for found in groups.values():
        first = found[0][1]
        merged.append(
            MergedFinding(
                id=first["id"],
                severity=min((f["severity"] for _, f in found), key=SEVERITY_RANK.__getitem__),
                title=first["title"],
                workers=tuple(dict.fromkeys(name for name, _ in found)),
                evidence=dict(first.get("evidence") or {}),
                fix=first.get("fix") if isinstance(first.get("fix"), str) else None,
                estimated_gain=first.get("estimated_gain")
                if isinstance(first.get("estimated_gain"), str)
                else None,
                location=first.get("location") if isinstance(first.get("location"), str) else None,
                gain_value=max(
                    (
                        float(g)
                        for _, f in found
                        if isinstance(g := f.get("gain_value"), (int, float))
                        and not isinstance(g, bool)
                    ),
                    default=None,
                ),
            )
        )
    return merged


def _unique_names(records: list[WorkerRecord]) -> list[WorkerRecord]:
    """Two files claiming one task (a copied record) keep both, told apart by file."""
    seen: dict[str, int] = {}
    for r in records:
        seen[r.run.name] = seen.get(r.run.name, 0) + 1
    out = []
    for r in records:
        if seen[r.run.name] > 1:
            r = WorkerRecord(
                dataclasses.replace(r.run, name=f"{r.run.name} ({r.run.file})"),
                r.findings,
                r.cluster,
            )
        out.append(r)
    return out


def _task_order(worker: WorkerRun) -> tuple:
    """chief, then workers by index, ps, evaluator; anything else by name."""
    kind, _, index = worker.name.rpartition("-")
    if kind in _KINDS and index.isdigit():
        return (_KINDS[kind], int(index), worker.name)
    return (len(_KINDS), 0, worker.name)
