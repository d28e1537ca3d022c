"""``%load_ext gpuwhy``: gpuwhy where most TensorFlow users train, in Jupyter, Colab and
Kaggle.

A notebook user asks "why is my GPU idle?" about a cell, not a script, so the answers
``gpuwhy run`` gives a script are one line away here::

    %load_ext gpuwhy
    %gpuwhy check                 # is TensorFlow using my GPU?
    %%gpuwhy -r rec               # watch this cell as `gpuwhy run` watches a script
    model.fit(ds, epochs=2)
    %gpuwhy report run.json       # a saved record, NVML recording or XProf capture

The report is shown inline: the HTML page of ``gpuwhy run --html`` (self-contained, in an
iframe) with the terminal report as its text fallback. ``%%gpuwhy`` takes ``gpuwhy run``'s
options (the collectors' own definitions) and ``-r NAME`` keeps the record in ``NAME``.

Why a package of its own, at the top beside the command line: it is an entry point like
``cli``, reusing the commands' option definitions and a Session, and it needs IPython,
which gpuwhy does not: the package root's ``load_ipython_extension`` imports it only when
IPython asks (``pip install 'gpuwhy[notebook]'`` where IPython is not already there).
magic.py dispatches, options.py parses, cell.py runs the cell's code as IPython would,
display.py makes the inline output, interrupts.py holds a Ctrl-C while hooks go in or out.
"""

from __future__ import annotations

from typing import Any

from gpuwhy.notebook.magic import GpuwhyMagics


def load_ipython_extension(ipython: Any) -> None:
    """Register ``%gpuwhy`` and ``%%gpuwhy`` (``%load_ext gpuwhy``)."""
    ipython.register_magics(GpuwhyMagics)


def unload_ipython_extension(ipython: Any) -> None:
    """``%unload_ext gpuwhy``: the magics forgotten (no hook outlives its cell anyway)."""
    for kind in ("line", "cell"):
        ipython.magics_manager.magics[kind].pop("gpuwhy", None)
