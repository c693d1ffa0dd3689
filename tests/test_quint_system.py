"""The Quint export of a system: every declared system's module passes ``quint typecheck``;
``quint run`` (a fixed seed, short runs) finds no violation on the shipped systems and finds
the one our explorer finds in a system mutant (a mutex removed, a synchronised step made
local, a shared guard dropped); every step of a ``quint run`` trace is a step of
``System.enabled``, so the module's semantics and ours are held together.

Without ``quint`` on the PATH (npm i -g @informalsystems/quint) the tests that run it skip in
one line, except under CI=true, where they fail.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from conftest import need_quint

from settled.conformance._explore._quint_system import QuintSystemModel, render_system_module
from settled.conformance._explore._system import explore_system
from settled.model import Config
from settled.model._system import System
from settled.model._system_parts import SystemConfig
from settled.model.progress import liveness_of
from settled.model.systems import build_approval_system, build_ledger_system, build_query_system

# The smallest size of each system where its instances interact: two instances each.
SMALL: dict[str, Callable[[], System]] = {
    "ledger": lambda: build_ledger_system(calls=2),
    "approval": lambda: build_approval_system(calls=2, stock=1),
    "query": lambda: build_query_system(queries=2, workers=1),
}
RUN = ("--backend", "typescript", "--seed", "1", "--max-steps", "30")


def quint(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([need_quint(), *args], capture_output=True, text=True, timeout=600)


def write(tmp_path: Path, system: System) -> tuple[Path, QuintSystemModel]:
    model = render_system_module(system)
    path = tmp_path / f"{system.name}.qnt"
    path.write_text(model.text, encoding="utf-8")
    return path, model


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "settled.cli", *args], capture_output=True,
                          text=True)


def test_export_quint_writes_the_module_of_a_system(tmp_path: Path) -> None:
    """``--queries N`` exports the system: one check per machine invariant, system invariant,
    step property, variable and deadlock, one temporal formula per progress property."""
    out = tmp_path / "ledger_system.qnt"
    done = cli("export", "--quint", "ledger", "--queries", "3", "-o", str(out))
    system = build_ledger_system(calls=3)
    model = render_system_module(system)
    assert done.returncode == 0, done.stderr
    assert out.read_text() == model.text and "module ledger_system {" in model.text
    assert "pure val INST = 0.to(2)" in model.text and "NOT EXPRESSED" not in done.stderr
    progress = liveness_of(system).progress
    assert model.not_expressed == () and len(model.temporal) == len(progress) > 0
    m = system.machine
    assert len(model.invariants) == (len(m.invariants) + len(system.invariants)
                                     + len(m.step_properties) + len(m.variables)
                                     + len(system.variables) + 1)
    doc = json.loads(cli("export", "--quint", "ledger", "--queries", "3", "--json").stdout)
    assert doc["exit_code"] == 0 and doc["system"] is True and doc["instances"] == 3
    assert doc["text"] == model.text and doc["invariants"] == list(model.invariants)
    assert doc["not_expressed"] == [] and doc["temporal"] == list(model.temporal)
    assert cli("export", "--quint", "ledger", "--queries", "3").stdout == model.text
    two = cli("export", "--quint", "query", "--queries", "2", "--workers", "2")
    assert two.returncode == 0 and "pure val INST = 0.to(1)" in two.stdout
    assert "2 worker processes" in two.stdout
    # careless input: one line, exit 2
    for args, says in ((("nonsense", "--queries", "2"), "unknown system"),
                       (("ledger", "--queries", "2", "--workers", "2"), "only the query system"),
                       (("approval", "--queries", "2", "--stock", "-1"), "only the approval")):
        bad = cli("export", "--quint", *args)
        assert bad.returncode == 2 and says in bad.stderr and bad.stdout == "", bad.stderr
        assert len(bad.stderr.strip().splitlines()) == 1, bad.stderr


def test_what_quint_cannot_express_in_a_system_is_said_and_exits_3(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A system's progress predicate ordering names (Quint orders numbers only) is left out:
    named in the module's header and at its place, in ``not_expressed`` and on the
    command's standard error; the module is still written and the command exits 3."""
    import typer
    from typer.testing import CliRunner

    from settled import _cmd_export
    from settled.conformance._explore import _quint_system
    from settled.model._liveness import Cmp, Liveness, Pred, Progress

    system = build_ledger_system(calls=2)
    live = liveness_of(system)
    odd = Progress("ordered_names", Pred(("recovering",), instances="some",
                                         where=(Cmp("result", "<", "x"),)),
                   Pred(("paired",), instances="every"), "an ordering of names", ("L4",))
    wider = Liveness(live.target, live.fairness, (*live.progress, odd))
    model = render_system_module(system, wider)
    [item] = model.not_expressed
    assert "ordered_names" in item and "orders" in item
    assert model.text.count("ordered_names") == 2 and "progress_ordered_names" not in model.text
    assert len(model.temporal) == len(live.progress)

    real = _quint_system.render_system_module
    monkeypatch.setattr(_quint_system, "render_system_module", lambda s: real(s, wider))
    app = typer.Typer()

    @app.callback()
    def main() -> None:
        """settled (only the export command)."""

    _cmd_export.register(app)
    done = CliRunner().invoke(app, ["export", "--quint", "ledger", "--queries", "2"])
    assert done.exit_code == 3, done.output
    assert "NOT EXPRESSED in Quint (left out of the module): progress ordered_names" \
        in done.output


@pytest.mark.parametrize("name", sorted(SMALL))
def test_every_system_passes_quint_typecheck(name: str, tmp_path: Path) -> None:
    path, _ = write(tmp_path, SMALL[name]())
    done = quint("typecheck", str(path))
    assert done.returncode == 0, done.stdout + done.stderr


def violated(system: System, tmp_path: Path, samples: int) -> tuple[int, set[str]]:
    """``quint run`` checking every invariant of the module by name: (exit code, the names
    it reports violated)."""
    path, model = write(tmp_path, system)
    done = quint("run", str(path), *RUN, "--max-samples", str(samples),
                 "--invariants", *model.invariants)
    out = done.stdout + done.stderr
    assert done.returncode in (0, 1), out
    assert ("[ok] No violation found" in out) == (done.returncode == 0), out
    return done.returncode, set(re.findall(r"❌ (\w+)", out))


# the query system's run takes 17-26 s here: in the slow suite
@pytest.mark.parametrize("name", ["ledger", "approval",
                                  pytest.param("query", marks=pytest.mark.slow)])
def test_quint_run_finds_no_violation_on_a_shipped_system(name: str, tmp_path: Path) -> None:
    assert violated(SMALL[name](), tmp_path, 20) == (0, set())


def no_mutex() -> System:
    """The approval system with the session's lock removed: two calls' runtimes at once."""
    return dataclasses.replace(build_approval_system(calls=2, stock=1), mutex=None)


def continue_local() -> System:
    """The ledger system with ``continue`` a local step: one call's input goes on alone."""
    s = build_ledger_system(calls=2)
    return dataclasses.replace(s, sync=tuple(t for t in s.sync if t != "continue"))


def all_paired_dropped() -> System:
    """The ledger system with the shared guard of ``continue`` (every call paired) dropped."""
    s = build_ledger_system(calls=2)
    return dataclasses.replace(s, refinements=tuple(r for r in s.refinements
                                                    if r.trigger != "continue"))


OURS = {"invariant": "inv_", "system_invariant": "sys_", "step_property": "step_",
        "domain": "domain_"}


@pytest.mark.parametrize(("mutant", "expected"), [
    (no_mutex, "sys_one_runtime_per_session"),
    (continue_local, "sys_no_unpaired_call_survives_recovery"),
    (all_paired_dropped, "sys_no_unpaired_call_survives_recovery"),
])
def test_quint_run_finds_what_ours_finds_in_a_system_mutant(
        mutant: Callable[[], System], expected: str, tmp_path: Path) -> None:
    system = mutant()
    code, names = violated(system, tmp_path, 200)
    assert code == 1 and expected in names, names
    # ...and our explorer finds that one too, and every other quint reports
    result = explore_system(system, symmetry=False)
    ours = {OURS[f.kind] + f.name for f in result.findings if f.kind in OURS}
    ours |= {"no_deadlock"} if any(f.kind == "deadlock" for f in result.findings) else set()
    assert expected in ours and names <= ours, (names, ours)


def _decode(value: object) -> object:
    """An ITF value as our model holds it: a number, a name, a truth value, a tuple, a map
    over instance ids (as a dict)."""
    if isinstance(value, dict) and "#bigint" in value:
        return int(value["#bigint"])
    if isinstance(value, dict) and "#map" in value:
        return {_decode(k): _decode(v) for k, v in value["#map"]}
    if isinstance(value, list):
        return tuple(_decode(v) for v in value)
    return value


def configuration(system: System, model: QuintSystemModel, s: dict[str, object]
                  ) -> SystemConfig:
    """One ITF state of the module as our system configuration."""
    m = system.machine
    values = {v.name: _decode(s[model.variables[v.name]]) for v in m.variables}
    states = _decode(s["state"])
    assert isinstance(states, dict)
    instances = []
    for i in range(system.instances):
        mine = tuple(values[v.name][i] if v.name in model.local  # type: ignore[index]
                     else values[v.name] for v in m.variables)
        instances.append(Config(states[i], mine))
    return SystemConfig(tuple(instances), tuple(_decode(s[model.variables[v.name]])
                                                for v in system.variables))


def walk(module: System, table: System, tmp_path: Path) -> tuple[int, int, list[object]]:
    """Traces of ``quint run`` on ``module``'s export (ITF), replayed against ``table``'s
    ``System.enabled``: (steps taken, those that moved several instances, the steps it does
    not allow). A ``settled`` stutter is allowed only where every instance is terminal; a
    step property recorded broken is a step the table does not allow."""
    path, model = write(tmp_path, module)
    done = quint("run", str(path), "--backend", "typescript", "--seed", "2", "--max-samples",
                 "8", "--n-traces", "8", "--max-steps", "30", "--out-itf",
                 str(tmp_path / "trace_{seq}.itf.json"))
    assert done.returncode in (0, 1), done.stdout + done.stderr
    traces = sorted(tmp_path.glob("trace_*.itf.json"))
    assert traces, "quint run wrote no trace"
    steps, together, wrong = 0, 0, list[object]()
    for trace in traces:
        states = json.loads(trace.read_text())["states"]
        configs = [configuration(table, model, s) for s in states]
        for s, c in zip(states, configs, strict=True):
            if not all(s[ok] is True for ok in model.ok.values()):
                wrong.append(("a step property broken", c))
        assert configs[0] == table.initial_config()
        for before, after in itertools.pairwise(configs):
            if after == before and table.terminal(before):
                continue
            steps += 1
            together += sum(a != b for a, b in zip(after.instances, before.instances,
                                                   strict=True)) > 1
            if after not in {step.after for step in table.enabled(before)}:
                wrong.append((before, after))
    return steps, together, wrong


# Beyond the smallest sizes: three instances, and two worker processes (the per-worker
# tuple indexed by a step's parameter); the larger ones take 16-20 s here: in the slow suite.
LARGER: dict[str, Callable[[], System]] = {
    "ledger_3": lambda: build_ledger_system(calls=3),
    "approval_3_stock_2": lambda: build_approval_system(calls=3, stock=2),
    "query_2_workers": lambda: build_query_system(queries=2, workers=2),
}


@pytest.mark.parametrize("name", ["ledger", "approval", "query", "ledger_3",
                                  pytest.param("approval_3_stock_2", marks=pytest.mark.slow),
                                  pytest.param("query_2_workers", marks=pytest.mark.slow)])
def test_every_step_of_a_quint_run_is_a_step_of_the_system(name: str, tmp_path: Path) -> None:
    """So the module's steps (local, synchronised, per-instance, the system's own; bindings,
    refinements, the lock) allow nothing ``System.enabled`` does not."""
    system = {**SMALL, **LARGER}[name]()
    steps, together, wrong = walk(system, system, tmp_path)
    assert wrong == []
    assert steps >= 100, steps  # the traces walked the system, not only stuttered
    assert together > 0 or not system.sync, together  # and took synchronised steps


def test_a_step_the_system_does_not_allow_is_caught_in_a_quint_run(tmp_path: Path) -> None:
    """The check above can fail: the approval module without its lock takes steps the
    shipped system refuses (a second call entering the runtime while the first holds it)."""
    _, _, wrong = walk(no_mutex(), build_approval_system(calls=2, stock=1), tmp_path)
    assert wrong
