"""The run record's JSON Schema and the words a record that breaks it is refused with.

published.py: the schema's number, run.schema.json and its validator; errors.py: what
is wrong with a file, one short line (``gpuwhy report bad.json``).
"""

from gpuwhy.schema.errors import refusal, validation_errors
from gpuwhy.schema.published import SCHEMA_VERSION, load

__all__ = ["SCHEMA_VERSION", "load", "refusal", "validation_errors"]
