"""docs/findings.md is generated from the rules (tools/generate_findings_doc.py): a rule
added or its docstring changed without regenerating fails here, so the catalogue cannot
drift from the rules again."""

import importlib.util
from pathlib import Path

from gpuwhy.rules import ALL_RULES

TOOL = Path(__file__).resolve().parents[2] / "tools" / "generate_findings_doc.py"


def generator():
    spec = importlib.util.spec_from_file_location("generate_findings_doc", TOOL)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_catalogue_is_what_the_rules_generate():
    tool = generator()
    published = tool.CATALOGUE.read_text(encoding="utf-8")
    assert published == tool.render(), (
        f"docs/findings.md is stale: regenerate it with `{tool.COMMAND}`"
    )


def test_every_rule_has_its_question_and_its_documentation_under_its_anchor():
    tool = generator()
    text = tool.render()
    for rule in ALL_RULES:
        assert f"[{rule.id}](#{tool.slug(rule.id)})" in text
        start = text.index(f"\n### {rule.id}\n")
        body = text[start : text.find("\n### ", start + 1)]
        assert rule.question in body
        assert rule.summary() in body and "#### What it detects" in body


def test_severities_start_with_the_default_and_read_the_rules_code():
    tool = generator()
    by_id = {r.id: r for r in ALL_RULES}
    assert tool.severities(by_id["input.bound"]) == ["high", "medium", "low"]
    assert tool.severities(by_id["memory.underused"]) == ["low"]
    # a measurement that overrules the traced prediction gives info (Rule.overruled)
    assert "info" in tool.severities(by_id["tensorcore.unused"])


def test_headings_nest_under_the_rule_and_code_comments_stay():
    tool = generator()
    doc = "Summary.\n\n## What it detects\n```python\n## a comment\n```\n"
    assert tool.demoted(doc) == "Summary.\n\n#### What it detects\n```python\n## a comment\n```"


def test_github_anchors():
    tool = generator()
    assert tool.slug("input.bound") == "inputbound"
    assert tool.slug("Exit status") == "exit-status"
    assert tool.slug("`gpuwhy run`: why is it slow?") == "gpuwhy-run-why-is-it-slow"
