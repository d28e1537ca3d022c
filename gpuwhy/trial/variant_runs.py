"""One run of one variant of the program: a fresh working copy with the variant's
edits, then a bounded ``gpuwhy run`` of it in a child process (``gpuwhy.trial.child``),
its output kept in files beside the copy, its record read back.

A variant that does not end is stopped at its time limit (SIGTERM, then SIGKILL): three
times the original's bounded run, so a fix that hangs costs a bounded amount.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass

from gpuwhy.record import Record, RecordError
from gpuwhy.trial import workspace
from gpuwhy.trial.source_edits import Edit

SEED = 0
GRACE_S = 10.0


@dataclass(frozen=True)
class VariantRun:
    """How one run of a variant went, and what it left."""

    variant: str  # "original", or the fix's name
    status: int | None  # the child's exit status (None: stopped at the time limit)
    seconds: float  # wall time of the whole child
    record: Record | None  # its gpuwhy record (None: none was written)
    stdout: str  # the program's printed output (for the values a custom loop prints)
    results_path: str  # the Keras logs the child kept (JSON lines)
    error: str | None  # why it failed, one line (the exception's last line)
    timed_out: bool = False
    copy: str = ""  # where the copy of the program's tree was (its paths in the record)
    root: str = ""  # the user's folder it copied


def run_variant(
    variant: str,
    script: str,
    args: Sequence[str],
    edits: Sequence[Edit],
    *,
    parent: str,
    bound_s: float,
    limit_s: float | None,
    extra: Sequence[str] = (),
) -> VariantRun:
    cwd = os.getcwd()
    ws = workspace.make(script, cwd, parent, prefix=_slug(variant))
    ws.write_edits(edits)
    out = ws.path + ".out"
    os.makedirs(out, exist_ok=True)
    record_path = os.path.join(out, "record.json")
    results_path = os.path.join(out, "results.jsonl")
    command = [
        sys.executable,
        "-m",
        "gpuwhy",
        "run",
        "--trial-results",
        results_path,
        "--trial-seed",
        str(SEED),
        "--json",
        record_path,
        "--stop-after",
        f"{bound_s:g}",
        "-o",
        os.path.join(out, "report.txt"),
        *extra,
        ws.mapped(script),
        *args,
    ]
    env = dict(os.environ, PYTHONHASHSEED=str(SEED), PYTHONUNBUFFERED="1")
    start = time.monotonic()
    with (
        open(os.path.join(out, "stdout.txt"), "wb") as so,
        open(os.path.join(out, "stderr.txt"), "wb") as se,
    ):
        child = subprocess.Popen(
            command,
            cwd=ws.mapped(cwd),
            stdout=so,
            stderr=se,
            stdin=subprocess.DEVNULL,
            env=env,
            start_new_session=True,
        )
        timed_out = False
        try:
            status: int | None = child.wait(timeout=limit_s)
        except subprocess.TimeoutExpired:
            timed_out = True
            status = None
            _stop(child)
        except BaseException:
            _stop(child)
            raise
    seconds = time.monotonic() - start
    stdout = _read(os.path.join(out, "stdout.txt"))
    record = _record(record_path, ws.path, ws.root)
    error = None
    if timed_out:
        error = f"still running at {limit_s:.0f} s (3x the original's run): stopped"
    elif (
        record is not None
        and record.facts.program is not None
        and record.facts.program.ended == "exception"
    ):
        error = record.facts.program.error
    elif status != 0:  # no record, or one of a program that exited (argparse's usage error)
        error = _last_line(_read(os.path.join(out, "stderr.txt"))) or f"exit status {status}"
    ws.remove()
    return VariantRun(
        variant,
        None if timed_out else status,
        seconds,
        record,
        stdout,
        results_path,
        error,
        timed_out,
        copy=ws.path,
        root=ws.root,
    )


def _slug(variant: str) -> str:
    """A folder name that says which variant ran there: ``original-``, ``fix-train_step-``."""
    words = re.sub(r"[^A-Za-z0-9_]+", "-", variant).strip("-")[:40]
    return (words or "variant") + "-"


def _stop(child: subprocess.Popen) -> None:
    """SIGTERM to the child's process group (the run writes its report), SIGKILL after."""
    for sig, wait in ((signal.SIGTERM, GRACE_S), (signal.SIGKILL, GRACE_S)):
        try:
            os.killpg(child.pid, sig)
        except (ProcessLookupError, PermissionError):
            return None
        try:
            child.wait(timeout=wait)
            return None
        except subprocess.TimeoutExpired:
            continue
    return None


def _read(path: str) -> str:
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.read()
    except OSError:
        return ""


def _record(path: str, copy: str, root: str) -> Record | None:
    """The run's record, with the copy's paths written as the user's (its findings then
    point at the user's files, as a run of the original would)."""
    if not os.path.exists(path):
        return None
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
        return Record.from_dict(
            json.loads(text.replace(json.dumps(copy)[1:-1], json.dumps(root)[1:-1]))
        )
    except (RecordError, OSError, ValueError, KeyError, TypeError):
        return None


# TensorFlow's and absl's own log lines ("E0000 00:00:... cuda_platform.cc:52] failed
# call to cuInit ..."): never the program's error, whatever they say
_LOG_LINE = re.compile(r"^(?:[IWEF]\d{4} \d\d:\d\d:\d\d|WARNING: All log messages before absl)")


def _last_line(text: str) -> str | None:
    """The line of a program's stderr that says why it ended: the last error or
    exception line (argparse's ``train.py: error: ...`` included) that is not a log line
    of TensorFlow's, else its last line."""
    lines = [
        line.strip() for line in text.splitlines() if line.strip() and not _LOG_LINE.match(line)
    ]
    errors = [
        line for line in lines if "Error" in line or "Exception" in line or ": error:" in line
    ]
    found = errors or lines
    return found[-1] if found else None
