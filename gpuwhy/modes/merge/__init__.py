"""``gpuwhy merge DIR``: the records of a cluster's tasks (``gpuwhy run --out-dir DIR``
on every worker) read into one ``workers`` section (read.py: one record, leanly and
tolerantly; directory.py: the whole directory, who is missing, the findings once), and
the record of them all (:func:`merge`)."""

from gpuwhy.facts import Facts
from gpuwhy.modes.merge.directory import MergeError, merge_directory
from gpuwhy.record import Record

__all__ = ["MergeError", "merge", "merge_directory"]


def merge(directory: str) -> Record:
    """One record for the task records in ``directory``: its ``workers`` section and the
    findings of the rules over it (raises :class:`MergeError` when the directory itself
    cannot be merged)."""
    return Record.diagnose("merge", Facts(workers=merge_directory(directory)))
