"""`gpuwhy fix SCRIPT`'s report: the terminal rows, and the HTML section in a real
browser (each fix's verdicts, the projected row said to be projected, the patch copied)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from gpuwhy.facts import FixTrialFacts, FixTried
from gpuwhy.record import Record
from gpuwhy.report.run.html import HtmlRenderer
from gpuwhy.report.run.terminal import TerminalRenderer
from tests.report import builders as rb

PATCH = "".join(
    [
        "--- a/train.py\n",
        "+++ b/train.py\n",
        "@@ -20,3 +20,4 @@\n",
        " \n",
        " \n",
        "+@tf.function\n",
        " def train_step(images, labels):\n",
    ]
)

HELD = FixTried(
    finding="launch.eager-ops",
    fix="train_step traced: @tf.function",
    location="train.py:22",
    ran=True,
    same_results=True,
    tolerance="1% relative",
    compared="6 values of printed output",
    step_before_s=0.0045,
    step_after_s=0.0006,
    speedup=7.13,
    speedup_low=6.0,
    speedup_high=8.48,
    called="faster",
    held=True,
    in_patch=True,
    runs=5,  # 2 more rounds: the planned 3 left its gain unclear
    note="the one iterator still ends after the last step",
)
CRASHED = FixTried(
    finding="launch.eager-ops",
    fix="train_step traced and XLA-compiled",
    ran=False,
    error="AttributeError: 'SymbolicTensor' object has no attribute 'numpy'",
    runs=1,
)
PROJECTED = FixTried(
    finding="placement.forced-cpu",
    fix="the `with tf.device('/CPU:0'):` block removed",
    ran=True,
    same_results=True,
    step_before_s=0.0008,
    step_after_s=0.0007,
    speedup=1.1,
    speedup_low=0.9,
    speedup_high=1.3,
    called="same",
    projected=True,
    projected_gpu="A100",
    projected_before_s=0.0005,
    projected_after_s=0.0004,
    projected_speedup=1.25,
    projected_speedup_low=1.1,
    projected_speedup_high=1.3,
    held=True,
    runs=3,
)


def trial_record() -> Record:
    base = rb.watched_run()
    trial = FixTrialFacts(
        bound_s=30,
        runs_per_side=3,
        measure="step time",
        patch=PATCH,
        not_tried=(
            ("input.bound", "TF already runs its maps in parallel"),
            ("launch.eager-ops", "besides the fixes tried: the step's loop body cannot move"),
        ),
    )
    facts = replace(base.facts, fixes_tried=(HELD, CRASHED, PROJECTED), fix_trial=trial)
    return Record.diagnose("fix", facts)


def test_the_terminal_has_one_row_per_fix_and_the_patch():
    text = TerminalRenderer(color=False).render(trial_record())
    assert text.splitlines()[0].endswith(
        "2 of 3 fixes held; the patch keeps 1: train_step traced: @tf.function: step 7.13x faster "
        "(6.00x-8.48x), same results; 1 crashed."
    )
    assert "✓ HELD train_step traced: @tf.function" in text
    assert "7.13x (6.00x-8.48x, 95%), faster" in text
    assert "runs: yes, 5 times: 2 more after 3 left its gain unclear" in text
    assert text.count("runs: yes\n") == 1  # the projected fix ran the planned 3
    assert "runs: NO: AttributeError: 'SymbolicTensor'" in text
    assert "✓ HELD (projected)" in text and "projected on A100" in text
    assert "not tried for input.bound: TF already runs its maps in parallel" in text
    assert "for launch.eager-ops, not tried besides those: the step's loop body cannot move" in text
    assert "+@tf.function" in text
    # what the person pasting it should know, under its row (none where it has none)
    assert "    note: the one iterator still ends after the last step\n    in the patch" in text
    assert text.count("note:") == 1


def test_the_html_section_in_a_browser(open_report, tmp_path: Path):
    path = tmp_path / "fix.html"
    path.write_text(HtmlRenderer().render(trial_record()), encoding="utf-8")
    opened = open_report(path)
    page = opened.page
    assert opened.errors == [] and opened.fetched == []
    rows = page.locator("#fixes-tried-table tbody tr")
    assert rows.count() == 3
    first = rows.nth(0).inner_text()
    assert "train_step traced: @tf.function" in first and "held, in the patch" in first
    assert "5 times: 2 more after 3" in first
    assert "(note: the one iterator still ends after the last step)" in first
    assert "NO: AttributeError" in rows.nth(1).inner_text()
    assert "a prediction from the traced graph" in rows.nth(2).inner_text()
    page.locator("#fixes-tried button.copy").click()
    page.wait_for_function(
        "() => document.querySelector('#fixes-tried button.copy').textContent === 'Copied'"
    )
    assert page.evaluate("navigator.clipboard.readText()") == PATCH  # its last newline too
