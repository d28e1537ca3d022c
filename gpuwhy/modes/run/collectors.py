"""COLLECTORS: every collector of a watched run, found in the packages that hold them
(as pytest finds its plugins) and put in the order they declare: the session makes and
starts them in that order, asks them for their sections in it, and stops them in reverse.

Adding a collector (it fills one section of the record) touches three files:
1. its section: a frozen dataclass in gpuwhy/facts/<section>.py,
2. and its field on ``Facts`` (with the name exported) in gpuwhy/facts/__init__.py;
3. its module anywhere under gpuwhy/collect/: a ``Collector`` subclass
   (collect/inprocess/base.py) declaring ``section``, ``order`` (after the collectors whose
   sections it reads), ``what``, ``live``, ``needs_tensorflow`` (``wanted()`` for an
   option), its hooks, and ``fill(gathering)`` returning the section
   (``gathering.facts`` holds those of lower order);
then the schema regenerated: ``python tools/generate_schema.py``.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Iterable

import gpuwhy.collect
import gpuwhy.projection
from gpuwhy.collect.inprocess.base import Collector

# The packages whose modules may define a run's collectors; collect/child/ is stdlib-only
# code that runs inside a child process, never in the program.
PACKAGES = (gpuwhy.collect, gpuwhy.projection)
NOT_SCANNED = ("gpuwhy.collect.child",)


def discover(packages: Iterable = PACKAGES) -> tuple[type[Collector], ...]:
    """Every ``Collector`` subclass defined in ``packages`` that declares an ``order``,
    sorted by it. Two with the same order would start in an arbitrary order: refused."""
    found: dict[str, type[Collector]] = {}
    for package in packages:
        for module_info in pkgutil.walk_packages(package.__path__, package.__name__ + "."):
            if module_info.name.startswith(NOT_SCANNED):
                continue
            module = importlib.import_module(module_info.name)
            for value in vars(module).values():
                if (
                    isinstance(value, type)
                    and issubclass(value, Collector)
                    and value.__module__ == module.__name__
                    and value.order is not None
                ):
                    found[f"{value.__module__}.{value.__qualname__}"] = value
    kinds = sorted(found.values(), key=lambda kind: kind.order or 0)
    orders = [kind.order for kind in kinds]
    clashes = sorted({o for o in orders if orders.count(o) > 1}, key=lambda o: o or 0)
    if clashes:
        names = [k.__name__ for k in kinds if k.order in clashes]
        raise RuntimeError(f"collectors declare the same order {clashes}: {', '.join(names)}")
    return tuple(kinds)


COLLECTORS: tuple[type[Collector], ...] = discover()
