"""One task's record read for ``gpuwhy merge``: only what the per-worker table and the
straggler rule need, from the figures the record already holds (the step count,
medians and totals, not the per-step series, which stop at 5000 steps), so that 64
records of 10,000 steps merge in well under two seconds.

Nothing in a record is trusted: a file cut short (a worker killed while an older gpuwhy
wrote it, a full disk), a field of the wrong type or another command's record makes a
worker ``unreadable`` with the reason, never a failed merge.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from typing import Any

from gpuwhy.derived.stage import derived
from gpuwhy.facts import (
    Facts,
    GpuSamplesFacts,
    StepFacts,
    StepSpan,
    WorkerInput,
    WorkerRun,
    from_dict,
)
from gpuwhy.json_input import MAX_DEPTH, TooDeep, loads

# How a run ended (ProgramFacts.ended) -> the worker's state in the merge.
_STATES = {"completed": "ok", "interrupted": "interrupted", "terminated": "interrupted"}


class Unreadable(ValueError):
    """Why a record cannot be used, in a few words."""


@dataclass
class WorkerRecord:
    """A worker's row and its own findings (raw, as its record holds them)."""

    run: WorkerRun
    findings: list[dict[str, Any]] = field(default_factory=list)
    cluster: tuple[str, ...] = ()  # the tasks its cluster spec names


def read_worker(path: str) -> WorkerRecord:
    """The record at ``path`` as a worker row; never raises for a bad file."""
    file = os.path.basename(path)
    stem = file[: -len(".json")] if file.endswith(".json") else file
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except (OSError, UnicodeDecodeError) as e:
        return _unreadable(stem, file, f"cannot be read ({getattr(e, 'strerror', None) or e})")
    try:
        data = loads(text, file)
    except TooDeep:
        return _unreadable(stem, file, f"unreadable (nested more than {MAX_DEPTH} levels deep)")
    except ValueError:
        return _unreadable(stem, file, "partial: unreadable (not complete JSON)")
    try:
        return _worker(data, stem, file)
    except Unreadable as e:
        return _unreadable(stem, file, str(e))
    except (TypeError, ValueError, KeyError, AttributeError, IndexError) as e:
        return _unreadable(stem, file, f"partial: unreadable ({type(e).__name__}: {e})")


def is_merge_record(path: str) -> bool:
    """A ``gpuwhy merge --json`` output written into the directory it merged."""
    try:
        with open(path, encoding="utf-8") as f:
            head = f.read(4096)
    except (OSError, UnicodeDecodeError):
        return False
    return '"command": "merge"' in head


def _unreadable(name: str, file: str, why: str) -> WorkerRecord:
    return WorkerRecord(WorkerRun(name=name, state="unreadable", file=file, note=why))


def _worker(data: Any, stem: str, file: str) -> WorkerRecord:
    if not isinstance(data, dict) or (data.get("tool") or {}).get("name") != "gpuwhy":
        raise Unreadable("not a gpuwhy run record")
    command = data.get("command")
    if command not in ("run", "watch"):
        raise Unreadable(f"a gpuwhy {command} record, not a run's")
    task = _section(data, "task")
    program = _section(data, "program")
    steps = _section(data, "steps")
    distribute = _section(data, "distribute")
    name = _text(task.get("name")) or stem
    ended = _text(program.get("ended"))
    exit_code = _integer(program.get("exit_code"))
    state = _STATES.get(ended or "", "failed") if program else "unreadable"
    note = None
    if not program:
        note = "partial: no program section"
    elif state == "interrupted":
        note = f"{ended} after {_number(program.get('seconds')) or 0:.1f} s (its figures cover the steps before)"
    elif state == "failed":
        error = _text(program.get("error"))
        note = f"{ended}, exit status {exit_code}" + (f": {error}" if error else "")
    run = WorkerRun(
        name=name,
        state=state,
        file=file,
        note=note,
        hostname=_text(task.get("hostname")),
        ended=ended,
        exit_code=exit_code,
        strategy=_text(distribute.get("strategy")),
        collective_step_s=_number(distribute.get("collective_step_s")),
        collective_share=_number(distribute.get("collective_share")),
        gpu_busy=_gpu_busy(data),
        inputs=_inputs(distribute),
        **_host(_section(data, "tfdata")),
        **_step_figures(steps, _section(data, "tracing")),
    )
    findings = data.get("findings")
    cluster = task.get("cluster")
    return WorkerRecord(
        run,
        [f for f in findings if _is_finding(f)] if isinstance(findings, list) else [],
        tuple(c for c in cluster if isinstance(c, str)) if isinstance(cluster, list) else (),
    )


def _step_figures(steps: dict[str, Any], tracing: dict[str, Any]) -> dict[str, Any]:
    """Steps, medians and means after warm-up, and the input wait per step: as timed
    (next(), tf.data's gap timer) or, for a loop calling a step function, the time per
    step spent outside that function (reading the next batch from a distributed
    iterator is there; the all-reduce, and any wait for a late peer, is inside)."""
    if not steps:
        return {}
    count = _integer(steps.get("count")) or 0
    counted = max(0, count - (_integer(steps.get("warmup")) or 0))
    total = _number(steps.get("total_s"))
    mean = total / counted if total is not None and counted else None
    figures: dict[str, Any] = {
        "windows": _training_windows(steps),
        "step_source": _text(steps.get("source")),
        "steps": count,
        "counted_steps": counted,
        "step_median_s": _number(steps.get("median_s")),
        "step_p90_s": _number(steps.get("p90_s")),
        "step_mean_s": mean,
    }
    fraction = _number(steps.get("input_wait_fraction"))
    if fraction is not None and mean is not None:
        figures["input_wait_s"] = fraction * mean
        figures["input_wait_median_s"] = _number(steps.get("input_wait_median_s"))
        figures["input_wait_by"] = _text(steps.get("input_wait_source")) or "measured"
    elif steps.get("source") == "tf-function" and mean is not None:
        outside = _outside_step_function(steps, tracing, mean)
        if outside is not None:
            figures["input_wait_s"], figures["input_wait_by"] = outside
    return figures


def _training_windows(steps: dict[str, Any]) -> tuple[StepSpan, ...]:
    """The worker's main-loop windows after warm-up, as the drift and diff read a run's
    (none where its steps section cannot be read whole)."""
    try:
        facts = from_dict(StepFacts, steps)
    except (TypeError, ValueError, KeyError, AttributeError):
        return ()
    if not isinstance(facts, StepFacts) or facts.timeline is None:
        return ()
    return derived(Facts(steps=facts)).training_spans


def _outside_step_function(
    steps: dict[str, Any], tracing: dict[str, Any], mean: float
) -> tuple[float | None, str] | None:
    loops = steps.get("loops") or []
    name = _text(loops[0].get("name")) if loops and isinstance(loops[0], dict) else None
    for function in tracing.get("functions") or []:
        if not isinstance(function, dict):
            continue
        label = f"{function.get('name')} ({function.get('location')})"
        calls = _integer(function.get("calls")) or 0
        call_s = _number(function.get("call_s"))
        if label != name or calls <= 0 or call_s is None:
            continue
        if _takes_an_iterator(function):
            # next() runs inside the function (TF's multi-worker tutorial): the time
            # outside it is not the wait, and the wait inside is not told from the step
            return None, f"not measurable: {function.get('name')} reads its iterator inside"
        per_call = max(0.0, call_s - (_number(function.get("trace_s")) or 0.0)) / calls
        return max(0.0, mean - per_call), f"time outside {function.get('name')} per step"
    return None


def _takes_an_iterator(function: dict[str, Any]) -> bool:
    """The function's latest trace was given an iterator (an ``IteratorSpec`` argument)."""
    signatures = function.get("signatures") or []
    last = signatures[-1] if signatures and isinstance(signatures[-1], dict) else {}
    return any(
        isinstance(arg, (list, tuple)) and len(arg) == 2 and "IteratorSpec" in str(arg[1])
        for arg in last.get("args") or []
    )


def _inputs(distribute: dict[str, Any]) -> tuple[WorkerInput, ...]:
    """The datasets the worker distributed, with what each reads (where its record
    says: multi-worker runs of this gpuwhy)."""
    found = []
    for given in distribute.get("inputs") or []:
        if not isinstance(given, dict) or not _text(given.get("how")):
            continue
        files = given.get("read_files")
        found.append(
            WorkerInput(
                how=str(given["how"]),
                source=_text(given.get("source")),
                source_location=_text(given.get("source_location")),
                shard_applied=_text(given.get("shard_applied")),
                sharded_by=_text(given.get("sharded_by")),
                shuffled=given.get("shuffled") is True,
                reads_digest=_text(given.get("reads_digest")),
                read_files=tuple(f for f in files if isinstance(f, str))
                if isinstance(files, list)
                else (),
            )
        )
    return tuple(found)


def _host(tfdata: dict[str, Any]) -> dict[str, Any]:
    """The host's cores and how busy they were over the run (every process)."""
    cores = _integer(tfdata.get("host_cores"))
    busy = _number(tfdata.get("host_cpu_busy_fraction"))
    return {"host_cores": cores, "host_cpu_busy": busy}


def _gpu_busy(data: dict[str, Any]) -> float | None:
    """The busy share of the GPUs the worker's program used, averaged over those whose
    figure can resolve it: the one busy figure (derived/gpu_busy.py), derived from the
    worker's samples and steps by the derivation stage as its own report derives it
    (never a figure the file holds). None where the section cannot be read whole."""
    section, steps = _section(data, "gpu_samples"), data.get("steps")
    if not section:
        return None
    try:
        samples = from_dict(GpuSamplesFacts, section)
        timed = from_dict(StepFacts, steps) if isinstance(steps, dict) else None
    except (TypeError, ValueError, KeyError, AttributeError):
        return None
    if not isinstance(samples, GpuSamplesFacts):
        return None
    facts = Facts(gpu_samples=samples, steps=timed if isinstance(timed, StepFacts) else None)
    shares = [b.share for _, b in derived(facts).program_busy if b.reliable and b.share is not None]
    return sum(shares) / len(shares) if shares else None


def _is_finding(f: Any) -> bool:
    return (
        isinstance(f, dict)
        and isinstance(f.get("id"), str)
        and isinstance(f.get("title"), str)
        and f.get("severity") in ("high", "medium", "low", "info")
        and isinstance(f.get("evidence", {}), dict)
    )


def _section(data: dict[str, Any], name: str) -> dict[str, Any]:
    value = data.get(name)
    return value if isinstance(value, dict) else {}


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) else None


def _integer(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None
