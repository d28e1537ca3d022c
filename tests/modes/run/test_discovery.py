"""COLLECTORS is found, not listed: a collector module dropped into a scanned package is
picked up in the order it declares, and two collectors that claim one place are refused.
Real packages written to a temporary folder and imported."""

import sys
import textwrap

import pytest

from gpuwhy.collect.inprocess.base import Collector
from gpuwhy.modes.run.collectors import COLLECTORS, discover

SEEN = """
from gpuwhy.collect.inprocess.base import Collector

class Seen(Collector):
    section = "task"
    order = {order}
    what = "seen"

class Helper(Collector):
    '''No order: serves other collectors, never made by a run on its own.'''
"""


@pytest.fixture
def package(tmp_path, monkeypatch):
    """A package ``extra_collectors`` with the modules given, importable for this test."""
    monkeypatch.syspath_prepend(str(tmp_path))
    made = []

    def make(name: str, modules: dict[str, str]):
        root = tmp_path / name
        (root / "inner").mkdir(parents=True)
        (root / "__init__.py").write_text("")
        (root / "inner" / "__init__.py").write_text("")
        for path, text in modules.items():
            (root / path).write_text(textwrap.dedent(text))
        made.append(name)
        return __import__(name)

    yield make
    for name in made:
        for module in [m for m in sys.modules if m == name or m.startswith(name + ".")]:
            del sys.modules[module]


def test_the_run_collectors_are_found_in_their_declared_order():
    orders = [kind.order for kind in COLLECTORS]
    assert orders == sorted(orders) and len(set(orders)) == len(orders)
    names = [kind.__name__ for kind in COLLECTORS]
    # the sections read by a collector are filled by one of lower order
    assert names.index("StepCollector") < names.index("PipelineCollector")
    assert names.index("PlacementAudit") < names.index("TargetProjection")
    assert all(issubclass(kind, Collector) and kind.order is not None for kind in COLLECTORS)


def test_a_collector_in_a_nested_module_is_found_and_a_helper_class_is_not(package):
    extra = package("extra_collectors", {"inner/seen.py": SEEN.format(order=51)})
    (found,) = discover([extra])
    assert found.__name__ == "Seen" and found.__module__ == "extra_collectors.inner.seen"
    merged = sorted([*COLLECTORS, found], key=lambda kind: kind.order or 0)
    assert merged.index(found) == [k.__name__ for k in merged].index("PipelineCollector") + 1


def test_two_collectors_claiming_one_place_are_refused(package):
    extra = package(
        "clashing_collectors",
        {"a.py": SEEN.format(order=7), "inner/b.py": SEEN.format(order=7)},
    )
    with pytest.raises(RuntimeError, match=r"the same order \[7\]: Seen, Seen"):
        discover([extra])
