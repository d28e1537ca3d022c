"""gpuwhy/line_numbers.py: a hook's code given its line array without its body running,
whatever the function takes, the thread's profile function left as it was, the lines
read afterwards the same. (What it saves is counted in benchmarks/bench_instructions.py.)"""

from __future__ import annotations

import sys

import pytest

from gpuwhy import line_numbers

ON_311 = sys.version_info[:2] == (3, 11)


def hook(seen: list, original):
    """A hook of the patches' shape: a closure, positional, keyword-only and variable
    arguments, the original called after lines of its own."""

    def wrapper(self, *args, flag, **kwargs):
        seen.append("body ran")
        first = len(seen)
        second = first + 1
        return original(self, second, *args, flag=flag, **kwargs)

    return wrapper


def where(_self, _second, *_args, flag, **_kwargs):
    """The caller's line, as TF reads it from the frame waiting in the call."""
    del flag
    return sys._getframe(1).f_lineno


@pytest.mark.skipif(not ON_311, reason="the line array is CPython 3.11's")
def test_the_body_never_runs_and_a_profiler_of_the_program_s_is_left_alone():
    seen: list[str] = []
    wrapper = hook(seen, where)

    def profiler(frame, event, arg):
        pass

    sys.setprofile(profiler)  # the program's own (cProfile's could not be put back)
    try:
        assert line_numbers.prepare(wrapper) is False
        assert sys.getprofile() is profiler
    finally:
        sys.setprofile(None)
    assert line_numbers.prepare(wrapper) is True
    assert sys.getprofile() is None and seen == []
    line = wrapper(None, flag=True)
    assert seen == ["body ran"]
    assert line == wrapper.__code__.co_firstlineno + 4  # the ``return original(...)`` line
    # once per code object: another closure of the same def shares it
    assert line_numbers.prepare(hook([], where)) is False


def test_what_has_no_such_code_is_left_alone():
    def steps():
        yield 1

    assert line_numbers.prepare(len) is False  # a builtin: no Python code
    assert line_numbers.prepare(steps) is False  # a generator's frame starts elsewhere
    assert list(steps()) == [1]
    if not ON_311:  # 3.12 and later compute lines without it
        assert line_numbers.prepare(hook([], where)) is False
