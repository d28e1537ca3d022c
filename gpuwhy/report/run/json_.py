"""The JSON report: the run record itself (schema 1)."""

from gpuwhy.record import Record
from gpuwhy.report.base import Renderer


class JsonRenderer(Renderer):
    name = "json"
    file_extension = "json"

    def render(self, record: Record) -> str:
        return record.to_json() + "\n"
