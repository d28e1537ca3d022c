"""Which of the script's modules gpuwhy's own path would resolve to another file: the
report swaps those (and only those) out while it imports (gpuwhy.modes.run.script_modules).
The end-to-end cases (a script's secrets.py, random.py) are in tests/test_run_reliability.py."""

import os

import pytest

from gpuwhy.modes.run import script_modules
from gpuwhy.modes.run.script_modules import _resolves_elsewhere


def _module(directory, name):
    path = directory / f"{name}.py"
    path.write_text("VALUE = 1\n")
    return str(path)


def test_a_module_found_where_the_script_found_it_is_not_elsewhere_and_costs_no_path_resolution(
    tmp_path, monkeypatch
):
    origin = _module(tmp_path, "gpuwhy_probe_same")

    def no_realpath(path, *args, **kwargs):
        raise AssertionError(f"realpath({path!r}) for a module found at its own path")

    # a TF program has ~90 top-level modules, each looked up after its last line
    monkeypatch.setattr(script_modules.os.path, "realpath", no_realpath)
    assert _resolves_elsewhere("gpuwhy_probe_same", origin, [str(tmp_path)]) is False


def test_the_same_file_reached_through_a_link_is_not_elsewhere(tmp_path):
    real = tmp_path / "real"
    real.mkdir()
    origin = _module(real, "gpuwhy_probe_linked")
    link = tmp_path / "link"
    os.symlink(real, link, target_is_directory=True)
    assert _resolves_elsewhere("gpuwhy_probe_linked", origin, [str(link)]) is False


@pytest.mark.parametrize("first", ["script", "gpuwhy"])
def test_another_file_of_the_same_name_is_elsewhere_only_where_it_comes_first_on_gpuwhys_path(
    tmp_path, first
):
    script_dir, gpuwhy_dir = tmp_path / "script", tmp_path / "gpuwhy"
    script_dir.mkdir()
    gpuwhy_dir.mkdir()
    origin = _module(script_dir, "gpuwhy_probe_shadow")
    _module(gpuwhy_dir, "gpuwhy_probe_shadow")
    path = [str(gpuwhy_dir), str(script_dir)]
    if first == "script":
        path.reverse()
    assert _resolves_elsewhere("gpuwhy_probe_shadow", origin, path) is (first == "gpuwhy")


def test_a_name_gpuwhys_path_does_not_find_is_not_elsewhere(tmp_path):
    origin = _module(tmp_path, "gpuwhy_probe_missing")
    assert _resolves_elsewhere("gpuwhy_probe_missing", origin, [str(tmp_path / "empty")]) is False
