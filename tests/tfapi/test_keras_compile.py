"""gpuwhy.tfapi.keras_hooks.install_compile against the installed Keras."""

from __future__ import annotations

import pytest

tf = pytest.importorskip("tensorflow")

from gpuwhy.tfapi import keras_hooks  # noqa: E402 - after the importorskip
from tests import markers  # noqa: E402

at = markers.marker_lines(__file__)


def _compiles(*compile_kwargs: dict) -> list[tuple]:
    keras = pytest.importorskip("keras")
    seen: list[tuple] = []
    patches = keras_hooks.install_compile(lambda *record: seen.append(record))
    try:
        model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(1)])
        for kwargs in compile_kwargs:
            model.compile(optimizer="sgd", loss="mse", **kwargs)  # @compile
    finally:
        for patch in reversed(patches):
            patch.undo()
    return seen


def test_a_compile_told_to_run_eagerly_is_located_at_the_program_s_line():
    """fit's eager ops are Keras' layers called from fit's line; the cause is the compile
    given run_eagerly=True (a tutorial's), which launch.eager-ops points at."""
    (record,) = _compiles({"run_eagerly": True})
    assert record[3] == at("compile")
    assert [r[3] for r in _compiles({}, {"run_eagerly": False})] == [None, None]
