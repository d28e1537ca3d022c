"""Which frames are a library's: by the folder a package was imported from, so that a
user's project in a folder named like a library is still the user's code."""

from __future__ import annotations

import os

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


def test_a_user_package_installed_in_site_packages_is_not_a_library():
    assert not is_library_file("/venv/lib/python3.11/site-packages/mytrainer/loop.py")


def test_a_notebook_cell_is_the_users_and_the_notebook_machinery_a_library():
    assert not is_library_file("<ipython-input-3-8f2a61c0de45>")  # IPython's cell
    assert not is_library_file("/tmp/ipykernel_4242/1593032386.py")  # ipykernel's cell
    assert is_library_file("<string>")  # other generated code stays out
    assert is_library_file("/venv/lib/python3.11/site-packages/IPython/core/interactiveshell.py")
    assert is_library_file("/venv/lib/python3.11/site-packages/ipykernel/ipkernel.py")
