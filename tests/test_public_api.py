"""``gpuwhy.<mode>()`` and ``gpuwhy <mode>`` call the same mode function: for the same
input they make the same record (all but when it was made, how long that took and, for
an object audited in hand, the line that handed it over). Real subprocesses, the real
TensorFlow."""

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import gpuwhy

GPUWHY = str(Path(sys.executable).with_name("gpuwhy"))


def _command_record(*args: str, out: Path, ignore: tuple[str, ...] = ()) -> dict:
    """The record of ``gpuwhy ARGS``, run with this process's environment (a check
    records the TF_* variables it sees)."""
    result = subprocess.run(
        [GPUWHY, *args, "--json", str(out)], capture_output=True, text=True, timeout=300
    )
    assert result.returncode in (0, 1), result.stderr
    return _comparable(json.loads(out.read_text()), ignore)


def _comparable(value: Any, ignore: tuple[str, ...] = ()) -> Any:
    """The record less its time of creation and the ``ignore`` keys, at any depth."""
    if isinstance(value, dict):
        return {
            key: _comparable(item, ignore)
            for key, item in value.items()
            if key != "created" and key not in ignore
        }
    if isinstance(value, list):
        return [_comparable(item, ignore) for item in value]
    return value


def test_check_and_gpuwhy_check_make_the_same_record(tmp_path):
    """An interpreter that cannot run: the same findings, facts and verdict, in seconds.
    The function is called from a fresh Python too, so that neither process holds a GPU
    (the other test's TensorFlow would be one more process on it); what a GPU reads
    from moment to moment is left out."""
    python = "/bin/false"
    ignore = ("memory_used_bytes", "utilization_percent", "processes")
    call = f"import gpuwhy; print(gpuwhy.check(python={python!r}, timeout=30).to_json())"
    called = subprocess.run(
        [sys.executable, "-c", call], capture_output=True, text=True, timeout=300
    )
    assert called.returncode == 0, called.stderr
    from_function = _comparable(json.loads(called.stdout), ignore)
    from_command = _command_record(
        "check", "--python", python, "--timeout", "30", out=tmp_path / "check.json", ignore=ignore
    )
    assert from_function == from_command
    assert from_function["environment"]["tensorflow"]["import_ok"] is False


def test_audit_of_a_keras_model_and_gpuwhy_audit_of_its_file_make_the_same_record(tmp_path):
    """A model's forward pass: the object in hand and the file it was saved to."""
    keras = pytest.importorskip("keras")
    path = tmp_path / "tiny.keras"
    keras.Sequential([keras.Input((3,)), keras.layers.Dense(2)]).save(path)
    model = keras.models.load_model(path, compile=False)
    ignore = ("seconds", "location", "locations")  # this test's line, for the object
    from_function = _comparable(json.loads(gpuwhy.audit(model).to_json()), ignore)
    from_command = _command_record("audit", str(path), out=tmp_path / "audit.json", ignore=ignore)
    assert from_function == from_command
    assert from_function["placement"]["functions"]
