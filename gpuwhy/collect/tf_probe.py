"""Import TensorFlow in a child process with a time limit and read what it saw.

The child (``child/tf_child.py``) reports by stages, so when it hangs or dies the facts
still hold everything learned before that, plus the stage it was in: "hung in
list_gpus" points at cuInit, "crashed with SIGILL in import" at a CPU without AVX.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

from gpuwhy.facts import TensorFlowFacts, from_dict

CHILD = Path(__file__).with_name("child") / "tf_child.py"
MARK = "@@gpuwhy-probe "

# TF/XLA log lines worth keeping as evidence; the rest of stderr is noise for a doctor.
_RELEVANT = re.compile(
    r"cuda|cudnn|cublas|cufft|cusolver|cusparse|dlopen|dynamic library|gpu|driver|"
    r"compute capability|ptx|jit|TF_FORCE_GPU_ALLOW_GROWTH|TF_GPU_ALLOCATOR|nccl",
    re.IGNORECASE,
)
# glog/absl prefix: "E0000 00:00:1795241112.608977    5511 " (severity, time, thread id)
_GLOG_PREFIX = re.compile(r"^([IWEF])\d{4} [\d:.]+\s+\d+ ")


class TensorFlowProbe:
    """A running child; :meth:`result` waits for it (the parent works meanwhile)."""

    def __init__(
        self,
        python: str = sys.executable,
        timeout: float = 120.0,
        env: dict[str, str] | None = None,
    ) -> None:
        self.timeout = timeout
        child_env = dict(os.environ if env is None else env)
        child_env["TF_CPP_MIN_LOG_LEVEL"] = "0"  # we want TF's own words; they are not shown raw
        # The confirming matmul must not map nearly all memory of every GPU for a moment.
        child_env["TF_FORCE_GPU_ALLOW_GROWTH"] = "true"
        child_env.pop("TF_GPU_ALLOCATOR", None)
        child_env.setdefault("PYTHONUNBUFFERED", "1")
        try:
            self.proc: subprocess.Popen | None = subprocess.Popen(
                [python, str(CHILD)],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                stdin=subprocess.DEVNULL,
                env=child_env,
                text=True,
                errors="replace",
                start_new_session=True,
            )
            self.start_error: str | None = None
        except OSError as e:
            self.proc, self.start_error = None, f"cannot start {python}: {e.strerror or e}"

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc else None

    def result(self) -> TensorFlowFacts:
        if self.proc is None:
            return TensorFlowFacts(
                installed=False, probe_status="error", import_error=self.start_error
            )
        status = "ok"
        try:
            out, err = self.proc.communicate(timeout=self.timeout)
        except subprocess.TimeoutExpired:
            status = "timeout"
            self.kill()
            out, err = self.proc.communicate()
        except BaseException:
            # Ctrl-C: the child has its own session and never saw the signal.
            self.kill()
            raise
        return parse(out, err, self.proc.returncode, status, self.timeout)

    def kill(self) -> None:
        """Kill the child and anything it started (its own process group)."""
        if self.proc is None or self.proc.poll() is not None:
            return
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (OSError, AttributeError):  # AttributeError: no process groups on Windows
            self.proc.kill()
        self.proc.wait()


def parse(
    out: str, err: str, returncode: int | None, status: str = "ok", timeout: float = 0.0
) -> TensorFlowFacts:
    """Child output -> TensorFlowFacts. Pure, so recorded outputs can be tested."""
    stage, known, result = None, {}, None
    for line in out.splitlines():
        if not line.startswith(MARK):
            continue
        try:
            message = json.loads(line[len(MARK) :])
        except ValueError:
            continue
        if "result" in message:
            result = message["result"]
        else:
            stage, known = message.get("stage"), message.get("known", {})
    data: dict[str, Any] = dict(result if result is not None else known)
    data["log_lines"] = log_lines(err)
    if "probe_error" in data:
        data.update(probe_status="error", import_error=data.pop("probe_error"))
    if result is None:
        data.setdefault("installed", bool(known.get("installed")))
        data["hung_in"] = stage
        if status == "timeout":
            data["probe_status"] = "timeout"
            data["import_error"] = f"no answer after {timeout:g} s (stage: {stage or 'start'})"
        elif returncode is not None and returncode < 0:
            name = _signal_name(-returncode)
            data.update(
                probe_status="crashed",
                signal=name,
                import_error=f"the Python process died with {name} (stage: {stage})",
            )
        else:
            tail = [ln for ln in err.strip().splitlines() if ln.strip()][-1:] or ["no output"]
            data.update(
                probe_status="error", import_error=f"exit status {returncode}: {tail[0][:300]}"
            )
    return from_dict(TensorFlowFacts, data)


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def log_lines(stderr: str) -> tuple[str, ...]:
    """TF's GPU-related log lines, glog prefix reduced to its severity, duplicates folded
    (TF initialises two shared objects and prints some lines twice)."""
    seen: dict[str, None] = {}
    for raw in stderr.splitlines():
        match = _GLOG_PREFIX.match(raw)
        if not match:
            continue
        text = f"{match.group(1)} {raw[match.end() :].strip()}"
        if _RELEVANT.search(text) and "cpu_feature_guard" not in text:
            seen.setdefault(text[:500], None)
    return tuple(seen)
