"""``gpuwhy run --capture N``: N steps under TensorFlow's own profiler (kernels, copies and
host events, CUPTI underneath on a GPU), after warm-up, written as an XProf capture the
user keeps, then read back as the ``capture`` section: the measured facts the rules
prefer to the predicted ones (real placement, tensor cores actually used, copies, the
GPU's busy time in those steps).

A background thread waits for the training function to warm up (the tf.function with
the most time in calls that trains, once warm (profiler.WARMUP_CALLS): FunctionWatcher.warm;
a loop without one is captured for ``EAGER_CAPTURE_S`` once TensorFlow has run that
long), starts a profiler session of its own (tfapi/profiler_session.py), waits for N more calls
(at most ``MAX_CAPTURE_S``) and stops it, which writes the capture under
``--capture-dir`` (a TensorBoard log directory: ``plugins/profile/<run>/<host>.xplane.pb``).
Its cost is bounded: N is at most ``MAX_STEPS``, the time traced at most ``MAX_CAPTURE_S``,
and reading it back happens once, at the end, over those steps only.

TF's one profiler session is held through collect/inprocess/profiler.py: where gpuwhy's
step sampler holds it (a few steps, at most its MAX_SAMPLE_S) the capture waits its turn;
where the program starts TF's profiler itself (``tf.profiler.experimental.start``, Keras'
TensorBoard ``profile_batch``), gpuwhy's capture ends at once and gives it way (the
program never sees a second session); in a multi-worker job there is no capture (the
profiler corrupted workers' heaps there). The notes say why.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from gpuwhy.collect.capture import EAGER
from gpuwhy.collect.capture.errors import FormatError
from gpuwhy.collect.capture.files import CaptureNotFound, capture_files
from gpuwhy.collect.inprocess import profiler
from gpuwhy.collect.inprocess.base import Collector, Gathering, Option, RunOptions
from gpuwhy.collect.inprocess.functions import FunctionWatcher
from gpuwhy.derived import capture as capture_facts
from gpuwhy.facts import CaptureDevice, CaptureFacts, Facts
from gpuwhy.facts.capture import NOT_RECORDED
from gpuwhy.formatting import byte_size, duration
from gpuwhy.tfapi.profiler_session import OwnSession

NEVER = 1 << 62  # a function that trains nothing is never the one captured
# the profiler's levels: every op kernel on the host, the program's Python functions
# (their file:line), the GPU's kernels and copies. TF 2.21 ignores the levels it is given
# ("python_tracer_level expects an i value"): it traces at its defaults (2, 0, 1)
OPTIONS = {"host_tracer_level": 2, "python_tracer_level": 1, "device_tracer_level": 1}
MAX_STEPS = 200
MAX_CAPTURE_S = 30.0
EAGER_CAPTURE_S = 1.0  # no tf.function: the time traced (an eager loop's events are many)
EAGER_AFTER_S = 10.0  # ... once TensorFlow has run this long
DEFAULT_DIR = "gpuwhy-capture"
CAPTURE_POLL_S = 0.001  # counting the captured steps: a fast loop's steps are short


def steps(text: str) -> int:
    """A step count (argparse names this function in its error: "invalid steps value")."""
    return int(text)


def _refuse_steps(count: int) -> str | None:
    if count < 0 or count > MAX_STEPS:
        return f"--capture takes 1 to {MAX_STEPS} steps (0: no capture), not {count}"
    return None


def _refuse_dir(logdir: str) -> str | None:
    """A --capture-dir that cannot be one, refused before the program runs (not found
    out after it, when the capture is written). The default is checked for being a
    directory only: a run without --capture is never refused for the folder it is in."""
    where = Path(logdir).resolve()
    if where.exists() and not where.is_dir():
        return f"--capture-dir {logdir} is not a directory"
    if logdir == DEFAULT_DIR:
        return None
    parent = next((p for p in (where, *where.parents) if p.exists()), None)
    if parent is None or not parent.is_dir() or not os.access(parent, os.W_OK | os.X_OK):
        return f"--capture-dir {logdir} cannot be created: {parent or where} is not writable"
    return None


CAPTURE_STEPS = Option(
    name="capture",
    flag="--capture",
    default=0,
    type=steps,
    metavar="N",
    help="capture N steps after warm-up with TensorFlow's profiler (kernels, copies, host "
    "ops: measured, not predicted) and keep the capture for XProf/TensorBoard (off: 0)",
    refuse=_refuse_steps,
)
CAPTURE_DIR = Option(
    name="capture_dir",
    flag="--capture-dir",
    default=DEFAULT_DIR,
    metavar="DIR",
    help="the TensorBoard log directory --capture writes to (default ./gpuwhy-capture)",
    refuse=_refuse_dir,
)


class CaptureCollector(Collector):
    """The profiler thread; ``fill`` reads the capture it wrote back."""

    name = section = "capture"
    what = "the capture"
    needs_tensorflow = True
    reads_from = ("tracing",)  # the function whose calls are the steps
    options = (CAPTURE_STEPS, CAPTURE_DIR)
    shown = 85

    @classmethod
    def wanted(cls, options: RunOptions) -> bool:
        return options[CAPTURE_STEPS] > 0

    @classmethod
    def create(cls, options: RunOptions, made: Sequence[Collector]) -> CaptureCollector:
        return cls(cls.peer_of(made, FunctionWatcher), options[CAPTURE_STEPS], options[CAPTURE_DIR])

    @classmethod
    def report_rows(cls, facts: Facts, html: bool) -> list[tuple[str, str]]:
        if facts.capture is None:
            return []
        run_median = facts.steps.median_s if facts.steps is not None else None
        return capture_rows(facts.capture, run_median)

    def __init__(self, functions: FunctionWatcher, count: int, logdir: str) -> None:
        self._functions = functions
        self._steps = count
        self._logdir = os.path.abspath(logdir)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._tf_at: float | None = None
        self._session = OwnSession(self._logdir, OPTIONS)
        self._before: set[Path] = set()
        self._stopping_s = 0.0
        self.reason: str | None = None
        self.written: list[Path] = []
        self.overhead_s: float | None = None
        self.function: str | None = None
        self.gave_way = False

    def on_tensorflow(self) -> None:
        why = profiler.refused(script_profiles=False)  # the program's own: given way to
        if why:
            self.reason = why
            return
        self._tf_at = time.perf_counter()
        self._thread = threading.Thread(target=self._capture, name="gpuwhy-capture", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        thread = self._thread
        if thread is not None and thread.is_alive():
            thread.join(timeout=MAX_CAPTURE_S)
        if self._session.running:  # the thread did not get to it: never left on
            self._end()

    def fill(self, gathering: Gathering) -> CaptureFacts | None:
        if not self.written:
            if self.reason:
                gathering.note(f"--capture: {self.reason}")
            return None
        # the reader (numpy) only where a capture was made: the reports import this
        # module for its rows on machines without it
        from gpuwhy.collect.capture.analysis import read_capture

        try:
            facts = read_capture(self.written, prefer=self.function or EAGER)
        except (CaptureNotFound, FormatError, OSError) as error:
            gathering.note(f"--capture: the capture could not be read back ({error})")
            return None
        note = (
            "the program started TF's profiler itself: gpuwhy's capture ended there"
            if self.gave_way
            else None
        )
        return replace(facts, captured_steps=self._steps, overhead_s=self.overhead_s, note=note)

    # -- the profiler thread -------------------------------------------------------------
    def _give_way(self) -> None:
        """The program starts TF's profiler: gpuwhy's session ends first (one per process;
        a session still starting is waited for, then ended)."""
        if self._end():
            self.gave_way = True

    def _end(self) -> bool:
        """Stop the session and find what it wrote; whether this call stopped it."""
        stopping = time.perf_counter()
        try:
            if self._session.stop():
                self._stopping_s = time.perf_counter() - stopping
                self.written = sorted(set(_existing(self._logdir)) - self._before)
                if not self.written:
                    self.reason = f"TensorFlow's profiler wrote no capture under {self._logdir}"
                return True
        except Exception as error:  # noqa: BLE001 - never into the program
            self.reason = f"the capture could not be written ({type(error).__name__}: {error})"
        return False

    def _wait_for_function(self) -> tuple[str, int] | None:
        """The training function once warm; None for a loop without one (eager), once
        TensorFlow has run ``EAGER_AFTER_S`` without one (an evaluation function or a
        helper called often is not the step)."""
        while not self._stop.is_set():
            hot = self._functions.warm(1 + profiler.WARMUP_CALLS, NEVER)
            if hot is not None:
                return hot
            if self._tf_at is not None and time.perf_counter() - self._tf_at > EAGER_AFTER_S:
                return None
            time.sleep(profiler.POLL_S * 5)
        return None

    def _capture(self) -> None:
        try:
            hot = self._wait_for_function()
            if self._stop.is_set():
                self.reason = "the program ended before its steps warmed up"
                return
            self.function = hot[0] if hot else None
            with profiler.held(self._give_way, self._stop):
                self._capture_steps(hot)
        except Exception as error:  # noqa: BLE001 - never into the program (profiler.Busy too)
            self.reason = f"{type(error).__name__}: {error}"

    def _capture_steps(self, hot: tuple[str, int] | None) -> None:
        """The session from the next call of ``hot`` to ``steps`` calls after it (an
        eager loop: ``EAGER_CAPTURE_S``), at most ``MAX_CAPTURE_S``."""
        self._before = set(_existing(self._logdir))
        start_s = self._start()
        if start_s is None:
            return
        until = time.perf_counter() + (MAX_CAPTURE_S if hot is not None else EAGER_CAPTURE_S)
        name = hot[0] if hot is not None else None
        target = self._functions.calls_of(name) + self._steps + 1 if name else 0

        def done() -> bool:  # its steps captured (an eager loop: its time), or given way
            given_way = not self._session.running
            return given_way or (name is not None and self._functions.calls_of(name) >= target)

        profiler.wait_for(done, until, self._stop, CAPTURE_POLL_S)
        self._end()
        self.overhead_s = start_s + self._stopping_s

    def _start(self) -> float | None:
        """Start the session, waiting while the program's own holds TF's profiler; the
        seconds the start itself took (None: it never started, ``reason`` says why)."""
        deadline = time.perf_counter() + profiler.BUSY_WAIT_S
        while True:
            began = time.perf_counter()
            try:
                self._session.start()
                return time.perf_counter() - began
            except Exception as error:  # noqa: BLE001 - another session runs
                if self._stop.is_set() or time.perf_counter() > deadline:
                    self.reason = f"TensorFlow's profiler would not start ({error})"
                    return None
                time.sleep(0.5)


def _existing(logdir: str) -> list[Path]:
    try:
        return capture_files(logdir)
    except CaptureNotFound:
        return []


def capture_rows(capture: CaptureFacts, run_median_s: float | None = None) -> list[tuple[str, str]]:
    """The capture's rows in the reports: what was captured, the steps measured in it
    (beside the whole run's median step, where watched: the profiler's cost on them),
    each GPU's busy time, kernels, copies and tensor cores, the host during idle."""
    rows = [("Capture", _source_line(capture))]
    if capture.steps:
        line = _steps_line(capture)
        if run_median_s and capture.median_step_s and capture.captured_steps:
            slower = capture.median_step_s / run_median_s - 1
            line += f"; the run's median step {duration(run_median_s)}: traced steps " + (
                f"{slower:.0%} slower" if slower > 0.005 else "no slower"
            )
        rows.append(("Captured steps", line))
    if capture.no_device:
        rows.append(("GPU (captured)", capture.no_device + "; the host's events were read"))
    for device in capture.devices:
        rows.append((f"{device.name} (captured)", _device_line(device)))
        if device.copies:
            rows.append(("Copies (captured)", _copies_line(device)))
    if capture.idle:
        rows.append(
            (
                "GPU idle in captured steps" if capture.devices else "Host in captured steps",
                _idle_line(capture),
            )
        )
    cpu_ops = [op for op in capture.host_ops if op.on_cpu]
    if cpu_ops:
        rows.append(
            (
                "Ops on the CPU",
                ", ".join(f"{op.type} ({op.name})" for op in cpu_ops[:5])
                + (f" and {len(cpu_ops) - 5} more" if len(cpu_ops) > 5 else ""),
            )
        )
    return rows


def _source_line(capture: CaptureFacts) -> str:
    producer = {"tensorflow": "TensorFlow's", "jax": "JAX's"}.get(capture.producer, "a")
    text = f"{capture.path} ({producer} profiler, {duration(capture.span_s)} traced"
    text += f", {byte_size(capture.bytes)})" if capture.bytes else ")"
    if capture.captured_steps:
        text += f"; {capture.captured_steps} steps asked for"
    if capture.overhead_s is not None:
        text += f", profiler start and stop took {duration(capture.overhead_s)}"
    if capture.note:
        text += f"; {capture.note}"
    return text


def _steps_line(capture: CaptureFacts) -> str:
    how = {
        "step markers": f"step markers ({capture.step_name})",
        "function calls": f"calls of {capture.step_name}",
        "device pattern": f"the GPU's repeating work ({capture.step_name})",
        "eager op pattern": f"an op run eagerly once a step ({capture.step_name})",
    }.get(capture.steps_from or "", capture.steps_from or "")
    text = f"{capture.step_count} from {how}"
    if capture.median_step_s is not None:
        text += f", median {duration(capture.median_step_s)}"
    if capture.busy_share is not None and len(capture.devices) > 1:
        total = capture.steps_s or 1.0
        each = ", ".join(f"{d.steps_busy_s / total:.0%}" for d in capture.devices)
        text += (
            f"; any of its {len(capture.devices)} GPUs busy {capture.busy_share:.1%} of them "
            f"(each: {each}; measured: their kernels' union)"
        )
    elif capture.busy_share is not None:
        text += f"; GPU busy {capture.busy_share:.1%} of them (measured: its kernels' union)"
    pattern = capture_facts.kernel_pattern(capture)
    if pattern is not None:
        text += (
            f"; {pattern.kernels_per_step} kernels a step, median "
            f"{duration(pattern.median_kernel_s, microseconds=True)} each"
        )
    return text


def _device_line(device: CaptureDevice) -> str:
    text = f"{device.model or device.name}: {device.kernels:,} kernels on {device.streams} streams"
    text += f", busy {duration(device.busy_s)}"
    if device.matmul_s > 0:
        share = device.matmul_tensor_core_s / device.matmul_s
        precisions = sorted({k.tensor_core for k in device.top_kernels if k.tensor_core} - {""})
        text += f"; convolutions and matmuls {share:.0%} on tensor cores"
        if precisions:
            text += f" ({', '.join(precisions)})"
    if device.modules:
        top = device.modules[0]
        text += f"; most time in {top.name} ({duration(top.time_s)})"
    return text


def _copies_line(device: CaptureDevice) -> str:
    parts = []
    for copies in device.copies:
        kind = copies.direction.replace("_to_", "→").replace("device", "GPU")
        part = f"{kind} {copies.count} ({byte_size(copies.bytes)}, {duration(copies.time_s)}"
        if copies.pageable:
            part += f", {copies.pageable} from pageable memory"
        parts.append(part + ")")
    return "; ".join(parts)


def _idle_line(capture: CaptureFacts) -> str:
    parts = [
        f"{share.activity} {share.share:.0%}"
        + (
            " (no event: Python between TF's calls, or the host idle)"
            if share.activity == NOT_RECORDED
            else ""
        )
        for share in capture.idle
        if share.share >= 0.01
    ]
    # without a GPU the shares are of the steps' whole time, by the host's events (the
    # Steps row's input wait is measured around next(), over every step)
    whole = "" if capture.devices else " (of the steps' whole time, by the host's events)"
    text = f"the host was in {', '.join(parts)}{whole}"
    own = [f for f in capture.python if f.file]
    if own:
        frame = own[0]
        text += f"; first Python frame: {frame.function} ({frame.file}:{frame.line})"
    return text
