"""``gpuwhy diff BEFORE.json AFTER.json``: two saved records (of ``run``, ``watch`` or
``merge``) compared, or several a side; the function ``gpuwhy.diff()`` calls."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from gpuwhy.comparison import Comparison, compare_runs
from gpuwhy.record import Record, RecordError

COMPARED = ("run", "watch", "merge")


def read(record: Record | str | Path) -> tuple[Record, str]:
    """A record and the name the comparison calls it by (its path, as given). Raises
    RecordError, naming the file, for one that cannot be read or is not of a run."""
    if isinstance(record, Record):
        loaded, name = record, f"a {record.command} record of {record.created}"
    else:
        try:
            loaded, name = Record.load(record), str(record)
        except RecordError as e:
            message = str(e)
            raise RecordError(
                message if str(record) in message else f"{record}: {message}"
            ) from None
    if loaded.command not in COMPARED:
        raise RecordError(
            f"{name} is a gpuwhy {loaded.command} record: diff compares the records of "
            "run, watch and merge (they hold the steps and the GPU samples)"
        )
    return loaded, name


Given = Record | str | Path


def diff(before: Given | Sequence[Given], after: Given | Sequence[Given]) -> Comparison:
    """The two records (or the records at these paths) compared; or several a side (a
    list each), the intervals then from the variation between the runs. Raises
    RecordError for one that cannot be read (its message names the file)."""
    sides = [
        [read(r) for r in (side if isinstance(side, (list, tuple)) else [side])]
        for side in (before, after)
    ]
    return compare_runs(
        [r for r, _ in sides[0]],
        [r for r, _ in sides[1]],
        names=([n for _, n in sides[0]], [n for _, n in sides[1]]),
    )
