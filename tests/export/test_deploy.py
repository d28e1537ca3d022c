"""The files a platform team deploys: the alert rules pass `promtool test rules` (a real
promtool), the dashboard asks only for documented series, and docs/metrics.md documents
exactly the metrics gpuwhy publishes."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

from gpuwhy.collect.identity import GPU_LABELS
from gpuwhy.export.metrics import METRICS
from tests.export.conftest import binary

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
DASHBOARD = DEPLOY / "grafana" / "gpuwhy-dashboard.json"


def documented_series() -> set[str]:
    names = set()
    for m in METRICS:
        parts = ("bucket", "sum", "count") if m.kind == "histogram" else ("",)
        names |= {f"{m.name}_{p}" if p else m.name for p in parts}
    return names


def dashboard_expressions() -> list[str]:
    panels = json.loads(DASHBOARD.read_text())["panels"]
    return [target["expr"] for panel in panels for target in panel["targets"]]


def test_the_alert_rules_pass_promtool():
    promtool = binary("promtool", "PROMTOOL")
    rules = DEPLOY / "prometheus"
    check = subprocess.run([promtool, "check", "rules", "gpuwhy-alerts.yml"], cwd=rules,
                           capture_output=True, text=True)  # fmt: skip
    assert check.returncode == 0, check.stdout + check.stderr
    test = subprocess.run([promtool, "test", "rules", "gpuwhy-alerts.test.yml"], cwd=rules,
                          capture_output=True, text=True)  # fmt: skip
    assert test.returncode == 0, test.stdout + test.stderr
    assert "SUCCESS" in test.stdout


def test_the_dashboard_asks_for_documented_series_only():
    asked = {name for expr in dashboard_expressions() for name in re.findall(r"\bgpuwhy_\w+", expr)}
    assert asked and asked <= documented_series(), asked - documented_series()
    dcgm = {name for expr in dashboard_expressions() for name in re.findall(r"\bDCGM_\w+", expr)}
    assert dcgm == {"DCGM_FI_DEV_GPU_UTIL"}  # beside dcgm-exporter's panel, joined by label
    assert {"gpu", "Hostname"} <= set(GPU_LABELS) | {"Hostname"}


def test_the_metrics_page_documents_every_metric_exactly():
    readme = (ROOT / "docs" / "metrics.md").read_text()
    rows = re.findall(
        r"^\| `((?:gpuwhy|DCGM)_\w+)` \| (\w+) \| ([^|]*) \| ([^|]+) \|$", readme, re.M
    )
    documented = {
        name: (kind, tuple(re.findall(r"`(\w+)`", labels))) for name, kind, labels, _ in rows
    }
    assert documented == {m.name: (m.kind, m.labels) for m in METRICS}
