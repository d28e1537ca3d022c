"""The corpus: real programs and saved GPU records, each with the findings gpuwhy must
give on it written next to it, so that a change that loses a finding (or adds one) fails.

A program (``programs/NAME.py``) carries its expectations in comment lines:

    # corpus-options: --target A100        gpuwhy run's own options
    # corpus-args: --epochs 2              the program's arguments
    # corpus-env: NAME=VALUE               the program's environment
    # expect: input.bound high             one line per finding, id and severity
    # expect: input.bound low|medium -- why  severities a finding may take, and why
    # maybe: input.bound low|medium -- why   a finding the host's load makes or unmakes

A saved record, recording or capture (``saved/NAME.expect``) names its file with
``# corpus-source: tests/data/...`` and lists its findings the same way; it is read with
``gpuwhy report`` and the entry's ``corpus-options`` (a gpuwhy record: ``--recheck``, so
that today's rules judge its facts, not the findings it was saved with). A finding whose severity follows the host's load (the same program is
"low" on a busy machine and "medium" on a quiet one) lists both, with the reason after
``--``: every other line is one severity. An expectation changes only in a commit that
says why. A ``maybe`` line is for a finding that is there on a quiet machine and not on
a busy one (or the reverse) whatever the program does: the Python call per step measured
against a step of a millisecond. It never stands for a finding a program is about.

``python -m tests.corpus.corpus [NAME ...]`` runs the programs (all, or those named) and
prints what each found as ``# expect:`` lines, to compare with what is written.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import tempfile
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
PROGRAMS = HERE / "programs"
SAVED = HERE / "saved"
GPUWHY = str(Path(sys.executable).with_name("gpuwhy"))
TIMEOUT_S = 600


@dataclass(frozen=True)
class Expected:
    """One finding the corpus entry must give: its id and the severities it may take."""

    id: str
    severities: frozenset[str]
    why: str = ""
    optional: bool = False  # a `maybe:` line


@dataclass
class Entry:
    """A program or a saved file of the corpus and what gpuwhy must find on it."""

    name: str
    path: Path  # the program, or the .expect file
    source: Path | None = None  # a saved record/recording/capture, for `gpuwhy report`
    options: list[str] = field(default_factory=list)
    args: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    expected: list[Expected] = field(default_factory=list)

    @property
    def is_program(self) -> bool:
        return self.source is None


@dataclass(frozen=True)
class Found:
    id: str
    severity: str
    location: str | None
    title: str


def parse(path: Path) -> Entry:
    """The entry that ``path`` (a program or a .expect file) describes."""
    entry = Entry(name=path.stem, path=path)
    for raw in path.read_text().splitlines():
        line = raw.strip()
        if not line.startswith("# "):
            continue
        key, sep, value = line[2:].partition(":")
        if not sep:
            continue
        value = value.strip()
        if key in ("expect", "maybe"):
            spec, _, why = value.partition(" -- ")
            rule, severities = spec.split()
            entry.expected.append(
                Expected(rule, frozenset(severities.split("|")), why.strip(), key == "maybe")
            )
        elif key == "corpus-options":
            entry.options += shlex.split(value)
        elif key == "corpus-args":
            entry.args += shlex.split(value)
        elif key == "corpus-env":
            name, _, setting = value.partition("=")
            entry.env[name] = setting
        elif key == "corpus-source":
            entry.source = ROOT / value
    return entry


def entries() -> list[Entry]:
    """Every program and saved file of the corpus, programs first, by name."""
    programs = sorted(PROGRAMS.glob("*.py"))
    saved = sorted(SAVED.glob("*.expect"))
    return [parse(p) for p in programs + saved]


def run(entry: Entry) -> tuple[int, list[Found], str]:
    """gpuwhy on the entry, as a user runs it: (exit status, findings, stderr's tail).
    A program runs from the repository's root, so its locations read
    ``tests/corpus/programs/NAME.py:LINE``."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "run.json"
        if entry.source is None:
            command = [GPUWHY, "run", "--json", str(out), *entry.options]
            command += [os.path.relpath(entry.path, ROOT), *entry.args]
        else:
            command = [GPUWHY, "report", "--json", str(out), *entry.options, str(entry.source)]
        env = {
            "TF_CPP_MIN_LOG_LEVEL": "2",
            "PATH": "/usr/bin:/bin",
            "PYTHONPATH": str(ROOT),
            "HOME": os.environ.get("HOME", tmp),
            **entry.env,
        }
        result = subprocess.run(
            command, capture_output=True, text=True, cwd=ROOT, env=env, timeout=TIMEOUT_S
        )
        if not out.exists():
            return result.returncode, [], result.stderr[-3000:]
        record = json.loads(out.read_text())
    found = [
        Found(f["id"], f["severity"], f.get("location"), f["title"]) for f in record["findings"]
    ]
    return result.returncode, found, result.stderr[-3000:] + "\n" + digest(record)


def digest(record: dict) -> str:
    """The facts a finding's presence turns on most often, in a few lines: what a
    difference seen only on another machine (CI) is read from, where the report's tail
    does not hold them."""
    lines = ["-- facts --"]
    steps = record.get("steps") or {}
    if steps:
        lines.append(
            "steps: "
            + ", ".join(
                f"{key}={steps.get(key)}"
                for key in (
                    "source",
                    "count",
                    "warmup",
                    "median_s",
                    "total_s",
                    "input_wait_fraction",
                    "input_wait_error",
                )
            )
        )
    eager = record.get("eager") or {}
    if eager:
        keys = ("sampled_steps", "ops", "per_step", "dispatch_fraction", "counted_s")
        lines.append(
            "eager: " + ", ".join(f"{key}={eager.get(key)}" for key in (*keys, "core_wait_s"))
        )
    for p in (record.get("tfdata") or {}).get("pipelines", ()):
        lines.append(
            f"pipeline {p.get('id')} {p.get('consumer')}: elements={p.get('elements')}, "
            f"iterators={p.get('iterators')}, wait={p.get('wait_per_element_s')} "
            f"({p.get('wait_source')}), gap mean={p.get('gap_mean_s')} "
            f"median={p.get('gap_median_s')} n={p.get('gap_count')}"
        )
    windows = (record.get("timeline") or {}).get("windows") or ()
    others = [w["cpu_others_share"] for w in windows if w.get("cpu_others_share") is not None]
    if others:
        lines.append(
            f"other processes' share of the host's CPU: mean {sum(others) / len(others):.2f}"
        )
    return "\n".join(lines)


def differences(entry: Entry, found: list[Found]) -> list[str]:
    """What ``found`` lost, added or changed against the entry's expectations: one line
    each, empty where it matches."""
    out: list[str] = []
    left = list(found)
    for expected in entry.expected:
        match = next((f for f in left if f.id == expected.id), None)
        if match is None:
            if expected.optional:
                continue
            out.append(f"lost: {expected.id} {'|'.join(sorted(expected.severities))}")
            continue
        left.remove(match)
        if match.severity not in expected.severities:
            out.append(
                f"changed: {expected.id} is {match.severity}, expected "
                f"{'|'.join(sorted(expected.severities))} ({match.title[:160]})"
            )
    out += [f"added: {f.id} {f.severity} ({f.title[:160]})" for f in left]
    return out


def outside_the_program(entry: Entry, found: list[Found]) -> list[str]:
    """Findings whose location is not in the program's own file: a library's frame, or
    gpuwhy's."""
    own = os.path.relpath(entry.path, ROOT)
    return [
        f"{f.id} at {f.location}"
        for f in found
        if f.location is not None and f.location.rpartition(":")[0] != own
    ]


def counts(found: list[Found]) -> Counter[tuple[str, str]]:
    return Counter((f.id, f.severity) for f in found)


def main(names: list[str]) -> int:
    for entry in entries():
        if names and entry.name not in names:
            continue
        code, found, tail = run(entry)
        print(f"== {entry.name}: exit {code}")
        for f in found:
            print(f"# expect: {f.id} {f.severity}    ({f.location}) {f.title[:100]}")
        if not found and code:
            print(tail)
        for line in differences(entry, found):
            print(f"   differs: {line}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
