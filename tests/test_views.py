"""The graph, the diagrams and the spec are views of the table and agree with it."""

from __future__ import annotations

import dataclasses
import re
import subprocess
import sys

import pygraphviz
import pytest

from settled import _diagrams, _spec
from settled.model import MACHINES, QUERY, RULES, Protocol, Transition
from settled.model._graph import protocol_graph, static_findings


def table_edges(p: Protocol) -> set[tuple[str, str, str]]:
    return {(s, t.target(s), t.trigger) for t in p.transitions for s in t.source}


def test_protocol_graph_has_one_edge_per_transition_and_source():
    g = protocol_graph(QUERY)
    assert set(g.nodes) == set(QUERY.state_names)
    assert {(a, b, d["trigger"]) for a, b, d in g.edges(data=True)} == table_edges(QUERY)
    cancel = [d for a, b, d in g.edges(data=True) if d["trigger"] == "cancel" and a == "running"]
    assert cancel[0]["rules"] == ("Q19", "Q21") and cancel[0]["guard"] == "cancel_state == none"


def test_static_findings_of_the_query_machine_are_empty():
    assert static_findings(QUERY) == {"unreachable_states": [], "terminal_with_exits": [],
                                      "cannot_settle": [], "uncited_rules": []}


def _label_triggers(label: str) -> set[str]:
    return {line.split(" [")[0].split("  ×")[0].strip()
            for line in re.split(r"\\l|<br/>", label) if line.strip()}


def test_dot_diagram_has_exactly_the_tables_states_and_edges():
    g = pygraphviz.AGraph(string=_diagrams.to_dot(QUERY))
    assert set(g.nodes()) - {"__start__"} == set(QUERY.state_names)
    # Several edges may join one pair of states (one per actor): read each edge's label.
    drawn = {(e[0], e[1], trig) for e in g.edges(keys=True) if e[0] != "__start__"
             for trig in _label_triggers(g.get_edge(e[0], e[1], e[2]).attr["label"])}
    assert drawn == table_edges(QUERY)


def test_mermaid_diagram_has_exactly_the_tables_states_and_edges():
    text = _diagrams.to_mermaid(QUERY)
    assert text.splitlines()[3] == "stateDiagram-v2"
    edges = set()
    for line in text.splitlines():
        m = re.match(r"\s+(\w+) --> (\w+) : (.*)$", line)
        if m and m.group(1) != "[*]":
            edges |= {(m.group(1), m.group(2), t) for t in _label_triggers(m.group(3))}
    assert edges == table_edges(QUERY)
    assert f"[*] --> {QUERY.initial}" in text
    assert "class submission_unknown unknown" in text


def test_terminal_unknown_and_initial_states_are_drawn_distinctly():
    dot = _diagrams.to_dot(QUERY)
    assert re.search(r'"succeeded" \[peripheries=2', dot)
    assert '"submission_unknown" [fillcolor="#f5a623"]' in dot
    assert '"drafted" [penwidth=2.5]' in dot


def test_diagrams_are_deterministic_byte_for_byte():
    assert _diagrams.artefacts(QUERY) == _diagrams.artefacts(QUERY)


def test_committed_diagrams_and_spec_are_current(root):
    from settled._cmd_views import diagram_files, spec_files
    files = {**diagram_files(), **spec_files(root)}
    assert _diagrams.write_or_check(files, root / "diagrams", check=True) == []


def test_drift_check_names_the_files_a_changed_table_makes_stale(root, tmp_path):
    changed = dataclasses.replace(QUERY, transitions=(
        *QUERY.transitions,
        Transition("shortcut", ("queued",), "running", "a forbidden shortcut", ("Q12",))))
    for name, data in _diagrams.artefacts(QUERY).items():
        (tmp_path / name).write_bytes(data)
    stale = _diagrams.write_or_check(_diagrams.artefacts(changed), tmp_path, check=True)
    assert stale == ["query.dot", "query.mmd", "query.svg"]


def test_cli_check_exits_nonzero_naming_each_stale_file(root, tmp_path):
    (tmp_path / "diagrams").mkdir()
    (tmp_path / "diagrams" / "query.dot").write_text("stale\n")
    (tmp_path / "tests").mkdir()
    (tmp_path / "model").mkdir()  # a checkout: its tables and its pyproject
    (tmp_path / "model" / "query.py").write_text("")
    (tmp_path / "pyproject.toml").write_text((root / "pyproject.toml").read_text())
    run = subprocess.run([sys.executable, "-m", "settled.cli", "diagrams", "--check",
                          "--root", str(tmp_path)], capture_output=True, text=True)
    assert run.returncode == 1
    for name in ("query.dot", "query.svg", "query.mmd"):
        assert name in run.stderr
    assert "stale" in run.stderr and "missing" in run.stderr  # query.dot is there, the rest not


def test_spec_lists_every_rule_and_names_gaps(root):
    text = _spec.render_spec(list(MACHINES.values()), root / "tests")
    for rule in RULES:
        assert f"| {rule} |" in text
    gaps = text.split("### Gaps")[1]
    assert "None: every rule has" in gaps and "**L1**" not in gaps and "**Q16**" not in gaps
    # Without the ledger machine and with no tests to cite, L1–L4 are listed as gaps (L5 is
    # also cited by the approval machine's contract check).
    bare = _spec.render_spec([m for m in MACHINES.values() if m.name != "ledger"],
                             root / "no-such-tests")
    assert all(f"**{r}**" in bare.split("### Gaps")[1] for r in ("L1", "L2", "L3", "L4"))


def test_spec_finds_tests_by_their_rule_marker(root):
    tests = _spec.rule_tests(root / "tests")
    assert "test_query_model.py::test_lookup_timeout_never_resubmits" in tests["Q15"]


@pytest.mark.parametrize("trigger", sorted(QUERY.triggers()))
def test_spec_documents_every_trigger(root, trigger):
    assert f"| `{trigger}`" in _spec.render_spec([QUERY], root / "tests")


# --------------------------------------------------------------------------
# System diagrams
# --------------------------------------------------------------------------
def _png_width(dot: str) -> int:
    import struct

    import pygraphviz

    png: bytes = pygraphviz.AGraph(string=dot).draw(format="png", prog="dot")
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    width: int = struct.unpack(">I", png[16:20])[0]
    return width


@pytest.mark.parametrize("name", ["query", "approval", "ledger"])
def test_system_diagram_shows_what_the_instances_share(name: str) -> None:
    from settled._system_views import system_artefacts, system_dot
    from settled.model.systems import SYSTEMS

    s = SYSTEMS[name]
    dot = system_dot(s)
    assert system_artefacts(s) == system_artefacts(s)  # deterministic, byte for byte
    for shown in (*s.shared, *s.sync, *s.variable_names, *(t.trigger for t in s.transitions),
                  *(r.trigger for r in s.refinements), *(i.name for i in s.invariants),
                  *(r for x in (*s.transitions, *s.refinements, *s.invariants) for r in x.rules)):
        assert shown in dot, f"{shown!r} missing from the {s.name} diagram"
    assert f"× {s.instances}" in dot
    assert _png_width(dot) <= 1000  # readable at README width (96 dpi)


def test_system_diagrams_are_among_the_checked_views() -> None:
    from settled._cmd_views import diagram_files
    from settled.model.systems import SYSTEMS

    files = diagram_files()
    for s in SYSTEMS.values():
        assert {f"{s.name}.dot", f"{s.name}.svg"} <= set(files)
