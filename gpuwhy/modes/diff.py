"""``gpuwhy diff BEFORE.json AFTER.json``: two saved records (of ``run``, ``watch`` or
``merge``) compared, the function both the command and ``gpuwhy.compare()`` call."""

from __future__ import annotations

from pathlib import Path

from gpuwhy.comparison import Comparison, compare
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


def diff(before: Record | str | Path, after: Record | str | Path) -> Comparison:
    """The two records (or the records at these paths) compared. Raises RecordError for
    one that cannot be read (its message names the file)."""
    (b, b_name), (a, a_name) = read(before), read(after)
    return compare(b, a, names=(b_name, a_name))
