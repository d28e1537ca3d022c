"""Replace a class attribute and put the original back: the one way gpuwhy hooks code.

Every hook gpuwhy installs in a watched program is a :class:`Patch`, so ``stop()``
restores each class exactly (the original object, not a copy), even when two sessions
patched the same method in turn.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar

F = TypeVar("F", bound=Callable[..., Any])


class Patch:
    """``owner.name`` replaced by ``make(original)`` until :meth:`undo`."""

    def __init__(self, owner: Any, name: str, make: Callable[[Any], Any]) -> None:
        self.owner, self.name = owner, name
        self.had_own = name in vars(owner)
        self.original = vars(owner)[name] if self.had_own else getattr(owner, name)
        self.replacement = make(self.original)
        setattr(owner, name, self.replacement)

    def undo(self) -> None:
        if vars(self.owner).get(self.name) is not self.replacement:
            return  # someone patched over us; leave theirs in place
        if self.had_own:
            setattr(self.owner, self.name, self.original)
        else:
            delattr(self.owner, self.name)


def mark_wrapped(replacement: F, original: Any) -> F:
    """Set ``replacement.__wrapped__ = original`` (what ``inspect.unwrap`` follows) and
    nothing else: unlike ``functools.wraps`` the replacement keeps its own name."""
    functools.update_wrapper(replacement, original, assigned=(), updated=())
    return replacement
