"""``--max-epoch`` and ``--max-task-version``: the query model's bounds, from the command line.

The query machine and system cut their space at a lease epoch and a task version
(``epochs_left``, ``versions_left``: bound guards, ``model/query.py``). ``settled explore``
and ``settled export`` take both, for the machine and for the system, with either engine;
unset, each keeps its declared default (the machine 3 and 3, the system 2 and 2). Only the
query model has them: with another, the options are refused in one line."""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Annotated

import typer
from rich.console import Console

err = Console(stderr=True, highlight=False, soft_wrap=True, markup=False)

MAX_BOUND = 9  # a lease epoch or task version past this is not a space anyone can explore

MaxEpoch = Annotated[int | None, typer.Option(
    "--max-epoch", min=1, max=MAX_BOUND,
    help="The query model's last lease epoch (default: the machine 3, the system 2).")]
MaxTaskVersion = Annotated[int | None, typer.Option(
    "--max-task-version", min=1, max=MAX_BOUND,
    help="The query model's last task version (default: the machine 3, the system 2).")]


@dataclass(frozen=True, slots=True)
class Bounds:
    """The bounds asked for; None keeps the model's default."""

    max_epoch: int | None = None
    max_task_version: int | None = None

    def kwargs(self) -> dict[str, int]:
        """The builder's keyword arguments for the bounds that were set."""
        return {k: v for k, v in (("max_epoch", self.max_epoch),
                                  ("max_task_version", self.max_task_version)) if v is not None}

    def options(self) -> str:
        """The options as typed, for messages ('' when none was set)."""
        return " ".join(f"--{k.replace('_', '-')} {v}" for k, v in self.kwargs().items())

    def effective(self, model: str, instances: int) -> dict[str, int]:
        """The bounds the run uses: those asked, the rest at the model's defaults (the
        builders' own, so they are said once); {} for a model without them."""
        if model != "query":
            return {}
        from settled.model import build_query_machine
        from settled.model.systems import build_query_system

        builder = build_query_machine if instances == 1 else build_query_system
        params = inspect.signature(builder).parameters
        return {k: int(params[k].default) for k in ("max_epoch", "max_task_version")
                } | self.kwargs()

    def line(self, model: str, instances: int) -> str | None:
        """The bounds used, in a line, when the command line set one."""
        if not self.kwargs():
            return None
        got = ", ".join(f"{k} {v}" for k, v in self.effective(model, instances).items())
        return (f"model bounds: {got} (asked: {self.options()}; a state or step only other "
                "bounds reach is not explored here, and is reported unreached or unfired)")

    def check(self, model: str) -> Bounds:
        """Refuse (exit 2) a bound on a known model that has none (an unknown name is the
        command's to report)."""
        from settled.model import MACHINES

        if self.kwargs() and model != "query" and model in MACHINES:
            err.print(f"{self.options()}: only the query model has a lease epoch and a task "
                      "version; drop the option")
            raise typer.Exit(2)
        return self


DEFAULTS = Bounds()  # every bound at the model's own default
