"""``gpuwhy report CAPTURE``: an XProf capture (``*.xplane.pb``, or a TensorBoard log
directory holding ``plugins/profile/<run>/``) from TensorFlow or JAX, diagnosed by the same
rules, verdict and reports as a live run; every figure in it measured by the profiler."""

from __future__ import annotations

from pathlib import Path

from gpuwhy.collect.capture.errors import FormatError
from gpuwhy.collect.capture.files import CaptureNotFound, capture_files, is_capture, other_runs
from gpuwhy.facts import Facts
from gpuwhy.record import Record

__all__ = ["CaptureError", "diagnose_capture", "is_capture"]


class CaptureError(ValueError):
    """A capture that cannot be found or read: the message says which and why."""


def diagnose_capture(path: str | Path, run: str | None = None) -> Record:
    """The record of the capture at ``path`` (``run``: a run's folder under plugins/profile)."""
    try:
        files = capture_files(path, run)
    except CaptureNotFound as error:
        raise CaptureError(str(error)) from None
    others = other_runs(path, run)
    note = (
        f"read the newest of {len(others) + 1} profile runs ({files[0].parent.name}); "
        f"--run NAME for another: {', '.join(others[-3:])}"
        if others and run is None
        else None
    )
    from gpuwhy.collect.capture.analysis import read_capture  # numpy: only for a capture

    try:
        capture = read_capture(files, note)
    except FormatError as error:
        raise CaptureError(f"{', '.join(map(str, files))}: {error}") from None
    except OSError as error:
        raise CaptureError(f"cannot read {path}: {error.strerror or error}") from None
    return Record.diagnose("capture", Facts(capture=capture))
