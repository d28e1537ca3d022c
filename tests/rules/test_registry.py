"""The registry, the docs table and every rule's documentation agree."""

import re
from pathlib import Path

import pytest

from gpuwhy.facts import Facts
from gpuwhy.rules import ALL_RULES, UnknownRuleError, get_rule, run_rules
from gpuwhy.rules.base import REQUIRED_HEADINGS, SEVERITIES, STATUSES, Rule

CATALOGUE = Path(__file__).parents[2] / "docs" / "findings.md"


def catalogue_rows():
    rows = re.findall(
        r"^\| \[([a-z]+\.[a-z0-9-]+)\]\(#[a-z0-9-]+\) \|.*\| (\w+) \|$", CATALOGUE.read_text(), re.M
    )
    return dict(rows)


def test_ids_are_unique_sorted_and_match_the_catalogue():
    ids = [r.id for r in ALL_RULES]
    assert len(ids) == len(set(ids))
    assert ids == sorted(ids)
    assert set(ids) == set(catalogue_rows())


def test_catalogue_states_match_the_rules():
    rows = catalogue_rows()
    for rule in ALL_RULES:
        assert rows[rule.id] == rule.status, rule.id


@pytest.mark.parametrize("rule", ALL_RULES, ids=lambda r: r.id)
def test_rule_is_fully_documented(rule: type[Rule]):
    doc = rule.doc()
    positions = [doc.find(h) for h in REQUIRED_HEADINGS]
    assert all(p >= 0 for p in positions), f"{rule.id} lacks a heading"
    assert positions == sorted(positions), f"{rule.id}: headings out of order"
    assert set(rule.documented_options()) == set(rule.options), rule.id
    assert rule.severity in SEVERITIES and rule.status in STATUSES
    assert rule.question and rule.summary()
    module = rule.__module__.rsplit(".", 2)
    assert f"{module[1]}.{module[2].replace('_', '-')}" == rule.id, "module named after its id"


def test_unknown_id_lists_close_matches():
    with pytest.raises(UnknownRuleError) as e:
        get_rule("input.bund")
    assert "input.bound" in str(e.value)


def test_rules_without_their_facts_are_recorded_not_run():
    findings, not_checked = run_rules(Facts())
    assert findings == []
    assert not_checked["env.no-gpu"] == "needs environment"
    assert not_checked["input.bound"] == "needs steps or capture"
    assert not_checked["input.sequential-map"] == "needs tfdata"
