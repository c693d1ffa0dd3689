"""What a lockstep run is made of: its steps, and the kit's constants.

A single machine is a system of independent instances (see :mod:`._world`), so one kind
of step serves both: an instance's own step (``q1 confirm ...``), a synchronised step
every concerned instance takes at once (``all condition_updated``), or a system's own step
(``system message_received``); each may be a forbidden attempt the implementation must
refuse.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from settled.model import Params, Transition

EAGER = 4  # weight of a step that keeps an instance's story going
MIN_STEPS = 25  # Hypothesis draws many short runs; a floor gets every run into deep states
REPLAY_BUDGET = 400  # replays the minimiser may spend on one failure
WORKER_FIRST = frozenset({"begin_submit", "resubmit"})  # forbidden probes drawn first
SYSTEM = -1  # the ``instance`` of a step no single instance takes (sync or the system's own)


@dataclass(frozen=True, slots=True)
class Action:
    """One step of a run: a model trigger on an instance (``who`` ``q<i>``), a synchronised
    step (``all``) or the system's own (``system``); or a forbidden attempt."""

    instance: int
    trigger: str
    params: Params
    forbidden: bool = False
    who: str = ""  # defaults to q<instance>
    # Refused by the system's state alone (a bound parameter, a lock another instance holds).
    bound: bool = field(default=False, compare=False)

    def __post_init__(self) -> None:
        if not self.who:
            object.__setattr__(self, "who", f"q{self.instance}" if self.instance >= 0 else "all")

    def text(self) -> str:
        args = " ".join(f"{k}={v}" for k, v in self.params.items())
        head = "refuse " if self.forbidden else ""
        return f"{head}{self.who} {self.trigger}" + (f" {args}" if args else "")

    @property
    def target(self) -> int | None:
        """The instance ``perform``/``observe`` get: None for a sync or system step."""
        return None if self.instance == SYSTEM else self.instance

    def key(self) -> tuple[str, str, tuple[tuple[str, object], ...]]:
        """Who takes which trigger with which parameters (refusal or not)."""
        return (self.who, self.trigger, tuple(sorted(self.params.items())))


SystemAction = Action  # the name the system kit used


def transition_label(t: Transition) -> str:
    """A transition's name in coverage reports: ``trigger: sources -> dest``."""
    return f"{t.trigger}: {'|'.join(t.source)} -> {t.dest or '(same)'}"


def rules_text(rules: tuple[str, ...] | list[str]) -> str:
    return "rule " + rules[0] if len(rules) == 1 else "rules " + ", ".join(rules)
