"""``settled demo query`` and ``settled demo approval``: each seed's story, end to end.

Each demo runs the real implementation on a fresh temporary folder and says
whether the story held (exit 0) or not (exit 1, naming what did not). The
query demo's event log is then replayed through the model with the trace
checker; that check lives here because ``impl/`` never imports the
conformance kit.
"""

from __future__ import annotations

import contextlib
import json
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Any, Final

import typer
from rich.console import Console

from settled._demo_approval import demo_approval
from settled._demo_ledger import demo_ledger
from settled._demo_query import STORE_FILE, demo_query
from settled._paths import OutputPathError, writable_dir
from settled.conformance._trace import CheckReport, check_lines
from settled.impl.query._events import trace_lines

__all__ = ["APPROVAL_STORY", "LEDGER_STORY", "approval_problems", "ledger_problems",
           "query_problems", "query_story", "register"]

AsJson = Annotated[bool, typer.Option("--json", help="Print only the story's facts as one JSON object.")]
KeepIn = Annotated[Path | None, typer.Option(
    "--dir", help="Keep the databases in this new or empty folder (for export-trace); by default "
                  "they live in a temporary folder that is removed.")]


@contextlib.contextmanager
def _folder(keep: Path | None, prefix: str) -> Iterator[Path]:
    """The demo's folder: ``keep`` (checked before the story starts) or a temporary one."""
    if keep is None:
        with tempfile.TemporaryDirectory(prefix=prefix) as folder:
            yield Path(folder)
        return
    try:
        writable_dir(keep)
    except OutputPathError as e:
        err.print(str(e))
        raise typer.Exit(2) from None
    if any(p for p in keep.iterdir() if not p.name.startswith(".settled-write-check-")):
        err.print(f"{keep} is not empty; name a new or empty folder for --dir, so the demo's "
                  "databases are not mixed with others")
        raise typer.Exit(2)
    yield keep


def _kept(keep: Path | None, as_json: bool, files: str) -> None:
    if keep is not None and not as_json:
        out.print(f"databases kept in {keep}: {files}")

# What the ERP-agent article's idempotency example printed; the demo must print exactly this.
APPROVAL_STORY: Final = {"observed_delta": 5, "replay_same_result": True, "lookup_status": "found",
                         "different_arguments": "idempotency_conflict"}

# The ledger story's four figures; ``--json`` prints exactly these.
LEDGER_STORY: Final = {"calls": 3, "paired": 3, "business_changes": 2, "new_operation_ids": 0}

out = Console(highlight=False, soft_wrap=True, markup=False)
err = Console(stderr=True, highlight=False, soft_wrap=True, markup=False)
demo = typer.Typer(name="demo", no_args_is_help=True, add_completion=False,
                   help="Tell a seed's story on fresh files with the real implementation.")


def _say(line: str) -> None:
    out.print(line)


def query_story(directory: Path, say: Any = None) -> tuple[dict[str, Any], CheckReport]:
    """Run the query demo in ``directory`` and replay its event log through the model."""
    facts = demo_query(directory, say)
    report = check_lines(trace_lines(directory / STORE_FILE))
    facts["trace_conforms"] = report.ok
    return facts, report


def query_problems(facts: dict[str, Any]) -> list[str]:
    """What of the data-agent article's story did not hold; empty when all of it did."""
    query, task, note = facts["query"], facts["task"], facts["notification"]
    wanted = [
        (query["state"] == "succeeded" and query["result_yuan"] == 16.0, "Q2 succeeded with 16 yuan"),
        (query["executions_on_platform"] == 1 == query["submissions"], "Q2 ran once, submitted once"),
        (query["authorized_condition_version"] == 2, "Q2 kept its authorized version 2 (Q23)"),
        (facts["partial_quote"]["refused_with"] == "InvalidInput", "a partial quote is refused (Q5)"),
        (task["condition_version"] == 3 and not task["phase_moved_by_late_result"],
         "the late result did not move version 3's phase (Q24)"),
        (note["condition_version"] == 2 and "earlier app monthly total" in note["answer"]
         and not note["authorizes"], "the notification tells the earlier app monthly total (Q25)"),
        (facts["draft_q3"] == {"state": "awaiting_confirmation", "condition_version": 3},
         "Q3 still awaits its own confirmation"),
        (facts["trace_conforms"], "the event log conforms to the model"),
    ]
    return [f"expected: {fact}" for held, fact in wanted if not held]


def approval_problems(facts: dict[str, Any]) -> list[str]:
    """What of the ERP-agent article's example did not hold; empty when all of it did."""
    return [f"{key}: expected {want!r}, got {facts.get(key)!r}"
            for key, want in APPROVAL_STORY.items() if facts.get(key) != want]


def ledger_problems(facts: dict[str, Any]) -> list[str]:
    """What of the ledger story did not hold; empty when all of it did."""
    details = facts.get("details", {})
    wanted = [(f"{key}: expected {want!r}, got {facts.get(key)!r}", facts.get(key) == want)
              for key, want in LEDGER_STORY.items()]
    wanted += [
        ("the first run died at the crash point", details.get("crash_exit_code") == 77),
        ("both writes paired from their receipts",
         details.get("paired_from_receipts") == ["call_order", "call_restock"]),
        ("the lookup ran once, under its original operation_id",
         details.get("continued") == ["call_mugs_left"] and details.get("lookups_run") == 1),
        ("the original input continued", details.get("continued_input") is True),
    ]
    return [f"expected: {what}" if "expected" not in what else what
            for what, held in wanted if not held]


def _finish(facts: dict[str, Any], problems: list[str], as_json: bool, summary: str) -> None:
    if as_json:
        print(json.dumps(facts, ensure_ascii=False))  # the story's facts, exactly (no exit key)
    elif problems:
        out.print("the story did not hold:")
        for problem in problems:
            out.print(f"  {problem}")
    else:
        out.print(summary)
    raise typer.Exit(1 if problems else 0)


@demo.command()
def query(as_json: AsJson = False, keep: KeepIn = None) -> None:
    """The data agent: the user asks to look at the app only, then says "execute"; the answer is
    lost, the task moves to version 3, and the late 16 yuan still answers version 2."""
    with _folder(keep, "settled-query-demo-") as folder:
        facts, report = query_story(folder, None if as_json else _say)
    _kept(keep, as_json, f"{STORE_FILE} (settled export-trace {keep}/{STORE_FILE} -o trace.jsonl)")
    if not as_json:
        verdict = "conforms" if report.ok else f"{len(report.violations)} violation(s)"
        out.print(f"trace check: {report.events} events of {report.instances} queries: {verdict}")
        for violation in report.violations:
            out.print(violation.text())
    q, task = facts["query"], facts["task"]
    runs = q["executions_on_platform"]
    summary = (f"story held: Q2 ran {'once' if runs == 1 else f'{runs} times'} on the platform and "
               f"{q['state']} with {q['result_yuan']:g} yuan at condition version "
               f"{q['authorized_condition_version']}; task A is at version {task['condition_version']} "
               f"with phase {task['phase']}, untouched by the late result; Q3 awaits confirmation.")
    _finish(facts, query_problems(facts), as_json, summary)


@demo.command()
def approval(as_json: AsJson = False, keep: KeepIn = None) -> None:
    """The ERP agent: an approved stock adjustment, its replay, a lookup and a conflicting token reuse."""
    with _folder(keep, "settled-approval-demo-") as folder:
        facts = demo_approval(folder, None if as_json else _say)
    _kept(keep, as_json, "a folder with checkpoint.db and business.db")
    summary = (f"story held: stock changed by {facts['observed_delta']} once; the replay returned "
               f"the first result; the lookup found the token; other arguments under it were an "
               f"{facts['different_arguments']}.")
    _finish(facts, approval_problems(facts), as_json, summary)


@demo.command()
def ledger(as_json: AsJson = False, keep: KeepIn = None) -> None:
    """The data agent's ledger: a turn of three tool calls (two writes, one lookup) crashes after
    the second write commits; recovery pairs both writes from their receipts and runs the lookup
    once under its original operation_id."""
    with _folder(keep, "settled-ledger-demo-") as folder:
        facts = demo_ledger(folder, None if as_json else _say)
    _kept(keep, as_json, "a folder with sessions.db and business.db "
                         "(settled export-trace reads sessions.db)")
    problems = ledger_problems(facts)
    if as_json:
        print(json.dumps({key: facts[key] for key in LEDGER_STORY}, ensure_ascii=False))
        raise typer.Exit(1 if problems else 0)
    summary = (f"story held: {facts['calls']} calls, {facts['paired']} paired once each, "
               f"{facts['business_changes']} business changes, {facts['new_operation_ids']} new "
               "operation_ids; the original input continued.")
    _finish(facts, problems, False, summary)


def register(app: typer.Typer) -> None:
    app.add_typer(demo, name="demo")
