"""``gpuwhy diff BEFORE.json AFTER.json``: two saved records (of ``run``, ``watch`` or
``merge``) compared, the function both the command and ``gpuwhy.compare()`` call."""

from __future__ import annotations

from pathlib import Path

from gpuwhy.comparison import Comparison, compare
from gpuwhy.record import Record


def read(record: Record | str | Path) -> tuple[Record, str]:
    """A record and the name the comparison calls it by (its path, as given)."""
    if isinstance(record, Record):
        return record, f"a {record.command} record of {record.created}"
    return Record.load(record), str(record)


def diff(before: Record | str | Path, after: Record | str | Path) -> Comparison:
    """The two records (or the records at these paths) compared. Raises RecordError for
    one that cannot be read (its message names the file)."""
    (b, b_name), (a, a_name) = read(before), read(after)
    return compare(b, a, names=(b_name, a_name))
