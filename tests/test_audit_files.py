"""`gpuwhy audit PATH` on files that are not models: one line naming the file and what is
wrong with it, exit status 2, never a traceback and never Keras's "File not found" for a
file that exists (issue #12). Real subprocesses, real broken files."""

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from gpuwhy.modes.audit import AuditError, audit_path

GPUWHY = str(Path(sys.executable).with_name("gpuwhy"))
KERAS_NOT_ZIP = "not a valid Keras archive (a .keras file is a zip)"
H5_NOT_HDF5 = "not a valid HDF5 file (a .h5 Keras model is HDF5)"


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> Path:
    """One directory of broken model files, built once: a real tiny Keras model is saved
    and then damaged, the rest are written by hand."""
    keras = pytest.importorskip("keras")
    root = tmp_path_factory.mktemp("audit-files")
    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2)])
    model.save(root / "good.keras")
    model.save(root / "good.h5")
    whole = (root / "good.keras").read_bytes()
    (root / "truncated.keras").write_bytes(whole[: len(whole) // 2])
    (root / "text.keras").write_text("this is not a model\n")
    (root / "empty.keras").write_bytes(b"")
    (root / "text.h5").write_text("not hdf5 either\n")
    (root / "plain_dir").mkdir()
    (root / "plain_dir" / "notes.txt").write_text("no model here")
    (root / "corrupt_sm").mkdir()
    (root / "corrupt_sm" / "saved_model.pb").write_bytes(b"\xff\xff\xff garbage, not a protobuf")
    (root / "empty_sm").mkdir()
    (root / "empty_sm" / "saved_model.pb").write_bytes(b"")
    (root / "h5_named.keras").write_bytes((root / "good.h5").read_bytes())
    (root / "zip_named.h5").write_bytes(whole)
    with zipfile.ZipFile(root / "other_zip.keras", "w") as archive:
        archive.writestr("readme.txt", "a zip, but not a Keras archive")
    return root


# What each broken file is called in the one error line.
CLI_CASES = {
    "text.keras": f"{KERAS_NOT_ZIP}: it is a text file",
    "truncated.keras": f"{KERAS_NOT_ZIP}: it starts like a zip but has no zip directory",
    "empty.keras": f"{KERAS_NOT_ZIP}: the file is empty (0 bytes)",
    "text.h5": f"{H5_NOT_HDF5}: it is a text file",
    "plain_dir": "is a directory but not a SavedModel (no saved_model.pb)",
    "corrupt_sm": "not a valid SavedModel: saved_model.pb is corrupt",
}
IN_PROCESS_CASES = {
    "h5_named.keras": f"{KERAS_NOT_ZIP}: it is an HDF5 file (a legacy Keras model? name it .h5)",
    "zip_named.h5": f"{H5_NOT_HDF5}: it is a zip (a .keras archive? name it .keras)",
    "other_zip.keras": "not a valid Keras archive: the zip has no config.json (it holds readme.txt)",
    "empty_sm": "not a valid SavedModel: saved_model.pb is empty (0 bytes)",
    "empty_sm/saved_model.pb": "pass the SavedModel's directory",
}


@pytest.mark.parametrize("name", CLI_CASES)
def test_cli_says_what_is_wrong_in_one_line(files, name):
    """The real command a user types, with a relative path: exit 2 and one
    `gpuwhy: error:` line that starts with that path and says what the file is."""
    result = subprocess.run(
        [GPUWHY, "audit", name], check=False, capture_output=True, text=True, timeout=300, cwd=files
    )
    errors = [line for line in result.stderr.splitlines() if line.startswith("gpuwhy:")]
    assert result.returncode == 2, result.stderr
    assert len(errors) == 1, result.stderr
    assert errors[0].startswith(f"gpuwhy: error: {name}") and CLI_CASES[name] in errors[0], (
        result.stderr
    )
    assert "Traceback" not in result.stderr and "File not found" not in result.stderr
    assert result.stdout == ""


@pytest.mark.parametrize("name", IN_PROCESS_CASES)
def test_audit_path_names_the_file_and_the_problem(files, name):
    """The same checks in-process, for the mix-ups a user makes (a file saved under the
    other extension, a zip of something else, the .pb instead of its directory)."""
    path = files / name
    with pytest.raises(AuditError) as caught:
        audit_path(path)
    message = str(caught.value)
    assert (
        message.startswith(str(path)) and IN_PROCESS_CASES[name] in message and "\n" not in message
    )


def test_the_real_files_still_audit(files):
    """The checks refuse only broken files: the undamaged model loads and is audited."""
    for name in ("good.keras", "good.h5"):
        assert audit_path(files / name).facts.placement.functions


def test_a_saved_model_projected_onto_a_named_gpu_with_a_batch(files):
    """`gpuwhy audit --target T4 --batch 256`: the unknown batch dimension sized."""
    unsized = audit_path(files / "good.keras", target="T4").derived.projection
    sized = audit_path(files / "good.keras", target="T4", batch=256).derived.projection
    assert unsized.gpu == sized.gpu == "T4"
    assert unsized.tensor_ops_unsized == unsized.tensor_ops  # no batch: FLOPs unknown
    assert any("left out" in note for note in unsized.notes)
    assert sized.tensor_ops_unsized == 0 and sized.batch == 256
    assert sized.input_wait_fraction is None  # an audit runs no input pipeline
    assert sized.step_s > 0
