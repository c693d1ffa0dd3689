"""``settled review``: the static site, its inputs and errors, and the pages in a real Chromium.

The browser tests drive Debian's ``/usr/bin/chromium`` through playwright's Python package
(``executable_path``: no browser is downloaded). Without either they skip in one line,
except under ``CI=true``, where a missing browser fails them. Screenshots go to a folder
the test prints; the time to first render of the largest page is printed, never asserted.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from settled import _review, _review_data
from settled._cmd_review import SITE, review_files
from settled.conformance._explore import explore
from settled.model import LEDGER, MACHINES, Invariant
from settled.model._expr import STATE, I, every
from settled.model.systems import SYSTEMS

ROOT = Path(__file__).resolve().parent.parent
CHROMIUM = Path("/usr/bin/chromium")
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync"]
MUTANT = "Q14-lost-response-recorded-as-failed"
UNFIRED_EDGE = ("queued", "submitting", "begin_submit")


def cli(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "settled.cli", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=300)


def errors_of(run: subprocess.CompletedProcess[str]) -> list[str]:
    """stderr without Graphviz's own font-configuration chatter."""
    return [line for line in run.stderr.splitlines() if not line.startswith("Fontconfig")]


# ------------------------------------------------------------------------------------------
# Inputs for a full site: a verify report, a mutant's real counterexample, an explorer trace
# ------------------------------------------------------------------------------------------
def verify_report() -> dict[str, Any]:
    """A verify report as ``settled verify --json`` writes it, one query edge never fired."""
    from settled.conformance._lockstep import declared_cases

    p = MACHINES["query"]
    src, dst, trigger = UNFIRED_EDGE
    label, guard, case = next(c for c in declared_cases(p) if not c[0].endswith("(same)"))
    lockstep = {"ok": False, "profile": "ci", "seed": 1, "examples": 3, "steps": 40,
                "store": "SQLite files", "failure": None, "unfired_transitions": [],
                "edges": 94, "unfired_edges": [f"{trigger}: {src} -> {dst}"],
                "guard_alternatives": 2, "unfired_guard_alternatives": [f"{label} [{guard}: {case}]"],
                "refusals": 18,
                "unprobed_refusals": [], "refusals_never_alone": [], "not_checked": ["notice"],
                "parameter_values": 151,
                "unfired_parameter_values": ["submit_response_lost fault=malformed"]}
    machine = {"ok": False, "static": {}, "lockstep": lockstep,
               "explore": {"ok": True, "states": 10, "edges": 20, "findings": []},
               "system": {"ok": True, "states": 5, "states_unreduced": 9, "edges": 7,
                          "findings": []},
               "trace_check": {"ok": True, "events": 100},
               "system_lockstep": {"checked": False, "ok": False, "why": "no adapter"}}
    assert p.name == "query"
    return {"ok": False, "machines": {"query": machine}, "views": {"ok": True}}


def explorer_trace(directory: Path) -> Path:
    """A real explorer counterexample: the ledger machine with an invariant that breaks."""
    broken = dataclasses.replace(LEDGER, invariants=(*LEDGER.invariants, Invariant(
        "never_leaves_initial", "the call never leaves its first state", ("L1",),
        LEDGER.initial == STATE)))
    finding = next(f for f in explore(broken).findings if f.counterexample is not None)
    assert finding.counterexample is not None
    path = directory / finding.file_name
    path.write_text(json.dumps(finding.counterexample.to_itf()), encoding="utf-8")
    return path


def system_trace(directory: Path) -> Path:
    """A real system explorer counterexample: the ledger system with an invariant that breaks."""
    from settled.conformance._explore._system import explore_system
    from settled.model._system_parts import SystemInvariant

    system = SYSTEMS["ledger"]
    broken = dataclasses.replace(system, invariants=(*system.invariants, SystemInvariant(
        "nobody_moves", "every call stays where it began", ("L1",),
        every(I.state == system.machine.initial))))
    finding = next(f for f in explore_system(broken).findings if f.counterexample is not None)
    assert finding.counterexample is not None
    meta = {"property": finding.name, "kind": finding.kind, "rules": list(finding.rules)}
    path = directory / finding.file_name
    path.write_text(json.dumps(finding.counterexample.to_itf(meta)), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def inputs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A verify report, a mutants report and a folder of counterexamples, all real but the
    verify report (a full verify takes minutes; its shape is the command's)."""
    from settled.conformance._profiles import profile
    from settled.conformance.mutants._run import MutantsReport, _mutant, select_mutants

    base = tmp_path_factory.mktemp("review-inputs")
    cx = base / "settled-counterexamples"
    cx.mkdir()
    report = MutantsReport(mutants=[_mutant(select_mutants([MUTANT])[0], profile("dev"), 1, cx)])
    assert report.mutants[0].killed, report.mutants[0].failure
    explorer_trace(cx)
    system_trace(cx)
    (base / "verify.json").write_text(json.dumps(verify_report()), encoding="utf-8")
    (base / "mutants.json").write_text(json.dumps(report.to_json()), encoding="utf-8")
    return {"verify": base / "verify.json", "mutants": base / "mutants.json", "cx": cx,
            "base": base}


@pytest.fixture(scope="module")
def site(inputs: dict[str, Path]) -> Path:
    out = inputs["base"] / "site"
    run = cli("review", "--out", str(out), "--verify", str(inputs["verify"]), "--mutants",
              str(inputs["mutants"]), "--counterexamples", str(inputs["cx"]), "--json")
    assert run.returncode == 0, run.stderr
    summary = json.loads(run.stdout)
    size = sum(p.stat().st_size for p in out.iterdir())
    print(f"\nsite: {len(summary['pages'])} pages, {size / 1024:.0f} KiB; "
          f"{summary['rules_linked']}/{summary['rules']} rules link to a transition or property "
          f"({summary['rules_backed_by_spec']} backed in SPEC.md)")
    return out


# ------------------------------------------------------------------------------------------
# Without a browser
# ------------------------------------------------------------------------------------------
def test_the_site_is_deterministic_small_and_has_a_page_per_machine_and_system() -> None:
    first, second = review_files(ROOT), review_files(ROOT)
    assert first == second
    expected = {f"{n}.html" for n in MACHINES} | {f"{s.name}.html" for s in SYSTEMS.values()}
    shared = {"review.css", "review.js", "search.js"}  # one copy, not one per page
    assert expected | {"index.html", "rules.html"} | shared == set(first)
    assert sum(map(len, first.values())) < 1_000_000


def test_the_page_assets_ship_in_the_wheel() -> None:
    import fnmatch
    import tomllib

    patterns = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"][
        "package-data"]["settled"]
    assets = [p.relative_to(ROOT / "settled").as_posix()
              for p in (ROOT / "settled" / "review_assets").iterdir()]
    assert assets and all(any(fnmatch.fnmatch(a, pat) for pat in patterns) for a in assets)


def test_the_committed_site_is_current() -> None:
    run = cli("review", "--check")
    assert run.returncode == 0, run.stderr


def test_check_on_a_stale_site_exits_1_naming_the_stale_and_missing_files(tmp_path: Path) -> None:
    out = tmp_path / "site"
    assert cli("review", "--out", str(out)).returncode == 0
    (out / "query.html").write_text("old", encoding="utf-8")
    (out / "rules.html").unlink()
    run = cli("review", "--out", str(out), "--check")
    assert run.returncode == 1
    text = " ".join(run.stderr.split())
    assert f"stale {out / 'query.html'}" in text and f"missing {out / 'rules.html'}" in text
    assert "approval.html" not in text


def test_verify_drift_check_names_a_stale_review_page(tmp_path: Path) -> None:
    from settled._verify import check_views

    shutil.copytree(ROOT / "diagrams", tmp_path / "diagrams")
    shutil.copytree(ROOT / "tests", tmp_path / "tests", ignore=shutil.ignore_patterns("__pycache__"))
    assert check_views(tmp_path, write=False) == []
    (tmp_path / SITE / "ledger.html").write_text("old", encoding="utf-8")
    assert check_views(tmp_path, write=False) == [f"{SITE.name}/ledger.html"]


def test_texts_come_from_the_declarations() -> None:
    for p in MACHINES.values():
        data = _review_data.machine_data(p)
        for t, shown in zip(p.transitions, data["transitions"], strict=True):
            assert shown["guard_text"] == t.guard_text and shown["effect"] == t.effect.text
            assert [g["text"] for g in shown["guards"]] == [g.text for g in t.guards]


def test_every_rule_spec_backs_is_linked_from_the_index() -> None:
    built = _review.build_site(ROOT / "tests")
    assert built.rules_backed and set(built.rules_backed) <= set(built.rules_linked)
    flagged = {r["rule"]: r["flag"] for r in built.rules if r["flag"]}
    assert all(flag in ("tests only", "gap") for flag in flagged.values())


def test_a_rule_backed_by_tests_only_is_flagged(monkeypatch: pytest.MonkeyPatch) -> None:
    from settled import _spec

    real = _spec.rule_backing

    def without_q14(*args: Any, **kwargs: Any) -> list[_spec.RuleBacking]:
        return [dataclasses.replace(b, transitions=(), properties=()) if b.rule == "Q14" else b
                for b in real(*args, **kwargs)]

    monkeypatch.setattr(_spec, "rule_backing", without_q14)
    built = _review.build_site(ROOT / "tests")
    q14 = next(r for r in built.rules if r["rule"] == "Q14")
    assert q14["flag"] == "tests only" and not q14["transitions"]
    assert "Q14" not in built.rules_backed


def _write(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    return path


@pytest.mark.parametrize("case", ["verify-missing", "verify-binary", "verify-malformed",
                                  "verify-not-a-report", "mutants-not-a-report",
                                  "cx-missing", "cx-binary", "cx-malformed", "cx-not-itf",
                                  "cx-unknown-model", "cx-empty-folder", "out-missing-parent",
                                  "out-under-a-file"])
def test_bad_input_is_one_line_and_exit_2(tmp_path: Path, case: str) -> None:
    binary = _write(tmp_path / "binary.json", b"\x89PNG\r\n\x1a\n\x00\x00\xff")
    broken = _write(tmp_path / "broken.json", b'{"machines": ')
    other = _write(tmp_path / "other.json", b'{"vars": [], "states": [{}], "#meta": {"source": "x"}}')
    (tmp_path / "empty").mkdir()
    out = tmp_path / "site"
    args = {
        "verify-missing": ["--verify", str(tmp_path / "nope.json")],
        "verify-binary": ["--verify", str(binary)],
        "verify-malformed": ["--verify", str(broken)],
        "verify-not-a-report": ["--verify", str(_write(tmp_path / "v.json", b'{"ok": true}'))],
        "mutants-not-a-report": ["--mutants", str(_write(tmp_path / "m.json", b"[1, 2]"))],
        "cx-missing": ["--counterexamples", str(tmp_path / "nope")],
        "cx-binary": ["--counterexamples", str(binary)],
        "cx-malformed": ["--counterexamples", str(broken)],
        "cx-not-itf": ["--counterexamples", str(_write(tmp_path / "n.itf.json", b'{"a": 1}'))],
        "cx-unknown-model": ["--counterexamples", str(other)],
        "cx-empty-folder": ["--counterexamples", str(tmp_path / "empty")],
        "out-missing-parent": [],
        "out-under-a-file": [],
    }[case]
    target = {"out-missing-parent": tmp_path / "no" / "such" / "site",
              "out-under-a-file": binary / "site"}.get(case, out)
    run = cli("review", "--out", str(target), *args)
    assert run.returncode == 2, (run.stdout, run.stderr)
    lines = errors_of(run)
    assert len(lines) == 1 and "Traceback" not in run.stderr, lines
    assert not out.exists() or case.startswith("out")


# ------------------------------------------------------------------------------------------
# In Chromium
# ------------------------------------------------------------------------------------------
def _no_browser() -> str | None:
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "playwright is not installed (pip install -e '.[dev]')"
    if not CHROMIUM.exists():
        return f"no browser at {CHROMIUM} (apt-get install chromium chromium-driver)"
    return None


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    reason = _no_browser()
    if reason is not None:
        if os.environ.get("CI") == "true":
            pytest.fail(f"browser test under CI=true: {reason}")
        pytest.skip(reason)
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        context = pw.chromium.launch_persistent_context(
            str(tmp_path_factory.mktemp("chromium-profile")), executable_path=str(CHROMIUM),
            headless=True, args=FLAGS, viewport={"width": 1280, "height": 800})
        try:
            yield context
        finally:
            context.close()


@pytest.fixture(scope="module")
def shots(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("review-screenshots")
    print(f"\nscreenshots: {folder}")
    return folder


class Page:
    """A browser tab that records console errors and uncaught exceptions."""

    def __init__(self, context: Any) -> None:
        self.tab = context.new_page()
        self.errors: list[str] = []
        self.tab.on("console", lambda m: self.errors.append(f"console.{m.type}: {m.text}")
                    if m.type == "error" else None)
        self.tab.on("pageerror", lambda e: self.errors.append(f"uncaught: {e}"))

    def open(self, path: Path, fragment: str = "") -> None:
        self.tab.goto(path.as_uri() + (f"#{fragment}" if fragment else ""))
        self.tab.wait_for_selector("body[data-ready]", state="attached")

    def close(self) -> None:
        self.tab.close()


@pytest.fixture
def page(browser: Any) -> Iterator[Page]:
    tab = Page(browser)
    yield tab
    assert tab.errors == []
    tab.close()


def test_every_page_loads_without_a_console_error(site: Path, page: Page, shots: Path) -> None:
    with_errors = []
    for html in sorted(site.glob("*.html")):
        page.open(html)
        page.tab.screenshot(path=str(shots / f"{html.stem}.png"))
        if page.errors:
            with_errors.append((html.name, list(page.errors)))
            page.errors.clear()
    print(f"\npages with a console error: {len(with_errors)} of {len(list(site.glob('*.html')))}")
    assert with_errors == []
    largest = max(site.glob("*.html"), key=lambda p: p.stat().st_size)
    start = time.perf_counter()
    page.open(largest)
    wall = time.perf_counter() - start
    paint = page.tab.evaluate("(performance.getEntriesByName('first-contentful-paint')[0] || "
                              "{}).startTime || null")
    ready = page.tab.evaluate("window.__settledReady")
    print(f"largest page {largest.name} ({largest.stat().st_size / 1024:.0f} KiB): first "
          f"contentful paint {paint} ms, script ready {ready:.0f} ms, load to ready "
          f"{wall * 1000:.0f} ms (wall, from this process)")


def _state_with_transitions(name: str) -> tuple[str, int, int, int]:
    p = MACHINES[name]
    for s in p.state_names:
        out = sum(1 for t in p.transitions for src in t.source if src == s and t.target(src) != s)
        into = sum(1 for t in p.transitions for src in t.source if src != s and t.target(src) == s)
        stays = sum(1 for t in p.transitions for src in t.source if src == s == t.target(src))
        if out and into:
            return s, out, into, stays
    raise AssertionError(f"{name}: no state with transitions in and out")


@pytest.mark.parametrize("name", sorted(MACHINES))
def test_a_click_on_a_state_lists_its_transitions(site: Path, page: Page, shots: Path,
                                                  name: str) -> None:
    state, out, into, stays = _state_with_transitions(name)
    page.open(site / f"{name}.html")
    page.tab.click(f'g[data-node="{state}"]')
    details = page.tab.locator("#details")
    assert details.locator("h2").inner_text() == state
    assert details.locator(".out .card").count() == out
    assert details.locator(".in .card").count() == into
    assert details.locator(".loops .card").count() == stays
    triggers = {t.trigger for t in MACHINES[name].transitions_from(state)}
    shown = set(details.locator(".out .card, .loops .card").evaluate_all(
        "cards => cards.map(c => c.dataset.trigger)"))
    assert shown == triggers
    page.tab.screenshot(path=str(shots / f"{name}-click-{state}.png"))
    # the keyboard reaches it too: focus the state and press Enter
    page.tab.click("#zoom-fit")
    page.tab.focus(f'g[data-node="{MACHINES[name].initial}"]')
    page.tab.keyboard.press("Enter")
    assert details.locator("h2").inner_text() == MACHINES[name].initial


@pytest.mark.parametrize("name", sorted(s.name for s in SYSTEMS.values()))
def test_a_click_on_a_system_box_lists_its_steps(site: Path, page: Page, name: str) -> None:
    system = next(s for s in SYSTEMS.values() if s.name == name)
    page.open(site / f"{name}.html")
    page.tab.click('g[data-node="instances"]')
    details = page.tab.locator("#details")
    shown = details.locator(".card[data-trigger]").evaluate_all(
        "cards => cards.map(c => c.dataset.trigger)")
    assert set(system.sync) | {r.trigger for r in system.refinements} == set(shown)
    if system.transitions:
        page.tab.click('g[data-node="system_vars"]')
        steps = details.locator(".card[data-trigger]").evaluate_all(
            "cards => cards.map(c => c.dataset.trigger)")
        assert {t.trigger for t in system.transitions} <= set(steps)


def test_the_player_steps_through_a_counterexample_to_its_divergence(
        site: Path, page: Page, shots: Path) -> None:
    file = f"lockstep-{MUTANT}.itf.json"
    page.open(site / "query.html", f"cx={file}")
    tab = page.tab
    assert tab.locator("#cx-pos").inner_text() == "step 0 / 5"
    diverging = tab.locator("ol.steps li.diverging")
    assert diverging.count() == 1
    for n in range(1, 6):
        tab.click("#cx-forward")
        assert tab.locator("#cx-pos").inner_text() == f"step {n} / 5"
        current = tab.locator("g.node.cx-current")
        assert current.count() >= 1
        if n == 3:  # q0 claim: queued -> queued is a self-loop; begin_submit is an edge
            tab.click("#cx-forward")
            assert tab.locator("g.edge.cx-edge").count() == 1
            tab.click("#cx-back")
            assert tab.locator("#cx-pos").inner_text() == "step 3 / 5"
    changed = tab.locator("#cx-table td.changed")
    assert changed.count() >= 1
    side = tab.locator("#cx-diverges")
    assert side.is_visible()
    text = side.inner_text()
    assert "q0.state" in text and "submission_unknown" in text and "failed" in text
    assert tab.locator('g.node.cx-current[data-node="submission_unknown"]').count() == 1
    assert tab.locator("#cx-table td.diverged").count() >= 1
    tab.screenshot(path=str(shots / "player-divergence.png"))


def test_the_player_shows_an_explorer_violation_and_opens_a_file_from_disk(
        site: Path, inputs: dict[str, Path], page: Page) -> None:
    trace = next(inputs["cx"].glob("invariant-*.itf.json"))
    page.open(site / "ledger.html", f"cx={trace.name}")
    page.tab.click("#cx-divergence")
    assert "never_leaves_initial" in page.tab.locator("#cx-diverges").inner_text()
    # a file from disk: the query mutant's trace on the ledger page is refused, on its own page played
    lockstep = inputs["cx"] / f"lockstep-{MUTANT}.itf.json"
    page.tab.set_input_files("#cx-file", str(lockstep))  # read asynchronously: wait for the verdict
    page.tab.wait_for_selector("#cx-message:has-text(\"not of ledger\")")
    assert "not of ledger" in page.tab.locator("#cx-message").inner_text()
    page.open(site / "query.html")
    page.tab.click('#tabs button[data-tab="player"]')
    page.tab.set_input_files("#cx-file", str(lockstep))
    page.tab.wait_for_selector("#cx-pos")
    page.tab.click("#cx-divergence")
    assert page.tab.locator("#cx-diverges").is_visible()


def test_the_player_plays_a_system_counterexample(site: Path, inputs: dict[str, Path],
                                                  page: Page) -> None:
    trace = next(inputs["cx"].glob("system_invariant-*.itf.json"))
    page.open(site / "ledger_system.html", f"cx={trace.name}")
    page.tab.click("#cx-divergence")
    assert "nobody_moves" in page.tab.locator("#cx-diverges").inner_text()
    assert page.tab.locator("ol.steps li.diverging").get_attribute("data-mark") == "breaks"
    # The first move of any call is the message's registration, one step of every call.
    assert page.tab.locator('g.node.cx-current[data-node="sync_register"]').count() == 1
    header = page.tab.locator("#cx-table tr").first.inner_text().split()
    assert header == ["variable", "q0", "q1", "q2"]
    assert page.tab.locator("#cx-table td.changed").count() >= 1


def test_every_rule_index_link_resolves(site: Path, page: Page, shots: Path) -> None:
    page.open(site / "rules.html")
    page.tab.screenshot(path=str(shots / "rules.png"))
    hrefs = page.tab.locator("#doc a.target, #doc a.play").evaluate_all(
        "links => links.map(a => a.getAttribute('href'))")
    assert len(hrefs) > len(MACHINES)
    by_page: dict[str, list[str]] = {}
    for href in hrefs:
        name, _, fragment = href.partition("#")
        by_page.setdefault(name, []).append(fragment)
    unresolved = []
    for name, fragments in sorted(by_page.items()):
        page.open(site / name)
        for fragment in sorted(set(fragments)):  # the same hash twice fires no hashchange
            page.tab.evaluate("document.body.removeAttribute('data-resolved')")
            page.tab.evaluate(f"location.hash = {json.dumps(fragment)}")
            page.tab.wait_for_selector("body[data-resolved]", state="attached")
            if page.tab.evaluate("document.body.dataset.resolved") != "ok":
                unresolved.append(f"{name}#{fragment}")
    print(f"\nrule index: {len(hrefs)} links to {len(by_page)} pages, {len(unresolved)} unresolved")
    assert unresolved == []


def test_a_rule_leads_to_a_counterexample_breaking_it_in_three_clicks(site: Path,
                                                                       page: Page) -> None:
    page.open(site / "index.html")
    page.tab.click('#top nav a[href="rules.html"]')                    # 1
    page.tab.wait_for_selector("body[data-ready]", state="attached")
    section = page.tab.locator("section#Q14")
    assert "killed by tour in 5 steps" in section.inner_text()
    section.locator("a.play").click()                                    # 2
    page.tab.wait_for_selector("#cx-divergence")
    page.tab.click("#cx-divergence")                                     # 3
    assert page.tab.locator("#cx-diverges").is_visible()


def test_the_coverage_layer_marks_the_edge_never_fired(site: Path, page: Page, shots: Path) -> None:
    src, dst, trigger = UNFIRED_EDGE
    page.open(site / "query.html")
    edge = page.tab.locator(f'g.edge[data-src="{src}"][data-dst="{dst}"]')
    assert "cov-unfired" in (edge.get_attribute("class") or "")
    stroke = "getComputedStyle(document.querySelector('g.edge.cov-unfired > path')).stroke"
    assert page.tab.evaluate(stroke) != "rgb(255, 0, 255)"  # layer off
    page.tab.check("#coverage-toggle")
    assert page.tab.evaluate(stroke) == "rgb(255, 0, 255)"
    # the edge of the transition whose guard alternative was never taken is marked too
    from settled.conformance._lockstep import declared_cases

    label = next(c for c in declared_cases(MACHINES["query"]) if not c[0].endswith("(same)"))[0]
    trigger_of_case = label.split(":")[0]
    marked = page.tab.locator("g.edge.cov-alternative").evaluate_all(
        "edges => edges.map(e => e.dataset.words)")
    assert marked and all(trigger_of_case in words.split() for words in marked)
    page.tab.click('#tabs button[data-tab="coverage"]')
    coverage = page.tab.locator("#coverage").inner_text()
    assert f"{trigger}: {src} → {dst}" in coverage
    # the parameter value never taken is listed, out of the values declared
    assert "parameter values never taken, of 151 declared (1)" in coverage.lower()
    assert "submit_response_lost fault=malformed" in coverage
    page.tab.screenshot(path=str(shots / "coverage.png"))
    # a page without a report says so instead of showing an empty layer
    page.open(ROOT / SITE / "query.html")
    assert page.tab.locator("#coverage-toggle").is_disabled()
    assert "NOT MEASURED" in page.tab.locator("#coverage").inner_text()


def test_search_finds_states_guards_variables_and_rules(site: Path, page: Page) -> None:
    page.open(site / "approval.html")
    box = page.tab.locator("#search-box")
    for query, href in [("submission_unknown", "query.html#state=submission_unknown"),
                        ("Q14", "rules.html#Q14"), ("lease_epoch", "query.html#var=lease_epoch"),
                        ("fresh_lease", "query.html#guard=fresh_lease")]:
        box.fill(query)
        hrefs = page.tab.locator("#search-results a").evaluate_all(
            "links => links.map(a => a.getAttribute('href'))")
        assert href in hrefs, (query, hrefs[:5])
    box.fill("Q14")
    box.press("Enter")
    page.tab.wait_for_url("**/rules.html#Q14")


def test_search_says_so_when_its_shared_index_is_missing(site: Path, page: Page,
                                                         tmp_path: Path) -> None:
    """The pages share one search index file; without it the box says so, never 'nothing'."""
    import shutil

    copy = tmp_path / "site"
    shutil.copytree(site, copy)
    (copy / "search.js").unlink()
    page.open(copy / "query.html")
    page.tab.locator("#search-box").fill("Q14")
    assert "search.js" in page.tab.locator("#search-results").inner_text()
    assert any("ERR_FILE_NOT_FOUND" in e for e in page.errors), page.errors  # the browser said so too
    page.errors.clear()
