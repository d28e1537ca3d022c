"""A fix gpuwhy can try: the finding it answers, what it changes, and the edits that
make it, read from the run's facts and the program's own source."""

from __future__ import annotations

import ast
import os
from dataclasses import dataclass, field

from gpuwhy.trial.source_edits import Edit, lines_of, parse


@dataclass(frozen=True)
class FixCandidate:
    """One way to fix one finding, as edits of the user's files."""

    finding: str  # the finding's id
    fix: str  # what it does, for people: "train_step in @tf.function"
    edits: tuple[Edit, ...]
    location: str | None = None  # file:line of the code it changes (the first edit)
    # its effect is on the GPU (placement, XLA fusion on the device, tensor cores): on a
    # machine without one, only whether it runs and computes the same is measured here
    device_effect: bool = False
    note: str | None = None  # what the person pasting it should know
    # how far its values may differ from the original's, relative, and why where wider
    # than the default (a precision change draws other initial weights from one seed)
    tolerance: float | None = None
    tolerance_why: str | None = None
    by_mean: bool = False  # compare each quantity's mean, not each value (same_results)
    # judged by the training loop's wall time per step, not the steps': what it changes
    # runs between them (a Keras call around each batch), or it makes other steps
    # (fit's batches become train_on_batch's calls)
    by_loop_time: bool = False
    # judged by the program's own run time: what it changes runs outside the training
    # loop (a VAE's one-batch predict() calls over a grid after fit)
    by_program_time: bool = False
    # only what the program prints is compared: the fix changes what marks the other
    # sources. A predict() made predict_on_batch() takes away the dataset reads at whose
    # 2nd, 6th and 21st the variables are read (they then fall at other points of the
    # two runs); a fit() made train_on_batch() writes no Keras logs
    printed_only: bool = False
    # printed lines that say what the fix changes by design, not what the program
    # computes (a pattern of their text): a retracing fix ends the traces a program that
    # prints ``train_step.experimental_get_tracing_count()`` counts (TF's tf.function
    # guide does), and "traces: 1" against "traces: 256" refused a fix 40x faster
    not_results: str | None = None


@dataclass(frozen=True)
class NotTried:
    """A finding with a fix gpuwhy cannot apply to this program, and why."""

    finding: str
    why: str


def location_parts(location: str | None) -> tuple[str, int] | None:
    """``("/x/train.py", 22)`` for ``"/x/train.py:22"`` (a relative path is the working
    directory's, as records write them), the path absolute: one file, one name."""
    if not location or ":" not in location:
        return None
    path, _, line = location.rpartition(":")
    return (os.path.abspath(path), int(line)) if line.isdigit() else None


@dataclass(frozen=True)
class SourceAt:
    """A finding's location in the program's own files, with the file as read."""

    path: str
    line: int
    source: str
    lines: list[str]
    tree: ast.Module


def source_at(location: str | None, files: SourceFiles) -> SourceAt | None:
    """The file and line of ``location`` where it is one of the program's own files
    that can be read (None: no location, a library's file, unreadable)."""
    where = location_parts(location)
    read = files.read(where[0]) if where is not None else None
    if where is None or read is None:
        return None
    return SourceAt(where[0], where[1], *read)


@dataclass
class SourceFiles:
    """The program's own files, read once each: their text, lines and syntax tree. Only
    files under ``root`` (the program's tree) may be edited: a location in a library is
    no place to fix."""

    root: str
    script: str  # the script's path (in the same tree)
    _cache: dict[str, tuple[str, list[str], ast.Module] | None] = field(default_factory=dict)

    def owns(self, path: str) -> bool:
        real = os.path.realpath(path)
        root = os.path.realpath(self.root)
        inside = os.path.commonpath([real, root]) == root
        return inside and "site-packages" not in real and os.path.isfile(real)

    def read(self, path: str) -> tuple[str, list[str], ast.Module] | None:
        if path not in self._cache:
            self._cache[path] = self._load(path)
        return self._cache[path]

    def _load(self, path: str) -> tuple[str, list[str], ast.Module] | None:
        if not self.owns(path):
            return None
        try:
            with open(path, encoding="utf-8", newline="") as f:  # its line endings kept
                source = f.read()
        except (OSError, UnicodeDecodeError):
            return None
        tree = parse(source, path)
        if tree is None:
            return None
        return source, lines_of(source), tree
