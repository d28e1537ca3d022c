"""Which frames are a library's: by the folder a package was imported from, so that a
user's project in a folder named like a library is still the user's code."""

from __future__ import annotations

import os
import sys
import types

import keras
import numpy
import tensorflow as tf

from gpuwhy.tfapi.graph_ops import is_library_file


def test_the_imported_libraries_are_libraries():
    for module in (tf, keras, numpy):
        assert is_library_file(module.__file__)
    assert is_library_file(os.__file__)  # the standard library


def test_a_project_in_a_folder_named_keras_is_the_users(tmp_path):
    for name in ("keras", "tensorflow", "numpy"):
        script = tmp_path / "projects" / name / "train.py"
        assert not is_library_file(str(script)), script


def test_an_installed_package_folder_is_a_library_even_before_its_import():
    assert is_library_file("/usr/lib/python3/dist-packages/keras/src/models/model.py")
    assert is_library_file("/venv/lib/python3.11/site-packages/tree/__init__.py")


def test_any_installed_package_is_a_library():
    """matplotlib's, cycler's lines (a GC pause a figure's allocation set off) are no
    place the program can change: its own line that called them is."""
    assert is_library_file("/venv/lib/python3.11/site-packages/matplotlib/figure.py")
    assert is_library_file("/venv/lib/python3.11/site-packages/cycler/__init__.py")
    assert is_library_file("/venv/lib/python3.11/site-packages/six.py")


def test_an_installed_package_is_the_users_where_the_script_run_is_in_it(monkeypatch):
    main = types.ModuleType("__main__")
    main.__file__ = "/venv/lib/python3.11/site-packages/mytrainer/main.py"
    monkeypatch.setitem(sys.modules, "__main__", main)
    assert not is_library_file("/venv/lib/python3.11/site-packages/mytrainer/loop.py")
    assert not is_library_file("/venv/lib/python3.11/site-packages/mytrainer/data/read.py")
    assert is_library_file("/venv/lib/python3.11/site-packages/mytrainer_extras/x.py")
    assert is_library_file("/venv/lib/python3.11/site-packages/matplotlib/figure.py")
    assert is_library_file("/venv/lib/python3.11/site-packages/keras/src/models/model.py")


def test_a_notebook_cell_is_the_users_and_the_notebook_machinery_a_library():
    assert not is_library_file("<ipython-input-3-8f2a61c0de45>")  # IPython's cell
    assert not is_library_file("/tmp/ipykernel_4242/1593032386.py")  # ipykernel's cell
    assert is_library_file("<string>")  # other generated code stays out
    assert is_library_file("/venv/lib/python3.11/site-packages/IPython/core/interactiveshell.py")
    assert is_library_file("/venv/lib/python3.11/site-packages/ipykernel/ipkernel.py")
