"""The compiled methods of gpuwhy's dataclasses, kept from one process to the next.

Every ``gpuwhy`` command starts by importing its facts, rules and collectors: about 230
dataclasses, whose ``__init__``, ``__repr__``, ``__eq__``, ``__hash__`` and frozen
``__setattr__``/``__delattr__`` the standard library writes out as source text and
compiles at every import (``dataclasses._create_fn``, one ``exec`` a method; on Python
3.13 one a class). That compiling was 0.1-0.15 s of the 0.35-0.45 s ``gpuwhy run`` took
before a script's first line (docs/speed.md), time every watched program pays.

The text depends only on the class's shape, so the code it compiles to is the same in
every process: :func:`install` gives the ``dataclasses`` module an ``exec`` of its own
(a module global, which its calls find before the builtin) that looks the code up by
the text's digest, compiles what it lacks exactly as ``exec`` would (same file name
``<string>``, no inherited future flags, the interpreter's optimisation level), and runs
it with the caller's globals as ``exec`` does. Only gpuwhy's own modules use it: a
class of any other module (the user's program, a library) goes to the builtin ``exec``
untouched. The codes are kept in the package's ``__pycache__`` beside its bytecode,
written (atomically) by a process that compiled new ones, under the same rule as
Python's bytecode (not under ``PYTHONDONTWRITEBYTECODE``; ``make setup`` writes them
explicitly: :func:`write_all`). A file of another Python, or one that
does not read, is ignored and replaced.

The ``exec`` global is private ground of the standard library's: it is used only where
the module's source calls ``exec`` with a text and globals, on the versions tested
(3.10 to 3.13); any other Python leaves ``dataclasses`` as it is.
"""

from __future__ import annotations

import atexit
import builtins
import dataclasses
import hashlib
import marshal
import os
import sys
import threading
import types
from importlib.util import MAGIC_NUMBER
from pathlib import Path
from typing import Any

__all__ = ["CodeCache", "install", "installed", "uninstall"]

OWN_PREFIX = "gpuwhy"  # modules whose dataclasses are compiled through the cache
MAX_CODES = 4096  # more (many versions' shapes): the file keeps only one process's
SUPPORTED = ((3, 10), (3, 11), (3, 12), (3, 13))


def cache_path() -> Path:
    """Beside the package's bytecode, one file per Python and optimisation level."""
    tag = sys.implementation.cache_tag or "python"
    level = f".opt-{sys.flags.optimize}" if sys.flags.optimize else ""
    return Path(__file__).parent / "__pycache__" / f"dataclass_code.{tag}{level}.marshal"


class CodeCache:
    """Code objects by the digest of the source text they were compiled from."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._codes: dict[bytes, types.CodeType] | None = None  # read at the first use
        self._used: dict[bytes, types.CodeType] = {}
        self.compiled = 0  # codes this process compiled (the file lacked them)
        self._lock = threading.Lock()

    def code(self, text: str) -> types.CodeType:
        """The code ``exec(text)`` would compile, from the file when it has it."""
        key = hashlib.blake2b(text.encode(), digest_size=16).digest()
        codes = self._codes if self._codes is not None else self._load()
        code = codes.get(key)
        if code is None:
            code = compile(text, "<string>", "exec", dont_inherit=True)
            with self._lock:
                codes[key] = code
                self.compiled += 1
        self._used[key] = code
        return code

    def _load(self) -> dict[bytes, types.CodeType]:
        with self._lock:
            if self._codes is None:
                self._codes = _read(self.path)
            return self._codes

    def save(self) -> bool:
        """Write the codes if this process compiled any; True when the file was written.
        Never raises (a read-only install keeps compiling, as without the cache)."""
        with self._lock:
            if not self.compiled or self._codes is None:
                return False
            codes = self._codes if len(self._codes) <= MAX_CODES else dict(self._used)
            data = MAGIC_NUMBER + marshal.dumps(codes)
        import tempfile  # only where codes are written: not on every start

        try:
            self.path.parent.mkdir(exist_ok=True)
            fd, temporary = tempfile.mkstemp(dir=self.path.parent, prefix=".dataclass_code.")
            try:
                os.fchmod(fd, 0o644)  # readable as the bytecode beside it is
                with os.fdopen(fd, "wb") as out:
                    out.write(data)
                os.replace(temporary, self.path)
            except BaseException:
                os.unlink(temporary)
                raise
        except OSError:
            return False
        with self._lock:
            self.compiled = 0
        return True


def _read(path: Path) -> dict[bytes, types.CodeType]:
    try:
        data = path.read_bytes()
    except OSError:
        return {}
    if not data.startswith(MAGIC_NUMBER):
        return {}  # another Python's codes
    try:
        codes = marshal.loads(data[len(MAGIC_NUMBER) :])
    except (EOFError, ValueError, TypeError):
        return {}
    if not isinstance(codes, dict):
        return {}
    return {k: v for k, v in codes.items() if isinstance(v, types.CodeType)}


_cache: CodeCache | None = None
_save_registered = False


def _exec(source: Any, globals: Any = None, locals: Any = None, /, **kw: Any) -> None:
    """``exec`` for the ``dataclasses`` module: gpuwhy's classes through the cache,
    everything else (and every call of another form) to the builtin as it came."""
    cache = _cache
    if (
        cache is None
        or kw
        or not isinstance(source, str)
        or not isinstance(globals, dict)
        or not str(globals.get("__name__", "")).startswith(OWN_PREFIX)
    ):
        return builtins.exec(source, globals, locals, **kw)
    code = cache.code(source)
    _save_at_exit(cache)
    return builtins.exec(code, globals, locals)


def _save_at_exit(cache: CodeCache) -> None:
    global _save_registered
    if cache.compiled and not _save_registered and not sys.dont_write_bytecode:
        _save_registered = True
        atexit.register(cache.save)


def install(path: Path | None = None) -> bool:
    """Compile gpuwhy's dataclass methods through the cache from now on; False where
    this Python's ``dataclasses`` is not one it knows (nothing changed then)."""
    global _cache
    if sys.version_info[:2] not in SUPPORTED or sys.implementation.name != "cpython":
        return False
    current = vars(dataclasses).get("exec")
    if current is not None and current is not _exec:
        return False  # someone else's: leave it
    _cache = CodeCache(path or cache_path())
    dataclasses.exec = _exec  # type: ignore[attr-defined]
    return True


def installed() -> CodeCache | None:
    return _cache if vars(dataclasses).get("exec") is _exec else None


def uninstall() -> None:
    global _cache
    if vars(dataclasses).get("exec") is _exec:
        del dataclasses.exec  # type: ignore[attr-defined]
    _cache = None


def write_all() -> int:
    """Import every gpuwhy module with the cache on and write it whatever
    ``PYTHONDONTWRITEBYTECODE`` says (``make setup``, as it compiles the bytecode).
    Returns how many codes the file holds."""
    import importlib
    import pkgutil

    if installed() is None and not install():
        return 0
    for module in pkgutil.walk_packages([str(Path(__file__).parent)], "gpuwhy."):
        if module.name.endswith("__main__"):
            continue  # runs the command line
        try:
            importlib.import_module(module.name)
        except Exception:  # noqa: BLE001 - an optional dependency missing: its classes compile as before
            continue
    cache = installed()
    assert cache is not None
    cache.save()
    return len(_read(cache.path))
