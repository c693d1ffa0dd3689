"""The graph, the diagrams and the spec are views of the table and agree with it."""

from __future__ import annotations

import dataclasses
import re
import subprocess
import sys

import pygraphviz
import pytest

from settled import _diagram_dot, _diagram_graph, _diagrams, _spec
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
    return {line.split(" [")[0].split(" ×")[0].strip()
            for line in re.split(r"\\l|<br/>", label)
            if line.strip() and not line.startswith(" ")}


LOOP = re.compile(r"↻ (\w+)")


def _drawn(g: pygraphviz.AGraph) -> set[tuple[str, str, str]]:
    """Every (from, to, trigger) the overview shows: edge labels, the ↻ rows inside each
    state's box and the ↻ rows on a box around several states (they loop on each)."""
    drawn = {(e[0], e[1], trig) for e in g.edges(keys=True)
             if not e[0].startswith("__") and not e[1].startswith("__")
             for trig in _label_triggers(g.get_edge(e[0], e[1], e[2]).attr["label"])}
    for n in g.nodes():
        if not n.startswith("__"):
            drawn |= {(str(n), str(n), t) for t in LOOP.findall(n.attr["label"] or "")}

    def clusters(sub: pygraphviz.AGraph) -> None:
        for c in sub.subgraphs():
            if (c.name or "").startswith("cluster_loops_"):
                drawn.update((str(n), str(n), t) for n in c.nodes()
                             for t in LOOP.findall(c.graph_attr["label"]))
            clusters(c)

    clusters(g)
    return drawn


@pytest.mark.parametrize("machine", sorted(MACHINES))
def test_dot_diagram_has_exactly_the_tables_states_and_transitions(machine):
    p = MACHINES[machine]
    g = pygraphviz.AGraph(string=_diagram_dot.to_dot(p))
    assert {n for n in g.nodes() if not n.startswith("__")} == set(p.state_names)
    assert _drawn(g) == table_edges(p)


def test_self_loops_are_listed_in_their_state_not_drawn_as_edges():
    g = pygraphviz.AGraph(string=_diagram_dot.to_dot(QUERY))
    assert not [e for e in g.edges() if e[0] == e[1]]
    assert "↻ crash_after_platform_stored" in g.get_node("submitting").attr["label"]
    # Loops shared by every state holding a lease are listed once, on a box around them.
    shared = [c for c in g.subgraphs() if (c.name or "").startswith("cluster_loops_")]
    assert len(shared) == 1 and set(shared[0].nodes()) >= {"queued", "running", "not_found"}
    assert "↻ crash" in shared[0].graph_attr["label"]


def _kind_of(p, source: str, trigger: str) -> str:
    return {_diagram_graph.kind(t) for t in p.transitions if t.trigger == trigger
            and source in t.source}.pop()


@pytest.mark.parametrize("machine", sorted(MACHINES))
def test_edges_and_loop_rows_are_styled_by_kind_as_the_legend_inside_says(machine):
    p = MACHINES[machine]
    g = pygraphviz.AGraph(string=_diagram_dot.to_dot(p))
    legend = {k: (g.get_edge(f"__legend_{k}_a", f"__legend_{k}_b").attr["color"],
                  g.get_edge(f"__legend_{k}_a", f"__legend_{k}_b").attr["style"])
              for k in _diagram_graph.KINDS}
    assert len(set(legend.values())) == len(legend)  # the legend tells every kind apart
    for a, b, key in g.edges(keys=True):
        if a.startswith("__") or b.startswith("__"):
            continue
        attr = g.get_edge(a, b, key).attr
        for trigger in _label_triggers(attr["label"]):
            assert (attr["color"], attr["style"]) == legend[_kind_of(p, a, trigger)], trigger
    for n in g.nodes():
        for colour, trigger in re.findall(r'color="(#\w+)">↻ (\w+)', n.attr["label"] or ""):
            assert colour == legend[_kind_of(p, str(n), trigger)][0], (n, trigger)


def test_every_crash_is_drawn_red_and_dotted_or_listed_red():
    from settled.model import APPROVAL
    crashes = {t.trigger for t in APPROVAL.transitions if t.trigger.startswith("crash")}
    assert len(crashes) >= 5
    dot = _diagram_dot.to_dot(APPROVAL)
    red = _diagram_graph.KINDS["crash"][0]
    for trigger in crashes:
        assert (re.search(rf'color="{red}">↻ {trigger}<', dot)
                or re.search(rf'label="{trigger}\\l", color="{red}", fontcolor="{red}", '
                             r'style=dotted', dot)), trigger


def test_mermaid_diagram_has_exactly_the_tables_states_and_edges():
    text = _diagrams.to_mermaid(QUERY)
    assert text.splitlines()[3] == "stateDiagram-v2"
    edges, note = set(), None
    for line in text.splitlines():
        m = re.match(r"\s+(\w+) --> (\w+) : (.*)$", line)
        if m and m.group(1) != "[*]":
            edges |= {(m.group(1), m.group(2), t) for t in _label_triggers(m.group(3))}
        if m := re.match(r"\s+note right of (\w+)$", line):
            note = m.group(1)
        elif line.strip() == "end note":
            note = None
        elif note and (m := re.match(r"\s+↻ (\w+)", line)):
            edges.add((note, note, m.group(1)))
    assert edges == table_edges(QUERY)
    assert f"[*] --> {QUERY.initial}" in text
    assert "class submission_unknown unknown" in text


def test_terminal_unknown_and_initial_states_are_drawn_distinctly():
    g = pygraphviz.AGraph(string=_diagram_dot.to_dot(QUERY))
    assert g.get_node("succeeded").attr["peripheries"] == "2"
    assert g.get_node("submission_unknown").attr["fillcolor"] == "#f5a623"
    assert g.get_node("drafted").attr["penwidth"] == "2.5"


def test_overview_png_fits_a_reader_at_96_dpi():
    """query.svg rendered to PNG at 96 dpi is at most 1,000 px wide, and no diagram (the
    overviews and the focused ones) is squeezed into that: its natural width is within 15 %
    of it, so the 9 pt text stays at least 7.7 pt on screen."""
    for p in MACHINES.values():
        dots = {p.name: _diagram_dot.to_dot(p)} | {
            f"{p.name}.{s}": _diagram_dot.to_focused_dot(p, s) for s in _diagram_graph.focused_states(p)}
        for name, dot in dots.items():
            width, _ = _diagrams.png_size(_diagrams.to_png(dot, dpi=96))
            assert 500 < width <= 1000, (name, width)
            assert _diagram_dot.natural_width(dot) * 96 / 72 <= 1150, name
    svg = _diagrams.artefacts(QUERY)["query.svg"]
    points = float(re.search(rb'<svg width="([\d.]+)pt"', svg).group(1))
    assert points * 96 / 72 <= 1000


def test_png_size_reads_the_header_and_refuses_other_bytes():
    png = _diagrams.to_png('digraph { a -> b }', dpi=72)
    assert _diagrams.png_size(png)[0] > 10
    with pytest.raises(ValueError):
        _diagrams.png_size(b"GIF89a" + bytes(30))


def test_busy_states_get_a_focused_diagram_with_every_guard():
    files = _diagrams.artefacts(QUERY)
    assert {"query.submitting.svg", "query.submitting.dot"} <= set(files)
    assert "query.succeeded.svg" not in files  # a terminal state with few edges
    dot = files["query.submitting.dot"].decode()
    g = pygraphviz.AGraph(string=dot)
    for t in QUERY.transitions:
        for src in t.source:
            if "submitting" in (src, t.target(src)):
                text = (g.get_node("submitting").attr["label"] if src == t.target(src)
                        else g.get_edge(src, t.target(src)).attr["label"])
                assert t.trigger in text, t.trigger
                assert all(guard.name in text for guard in t.guards), t.trigger
    width, _ = _diagrams.png_size(_diagrams.to_png(dot))
    assert width <= 1000


def test_coverage_overlay_counts_every_transition_and_flags_the_unfired():
    counts = {(s, t.target(s), t.trigger): 2 for t in QUERY.transitions for s in t.source}
    counts[("running", "running", "crash")] = 0
    dot = _diagram_dot.to_dot(QUERY, counts)
    g = pygraphviz.AGraph(string=dot)
    assert _drawn(g) == table_edges(QUERY)
    assert dot.count("×0 NEVER FIRED") == 1  # once in the picture (the legend explains it)
    assert "↻ crash ×0 NEVER FIRED" in g.get_node("running").attr["label"]
    assert _diagrams.coverage_svg(QUERY, counts).startswith(b"<?xml")


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
    # The overview, the focused diagram of the state the new edge enters, and a new focused
    # diagram for queued, which now has enough transitions to get one.
    assert stale == ["query.dot", "query.mmd", "query.queued.dot", "query.queued.svg",
                     "query.running.dot", "query.running.svg", "query.svg"]


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


def test_spec_lists_the_state_machines_outside_the_model_and_they_are_still_outside(root):
    """SPEC.md names the task phase and message attribution as outside the model; if a
    machine for either is declared in model/, this test says the list is stale."""
    text = _spec.render_spec(list(MACHINES.values()), root / "tests")
    section = text.split("## Outside the model")[1].split("## Traceability")[0]
    assert "`tasks.phase`" in section and "`messages.attribution`" in section
    assert not {"task_phase", "phase", "message_attribution", "attribution"} & set(MACHINES)
    from settled.impl.query import _values, _worker
    phases = {_values.PHASE_OPEN, _values.PHASE_EXECUTING, *_worker.SETTLED_PHASE.values()}
    assert all(f"`{phase}`" in section for phase in phases)
    from settled.model.systems import SYSTEMS
    assert [v.name for v in SYSTEMS["query"].variables] == ["message", "other_task"]


def test_checkpoint_call_states_are_the_approval_models_minus_the_unseen_two():
    from settled.impl.approval._checkpoint import NOT_CHECKPOINTED, CallState
    from settled.model.approval import ApprovalState

    assert {s.value for s in CallState} == {s.value for s in ApprovalState} - {
        s.value for s in NOT_CHECKPOINTED}
    assert {s.value for s in NOT_CHECKPOINTED} == {"proposed", "committed"}
    for name in ("proposed", "committed", "nonsense"):
        with pytest.raises(ValueError):
            CallState(name)
    assert CallState.PENDING == ApprovalState.PENDING and CallState("unknown").name == "UNKNOWN"


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
