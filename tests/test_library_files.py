"""Which frames of a capture's Python tracer are a library's (gpuwhy/library_files.py):
the tracer gives a file's base name only, so a library's frame is known by an installed
file of that name that defines the function, or by the frameworks' own file names."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuwhy import library_files
from gpuwhy.library_files import is_library_frame


@pytest.mark.parametrize(
    ("function", "file"),
    [
        ("_on_train_batch_end", "callback_list.py"),  # Keras', known by name
        ("slice_and_convert_to_jax", "array_data_adapter.py"),
        ("fit", "trainer.py"),  # Keras' trainer.py defines fit (installed here)
        ("wait", "threading.py"),  # the standard library
        ("result", "_base.py"),  # concurrent/futures/_base.py
        ("read_capture", "analysis.py"),  # gpuwhy's own (its hooks run in the program)
        ("next", None),  # $builtins next: no file, the interpreter's
    ],
)
def test_libraries_frames(function, file):
    assert is_library_frame(function, file)


@pytest.mark.parametrize(
    ("function", "file"),
    [
        ("train", "jax_cpu_capture.py"),  # no installed file of that name
        ("train", "trainer.py"),  # Keras' trainer.py files define no train
    ],
)
def test_the_programs_frames(function, file):
    assert not is_library_frame(function, file)


def test_a_program_file_named_as_an_installed_one_is_its_own_unless_it_defines_the_same(
    tmp_path, monkeypatch
):
    installed = tmp_path / "site-packages" / "pygments" / "lexers" / "make.py"
    installed.parent.mkdir(parents=True)
    installed.write_text("class MakefileLexer:\n    def analyse_text(text):\n        pass\n")
    monkeypatch.setattr(library_files, "_installed_files", lambda: {"make.py": (str(installed),)})
    assert not is_library_frame("make_batches", "make.py")  # the program's make.py
    assert is_library_frame("analyse_text", "make.py")
    assert is_library_frame("MakefileLexer", "make.py")
    assert is_library_frame("<listcomp>", "make.py")  # no def to tell: the name decides


def test_the_frameworks_files_are_known_where_they_are_not_installed(monkeypatch):
    monkeypatch.setattr(library_files, "_installed_files", dict)
    assert is_library_frame("_on_train_batch_end", "callback_list.py")
    assert not is_library_frame("fit", "trainer.py")  # a program may name its file so


def test_installed_means_site_packages_not_a_project_installed_for_development():
    assert library_files._is_installed("/venv/lib/python3.11/site-packages/keras/src/x.py")
    assert library_files._is_installed("/usr/lib/python3/dist-packages/numpy/core.py")
    assert not library_files._is_installed(str(Path("/home/me/project/train.py")))
