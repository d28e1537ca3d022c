"""What reading a capture raises, importable without the reader (and its numpy): the
commands and the run's collector catch these before they need the reader itself."""

from __future__ import annotations


class FormatError(ValueError):
    """The file is not an XSpace capture (or is cut short)."""
