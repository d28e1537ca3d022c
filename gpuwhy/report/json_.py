"""The JSON report: the run record itself (schema 1)."""

from gpuwhy.record import RunRecord
from gpuwhy.report.base import Renderer


class JsonRenderer(Renderer):
    name = "json"
    file_extension = "json"

    def render(self, record: RunRecord) -> str:
        return record.to_json() + "\n"
