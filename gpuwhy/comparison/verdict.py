"""The first line of ``gpuwhy diff``: faster, slower or no measurable difference, by
how much with its interval, the part that moved most, and what else changed."""

from __future__ import annotations

from gpuwhy.comparison.comparable_units import REST
from gpuwhy.comparison.environment import HOST_LOAD, QUEUED
from gpuwhy.comparison.model import Change, EnvironmentChange, PartChange
from gpuwhy.formatting import duration

BY_FACTOR = 1.25  # changes this large are said as a factor ("1.31x faster"), smaller in %


def diff_verdict(
    step: Change | None,
    busy: Change | None,
    parts: tuple[PartChange, ...],
    environment: tuple[EnvironmentChange, ...],
    confounded: str | None = None,
    example: Change | None = None,
    batches: tuple[int, int] | None = None,
    runs: tuple[int, int] = (1, 1),
) -> str:
    """The first line: faster, slower or no measurable difference, by how much with its
    interval, and the part that moved most."""
    if step is None:
        if busy is None:
            where = "records" if runs == (1, 1) else "sides"
            return f"Nothing to compare: neither training steps nor GPU samples in both {where}."
        return _busy_verdict(busy)
    b, a = duration(step.before), duration(step.after)
    interval = _ratio_interval(step)
    if example is not None and batches is not None:
        text = (
            f"AFTER trains on batches of {batches[1]} against {batches[0]}: "
            + (
                "no measurable difference per example "
                f"(AFTER/BEFORE {example.estimate:.3f}, {example.low:.3f}-{example.high:.3f}, 95%)"
                if example.called == "same"
                else _ratio_interval(example).replace("per step", "per example")
            )
            + f"; {interval if step.called != 'same' else 'no measurable difference per step'}"
            + f" ({b} -> {a} a step)"
        )
    elif step.called == "same":
        text = (
            f"No measurable difference in step time: {b} and {a} a step "
            f"(AFTER/BEFORE {step.estimate:.3f}, {step.low:.3f}-{step.high:.3f}, 95%); "
            + (
                f"these runs cannot show a change under {step.detectable:.0%}"
                if runs == (1, 1)
                else f"with {runs_a_side(*runs)} this program can show changes of "
                f"{step.detectable:.0%} or more"
            )
        )
    else:
        text = f"AFTER is {interval}: {b} -> {a} a step"
        if runs != (1, 1):
            text += f" ({runs_a_side(*runs)})"
    if example is None and step.called != "same":
        moved = _largest_part(parts, step)
        if moved is not None:
            text += f"; {moved}"
    if confounded:
        text += f"; but {confounded}"
    # the host's load is said where it may explain the change (confounded), and the
    # program's own waiting for a core is a measure, not a difference of set-up
    others = [
        e.what for e in environment if e.what != QUEUED and (e.what != HOST_LOAD or not confounded)
    ]
    if others:
        text += f" (also changed: {', '.join(others[:3])})"
    return text + "."


def _ratio_interval(step: Change) -> str:
    """ "1.31x faster per step (1.24-1.38x, 95%)" or "12% slower per step (+8% to +16%, 95%)"."""
    if step.estimate <= 1 / BY_FACTOR:
        return (
            f"{1 / step.estimate:.2f}x faster per step "
            f"({1 / step.high:.2f}-{1 / step.low:.2f}x, 95%)"
        )
    if step.estimate >= BY_FACTOR:
        return f"{step.estimate:.2f}x slower per step ({step.low:.2f}-{step.high:.2f}x, 95%)"
    word = "slower" if step.estimate > 1 else "faster"
    return (
        f"{abs(step.estimate - 1):.1%} {word} per step "
        f"({step.low - 1:+.1%} to {step.high - 1:+.1%}, 95%)"
    )


def _largest_part(parts: tuple[PartChange, ...], step: Change) -> str | None:
    """The part that moved most in the step's direction, where it was called (a part
    the split names: not the rest)."""
    direction = 1 if step.called == "slower" else -1
    moved = [p for p in parts if p.called and p.delta_s * direction > 0 and p.part != REST]
    if not moved:
        return None
    best = max(moved, key=lambda p: abs(p.delta_s))
    share = f" ({best.share:.0%} of the change)" if best.share is not None else ""
    return f"{best.label} {duration(best.before_s)} -> {duration(best.after_s)}{share}"


def _busy_verdict(busy: Change) -> str:
    span = f"{busy.before:.0%} -> {busy.after:.0%}"
    interval = f"{busy.low * 100:+.0f} to {busy.high * 100:+.0f} points, 95%"
    if busy.called == "same":
        return f"No measurable difference in GPU busy: {span} ({interval})."
    return f"The GPUs are busy {busy.called} in AFTER: {span} ({interval})."


def runs_a_side(runs_b: int, runs_a: int) -> str:
    return f"{runs_text(runs_b)} a side" if runs_b == runs_a else f"{runs_b} and {runs_a} runs"


def runs_text(n: int) -> str:
    return "1 run" if n == 1 else f"{n} runs"
