"""gpuwhy's dataclass methods compiled once and kept (gpuwhy/dataclass_code.py): the same
classes as the standard library makes, the user's classes never touched, the file
read back by the next process and ignored when it cannot be."""

from __future__ import annotations

import dataclasses
import marshal
import subprocess
import sys
import textwrap
import types
from collections.abc import Iterator
from importlib.util import MAGIC_NUMBER
from pathlib import Path

import pytest

from gpuwhy import dataclass_code

SOURCE = textwrap.dedent(
    """
    from __future__ import annotations

    import dataclasses
    from dataclasses import dataclass, field
    from typing import ClassVar

    @dataclass(frozen=True)
    class Frozen:
        name: str
        size: int = 3
        tags: tuple[str, ...] = ()
        kind: ClassVar[str] = "k"

    @dataclass(order=True)
    class Ordered:
        a: int
        b: list[int] = field(default_factory=list)

        def __post_init__(self) -> None:
            self.b.append(self.a)

    @dataclass(frozen=True, slots=True, kw_only=True)
    class Slotted:
        x: float
        y: float = 0.5
    """
)


def _module(name: str) -> types.ModuleType:
    """The source run as a module of that name, registered as importing would."""
    module = types.ModuleType(name)
    sys.modules[name] = module
    try:
        exec(compile(SOURCE, f"<{name}>", "exec", dont_inherit=True), module.__dict__)
    finally:
        del sys.modules[name]
    return module


@pytest.fixture
def cache(tmp_path: Path) -> Iterator[dataclass_code.CodeCache]:
    """The cache installed on a file of the test's, the package's own put back after."""
    before = dataclass_code.installed()
    assert dataclass_code.install(tmp_path / "codes.marshal")
    installed = dataclass_code.installed()
    assert installed is not None
    yield installed
    dataclass_code.uninstall()
    if before is not None:
        dataclass_code.install(before.path)


def _methods(cls: type) -> dict[str, types.CodeType]:
    names = ("__init__", "__repr__", "__eq__", "__hash__", "__setattr__", "__delattr__", "__lt__")
    return {
        n: vars(cls)[n].__code__
        for n in names
        if n in vars(cls) and hasattr(vars(cls)[n], "__code__")
    }


def test_gpuwhy_s_classes_get_the_methods_the_standard_library_compiles(cache) -> None:
    cached = _module("gpuwhy.fake_facts")
    assert cache.compiled > 0
    dataclass_code.uninstall()
    plain = _module("gpuwhy.fake_facts")
    for name in ("Frozen", "Ordered", "Slotted"):
        a, b = _methods(getattr(cached, name)), _methods(getattr(plain, name))
        assert a.keys() == b.keys() and a
        for method in a:
            assert a[method].co_code == b[method].co_code, (name, method)
            assert a[method].co_consts == b[method].co_consts, (name, method)
            assert a[method].co_names == b[method].co_names, (name, method)
        assert (
            getattr(cached, name).__init__.__annotations__
            == getattr(plain, name).__init__.__annotations__
        )
    # and they behave as the standard library's do
    f = cached.Frozen("a", tags=("x",))
    assert f == cached.Frozen("a", 3, ("x",)) and hash(f) == hash(cached.Frozen("a", 3, ("x",)))
    assert repr(f) == "Frozen(name='a', size=3, tags=('x',))"
    with pytest.raises(dataclasses.FrozenInstanceError):
        f.size = 4  # type: ignore[misc]
    assert cached.Ordered(1) < cached.Ordered(2) and cached.Ordered(5).b == [5]
    with pytest.raises(TypeError):
        cached.Slotted(1.0)  # keyword only
    assert cached.Slotted(x=1.0).y == 0.5


def test_another_module_s_classes_never_touch_the_cache(cache) -> None:
    user = _module("train")
    assert cache.compiled == 0
    assert not cache.save()  # nothing of gpuwhy's compiled: no file written
    assert not cache.path.exists()
    assert user.Frozen("a") == user.Frozen("a")


def test_the_next_process_reads_the_codes_and_compiles_none(cache, tmp_path: Path) -> None:
    _module("gpuwhy.fake_facts")
    compiled = cache.compiled
    assert compiled > 0 and cache.save() and cache.compiled == 0
    assert cache.path.read_bytes().startswith(MAGIC_NUMBER)
    # a new process of this Python, installed on the same file
    script = textwrap.dedent(
        f"""
        import sys, types
        from pathlib import Path
        from gpuwhy import dataclass_code
        dataclass_code.uninstall()
        dataclass_code.install(Path({str(cache.path)!r}))
        module = types.ModuleType("gpuwhy.fake_facts")
        sys.modules[module.__name__] = module
        exec(compile({SOURCE!r}, "<m>", "exec", dont_inherit=True), module.__dict__)
        print(dataclass_code.installed().compiled, module.Frozen("a"))
        """
    )
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True
    ).stdout.split(maxsplit=1)
    assert out == ["0", "Frozen(name='a', size=3, tags=())\n"]


@pytest.mark.parametrize(
    "content",
    [
        b"",
        b"garbage",
        b"\x00\x00\r\n" + marshal.dumps({b"k": 1}),
        MAGIC_NUMBER + b"\xff\xfe",
        MAGIC_NUMBER + marshal.dumps([1, 2]),
    ],
    ids=["empty", "not marshal", "another Python", "cut short", "not a table"],
)
def test_a_file_that_does_not_read_is_ignored_and_replaced(cache, content: bytes) -> None:
    cache.path.write_bytes(content)
    module = _module("gpuwhy.fake_facts")
    assert cache.compiled > 0 and module.Frozen("a").size == 3
    assert cache.save()
    assert marshal.loads(cache.path.read_bytes()[len(MAGIC_NUMBER) :])


def test_a_place_it_cannot_write_costs_nothing_but_the_compiling(tmp_path: Path) -> None:
    blocked = tmp_path / "file"
    blocked.write_text("not a folder")
    cache = dataclass_code.CodeCache(blocked / "codes.marshal")
    cache.code("x = 1\n")
    assert cache.compiled == 1 and cache.save() is False


def test_the_package_installs_it_and_leaves_exec_to_others_otherwise() -> None:
    import gpuwhy  # noqa: F401 - the package installs the cache as it is imported

    assert dataclass_code.installed() is not None
    assert dataclasses.exec is not exec  # type: ignore[attr-defined]
    # any other call of it is the builtin's
    namespace: dict[str, object] = {}
    dataclasses.exec("y = 2", namespace)  # type: ignore[attr-defined]
    assert namespace["y"] == 2
