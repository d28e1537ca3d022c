"""Where a capture is: an ``*.xplane.pb`` file, a run folder holding them (one per host),
or a TensorBoard log directory holding ``plugins/profile/<run>/`` (the newest run, or the
one named)."""

from __future__ import annotations

from pathlib import Path

SUFFIX = ".xplane.pb"


class CaptureNotFound(ValueError):
    """No capture where the user pointed: the message says what was looked for."""


def is_capture(path: Path) -> bool:
    """Whether ``path`` names a capture (a file or a folder holding one), not a record."""
    if path.is_file():
        return path.name.endswith(SUFFIX)
    return path.is_dir() and bool(_runs(path) or list(path.glob(f"*{SUFFIX}")))


def capture_files(path: str | Path, run: str | None = None) -> list[Path]:
    """The capture files of one run: the file itself, the run folder's, or the log
    directory's newest run (``run``: a run's folder name under plugins/profile)."""
    where = Path(path)
    if where.is_file():
        if run is not None:
            raise CaptureNotFound(f"--run names a run of a log directory; {where} is a file")
        if not where.name.endswith(SUFFIX):
            raise CaptureNotFound(f"{where} is not an XProf capture (*{SUFFIX})")
        return [where]
    if not where.is_dir():
        raise CaptureNotFound(f"{where} does not exist")
    here = sorted(where.glob(f"*{SUFFIX}"))
    if here and run is None:
        return here
    runs = _runs(where)
    if not runs:
        raise CaptureNotFound(
            f"no capture in {where}: expected *{SUFFIX} files or plugins/profile/<run>/"
        )
    if run is not None:
        chosen = [r for r in runs if r.name == run]
        if not chosen:
            names = ", ".join(r.name for r in runs)
            raise CaptureNotFound(f"no run {run!r} in {where} (runs: {names})")
        return sorted(chosen[0].glob(f"*{SUFFIX}"))
    newest = max(runs, key=lambda r: (r.name, r.stat().st_mtime))
    return sorted(newest.glob(f"*{SUFFIX}"))


def other_runs(path: str | Path, run: str | None) -> list[str]:
    """The runs of a log directory besides the one read (the newest, or ``run``)."""
    where = Path(path)
    if not where.is_dir() or list(where.glob(f"*{SUFFIX}")):
        return []
    runs = sorted(_runs(where), key=lambda r: (r.name, r.stat().st_mtime))
    chosen = run or (runs[-1].name if runs else None)
    return [r.name for r in runs if r.name != chosen]


def _runs(where: Path) -> list[Path]:
    """The profile runs under ``where``: ``plugins/profile/<run>/``, or one folder down
    (Keras's TensorBoard callback writes under ``log_dir/train/``)."""
    candidates = [where / "plugins" / "profile", where / "profile", where]
    candidates += sorted(where.glob("*/plugins/profile"))
    runs: list[Path] = []
    for profile in candidates:
        if profile.is_dir() and (profile.name == "profile" or profile == where / "profile"):
            runs += [r for r in profile.iterdir() if r.is_dir() and any(r.glob(f"*{SUFFIX}"))]
    return runs
