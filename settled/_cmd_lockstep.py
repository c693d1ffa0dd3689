"""``settled lockstep`` and ``settled replay``: the conformance kit on any importable adapter.

``settled lockstep MODULE:FACTORY`` imports ``FACTORY`` from ``MODULE`` (the
current folder is on the import path, as for ``python -m``), calls it for a
fresh adapter per run, and runs a lockstep campaign against the machine the
adapter names (or ``--machine``). ``settled replay FILE`` runs a saved
counterexample (a ``*.steps.json`` step list or a ``*.itf.json`` trace) again,
against the bundled implementation of its machine or ``--adapter``.

Exit codes: 0 passed (replay: the steps now agree); 1 diverged (replay: still
diverges); 2 bad input (an unimportable factory, an unknown machine or
profile, an unreadable file, an unwritable ``--out``); 3 the adapter broke its
contract, or a counterexample was found but could not be written.
"""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import typer

from settled._output import emit
from settled._paths import OutputPathError, writable_dir
from settled.conformance._profiles import PROFILES
from settled.model import MACHINES

BUNDLED = {"query": "settled.conformance._bundled._query_adapter:QueryAdapter",
           "approval": "settled.conformance._bundled._approval_adapter:ApprovalAdapter"}


class _BadInput(Exception):
    pass


def _say(text: str) -> None:
    print(text, file=sys.stderr)


def load_factory(spec: str) -> Callable[[], Any]:
    """``MODULE:FACTORY`` -> the callable; :class:`_BadInput` naming what is wrong."""
    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name or not attr:
        raise _BadInput(f"{spec!r} is not MODULE:FACTORY (e.g. examples.query_adapter:correct)")
    cwd = os.getcwd()
    if cwd not in sys.path:
        sys.path.insert(0, cwd)
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise _BadInput(f"cannot import {module_name!r}: {exc}") from None
    except Exception as exc:  # the module itself is broken
        raise _BadInput(f"importing {module_name!r} raised {type(exc).__name__}: {exc}") from None
    factory = module
    for part in attr.split("."):
        if not hasattr(factory, part):
            raise _BadInput(f"{module_name!r} has no {attr!r}")
        factory = getattr(factory, part)
    if not callable(factory):
        raise _BadInput(f"{spec} is a {type(factory).__name__}, not a callable factory")
    return factory


def lockstep(
    factory: Annotated[str, typer.Argument(metavar="MODULE:FACTORY",
                                           help="An importable callable returning a fresh "
                                                "settled.conformance.Adapter.")],
    machine: Annotated[str | None, typer.Option("--machine", help=f"The machine: "
                                                f"{', '.join(MACHINES)} (default: the "
                                                "adapter's own).")] = None,
    profile_name: Annotated[str, typer.Option("--profile", help=f"Hypothesis profile: "
                                              f"{', '.join(PROFILES)}.")] = "ci",
    seed: Annotated[int | None, typer.Option("--seed", help="Seed the campaign, for a "
                                             "reproducible run.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the report as JSON.")] = False,
    out: Annotated[Path | None, typer.Option("--out", help="Folder for counterexamples "
                                             "(default ./settled-counterexamples).")] = None,
    allow_unchecked: Annotated[list[str] | None, typer.Option(
        "--allow-unchecked", metavar="VAR",
        help="Accept that the adapter never shows VAR (declared unobservable); repeat for each. "
             "Without it such a campaign is incomplete: exit 3.")] = None,
) -> None:
    """Run the lockstep kit on any implementation through its adapter."""
    from settled.conformance import lockstep as run

    try:
        if profile_name not in PROFILES:
            raise _BadInput(f"unknown profile {profile_name!r}; choose one of {sorted(PROFILES)}")
        if machine is not None and machine not in MACHINES:
            raise _BadInput(f"unknown machine {machine!r}; machines are {sorted(MACHINES)}")
        if out is not None:
            writable_dir(out)
        made = load_factory(factory)
    except (_BadInput, OutputPathError) as exc:
        _say(f"settled lockstep: {exc}")
        raise typer.Exit(2) from None
    names = [n.strip() for item in allow_unchecked or [] for n in item.split(",") if n.strip()]
    try:
        report = run(made, machine, profile=profile_name, seed=seed, out=out,
                     allow_unchecked=names)
    except ValueError as exc:
        _say(f"settled lockstep: {exc}")
        raise typer.Exit(2) from None
    if as_json:
        emit(report.to_json(), report.exit_code)
    else:
        print(report.text())
    raise typer.Exit(report.exit_code)


def replay(
    file: Annotated[Path, typer.Argument(help="A saved counterexample: *.steps.json or "
                                              "*.itf.json.")],
    adapter: Annotated[str | None, typer.Option("--adapter", metavar="MODULE:FACTORY",
                                                help="Replay against this adapter (default: "
                                                     "the bundled implementation).")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the result as JSON.")] = False,
) -> None:
    """Run a saved lockstep counterexample again; say whether it still diverges."""
    from settled.conformance import CounterexampleError, load_counterexample, replay_counterexample

    try:
        saved = load_counterexample(file)
        if saved.machine not in MACHINES:
            raise _BadInput(f"{file} is for machine {saved.machine!r}; machines are "
                            f"{sorted(MACHINES)}")
        made = load_factory(adapter or BUNDLED[saved.machine])
        result = replay_counterexample(saved, made)
    except (_BadInput, CounterexampleError) as exc:
        _say(f"settled replay: {exc}")
        raise typer.Exit(2) from None
    if as_json:
        emit(result.to_json(), result.exit_code)
    else:
        print(result.text())
    raise typer.Exit(result.exit_code)


def register(app: typer.Typer) -> None:
    app.command("lockstep")(lockstep)
    app.command("replay")(replay)
