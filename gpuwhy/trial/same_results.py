"""Whether a variant computes what the original computes: the values the program
reports, compared one by one within a stated tolerance.

Where the values come from: Keras' logs of the first batches and of each epoch (kept by
``gpuwhy.trial.child``), else the numbers the program prints and a few elements of its
trainable variables after its first steps (a custom loop's). A printed line is keyed by
its text with the numbers taken out (``epoch # loss #``) and by how many such lines came
before it, so the first ``epoch # loss #`` of one run meets the first of the other,
whatever else either printed between them; numbers followed by a unit of time (``3.2 s``,
``12ms/step``, ``2.62s``) are timings, not results, nor part of their line's key, and a
Keras progress bar's counter (``3/55``) is how far a loop got.

Only values the original reproduces are compared: with several runs of the original, a
value that differs between them by more than the tolerance (a timing printed without a
unit, a value drawn from an unseeded generator) is left out, and the tolerance of each
value is at least three times the original runs' own spread of it. A printed tensor's
dtype word is not part of its line's key. A variant that stopped earlier (a slower fix,
within the same bound) is compared on the values both reached.
"""

from __future__ import annotations

import json
import math
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

RTOL = 0.01  # relative tolerance: float32 instead of float64, a graph's reordered sums
ATOL = 1e-6
MAX_LINES = 200  # printed lines with numbers read from the start of the output

_NUMBER = re.compile(r"(?<![\w.])[-+]?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?(?![\w.])")
_UNITS = r"(?:ms|s|sec|secs|second|seconds|us|µs|ns|min|m|h|it/s|/s|ms/step|s/step|us/step)"
_TIMING = re.compile(rf"^\s*{_UNITS}\b")
# a number written against its unit (``2.62s``, ``12ms/step``, ``1.5min``): not a number
# to _NUMBER (a word character follows it), so neither a value nor a ``#`` of its line's
# key, which then held the timing itself ("epoch # in 2.62s") and met another run's line
# of another epoch that took the same time (helper-57's distributed tutorial: "3 against 2")
_GLUED_TIMING = re.compile(
    rf"(?<![\w.])[-+]?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?{_UNITS}(?![\w.])"
)
# a printed tensor's dtype (``dtype=float64``) is not a result: a precision fix changes it
_DTYPE = re.compile(r"\b(?:b?float(?:16|32|64))\b")
VARIABLES = "the trained variables"
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]|[\r\b]")
# a Keras progress bar's counter (``1/1 ━━━━`` and ``3/55 [====>....]``): how far a loop
# got, not a result. A fix that takes a predict() loop away takes its bars with it: its
# counters would shift every later line of the same shape
_PROGRESS = re.compile(r"\d+/\d+(?=(?:[ \t]|\x1b\[[0-9;]*[A-Za-z])*(?:━|\[[=>.]+\]))")


@dataclass(frozen=True)
class Values:
    """What one run reported: (key, value) in order, and where they came from."""

    source: str  # "Keras' logs" | "printed output" | "none"
    items: tuple[tuple[str, float], ...]

    def as_dict(self) -> dict[str, float]:
        return dict(self.items)


@dataclass(frozen=True)
class Sameness:
    same: bool | None  # None: nothing the original reproduces to compare
    compared: int  # values compared
    how: str  # what was compared, or why nothing was
    first_difference: str | None = None  # "epoch 2 loss: 0.0000 against 0.6931"
    # where the values are the same within the tolerance: the one furthest from the
    # original's, relative to it ("epoch 9 loss: 0.4275 against 0.4233, 0.99%"); None
    # where every value is the original's exactly
    largest_difference: str | None = None


def read_values(results_path: str, stdout: str) -> Values:
    """Keras' logs where the program has them; else what it prints and its trained
    variables after its first steps (gpuwhy.trial.child)."""
    keras = _logged_values(results_path, ("batch", "epoch"))
    if keras:
        return Values("Keras' logs", tuple(keras))
    printed = printed_values(stdout)
    variables = _logged_values(results_path, ("variables",))
    sources = [name for name, got in (("printed output", printed), (VARIABLES, variables)) if got]
    return Values(" and ".join(sources) or "none", tuple(printed + variables))


def _logged_values(path: str, kinds: tuple[str, ...]) -> list[tuple[str, float]]:
    """The rows of ``kinds`` the child wrote, keyed ``kind index name``, and ``in fit N``
    where a key comes again: a program that fits one model after another (TF's
    time-series tutorial, thirteen) logs ``epoch 0 loss`` once a fit, and a run bounded
    in time reaches as many fits as its pace lets it: keyed alone, the last one each run
    reached was compared, another model on each side."""
    out = []
    seen: Counter[str] = Counter()
    try:
        with open(path, encoding="utf-8") as f:
            for line in f:
                try:
                    row = json.loads(line)
                except ValueError:
                    continue
                if row.get("kind") not in kinds:
                    continue
                for name, value in row.get("values", {}).items():
                    key = f"{row.get('kind')} {row.get('index')} {name}"
                    seen[key] += 1
                    if seen[key] > 1:
                        key += f" in fit {seen[key]}"
                    out.append((key, float(value)))
    except OSError:
        return []
    return out


def printed_values(stdout: str) -> list[tuple[str, float]]:
    """The numbers of the printed lines, keyed ``template|occurrence|position``."""
    out: list[tuple[str, float]] = []
    seen: Counter[str] = Counter()
    lines = 0
    for raw in _ANSI.sub("\n", _PROGRESS.sub("", stdout)).splitlines():
        raw = _GLUED_TIMING.sub("#", raw)
        numbers = [m for m in _NUMBER.finditer(raw) if not _TIMING.match(raw[m.end() :])]
        if not numbers:
            continue
        template = _NUMBER.sub("#", _DTYPE.sub("float", raw)).strip()
        occurrence = seen[template]
        seen[template] += 1
        for k, m in enumerate(numbers):
            try:
                out.append((f"{template}|{occurrence}|{k}", float(m.group())))
            except ValueError:
                continue
        lines += 1
        if lines >= MAX_LINES:
            break
    return out


def tolerance_text(rtol: float = RTOL, why: str | None = None) -> str:
    text = f"{rtol:.0%} relative (at least 3x the original runs' own spread of each value)"
    return f"{text}: {why}" if why else text


def compare(
    originals: Sequence[Values], variant: Values, rtol: float = RTOL, by_mean: bool = False
) -> Sameness:
    """``variant`` against the original runs (the first is the reference), each value
    within ``rtol`` of the reference's; ``by_mean``: each quantity's mean over the values
    both reached (a precision change starts from other weights: its curve, not each
    point, must match)."""
    if not originals or not originals[0].items:
        return Sameness(
            None,
            0,
            "the original reported no values to compare (no Keras logs, no printed numbers, "
            "no variables read after its steps)",
        )
    reference = originals[0].as_dict()
    others = [o.as_dict() for o in originals[1:]]
    stable: dict[str, float] = {}
    unstable = 0
    for key, value in reference.items():
        spread = max((abs(o[key] - value) for o in others if key in o), default=0.0)
        if spread > RTOL * abs(value) + ATOL:
            unstable += 1  # differs between runs of the original: a timing, not a result
            continue
        stable[key] = spread
    if not stable:
        return Sameness(
            None,
            0,
            f"none of the {len(reference)} values the original reports repeat between its runs",
        )
    got = variant.as_dict()
    scales = _variable_scales(reference, MEAN_SCALE_SHARE if by_mean else MODEL_SCALE_SHARE)
    if by_mean:
        return _compare_means(reference, stable, got, rtol, originals[0].source, unstable, scales)
    compared = 0
    largest = _Largest()
    for key, value in reference.items():
        if key not in stable or key not in got:
            continue
        compared += 1
        if _differ(value, got[key], rtol, stable[key], scales.get(_variable(key), 0.0)):
            return Sameness(
                False,
                compared,
                _how(originals[0].source, compared, unstable),
                f"{_label(key)}: {got[key]:.6g} against {value:.6g}",
            )
        largest.see(_label(key), value, got[key])
    if compared == 0:
        return Sameness(
            None, 0, f"the fix reported none of the original's values ({originals[0].source})"
        )
    how = _how(originals[0].source, compared, unstable)
    return Sameness(True, compared, how, largest_difference=largest.text)


@dataclass
class _Largest:
    """The value furthest from the original's, relative to it, among those that held."""

    relative: float = 0.0
    text: str | None = None

    def see(self, label: str, value: float, other: float) -> None:
        if not (math.isfinite(value) and math.isfinite(other)) or other == value:
            return
        relative = abs(other - value) / max(abs(value), abs(other))
        if relative > self.relative:
            self.relative = relative
            self.text = f"{label}: {other:.6g} against {value:.6g}, {relative:.2%}"


def _differ(value: float, other: float, rtol: float, spread: float, scale: float = 0.0) -> bool:
    """Beyond ``rtol`` of the larger (or of ``scale``: a variable's element near zero is
    judged against the variable's own size), or beyond 3x the originals' own spread."""
    if math.isnan(value) or math.isnan(other) or math.isinf(value) or math.isinf(other):
        return not (value == other or (math.isnan(value) and math.isnan(other)))
    tolerance = max(rtol * max(abs(value), abs(other), scale) + ATOL, 3 * spread)
    return abs(other - value) > tolerance


def _variable(key: str) -> str:
    """The variable a sampled element's key belongs to (``name[shape]``), else ``""``:
    ``variables 20 dense/kernel:0[8, 8]#3`` and the quantity ``variables dense/...#3``."""
    if not key.startswith("variables ") or "#" not in key:
        return ""
    rest = key[len("variables ") :]
    index, _, label = rest.partition(" ")
    return (label if index.isdigit() and label else rest).rsplit("#", 1)[0]


MODEL_SCALE_SHARE = 0.1  # of the model's typical variable size: the least one is judged by
# under a precision change (each quantity's mean): the typical size itself. An element
# near zero moves by about the learning rate each step whatever its sign, and 16-bit
# gradients flip the sign of the smallest (a GAN's bias under bfloat16: 1.4e-4 against
# -2.9e-4 after 20 steps at 1e-4, its weights 0.03): judged against a tenth of the
# weights it adds to it is no difference, against their hundredth it was one
MEAN_SCALE_SHARE = 1.0


def _variable_scales(
    reference: dict[str, float], share: float = MODEL_SCALE_SHARE
) -> dict[str, float]:
    """Per variable, the largest of its sampled elements in the original: a bias that
    starts at zero has elements near zero whose relative change means nothing. And no
    less than ``share`` of the model's typical variable (the median of those largest): a
    bias or a batch norm's beta that every element of stays near zero after a few steps
    (each moved by about the learning rate) is judged against the weights it adds to,
    not against its own drift (a GAN's betas: 1e-5 against 3e-4 under bfloat16)."""
    scales: dict[str, float] = {}
    for key, value in reference.items():
        name = _variable(key)
        if name and math.isfinite(value):
            scales[name] = max(scales.get(name, 0.0), abs(value))
    if len(scales) >= 2:
        ordered = sorted(scales.values())
        floor = share * ordered[len(ordered) // 2]
        scales = {name: max(scale, floor) for name, scale in scales.items()}
    return scales


def _quantity(key: str) -> str:
    """``batch loss`` for ``batch 3 loss``; a printed value's line template and position."""
    if "|" in key:
        template, _, position = key.rsplit("|", 2)
        return f"{template}|{position}"
    parts = key.split(" ", 2)
    return f"{parts[0]} {parts[-1]}"


def _compare_means(
    reference: dict[str, float],
    stable: dict[str, float],
    got: dict[str, float],
    rtol: float,
    source: str,
    unstable: int,
    scales: dict[str, float],
) -> Sameness:
    groups: dict[str, list[tuple[float, float]]] = {}
    for key, value in reference.items():
        if key in stable and key in got:
            groups.setdefault(_quantity(key), []).append((value, got[key]))
    compared = sum(len(v) for v in groups.values())
    if not compared:
        return Sameness(None, 0, f"the fix reported none of the original's values ({source})")
    how = _how(source, compared, unstable) + ", each quantity's mean"
    largest = _Largest()
    for name, pairs in groups.items():
        mean_ref = sum(p[0] for p in pairs) / len(pairs)
        mean_got = sum(p[1] for p in pairs) / len(pairs)
        label = _label(name + "|0") if "|" in name else name
        if _differ(mean_ref, mean_got, rtol, 0.0, scales.get(_variable(name), 0.0)):
            return Sameness(
                False, compared, how, f"mean {label}: {mean_got:.6g} against {mean_ref:.6g}"
            )
        largest.see(f"mean {label}", mean_ref, mean_got)
    return Sameness(True, compared, how, largest_difference=largest.text)


def _how(source: str, compared: int, unstable: int) -> str:
    text = f"{compared} values of {source}"
    if unstable:
        text += f" ({unstable} that differ between runs of the original left out)"
    return text


def _label(key: str) -> str:
    """``epoch 2 loss`` or the printed line's template with the value's place marked."""
    if "|" not in key:
        return key
    template, occurrence, position = key.rsplit("|", 2)
    return f"value {int(position) + 1} of printed line '{template}' (#{int(occurrence) + 1})"
