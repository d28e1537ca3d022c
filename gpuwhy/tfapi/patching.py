"""Replace a class attribute and put the original back: the one way gpuwhy hooks code.

Every hook gpuwhy installs in a watched program is a :class:`Patch`, so ``stop()``
restores each class exactly (the original object, not a copy), even when two sessions
patched the same method in turn; a child the program forks gets the originals back at once
(gpuwhy.forked).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar

import gpuwhy.forked as forked
import gpuwhy.line_numbers as line_numbers

F = TypeVar("F", bound=Callable[..., Any])


class Patch:
    """``owner.name`` replaced by ``make(original)`` until :meth:`undo`."""

    def __init__(self, owner: Any, name: str, make: Callable[[Any], Any]) -> None:
        self.owner, self.name = owner, name
        self.had_own = name in vars(owner)
        self.original = vars(owner)[name] if self.had_own else getattr(owner, name)
        self._put(make(self.original))

    def _put(self, replacement: Any) -> None:
        # known to forked children before it is in place, and until it is out of place:
        # a fork from another thread in between gets it undone too (a no-op where absent)
        self.replacement = replacement
        self._forget_in_child = forked.undo_in_child(self.undo)
        try:
            setattr(self.owner, self.name, replacement)
        except BaseException:
            self._forget_in_child()
            raise

    def step_aside(self) -> bool:
        """Put the original in place for a while (a pause of a per-step hook), where the
        replacement is in place; False where something else is (another patch over it):
        then nothing changes. :meth:`step_back` puts the replacement back."""
        if vars(self.owner).get(self.name) is not self.replacement:
            return False
        if self.had_own:
            setattr(self.owner, self.name, self.original)
        else:
            delattr(self.owner, self.name)
        return True

    def step_back(self) -> None:
        """The replacement back in place after :meth:`step_aside` (where the original
        still is: a patch made over it meanwhile stays)."""
        if self.had_own:
            if vars(self.owner).get(self.name) is self.original:
                setattr(self.owner, self.name, self.replacement)
        elif self.name not in vars(self.owner):
            setattr(self.owner, self.name, self.replacement)

    def undo(self) -> None:
        try:
            if vars(self.owner).get(self.name) is not self.replacement:
                return  # someone patched over us; leave theirs in place
            if self.had_own:
                setattr(self.owner, self.name, self.original)
            else:
                delattr(self.owner, self.name)
        finally:
            self._forget_in_child()


def mark_wrapped(replacement: F, original: Any) -> F:
    """Set ``replacement.__wrapped__ = original`` (what ``inspect.unwrap`` follows) and
    nothing else: unlike ``functools.wraps`` the replacement keeps its own name."""
    functools.update_wrapper(replacement, original, assigned=(), updated=())
    # TF reads each frame's line at every eager op and tf.function call: a hook's frame
    # is on the stack then (gpuwhy/line_numbers.py)
    line_numbers.prepare(replacement)
    return replacement
