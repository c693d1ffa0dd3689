"""The inputs of ``settled review``: a verify report, a mutants report and ITF
counterexamples, each read and checked for the parts the site reads; a file that cannot be
used raises :class:`ReviewInputError` with a one-line reason.

Its own room because it faces the user's files (and their mistakes), while the rest of the
review site is generated from the declarations alone.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from settled.model import MACHINES, Protocol, System
from settled.model.systems import SYSTEMS


class ReviewInputError(ValueError):
    """A report or counterexample given to ``settled review`` cannot be used (one line)."""


def _read_json(path: Path, what: str) -> Any:
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise ReviewInputError(f"{what} {path}: no such file") from None
    except IsADirectoryError:
        raise ReviewInputError(f"{what} {path}: is a folder, not a file") from None
    except OSError as e:
        raise ReviewInputError(f"{what} {path}: cannot read it: {e.strerror or e}") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise ReviewInputError(f"{what} {path}: not a text file (binary content)") from None
    if "\x00" in text:
        raise ReviewInputError(f"{what} {path}: not a text file (binary content)")
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise ReviewInputError(f"{what} {path}: not JSON ({e.msg} at line {e.lineno}, "
                               f"column {e.colno})") from None


def read_verify_report(path: Path) -> dict[str, Any]:
    """A ``settled verify --json`` report, checked for the parts the site reads."""
    doc = _read_json(path, "verify report")
    machines = doc.get("machines") if isinstance(doc, dict) else None
    if not isinstance(machines, dict) or not machines or not all(
            isinstance(m, dict) and isinstance(m.get("lockstep"), dict) for m in machines.values()):
        raise ReviewInputError(f"verify report {path}: not a 'settled verify --json' report (no "
                               "'machines' with a 'lockstep' section each)")
    unknown = sorted(set(machines) - set(MACHINES))
    if unknown:
        raise ReviewInputError(f"verify report {path}: machines {unknown} are not declared here; "
                               f"machines are {sorted(MACHINES)}")
    return dict(doc)


def read_mutants_report(path: Path) -> dict[str, Any]:
    """A ``settled mutants --json`` report, checked for the parts the site reads."""
    doc = _read_json(path, "mutants report")
    mutants = doc.get("mutants") if isinstance(doc, dict) else None
    if not isinstance(mutants, list) or not all(
            isinstance(m, dict) and isinstance(m.get("name"), str) and "killed" in m
            for m in mutants):
        raise ReviewInputError(f"mutants report {path}: not a 'settled mutants --json' report "
                               "(no 'mutants' list of {name, killed, ...})")
    return dict(doc)


@dataclass(frozen=True, slots=True)
class Trace:
    """One ITF counterexample: its file name, its model, and its JSON as read."""

    file: str
    model: str
    doc: Mapping[str, Any]


def pages() -> dict[str, Protocol | System]:
    """Page name → what it shows: every machine, then every system (by its own name)."""
    out: dict[str, Protocol | System] = dict(MACHINES)
    out.update({s.name: s for s in SYSTEMS.values()})
    return out


def read_trace(path: Path) -> Trace:
    doc = _read_json(path, "counterexample")
    if not isinstance(doc, dict) or not isinstance(doc.get("vars"), list) or not isinstance(
            doc.get("states"), list) or not doc["states"]:
        raise ReviewInputError(f"counterexample {path}: not an ITF trace ('vars' and a non-empty "
                               "'states' are required)")
    if not all(isinstance(s, dict) for s in doc["states"]):
        raise ReviewInputError(f"counterexample {path}: not an ITF trace (a state is not an object)")
    meta = doc["#meta"] if isinstance(doc.get("#meta"), dict) else {}
    model = str(meta.get("source") or meta.get("model") or "")
    if model not in pages():
        raise ReviewInputError(f"counterexample {path}: its model {model!r} is not declared here; "
                               f"models are {sorted(pages())}")
    return Trace(path.name, model, doc)


def read_traces(path: Path) -> tuple[list[Trace], list[str]]:
    """The ITF files of a folder (or one file), sorted by name; and the other files skipped."""
    if path.is_file():
        return [read_trace(path)], []
    if not path.is_dir():
        raise ReviewInputError(f"counterexamples {path}: no such file or folder")
    files = sorted(p for p in path.iterdir() if p.is_file())
    itf = [p for p in files if p.name.endswith(".itf.json")]
    if not itf:
        raise ReviewInputError(f"counterexamples {path}: no *.itf.json file in this folder")
    names = [p.name for p in itf]
    if len(set(names)) != len(names):
        raise ReviewInputError(f"counterexamples {path}: two files share a name")
    return [read_trace(p) for p in itf], [p.name for p in files if p not in itf]
