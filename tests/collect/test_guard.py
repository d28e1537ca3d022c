"""The one guard of a watched run, under its three policies."""

import pytest

from gpuwhy.collect.inprocess.guard import Guard, Policy


def fails() -> int:
    raise ValueError("bad value")


@pytest.mark.parametrize("policy", [Policy.HOOK, Policy.REPORT])
def test_a_failure_is_noted_and_gives_the_default(policy, monkeypatch):
    monkeypatch.delenv("GPUWHY_DEBUG", raising=False)
    notes: list[str] = ["earlier"]
    guard = Guard(policy, notes)
    assert guard("steps", fails, 7) == 7
    assert guard("steps", lambda: 3, 7) == 3
    assert notes == ["earlier", "steps failed: ValueError: bad value"]


def test_under_gpuwhy_debug_only_a_report_raises(monkeypatch):
    monkeypatch.setenv("GPUWHY_DEBUG", "1")
    with pytest.raises(ValueError, match="bad value"):
        Guard(Policy.REPORT)("steps", fails, None)
    hook = Guard(Policy.HOOK)
    assert hook("StepCollector.start", fails, None) is None  # never into the program
    assert hook.notes == ["StepCollector.start failed: ValueError: bad value"]


def test_a_live_update_skips_silently(monkeypatch):
    monkeypatch.setenv("GPUWHY_DEBUG", "1")
    live = Guard(Policy.LIVE)
    assert live("steps", fails, None) is None
    live.note("a note")
    assert live.notes == []


def test_a_keyboard_interrupt_is_never_swallowed():
    def interrupted() -> None:
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        Guard(Policy.HOOK)("steps", interrupted, None)
