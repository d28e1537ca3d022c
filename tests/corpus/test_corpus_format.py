"""The corpus's own reading of its expectations: what counts as lost, added or changed."""

import os
from pathlib import Path

from tests.corpus.corpus import ROOT, Found, differences, outside_the_program, parse


def _entry(tmp_path: Path, text: str):
    program = tmp_path / "prog.py"
    program.write_text(text)
    return parse(program)


HEAD = '''"""A program."""
# corpus-options: --target A100
# corpus-env: TF_FORCE_GPU_ALLOW_GROWTH=1
# expect: input.bound high
# expect: input.no-cache low|medium -- the host's load moves it
# maybe: launch.eager-ops low -- the Python call per step
'''


def test_the_lines_are_read(tmp_path):
    entry = _entry(tmp_path, HEAD)
    assert entry.options == ["--target", "A100"]
    assert entry.env == {"TF_FORCE_GPU_ALLOW_GROWTH": "1"}
    assert [(e.id, sorted(e.severities), e.optional) for e in entry.expected] == [
        ("input.bound", ["high"], False),
        ("input.no-cache", ["low", "medium"], False),
        ("launch.eager-ops", ["low"], True),
    ]
    assert entry.expected[1].why == "the host's load moves it"


def test_lost_added_and_changed_are_told_apart(tmp_path):
    entry = _entry(tmp_path, HEAD)
    bound = Found("input.bound", "high", "prog.py:3", "t")
    cache = Found("input.no-cache", "medium", "prog.py:4", "t")
    assert differences(entry, [bound, cache]) == []
    assert differences(entry, [cache]) == ["lost: input.bound high"]
    low = Found("input.bound", "medium", "prog.py:3", "waits")
    assert differences(entry, [low, cache]) == [
        "changed: input.bound is medium, expected high (waits)"
    ]
    extra = Found("steps.drift", "medium", None, "slower")
    assert differences(entry, [bound, cache, extra]) == ["added: steps.drift medium (slower)"]
    # a `maybe` finding may be there or not, at its severities only
    eager = Found("launch.eager-ops", "low", "prog.py:9", "t")
    assert differences(entry, [bound, cache, eager]) == []
    high = Found("launch.eager-ops", "high", "prog.py:9", "t")
    assert differences(entry, [bound, cache, high]) == [
        "changed: launch.eager-ops is high, expected low (t)"
    ]


def test_a_location_outside_the_program_is_reported(tmp_path):
    entry = _entry(tmp_path, HEAD)
    own = Found("input.bound", "high", f"{os.path.relpath(entry.path, ROOT)}:3", "t")
    library = Found("input.bound", "high", "/venv/site-packages/keras/callback_list.py:217", "t")
    assert outside_the_program(entry, [library]) == [
        "input.bound at /venv/site-packages/keras/callback_list.py:217"
    ]
    assert outside_the_program(entry, [own]) == []
