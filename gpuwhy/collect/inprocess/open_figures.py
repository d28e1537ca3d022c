"""How many matplotlib figures the program keeps open, and the line of its that made them.

pyplot keeps every figure it made (its canvas, its image buffers, a few MiB each) in its
registry until ``plt.close``: a program that draws one an epoch or a step to save it
(``generate_and_save_images`` in TF's DCGAN tutorial: ``plt.figure``, ``plt.savefig``,
``plt.show``, which does nothing without a display) grows by a figure each time, and the
heap census cannot name it (the registry is matplotlib's, not the program's). Counting
the registry once a second with the memory says it directly; its adoption of each new
figure hooked (every ``plt.figure`` and ``plt.subplots`` goes through it) gives the
program's line that made them. matplotlib's private registry
(``matplotlib._pylab_helpers.Gcf``) is read here only; nothing of matplotlib is imported.
"""

from __future__ import annotations

import functools
import sys
import threading
from collections import Counter
from typing import Any

from gpuwhy.facts import OpenFigures
from gpuwhy.source_calls import statement_at
from gpuwhy.tfapi.graph_ops import is_library_file, relative

MAX_SITES = 16  # program lines counted that made figures
_MAX_FRAMES = 40


class FigureWatch:
    """The open figures' count at each poll (the first and last read, the most), and
    the lines that made figures, from the time pyplot was imported."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._sites: Counter[str] = Counter()
        self._first: tuple[float, int] | None = None
        self._last: tuple[float, int] | None = None
        self._most = 0
        self._registry: Any = None  # pyplot's Gcf once hooked (False: it could not be)
        self._original: Any = None
        self._hooked: Any = None

    def poll(self, at_s: float) -> None:
        """Read the registry (from the timeline's thread); hook its adoption once."""
        helpers = sys.modules.get("matplotlib._pylab_helpers")
        if helpers is None:
            return
        if self._registry is None:
            self._hook(helpers.Gcf)
        try:
            count = int(helpers.Gcf.get_num_fig_managers())
        except Exception:  # noqa: BLE001 - another matplotlib: nothing said
            return
        with self._lock:
            if self._first is None:
                self._first = (at_s, count)
            self._last = (at_s, count)
            self._most = max(self._most, count)

    def _hook(self, registry: Any) -> None:
        """``Gcf._set_new_active_manager``, which pyplot.figure calls for each figure it
        makes, wrapped: the frame of gpuwhy's is below pyplot.figure and gone before it
        returns, so a warning matplotlib gives the program's line (more than 20 figures
        open) still names that line, not gpuwhy's."""
        original = registry.__dict__.get("_set_new_active_manager")
        function = getattr(original, "__func__", None)
        if not isinstance(original, classmethod) or function is None:
            self._registry = False  # another matplotlib: counted, not located
            return
        sites, lock = self._sites, self._lock

        @functools.wraps(function)
        def adopt(cls: Any, manager: Any) -> Any:
            result = function(cls, manager)
            try:
                site = _program_line(sys._getframe(1))
                if site is not None:
                    with lock:
                        if site in sites or len(sites) < MAX_SITES:
                            sites[site] += 1
            except Exception:  # noqa: BLE001 - counting never breaks the program
                pass
            return result

        self._hooked = classmethod(adopt)
        self._registry, self._original = registry, original
        registry._set_new_active_manager = self._hooked

    def stop(self) -> None:
        """The registry's method given back, where it is still gpuwhy's."""
        registry, original = self._registry, self._original
        if registry and original is not None:
            if registry.__dict__.get("_set_new_active_manager") is self._hooked:
                registry._set_new_active_manager = original

    def fact(self) -> OpenFigures | None:
        """None where pyplot made no figure the registry kept (or was never imported)."""
        with self._lock:
            first, last, most = self._first, self._last, self._most
            sites = self._sites.most_common(1)
        if first is None or last is None or most == 0:
            return None
        made_at, made = sites[0] if sites else (None, 0)
        return OpenFigures(
            first=first[1],
            last=last[1],
            most=most,
            first_at_s=round(first[0], 3),
            last_at_s=round(last[0], 3),
            made_at=made_at,
            made_written=statement_at(made_at) if made_at else None,
            made=made,
        )


def _program_line(frame: Any) -> str | None:
    """The program's own line nearest the call (pyplot's subplots and the like passed)."""
    for _ in range(_MAX_FRAMES):
        if frame is None:
            return None
        filename = frame.f_code.co_filename
        if not is_library_file(filename):
            return relative(filename, frame.f_lineno)
        frame = frame.f_back
    return None
