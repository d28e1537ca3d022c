"""Section ``input_fixes``: the pipelines ``gpuwhy fix --input`` rewrote with the fixes
that cannot change their elements, and what the rewrite measured.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class PipelineRate:
    """Elements per second over the timed passes of one pipeline (median, slowest and
    fastest pass)."""

    median: float
    min: float
    max: float
    passes: int
    elements_per_pass: int
    # the first timed pass's rate: where the pipeline caches, the pass that fills the
    # cache (the others read it)
    first: float | None = None


@dataclass(frozen=True)
class PipelineChange:
    """One fix gpuwhy applied to a rewritten pipeline, with the code that makes it stay."""

    kind: str  # parallel-map | parallel-interleave | cache | prefetch |
    # parallel-reads | any-order
    stage: str  # the transformation as written: "map(parse)"
    location: str | None  # file:line where the user wrote it
    code: str  # what to write there
    why: str
    source_line: str | None = None  # that line, as written


@dataclass(frozen=True)
class InputFix:
    """One pipeline rewritten with the fixes that cannot change its elements, checked and
    timed against the original and the ideal (the original's output cached in memory)."""

    dataset: str  # for people: "dataset created at train.py:75"
    location: str | None = None  # where the final dataset was built
    iterated_at: tuple[str, ...] = ()
    iterators: int = 0  # iterators the script made over it (0: not counted)
    before: PipelineRate | None = None
    after: PipelineRate | None = None
    ideal: PipelineRate | None = None
    gap_closed: float | None = None  # (after - before) / (ideal - before)
    speedup: float | None = None  # after / before
    same_elements: bool | None = None  # None: not compared
    elements_checked: str = ""  # how the elements were compared
    changes: tuple[PipelineChange, ...] = ()
    left_alone: tuple[str, ...] = ()  # "file:line stage: why not"
    refused: str | None = None  # why the rewrite was not kept
    worth_it: bool = True  # False: measured no faster than the original
    error: str | None = None  # the pipeline itself failed
    notes: tuple[str, ...] = ()


@dataclass(frozen=True)
class InputFixFacts:
    """Section ``input_fixes``: what ``gpuwhy fix --input`` rewrote and measured."""

    fixes: tuple[InputFix, ...] = ()
    keep_order: bool = True
    library_only: tuple[str, ...] = ()  # iterated datasets a library built: not optimised
    views: tuple[str, ...] = ()  # "created at a.py:3, iterated at a.py:9": views of one above
    stopped_early: bool = False  # --stop-early ended the script at its first iterator
