"""The docs live in the repository, agree with the rule catalogue, and link only inside it."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from settled.model import RULES

ROOT = Path(__file__).resolve().parents[1]
LINK = re.compile(r"\[[^\]]*\]\(([^)#\s]+)(?:#[^)]*)?\)")
DOCS = ["README.md", "diagrams/SPEC.md", *sorted(str(p.relative_to(ROOT))
                                              for p in (ROOT / "docs").glob("*.md"))]


def test_protocol_md_states_exactly_the_rules_the_model_cites() -> None:
    text = (ROOT / "docs" / "PROTOCOL.md").read_text(encoding="utf-8")
    stated = set(re.findall(r"^- \*\*([A-Z]\d+)\*\*", text, flags=re.MULTILINE))
    assert stated == set(RULES), {"in PROTOCOL.md only": sorted(stated - set(RULES)),
                                  "in model/_rules.py only": sorted(set(RULES) - stated)}


@pytest.mark.parametrize("doc", DOCS)
def test_every_relative_link_resolves_inside_the_repository(doc: str) -> None:
    path = ROOT / doc
    for target in LINK.findall(path.read_text(encoding="utf-8")):
        if re.match(r"^[a-z]+:", target):
            continue  # an absolute URL
        resolved = (path.parent / target).resolve()
        assert resolved.is_relative_to(ROOT), f"{doc} links outside the repository: {target}"
        assert resolved.exists(), f"{doc} links to a missing file: {target}"


def test_user_facing_text_names_the_source_articles_not_seed_files() -> None:
    for folder in ("settled", "model", "impl", "docs"):
        for path in (ROOT / folder).rglob("*"):
            if path.suffix in (".py", ".md"):
                text = path.read_text(encoding="utf-8")
                assert not re.search(r"\bseed (000|003)\b|seeds/", text, flags=re.IGNORECASE), path


def test_reviewing_guide_quotes_a_real_counterexample_and_the_real_focused_diagrams() -> None:
    """The guide's example run is what the explorer prints for that broken table, and it
    names every focused diagram that `settled diagrams` writes."""
    from test_explore import MUTANTS

    from settled import _diagrams
    from settled.conformance._explore import explore
    from settled.model import MACHINES

    text = (ROOT / "docs" / "REVIEWING.md").read_text(encoding="utf-8")
    mutant = next(m.values[1] for m in MUTANTS if m.id == "stale-lease-writes")
    finding = next(f for f in explore(mutant).violations
                   if f.name == "stale_lease_changes_nothing")
    assert finding.counterexample is not None
    assert finding.counterexample.steps_text() in text
    named = set(re.findall(r"\(\.\./diagrams/(\w+\.\w+)\.svg\)", text)) - {
        "query.coverage", "approval.coverage"}
    assert named == {f"{p.name}.{s}" for p in MACHINES.values()
                     for s in _diagrams.focused_states(p)}


def test_the_adapter_contract_tables_are_the_declarations() -> None:
    """conformance/README.md's trigger and variable tables are generated from the models;
    a machine added or changed without regenerating them fails here."""
    from settled._contract_doc import README, with_section

    text = README.read_text(encoding="utf-8")
    assert text == with_section(text), "run: python -m settled._contract_doc"
    from settled.model import MACHINES

    for name in MACHINES:
        assert f"### `{name}`" in text
