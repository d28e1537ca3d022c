"""A saved NVML recording (``gpuwhy watch --record PATH``) diagnosed again, anywhere:
``gpuwhy report RECORDING.jsonl`` replays its readings through the same sampler the live
``watch`` ran (so every conversion is today's) and diagnoses what it rebuilt as ``watch``
would. A recording made on a GPU machine is read on one without.

Recordings of any version-1 file stay readable: the program's outcome and the GPUs'
state before it started are in recordings made since ``watch`` kept them (the header's
``command`` and ``devices_before``, the last line's ``{"kind": "end"}``); older ones give
the GPU samples alone, and the report says only what those show.
"""

from __future__ import annotations

import json
import typing
from pathlib import Path
from typing import Any

from gpuwhy.collect.sampler import FORMAT, GpuSampler, RecordingError, ReplaySource
from gpuwhy.facts import Facts, GpuDevice, ProgramFacts, from_dict, to_dict
from gpuwhy.json_input import loads
from gpuwhy.record import Record

REPLAY_TIMEOUT_S = 120.0  # a day's recording replays in seconds


def is_recording(path: str | Path) -> bool:
    """Whether ``path`` starts with an NVML recording's header line."""
    return header_format(path) == FORMAT


def header_format(path: str | Path) -> str | None:
    """The ``format`` a JSON-lines file of gpuwhy's says on its first line (a recording,
    a peaks reading ...); None for anything else (a saved report is one JSON object)."""
    try:
        with open(path, encoding="utf-8") as f:
            first = loads(f.readline() or "null", str(path))
    except (OSError, UnicodeDecodeError, ValueError):
        return None
    found = first.get("format") if isinstance(first, dict) else None
    return found if isinstance(found, str) and first.get("kind") == "header" else None


def end_recording(path: str | Path, program: ProgramFacts) -> None:
    """The program's outcome, as the recording's last line (written after the sampler
    closed the file)."""
    line = {"kind": "end", **{k: to_dict(getattr(program, k)) for k in END_KEYS}}
    with open(path, "a", encoding="utf-8") as f:
        f.write(json.dumps(line) + "\n")


END_KEYS = ("ended", "exit_code", "error", "seconds")


def recording_facts(path: str | Path) -> Facts:
    """The facts the live ``watch`` had: its GPU samples replayed, and (where the file
    kept them) the program's outcome and the GPUs before it started.

    Raises :class:`RecordingError` for a file that is not a recording."""
    source = ReplaySource(path)
    sampler = GpuSampler(source=source, pids=source.watched_pids)
    sampler.start(0.0)
    if not sampler.wait(REPLAY_TIMEOUT_S):
        raise RecordingError(f"{path}: the replay did not end within {REPLAY_TIMEOUT_S:g} s")
    sampler.stop()
    header = source.header
    devices = header.get("devices_before")
    return Facts(
        devices=from_dict(tuple[GpuDevice, ...], devices) if isinstance(devices, list) else None,
        program=_program(header, _end_line(Path(path))),
        gpu_samples=sampler.facts(),
    )


def _end_line(path: Path) -> dict[str, Any] | None:
    """The recording's last line when it is the program's outcome (read from the end:
    a day's recording is not read twice)."""
    with open(path, "rb") as f:
        f.seek(0, 2)
        f.seek(max(0, f.tell() - 4096))
        tail = f.read().decode("utf-8", errors="replace").strip().splitlines()
    try:
        last = loads(tail[-1], str(path)) if tail else None
    except ValueError:
        return None
    return last if isinstance(last, dict) and last.get("kind") == "end" else None


def _program(header: dict[str, Any], end: dict[str, Any] | None) -> ProgramFacts | None:
    command = header.get("command")
    if end is None or not isinstance(command, list):
        return None
    hints = typing.get_type_hints(ProgramFacts)
    return ProgramFacts(
        command=tuple(str(c) for c in command),
        **{k: from_dict(hints[k], end.get(k)) for k in END_KEYS},
    )


def diagnose_recording(path: str | Path) -> Record:
    """The recording diagnosed as the live ``watch`` would."""
    return Record.diagnose("watch", recording_facts(path))
