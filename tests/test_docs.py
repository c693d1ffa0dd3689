"""The docs live in the repository, agree with the rule catalogue, and link only inside it."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from settled.model import RULES

ROOT = Path(__file__).resolve().parents[1]
LINK = re.compile(r"\[[^\]]*\]\(([^)#\s]+)(?:#[^)]*)?\)")
# The repository's home (pyproject's [project.urls]): README.md links into it absolutely, so
# that it renders on a package index, where a relative link leads nowhere.
REPO = "settled/settled"
HOME = (f"https://github.com/{REPO}/blob/main/", f"https://raw.githubusercontent.com/{REPO}/main/")
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
        home = next((base for base in HOME if target.startswith(base)), None)
        if home is not None:  # the repository's own file, linked absolutely (README.md)
            assert (ROOT / target[len(home):]).exists(), f"{doc} links to a missing file: {target}"
            continue
        if re.match(r"^[a-z]+:", target):
            continue  # an absolute URL elsewhere
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

    from settled import _diagram_graph
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
                     for s in _diagram_graph.focused_states(p)}


def test_the_adapter_contract_tables_are_the_declarations() -> None:
    """conformance/README.md's trigger and variable tables are generated from the models;
    a machine added or changed without regenerating them fails here."""
    from settled._contract_doc import README, with_section

    text = README.read_text(encoding="utf-8")
    assert text == with_section(text), "run: python -m settled._contract_doc"
    from settled.model import MACHINES

    for name in MACHINES:
        assert f"### `{name}`" in text


# Every hand-written mention of the model in the user-facing docs is held to the model, so a
# renamed guard or a changed trace format cannot leave a stale example behind.
USER_DOCS = ["README.md", "examples/README.md", "conformance/README.md",
             *sorted(str(p.relative_to(ROOT)) for p in (ROOT / "docs").glob("*.md"))]
FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.MULTILINE | re.DOTALL)
GUARD_LIST = re.compile(r"`([a-z_]+) \[([a-z_, ]+)\]`")


def _trace_samples() -> list[tuple[str, list[str]]]:
    samples = []
    for doc in USER_DOCS:
        for lang, body in FENCE.findall((ROOT / doc).read_text(encoding="utf-8")):
            if "settled.trace/1" in body and lang in ("json", "jsonl"):
                samples.append((doc, body.splitlines()))
    return samples


def test_every_trace_sample_in_the_docs_is_a_log_the_checker_accepts() -> None:
    """A trace shown to a user is one `settled check` accepts whole: a complete log of its
    instances from seq 1, in the declared domains. The README must show at least one."""
    from settled.conformance import check_trace

    samples = _trace_samples()
    assert any(doc == "README.md" for doc, _ in samples), "README.md shows no trace sample"
    for doc, lines in samples:
        report = check_trace(lines)
        assert report.ok, (doc, [v.message for v in report.violations],
                           [v.message for v in report.undecided])


def test_a_trace_sample_cut_from_the_middle_of_a_log_is_rejected() -> None:
    """The sample check can fail: the README's last line alone starts mid-stream."""
    from settled.conformance import check_trace

    lines = next(lines for doc, lines in _trace_samples() if doc == "README.md")
    assert not check_trace(lines[-1:]).ok


def test_guard_lists_in_the_docs_are_a_transitions_guards() -> None:
    """`trigger [g1, g2]` in a doc names the guards of a declared transition, in order."""
    from settled.model import MACHINES

    found = 0
    for doc in USER_DOCS:
        for trigger, names in GUARD_LIST.findall((ROOT / doc).read_text(encoding="utf-8")):
            cited = tuple(n.strip() for n in names.split(","))
            declared = {tuple(g.name for g in t.guards) for p in MACHINES.values()
                        for t in p.transitions if t.trigger == trigger}
            assert cited in declared, f"{doc}: `{trigger} [{names}]`; declared: {sorted(declared)}"
            found += 1
    assert found, "no guard list found in the docs: the pattern no longer matches them"


def test_guard_definitions_quoted_in_the_reviewing_guide_are_spec_md_lines() -> None:
    text = (ROOT / "docs" / "REVIEWING.md").read_text(encoding="utf-8")
    spec = (ROOT / "diagrams" / "SPEC.md").read_text(encoding="utf-8")
    quoted = re.findall(r"\(`(\w+: [^`]+)`, …\)", " ".join(text.split()))
    assert quoted, "the guide quotes no guard definition: the pattern no longer matches it"
    plain = spec.replace("`", "")  # SPEC.md sets each guard's expression as code
    for q in quoted:
        assert q in plain, f"docs/REVIEWING.md quotes {q!r}, which diagrams/SPEC.md does not say"


def test_the_walkthroughs_counts_are_the_query_machines() -> None:
    from settled.model import QUERY

    text = " ".join((ROOT / "examples" / "README.md").read_text(encoding="utf-8").split())
    m = re.search(r"query machine: (\d+) triggers, (\d+) variables to observe, "
                  r"(\d+) refusable triggers", text)
    assert m, "examples/README.md no longer states the query machine's counts"
    observable = [v for v in QUERY.variables if not v.ghost]
    assert tuple(map(int, m.groups())) == (len(QUERY.triggers()), len(observable),
                                           len(QUERY.refusable))


def test_the_readme_renders_on_a_package_index() -> None:
    """The package's long description is README.md: every link and image in it is absolute,
    into the repository named by pyproject's project URLs."""
    import tomllib

    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert project["readme"] == "README.md"
    assert all(REPO in url for url in project["urls"].values()), project["urls"]
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    relative = [t for t in LINK.findall(text) if not re.match(r"^[a-z]+:", t)]
    assert relative == [], f"relative links break on a package index: {relative}"
    images = re.findall(r"!\[[^\]]*\]\(([^)\s]+)\)", text)
    assert images and all(i.startswith(HOME[1]) for i in images), images
    assert (ROOT / "LICENSE").read_text(encoding="utf-8").startswith("MIT License")
    assert "Copyright (c) 2026 the settled authors" in (ROOT / "LICENSE").read_text()
