"""Markers for what a test module needs, found in its source, so ``make test-fast`` can run
the tests of hand-made facts alone in about a minute while working.

A module is marked by what it (or a helper module of ``tests/`` it imports, or a
``conftest.py`` above it) uses: ``tf`` (TensorFlow or Keras), ``subprocess`` (a real
program or interpreter started), ``browser`` (Chromium), ``server`` (a real Prometheus),
``corpus`` (the corpus's programs); ``slow`` is set by hand on tests at scale. A test with none of them is fast: rules, derived
values, comparison, projection and renderers on built facts and saved records. Reading
the source, not running it, keeps the marks stable on any machine; a mark too many only
moves a test out of the fast loop, never out of ``make test``.
"""

from __future__ import annotations

import ast
import re
from functools import cache
from pathlib import Path

TESTS = Path(__file__).parent

MARKS = {
    "tf": "uses TensorFlow or Keras (imports them, or starts a program that does)",
    "subprocess": "starts a real program, interpreter or gpuwhy process",
    "browser": "opens a report in a real Chromium",
    "server": "starts a real Prometheus or Pushgateway",
    "corpus": "runs the corpus's programs",
    "slow": "a bound's test at scale (a day of samples, a million steps): marked by hand",
}

_SIGNS = {
    "tf": re.compile(
        r"\bimport tensorflow\b|\bfrom tensorflow\b|\bimport keras\b|\bfrom keras\b"
        r"|importorskip\(\s*[\"'](tensorflow|keras)"
    ),
    "subprocess": re.compile(r"\bsubprocess\b|\bPopen\b|\bsys\.executable\b|\bpexpect\b"),
    "browser": re.compile(r"\bplaywright\b|\bCHROMIUM\b|\bchromium\b"),
    "server": re.compile(r"\bPROMETHEUS\b|\bPUSHGATEWAY\b|\bprometheus_server\b"),
}
_TEST_IMPORT = re.compile(
    r"^\s*(?:from|import)\s+tests((?:\.\w+)*)(?:\s+import\s+([\w, ()]+))?", re.M
)


def marks_for(path: Path, fixtures: list[str]) -> frozenset[str]:
    """The marks of a test in the module at ``path`` that uses ``fixtures``: the module's
    own, and those of the fixtures it takes from a ``conftest.py`` above it."""
    path = path.resolve()
    marks = set(_module_marks(path))
    for conftest in _conftests_above(path):
        by_fixture = _fixture_marks(conftest)
        for name in fixtures:
            marks |= by_fixture.get(name, frozenset())
    if TESTS / "corpus" in path.parents:
        marks.add("corpus")
    return frozenset(marks)


def _conftests_above(path: Path) -> list[Path]:
    folder = path.parent
    found = []
    while TESTS == folder or TESTS in folder.parents:
        conftest = folder / "conftest.py"
        if conftest.exists() and conftest != path:
            found.append(conftest)
        folder = folder.parent
    return found


@cache
def _fixture_marks(conftest: Path) -> dict[str, frozenset[str]]:
    """Per fixture of ``conftest``: the signs in its body and in the conftest's functions
    it calls, and the marks of the helper modules the conftest imports."""
    source = conftest.read_text()
    tree = ast.parse(source)
    functions = {node.name: node for node in tree.body if isinstance(node, ast.FunctionDef)}
    imported = frozenset().union(*(_module_marks(h) for h in _helpers(conftest, source)))

    def signs(node: ast.FunctionDef, seen: frozenset[str]) -> frozenset[str]:
        text = ast.get_source_segment(source, node) or ""
        found = {name for name, sign in _SIGNS.items() if sign.search(text)}
        called = {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}
        if called & _imported_names(tree):
            found |= imported
        for name in called & functions.keys() - seen - {node.name}:
            found |= signs(functions[name], seen | {node.name})
        return frozenset(found)

    return {name: signs(node, frozenset()) for name, node in functions.items()}


def _imported_names(tree: ast.Module) -> set[str]:
    """The names a module binds by importing from ``tests``."""
    names = set()
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("tests"):
            names |= {alias.asname or alias.name for alias in node.names}
    return names


@cache
def _module_marks(path: Path, seen: frozenset[Path] = frozenset()) -> frozenset[str]:
    """What the module's own source shows, and what the helper modules it imports show."""
    try:
        source = path.read_text()
    except OSError:
        return frozenset()
    marks = {name for name, sign in _SIGNS.items() if sign.search(source)}
    for helper in _helpers(path, source):
        if helper not in seen and helper != path:
            marks |= _module_marks(helper, seen | {path})
    return frozenset(marks)


def _helpers(path: Path, source: str) -> list[Path]:
    """The modules of ``tests/`` that ``source`` imports (``from tests.x import y``,
    ``from tests import x``) and the files of the relative imports next to it."""
    found = []
    for match in _TEST_IMPORT.finditer(source):
        dotted = match.group(1).strip(".").split(".") if match.group(1) else []
        base = TESTS.joinpath(*dotted)
        candidates = [base.with_suffix(".py"), base / "__init__.py"]
        for name in re.findall(r"\w+", match.group(2) or ""):
            candidates.append(base / f"{name}.py")
        found += [c for c in candidates if c.exists()]
    for name in re.findall(r"^\s*from \.(\w+) import", source, re.M):
        candidate = path.parent / f"{name}.py"
        if candidate.exists():
            found.append(candidate)
    return found
