"""What ``gpuwhy run`` has imported when the script's first line runs: every module
imported before it is time every watched program pays (docs/speed.md), so the ones a
plain run never reads are imported where they are first used. A real ``gpuwhy run`` of
a script that looks at ``sys.modules`` (the script runs in gpuwhy's process)."""

import ctypes
import subprocess
import sys
from pathlib import Path

import pytest

import gpuwhy.comparison
import gpuwhy.export
from gpuwhy.collect.nvml import NVML_LIBRARY

GPUWHY = str(Path(sys.executable).with_name("gpuwhy"))

# the comparing (gpuwhy diff's), the metadata reader (a capture's frames), the HTTP
# client (dcgm-exporter's reads), the code highlighter (a report in colour only: 14 ms),
# the live metrics' exporters (only where --metrics-port, --metrics-push or
# --metrics-otlp asks for them: 3-5 ms before the first line)
NOT_AT_START = (
    "gpuwhy.comparison.pair",
    "gpuwhy.export.live",
    "gpuwhy.export.metrics",
    "gpuwhy.export.otlp",
    "gpuwhy.export.prometheus",
    "importlib.metadata",
    "http.client",
    "urllib.request",
    "rich.syntax",
    "pygments",
)


def test_a_run_starts_the_script_without_what_it_never_reads(tmp_path):
    script = tmp_path / "first_line.py"
    script.write_text(
        "import sys\n"
        f"print(sorted(m for m in {NOT_AT_START!r} if m in sys.modules))\n"
        "print('gate', 'gpuwhy.comparison.gate' in sys.modules)\n"
    )
    done = subprocess.run(
        [GPUWHY, "run", "--no-audit", "-o", str(tmp_path / "report.txt"), str(script)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    loaded, gate = done.stdout.splitlines()
    assert loaded == "[]"
    assert gate == "gate True"  # the check means something: the package itself was loaded


def test_every_name_of_the_comparison_package_is_there_when_asked():
    """Its names come from their modules at first use (PEP 562): each one of
    ``__all__`` has a module to come from, and comes."""
    assert sorted(gpuwhy.comparison._WHERE) == sorted(gpuwhy.comparison.__all__)
    for name in gpuwhy.comparison.__all__:
        value = getattr(gpuwhy.comparison, name)
        module = sys.modules[f"gpuwhy.comparison.{gpuwhy.comparison._WHERE[name]}"]
        assert value is getattr(module, name)
    namespace: dict = {}
    exec("from gpuwhy.comparison import *", namespace)
    assert set(gpuwhy.comparison.__all__) <= set(namespace)


def test_every_name_of_the_export_package_is_there_when_asked():
    """The exporters' names come from their modules at first use (PEP 562), as the
    comparison package's do: a run that publishes metrics gets the same objects."""
    assert sorted(gpuwhy.export._WHERE) == sorted(gpuwhy.export.__all__)
    for name in gpuwhy.export.__all__:
        value = getattr(gpuwhy.export, name)
        module = sys.modules[f"gpuwhy.export.{gpuwhy.export._WHERE[name]}"]
        assert value is getattr(module, name)
    with pytest.raises(AttributeError):
        gpuwhy.export.NotAName  # the attribute read is the test


def _nvml_loads() -> bool:
    try:
        ctypes.CDLL(NVML_LIBRARY)
    except OSError:
        return False
    return True


@pytest.mark.skipif(_nvml_loads(), reason="this machine has NVIDIA's driver library")
def test_a_run_on_a_machine_without_nvml_never_imports_its_binding(tmp_path):
    """Where the driver's library does not load, NVML cannot start: its binding (14-25 ms
    to import) is never imported, the script's run says why there are no GPU samples as
    before, and the record names the same error nvmlInit would."""
    script = tmp_path / "first_line.py"
    script.write_text("import sys\nprint('pynvml' in sys.modules)\n")
    record = tmp_path / "run.json"
    done = subprocess.run(
        [GPUWHY, "run", "--no-audit", "--json", str(record), str(script)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[0] == "False"
    assert "NVML: LibraryNotFound" in done.stderr  # the report: the program's output stays alone
    import json

    facts = json.loads(record.read_text())
    assert "LibraryNotFound" in json.dumps(facts)
