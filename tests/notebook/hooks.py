"""What gpuwhy can install in a process, read directly from where it lives: TF's eager op
callbacks, its patches still in place, gc callbacks, import finders, profilers and
threads. A cell after ``%%gpuwhy`` must find none of them (it runs untouched)."""

from __future__ import annotations

import gc
import sys
import threading
import time
from typing import Any


def _ours(thing: Any) -> bool:
    module = getattr(thing, "__module__", None) or type(thing).__module__
    return module.startswith("gpuwhy")


def _running_threads(grace_s: float = 1.0) -> list[str]:
    """gpuwhy's threads still running ``grace_s`` after now (one asked to stop that ends
    within it is not left behind)."""
    ours = [t for t in threading.enumerate() if t.name.startswith("gpuwhy")]
    deadline = time.monotonic() + grace_s
    for thread in ours:
        thread.join(timeout=max(0.0, deadline - time.monotonic()))
    return [t.name for t in ours if t.is_alive()]


def installed_hooks() -> dict[str, list[str]]:
    """Every gpuwhy hook in place now, by kind (empty lists: none)."""
    from tensorflow.python.eager import context

    from gpuwhy.tfapi.patching import Patch

    patches = [
        f"{getattr(p.owner, '__qualname__', p.owner)}.{p.name}"
        for p in gc.get_objects()
        if isinstance(p, Patch)
        and hasattr(p, "owner")  # a Listening registers listeners on patches of its own
        and vars(p.owner).get(p.name) is p.replacement
    ]
    return {
        "op callbacks": [repr(c) for c in context.context().op_callbacks],
        "patches in place": patches,
        "gc callbacks": [repr(c) for c in gc.callbacks if _ours(c)],
        "import finders": [repr(f) for f in sys.meta_path if _ours(f)],
        "profile/trace": [repr(f) for f in (sys.getprofile(), sys.gettrace()) if f is not None],
        "threads": _running_threads(),
    }


NONE = {
    "op callbacks": [],
    "patches in place": [],
    "gc callbacks": [],
    "import finders": [],
    "profile/trace": [],
    "threads": [],
}
