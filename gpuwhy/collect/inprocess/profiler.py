"""The one in-process TensorFlow profiler: what the step sampler (a few steps traced in
memory, step_profile.py) and ``--capture`` (N steps written as an XProf capture,
capture.py) share when they hold TF's profiler.

TF runs one profiler session per process, so gpuwhy's two users take turns through
:func:`held` (one lock: the second waits, at most ``BUSY_WAIT_S``, instead of retrying a
start that raises), and the program's own profiler always wins: while gpuwhy holds the
session, ``tf.profiler.experimental.start`` (Keras' TensorBoard ``profile_batch``
included) first calls the holder's ``give_way`` (tfapi/profiler_session.py), which ends
gpuwhy's session. Each holder waits for the traced function to warm up
(``WARMUP_CALLS`` calls after its first trace) and for its calls with :func:`wait_for`.
The profiler is never started in a multi-worker process (it corrupted workers' heaps
there): :func:`refused` says why, and the step sampler also keeps away from a program
whose script runs TF's profiler itself.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from gpuwhy.tfapi.profiler_session import install_give_way

WARMUP_CALLS = 3  # calls of the traced function after its first before it is profiled
POLL_S = 0.02  # how often a holder looks at its function's calls
BUSY_WAIT_S = 30.0  # the longest a holder waits for the other to give the profiler back
MULTI_WORKER = "TF's profiler is not run in a multi-worker process (it can crash the worker)"

_ONE_SESSION = threading.Lock()  # gpuwhy's holders of TF's one profiler session


class Busy(Exception):
    """The other holder kept TF's profiler past ``BUSY_WAIT_S`` (or the run ended)."""


@contextmanager
def held(give_way: Callable[[], None], stop: threading.Event) -> Iterator[None]:
    """TF's profiler is gpuwhy's to start inside the block, the program's ``start`` calling
    ``give_way()`` first; raises :class:`Busy` where the other holder kept it past
    ``BUSY_WAIT_S`` or ``stop`` was set while waiting."""
    deadline = time.perf_counter() + BUSY_WAIT_S
    while not _ONE_SESSION.acquire(timeout=POLL_S * 5):
        if stop.is_set() or time.perf_counter() > deadline:
            raise Busy("gpuwhy's other use of TF's profiler did not end in time")
    try:
        patches = install_give_way(give_way)
        try:
            yield
        finally:
            for patch in reversed(patches):
                patch.undo()
    finally:
        _ONE_SESSION.release()


def wait_for(
    reached: Callable[[], bool], until: float, stop: threading.Event, poll_s: float = POLL_S
) -> bool:
    """Poll ``reached()`` until it holds, the clock passes ``until`` or the run ends
    (``stop``); whether it held."""
    while not stop.is_set() and time.perf_counter() < until:
        if reached():
            return True
        time.sleep(poll_s)
    return reached()


def refused(script_profiles: bool = True) -> str | None:
    """Why TF's profiler must not start in this process, if it must not
    (``script_profiles``: also where the program's script runs TF's profiler itself)."""
    if script_profiles and _program_profiles():
        return "the program runs TF's profiler itself"
    if multi_worker_config():
        return MULTI_WORKER
    return None


def multi_worker_config() -> bool:
    """TF_CONFIG names a cluster of two or more workers (chief included)."""
    try:
        cluster = json.loads(os.environ.get("TF_CONFIG") or "{}").get("cluster") or {}
        return sum(len(cluster.get(k) or ()) for k in ("chief", "worker")) >= 2
    except (ValueError, AttributeError, TypeError):
        return False


def _program_profiles() -> bool:
    """The script names TF's profiler (tf.profiler, Keras' TensorBoard profile_batch)."""
    script = sys.argv[0] if sys.argv and sys.argv[0].endswith(".py") else None
    if not script:
        return False
    try:
        text = Path(script).read_text(errors="replace")
    except OSError:
        return False
    return "profiler" in text or "profile_batch" in text
