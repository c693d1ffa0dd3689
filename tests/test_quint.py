"""The Quint export: every machine's module passes ``quint typecheck``; ``quint run`` (its
simulator, a fixed seed, short runs) finds no violation of any invariant, step property,
domain or deadlock check on the shipped machines, and does find the one a dropped guard
lets in; what the module cannot express is said in it and by the command.

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
from pathlib import Path

import pytest
from conftest import need_quint

from settled.conformance._explore._quint import render_module
from settled.model import APPROVAL, LEDGER, MACHINES, Protocol
from settled.model._liveness import Cmp, Liveness, Pred, Progress
from settled.model.progress import liveness_of

# quint's simulator: the TypeScript backend (the default Rust one is downloaded on first use)
# (a run stops at its first violation; a shipped machine takes every sample)
RUN = ("--backend", "typescript", "--seed", "1", "--max-steps", "20")


def write(tmp_path: Path, p: Protocol) -> Path:
    """The module as quint wants it: in a file named after the module."""
    path = tmp_path / f"{p.name}.qnt"
    path.write_text(render_module(p).text, encoding="utf-8")
    return path


def quint(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([need_quint(), *args], capture_output=True, text=True, timeout=600)


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "settled.cli", *args], capture_output=True,
                          text=True)


def test_export_quint_writes_the_module_of_a_machine(tmp_path: Path) -> None:
    out = tmp_path / "ledger.qnt"
    done = cli("export", "--quint", "ledger", "-o", str(out))
    assert done.returncode == 0, done.stderr
    model = render_module(LEDGER)
    assert out.read_text() == model.text and "module ledger {" in model.text
    assert "NOT EXPRESSED" not in done.stderr and "wrote" in done.stderr
    # one action per transition, one check per invariant, step property, variable, deadlock
    assert len(model.actions) == len(LEDGER.transitions)
    assert len(model.invariants) == (len(LEDGER.invariants) + len(LEDGER.step_properties)
                                     + len(LEDGER.variables) + 1)
    assert len(model.temporal) == len(liveness_of(LEDGER).progress)
    doc = json.loads(cli("export", "--quint", "ledger", "--json").stdout)
    assert doc["format"] == "quint" and doc["text"] == model.text and doc["exit_code"] == 0
    assert doc["not_expressed"] == [] and doc["invariants"] == list(model.invariants)
    assert cli("export", "--quint", "ledger").stdout == model.text  # deterministic


@pytest.mark.parametrize("name", sorted(MACHINES))
def test_every_machine_passes_quint_typecheck(name: str, tmp_path: Path) -> None:
    done = quint("typecheck", str(write(tmp_path, MACHINES[name])))
    assert done.returncode == 0, done.stdout + done.stderr


def test_quint_typecheck_fails_a_module_with_a_type_error(tmp_path: Path) -> None:
    """The check above can fail: a variable declared with the wrong type is refused."""
    path = write(tmp_path, LEDGER)
    text = path.read_text()
    assert "  var executions: int\n" in text
    path.write_text(text.replace("  var executions: int\n", "  var executions: str\n"))
    done = quint("typecheck", str(path))
    assert done.returncode != 0 and "executions" in done.stdout + done.stderr


def violated(p: Protocol, tmp_path: Path, samples: int) -> tuple[int, set[str]]:
    """``quint run`` checking every invariant of the module by name: (exit code, the names
    it reports violated)."""
    path = write(tmp_path, p)
    names = render_module(p).invariants
    done = quint("run", str(path), *RUN, "--max-samples", str(samples), "--invariants", *names)
    out = done.stdout + done.stderr
    assert done.returncode in (0, 1), out
    assert ("[ok] No violation found" in out) == (done.returncode == 0), out
    return done.returncode, set(re.findall(r"❌ (\w+)", out))


# the query machine's runs take twice the others' (about 11 s each here): in the slow suite
BY_SIZE = ["approval", "ledger", pytest.param("query", marks=pytest.mark.slow)]


@pytest.mark.parametrize("name", BY_SIZE)
def test_quint_run_finds_no_violation_on_a_shipped_machine(name: str, tmp_path: Path) -> None:
    assert violated(MACHINES[name], tmp_path, 30) == (0, set())


def drop_guard(p: Protocol, trigger: str, guard: str) -> Protocol:
    """``p`` with one guard of the (first) ``trigger`` transition that has it dropped."""
    i = next(i for i, t in enumerate(p.transitions)
             if t.trigger == trigger and any(g.name == guard for g in t.guards))
    t = p.transitions[i]
    dropped = dataclasses.replace(t, guards=tuple(g for g in t.guards if g.name != guard))
    return dataclasses.replace(p, transitions=(*p.transitions[:i], dropped,
                                               *p.transitions[i + 1:]))


@pytest.mark.parametrize(("machine", "trigger", "guard", "expected"), [
    # resuming a turn whose call has a receipt runs the call again: an invariant breaks
    (LEDGER, "resume", "no_receipt", "inv_executed_at_most_once"),
    # approving what was never shown: a step property breaks
    (APPROVAL, "approve", "shown", "step_decision_after_display"),
])
def test_quint_run_finds_what_a_dropped_guard_lets_in(
        machine: Protocol, trigger: str, guard: str, expected: str, tmp_path: Path) -> None:
    from settled.conformance._explore import explore

    mutant = drop_guard(machine, trigger, guard)
    code, names = violated(mutant, tmp_path, 300)
    assert code == 1 and expected in names, names
    # ...every one of which our explorer finds too
    prefix = {"invariant": "inv_", "step_property": "step_", "domain": "domain_"}
    result = explore(mutant)
    ours = {prefix[f.kind] + f.name for f in result.violations}
    ours |= {"no_deadlock"} if result.deadlocks else set()
    assert names <= ours, (names, ours)


def test_what_quint_cannot_express_is_said_in_the_module_and_by_the_command(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A progress predicate ordering names (Quint orders numbers only) is left out: named
    in the module's header and at its place, in ``not_expressed``, and on the command's
    standard error, loudly; the rest of the module is still written, and the command exits 3
    (incomplete), not 0."""
    import typer
    from typer.testing import CliRunner

    from settled import _cmd_export
    from settled.conformance._explore import _quint

    live = liveness_of(LEDGER)
    odd = Progress("ordered_names", Pred(("recovering",), where=(Cmp("result", "<", "x"),)),
                   Pred(("paired",)), "an ordering of names", ("L4",))
    wider = Liveness(live.target, live.fairness, (*live.progress, odd))
    model = render_module(LEDGER, wider)
    [item] = model.not_expressed
    assert "ordered_names" in item and "orders" in item
    assert model.text.count("ordered_names") == 2 and "progress_ordered_names" not in model.text
    assert len(model.temporal) == len(live.progress)

    real = _quint.render_module
    monkeypatch.setattr(_quint, "render_module", lambda p: real(p, wider))
    app = typer.Typer()

    @app.callback()
    def main() -> None:
        """settled (only the export command)."""

    _cmd_export.register(app)
    done = CliRunner().invoke(app, ["export", "--quint", "ledger"])
    assert done.exit_code == 3, done.output
    assert "NOT EXPRESSED in Quint (left out of the module): progress ordered_names" \
        in done.output


def _decode(value: object) -> object:
    """An ITF value as our model holds it: a number, a name, a truth value, a tuple."""
    if isinstance(value, dict) and "#bigint" in value:
        return int(value["#bigint"])
    if isinstance(value, list):
        return tuple(_decode(v) for v in value)
    return value


def walk(module: Protocol, table: Protocol, tmp_path: Path) -> tuple[int, list[object]]:
    """Traces of ``quint run`` on ``module``'s export (ITF), replayed against ``table``'s
    ``Protocol.enabled``: (steps taken, the steps the table does not allow). A ``settled``
    stutter is allowed only where the configuration is terminal; a step property recorded
    broken is a step the table does not allow."""
    model = render_module(module)
    path = write(tmp_path, module)
    done = quint("run", str(path), "--backend", "typescript", "--seed", "2", "--max-samples",
                 "10", "--n-traces", "10", "--max-steps", "30", "--out-itf",
                 str(tmp_path / "trace_{seq}.itf.json"))
    assert done.returncode in (0, 1), done.stdout + done.stderr
    traces = sorted(tmp_path.glob("trace_*.itf.json"))
    assert traces, "quint run wrote no trace"
    steps = 0
    wrong: list[object] = []
    for trace in traces:
        states = json.loads(trace.read_text())["states"]
        configs = []
        for s in states:
            values = tuple(_decode(s[model.variables[v.name]]) for v in table.variables)
            configs.append(table.config(s["state"], **dict(zip(table.variable_names, values,
                                                               strict=True))))
            if not all(s[f"ok_{sp.name}"] is True for sp in module.step_properties):
                wrong.append(("a step property broken", configs[-1]))
        assert configs[0] == table.initial_config()
        for before, after in itertools.pairwise(configs):
            if after == before and before.state in table.terminal_states:
                continue
            steps += 1
            if after not in {step.after for step in table.enabled(before)}:
                wrong.append((before, after))
    return steps, wrong


@pytest.mark.parametrize("name", BY_SIZE)
def test_every_step_of_a_quint_run_is_a_step_of_the_table(name: str, tmp_path: Path) -> None:
    """So the module's actions (guards, the first-of-its-group rule, effects) allow nothing
    the table does not, and keep every step property."""
    steps, wrong = walk(MACHINES[name], MACHINES[name], tmp_path)
    assert wrong == []
    assert steps >= 10, steps  # the traces walked the machine, not only stuttered


def test_a_step_the_table_does_not_allow_is_caught_in_a_quint_run(tmp_path: Path) -> None:
    """The check above can fail: the approval module with its approve guard dropped takes
    a step the shipped table refuses (approving what was never shown)."""
    _, wrong = walk(drop_guard(APPROVAL, "approve", "shown"), APPROVAL, tmp_path)
    assert wrong
