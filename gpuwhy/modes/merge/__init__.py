"""``gpuwhy merge DIR``: the records of a cluster's tasks (``gpuwhy run --out-dir DIR``
on every worker) read into one ``workers`` section (read.py: one record, leanly and
tolerantly; directory.py: the whole directory, who is missing, the findings once)."""

from gpuwhy.modes.merge.directory import carried_findings, merge_directory

__all__ = ["carried_findings", "merge_directory"]
