"""Heap censuses name only the program's containers: what TensorFlow keeps as it traces
(a tf.function's captures, rebuilt at each trace) and the locals of a library's running
function are not the program's to change; a list the program hands to a library is
named by the program's own frame that holds it."""

import sys

import pytest

from gpuwhy.collect.inprocess.heap_census import HeapCensus, MiB
from tests.collect.test_heap_census import census_while

LIBRARY_SOURCE = """\
def fill(into, n, started, done):
    for i in range(n):
        into.append([i] * 4)
    started.set()
    done.wait(30)


def keep_own(n, started, done):
    own = []
    for i in range(n):
        own.append([i] * 4)
    started.set()
    done.wait(30)
"""


@pytest.fixture
def library(tmp_path):
    """A package installed in a site-packages folder, imported."""
    folder = tmp_path / "site-packages" / "census_lib"
    folder.mkdir(parents=True)
    (folder / "__init__.py").write_text(LIBRARY_SOURCE)
    sys.path.insert(0, str(folder.parent))
    try:
        import census_lib

        yield census_lib
    finally:
        sys.path.remove(str(folder.parent))
        sys.modules.pop("census_lib", None)


def test_a_library_function_s_own_local_is_not_named(library):
    census = census_while(library.keep_own, 300)
    assert [g for g in census.growing() if g.name == "own"] == []


def hand_to_library(library, n, started, done):
    kept = []
    library.fill(kept, n, started, done)


def test_a_list_handed_to_a_library_is_named_by_the_program_s_frame(library):
    census = census_while(hand_to_library, library, 300)
    (grown,) = [g for g in census.growing() if g.length_last == 300]
    assert (grown.name, grown.holder) == ("kept", "local of hand_to_library()")


class Keeper:
    pass


def test_what_tensorflow_keeps_as_a_function_traces_is_not_named():
    tf = pytest.importorskip("tensorflow")
    census = HeapCensus(t0=0.0)
    census.take(0.0, 0)
    keeper = Keeper()
    keeper.weights = [tf.Variable(tf.ones([4])) for _ in range(40)]

    @tf.function
    def total(x):
        return x + tf.add_n([tf.reduce_sum(w) for w in keeper.weights])

    for i in range(3):
        total(tf.constant(float(i)))
    census.take(1.0, 64 * MiB)
    grown = census.growing()
    # TF's captures list (FunctionCaptures._cached_by_val_capture_tuples), the
    # ConcreteFunction's captured inputs: 40 each, none of them the program's
    assert [g.holder for g in grown if "site-packages" in (g.where or "")] == []
    assert [(g.name, g.holder, g.length_last) for g in grown] == [
        ("weights", "attribute of Keeper", 40)  # the program's own
    ]
