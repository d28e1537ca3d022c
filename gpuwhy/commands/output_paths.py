"""Where gpuwhy writes its reports: checked before the user's program runs, never over
the user's own files, and never lost.

A training run can last hours, so every output path is judged *before* the script
starts (a directory, a parent that is a file, no permission, the same path named twice;
missing directories are made, as ``mkdir -p`` would), against the directory gpuwhy was started in (a script that calls
``os.chdir`` must not move the report). Paths that could hold the user's work are
refused: the script itself, the command's other inputs, and any existing file under the
script's directory that is not a previous gpuwhy output (a JSON run record, an HTML
report, an NVML recording, a text report). If a path that passed still cannot be written
when the run ends (the disk filled, a file now stands where its directory was), the report goes to a new
file in the temporary directory and gpuwhy says where, so it is never lost.
"""

from __future__ import annotations

import errno
import os
import stat
import tempfile
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from gpuwhy.json_input import loads

# The first line of a terminal report written with -o: the verdict's mark (report/terminal.py).
_VERDICT_MARKS = ("✓ ", "✗ ", "• ")
_SNIFF_BYTES = 64 * 1024


class OutputPathError(ValueError):
    """An output path refused before anything runs: one line, exit 2."""


@dataclass(frozen=True)
class Output:
    option: str  # how the user named it: --json, --html, -o, --record
    given: str  # as typed
    path: str  # absolute, against the directory gpuwhy started in


def plan_outputs(
    named: Iterable[tuple[str, str | None]],
    *,
    inputs: Iterable[str] = (),
    project_dir: str | None = None,
) -> dict[str, Output]:
    """The outputs by option, each checked; raises :class:`OutputPathError` for the first
    one that is refused.

    ``inputs``: files the command reads (the script, a saved record, a model) that no
    output may be. ``project_dir``: the script's directory; an existing file under it is
    overwritten only when it is a previous gpuwhy output.
    """
    protected = [os.path.abspath(p) for p in inputs if p]
    outputs: dict[str, Output] = {}
    for option, given in named:
        if not given:
            continue
        out = Output(option, given, os.path.abspath(given))
        _check_one(out, protected, project_dir)
        for other in outputs.values():
            if _same_file(other.path, out.path):
                raise OutputPathError(
                    f"{other.option} and {option} both name {given}: one would overwrite the "
                    "other; give each output its own path"
                )
        outputs[option] = out
    return outputs


def _check_one(out: Output, protected: list[str], project_dir: str | None) -> None:
    for path in protected:
        if _same_file(path, out.path):
            raise OutputPathError(
                f"{out.option} {out.given} is the command's own input "
                f"{path}: refusing to write a report over it"
            )
    if os.path.isdir(out.path):
        raise OutputPathError(f"cannot write {out.option} {out.given}: it is a directory")
    # A missing directory is made when the report is written (mkdir -p): the nearest
    # directory that exists decides whether that can work.
    existing = _nearest_existing(os.path.dirname(out.path))
    if not os.path.isdir(existing):
        raise OutputPathError(
            f"cannot write {out.option} {out.given}: {existing} is a file, not a directory"
        )
    if os.path.exists(out.path):
        if not os.access(out.path, os.W_OK):
            raise OutputPathError(f"cannot write {out.option} {out.given}: permission denied")
        if (
            project_dir
            and _is_under(out.path, project_dir)
            and _is_regular(out.path)
            and not is_gpuwhy_output(out.path)
        ):
            raise OutputPathError(
                f"{out.option} {out.given} already exists next to the script and is not a "
                "gpuwhy report: refusing to overwrite it (remove it or choose another path)"
            )
    elif not os.access(existing, os.W_OK | os.X_OK):
        raise OutputPathError(
            f"cannot write {out.option} {out.given}: the directory {existing} is not writable"
        )


def _nearest_existing(path: str) -> str:
    """``path`` or its closest ancestor that exists."""
    while not os.path.exists(path) and os.path.dirname(path) != path:
        path = os.path.dirname(path)
    return path


def _same_file(a: str, b: str) -> bool:
    if os.path.realpath(a) == os.path.realpath(b):
        return True
    try:
        return os.path.samefile(a, b)  # hard links, bind mounts
    except OSError:
        return False


def _is_under(path: str, directory: str) -> bool:
    real, top = os.path.realpath(path), os.path.realpath(directory)
    return os.path.commonpath([real, top]) == top


def _is_regular(path: str) -> bool:
    try:
        return stat.S_ISREG(os.stat(path).st_mode)
    except OSError:
        return False


def is_gpuwhy_output(path: str) -> bool:
    """Whether an existing file is something gpuwhy wrote: a JSON run record, an HTML
    report, an NVML recording (JSON lines), or a terminal report (starts with the
    verdict's mark). Only its first bytes are read."""
    try:
        with open(path, "rb") as f:
            head = f.read(_SNIFF_BYTES)
    except OSError:
        return False
    if not head.strip():
        return False
    text = head.decode("utf-8", errors="replace")
    if text.startswith(_VERDICT_MARKS):
        return True
    if '<meta name="generator" content="gpuwhy' in text:
        return True
    first_line = text.splitlines()[0].strip()
    if first_line.startswith("{"):
        if '"name": "gpuwhy"' in text or '"recorded_by": "gpuwhy' in first_line:
            return True
        try:  # a one-line record: gpuwhy run -f json
            data = loads(first_line, path)
        except ValueError:
            return False
        return isinstance(data, dict) and data.get("tool", {}).get("name") == "gpuwhy"
    return False


def write_or_divert(
    output: Output, write: Callable[[str], object], say: Callable[[str], None], suffix: str = ""
) -> str | None:
    """``write(path)`` at the planned path; if that fails now (the run changed the disk
    under it), at a new file in the temporary directory, and ``say`` where. Returns the
    path written, or None if neither could be."""
    try:
        os.makedirs(os.path.dirname(output.path), exist_ok=True)
        write(output.path)
        return output.path
    except OSError as first:
        reason = first.strerror or str(first)
    name = Path(output.path).name or "report"
    stem, ext = os.path.splitext(name)
    try:
        fd, fallback = tempfile.mkstemp(prefix=f"gpuwhy-{stem}-", suffix=ext or suffix)
        os.close(fd)
        write(fallback)
    except OSError as second:
        say(
            f"gpuwhy: error: cannot write {output.option} {output.given} ({reason}), nor a "
            f"copy in {tempfile.gettempdir()} ({second.strerror or second})"
        )
        return None
    say(
        f"gpuwhy: cannot write {output.option} {output.given} ({reason}); "
        f"wrote it to {fallback} instead"
    )
    return fallback


def write_whole(path: str, text: str) -> None:
    """``text`` at ``path`` whole or not at all: written to a temporary file beside it,
    then renamed over it, so a process killed while writing (a cluster stopping its
    workers) never leaves half a file under the final name."""
    directory = os.path.dirname(path) or "."
    fd, temporary = tempfile.mkstemp(prefix=f".{Path(path).name}.", suffix=".tmp", dir=directory)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(temporary, 0o644)  # mkstemp's 0600 would hide it from whoever merges
        os.replace(temporary, path)
    except BaseException:
        try:
            os.unlink(temporary)
        except OSError:
            pass
        raise


def write_task_record(
    text: str, directory: str, given: str, task: str, say: Callable[[str], None]
) -> str | None:
    """One task's record as ``DIRECTORY/<task>.json`` (``gpuwhy run --out-dir``), written
    whole; a file there that is not a gpuwhy output is left alone. Never raises: a
    record that cannot be written is one line through ``say`` (in the temporary
    directory instead where that works), and the worker goes on as without gpuwhy.
    Returns the path written, or None."""
    name = f"{task}.json"
    output = Output("--out-dir", os.path.join(given, name), os.path.join(directory, name))

    def write(path: str) -> None:
        if path == output.path and _is_regular(path) and not is_gpuwhy_output(path):
            raise OSError(errno.EEXIST, "a file there is not a gpuwhy record")
        write_whole(path, text)

    try:
        return write_or_divert(output, write, say, suffix=".json")
    except Exception as e:  # noqa: BLE001 - a worker must train on whatever happens here
        say(f"gpuwhy: error: cannot write --out-dir {output.given}: {type(e).__name__}: {e}")
        return None
