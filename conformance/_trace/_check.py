"""The streaming check and its entry points: every instance's events read in one pass,
each instance keeping only its current configurations and its verdict.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

import msgspec

from settled.conformance._paused import gc_paused
from settled.model import Protocol, Value

from ._events import (
    _DECODE,
    _MEMO_LIMIT,
    CLOSURE_LIMIT,
    MAX_FILE_BYTES,
    MAX_INSTANCES,
    MAX_LINE_BYTES,
    CheckerFault,
    Event,
    TraceError,
    _as_dict,
    _decode_vars,
    _Event,
    _retry,
    _unreadable,
)
from ._machines import MACHINES, Machine
from ._replay import _NO_ROLE, _diagnose, _Replayer, _replayer
from ._report import CheckReport, Violation


# --------------------------------------------------------------------------
# The streaming check
# --------------------------------------------------------------------------
class _Instance:
    __slots__ = ("configs", "done", "first_line", "holder", "logged", "replayer", "seq",
                 "truncated")

    def __init__(self, replayer: _Replayer, line: int) -> None:
        self.replayer = replayer
        self.configs = replayer.intern(frozenset({replayer.p.initial_config()}))
        self.seq = 0
        self.logged: str = replayer.p.initial  # the state the log last named (``to``)
        self.holder: Value = None  # the name of the last worker that claimed
        self.done = False
        self.truncated = False  # a hidden-step search hit its limit: failures are undecided
        self.first_line = line


def check_lines(lines: Iterable[str | bytes], *, first: bool = False,
                closure_limit: int = CLOSURE_LIMIT,
                machines: Mapping[str, Machine] | None = None) -> CheckReport:
    """Check a whole trace; raises TraceError on unreadable input, CheckerFault on a defect."""
    with gc_paused():  # a million live events would have the cyclic GC walk them over and over
        return _check(lines, first, closure_limit, MACHINES if machines is None else machines)


def _check(lines: Iterable[str | bytes], first: bool, closure_limit: int,
           machines: Mapping[str, Machine]) -> CheckReport:
    at = [0]  # the line being read when a fault happens
    try:
        return _check_all(lines, first, closure_limit, machines, at)
    except TraceError:
        raise
    except OSError as exc:
        raise TraceError(at[0] + 1, f"cannot read the input: {exc.strerror or exc}") from None
    except Exception as exc:
        raise CheckerFault(at[0], exc) from None

def _check_all(lines: Iterable[str | bytes], first: bool, closure_limit: int,
               machines: Mapping[str, Machine], at: list[int]) -> CheckReport:
    """The streaming loop; ``at[0]`` holds the line being read, for the caller's fault report."""
    start = time.perf_counter()
    replayers: dict[str, _Replayer] = {}
    instances: dict[tuple[str, str], _Instance] = {}
    violations: list[Violation] = []
    undecided: list[Violation] = []
    events = total = line_no = 0
    decode, stopped = _DECODE, False
    for line_no, line in enumerate(lines, start=1):
        at[0] = line_no
        try:
            e = decode(line)
        except (msgspec.MsgspecError, RecursionError, ValueError) as exc:
            retried = _retry(line_no, line, exc)
            if retried is None:
                continue
            e = retried
        total += len(line)
        if len(line) > MAX_LINE_BYTES or total > MAX_FILE_BYTES:
            raise _too_big(line_no, line, total)
        events += 1
        inst = instances.get((e.machine, e.instance))
        if inst is None:
            inst = _open(e, line_no, replayers, instances, machines, closure_limit)
        elif inst.done:
            continue
        r = inst.replayer
        praw = bytes(e.params)
        known = r.params.get(praw)
        rest, name, params = known if known is not None else r.params_of(praw, line_no)
        if e.seq != inst.seq + 1:
            v = _incomplete(inst, e, line_no, line)
        else:
            inst.seq = e.seq
            role = _NO_ROLE if name is None else (0 if name == inst.holder else 1)
            vraw = bytes(e.vars)
            key = (inst.configs, inst.logged, e.trigger, rest, role, e.from_, e.to, vraw)
            got = r.memo.get(key)
            if got is None:
                found = _slow_step(r, inst, e, line_no, line, params, role, vraw, key)
            else:
                found = None
                inst.configs = got[0]
                inst.logged = e.to
                if not got[1]:
                    inst.truncated = True
            if found is None:
                if role == 1 and e.trigger in r.m.claims:
                    inst.holder = name
                continue
            v = found
        inst.done = True
        (undecided if v.kind == "undecided" else violations).append(v)
        if first:
            stopped = True
            break
    if not events:
        raise TraceError(line_no, "no events: the input holds no trace line")
    return CheckReport(events, len(instances), time.perf_counter() - start,
                       tuple(sorted(violations, key=lambda v: v.line)),
                       tuple(sorted(undecided, key=lambda v: v.line)), stopped)


def _too_big(line_no: int, line: str | bytes, total: int) -> TraceError:
    """The error for a line over its limit, or an input past the file's."""
    if total > MAX_FILE_BYTES:
        return TraceError(line_no, f"the input is over the limit of {MAX_FILE_BYTES:,} bytes")
    raw = line.encode("utf-8", "surrogatepass") if isinstance(line, str) else line
    return _unreadable(line_no, raw, ValueError())


def _open(e: _Event, line_no: int, replayers: dict[str, _Replayer],
          instances: dict[tuple[str, str], _Instance], machines: Mapping[str, Machine],
          closure_limit: int) -> _Instance:
    """The first event of an instance: its machine's replayer (made once per machine) and
    a fresh instance, within the limit on instances."""
    r = replayers.get(e.machine)
    if r is None:
        m = machines.get(e.machine)
        if m is None:
            raise TraceError(line_no, f"unknown machine {e.machine!r}; known machines are "
                                      f"{sorted(machines)}")
        r = replayers[e.machine] = _replayer(m, closure_limit)
    if len(instances) >= MAX_INSTANCES:
        raise TraceError(line_no, f"more than {MAX_INSTANCES:,} instances in one check; "
                                  "split the file by instance")
    inst = instances[(e.machine, e.instance)] = _Instance(r, line_no)
    return inst


def _slow_step(r: _Replayer, inst: _Instance, e: _Event, line_no: int, line: str | bytes,
               params: dict[str, Value], role: int, vraw: bytes,
               key: tuple[Any, ...]) -> Violation | None:
    """A step the memo has not seen: check names and domains, replay, or diagnose."""
    observed = r.checked_vars.get(vraw)
    if observed is None:
        observed = _decode_vars(line_no, vraw)
    model_params = dict(params)
    if role != _NO_ROLE and r.m.worker:
        model_params[r.m.worker] = role
    why = r.out_of_domain(e, params, observed)
    if why is not None:
        return Violation(e.instance, line_no, _as_dict(line), "out_of_domain", why, r.p.name)
    if len(r.checked_vars) > _MEMO_LIMIT:
        r.checked_vars.clear()
    r.checked_vars[vraw] = observed
    after, complete = r.step(inst.configs, e.trigger, model_params, e.from_, e.to, observed, role,
                             inst.logged)
    if after:
        if len(r.memo) > _MEMO_LIMIT:
            r.memo.clear()
        got = r.memo[key] = (r.intern(after), complete)
        inst.configs = got[0]
        inst.logged = e.to
        inst.truncated = inst.truncated or not complete
        return None
    return _diagnose(r, inst.configs, e, line_no, _as_dict(line), model_params, observed,
                     complete and not inst.truncated, inst.logged)


def _incomplete(inst: _Instance, e: _Event, line_no: int, line: str | bytes) -> Violation:
    expected = inst.seq + 1
    if inst.seq == 0:
        what = (f"the instance starts mid-stream: its first event has seq {e.seq}, and a log "
                "starts at seq 1")
    elif e.seq <= inst.seq:
        what = (f"seq {e.seq} after seq {inst.seq}: events out of order or repeated "
                f"(expected {expected})")
    else:
        gap = (f"event {expected} is" if e.seq == expected + 1
               else f"events {expected}..{e.seq - 1} are")
        what = f"seq {e.seq} after seq {inst.seq}: {gap} missing"
    return Violation(e.instance, line_no, _as_dict(line), "incomplete_log", what,
                     inst.replayer.p.name)


# --------------------------------------------------------------------------
# Entry points
# --------------------------------------------------------------------------
def check_file(path: Path | str, *, first: bool = False,
               closure_limit: int = CLOSURE_LIMIT) -> CheckReport:
    """Check a file (``-`` reads standard input)."""
    if str(path) == "-":
        return check_lines(sys.stdin.buffer, first=first, closure_limit=closure_limit)
    path = Path(path)
    try:
        f = path.open("rb")
    except OSError as exc:
        raise TraceError(0, f"cannot read {path}: {exc.strerror}") from None
    with f:
        try:
            size = path.stat().st_size
        except OSError:
            size = 0
        if size > MAX_FILE_BYTES:
            raise TraceError(0, f"{path} is {size:,} bytes, over the limit of "
                                f"{MAX_FILE_BYTES:,} bytes")
        try:
            return check_lines(f, first=first, closure_limit=closure_limit)
        except OSError as exc:
            raise TraceError(0, f"cannot read {path}: {exc.strerror}") from None


def check_trace(source: Path | str | Iterable[str | bytes], machine: Protocol | None = None, *,
                first: bool = False, closure_limit: int = CLOSURE_LIMIT) -> CheckReport:
    """Check a trace: a path (``-`` for standard input) or an iterable of lines.

    ``machine``, when given, is the only machine the trace may name; it is
    replayed as declared (the registered query machine keeps its worker
    abstraction). Raises :class:`TraceError` on unreadable input and
    :class:`CheckerFault` on a defect of the checker; everything else is a verdict.
    """
    if machine is not None:
        known = MACHINES.get(machine.name)
        m = known if known is not None and known.protocol.name == machine.name and (
            machine.name == "query" or known.protocol is machine) else Machine.of(machine)
        lines = _read(source) if isinstance(source, Path | str) else source
        return check_lines(lines, first=first, closure_limit=closure_limit,
                           machines={machine.name: m})
    if isinstance(source, Path | str):
        return check_file(source, first=first, closure_limit=closure_limit)
    return check_lines(source, first=first, closure_limit=closure_limit)


def _read(path: Path | str) -> Iterator[bytes]:
    if str(path) == "-":
        yield from sys.stdin.buffer
        return
    try:
        with Path(path).open("rb") as f:
            yield from f
    except OSError as exc:
        raise TraceError(0, f"cannot read {path}: {exc.strerror}") from None


def group(events: Iterable[Event]) -> dict[tuple[str, str], list[Event]]:
    """Events by (machine, instance), in file order (no verdicts: ``check_lines`` judges)."""
    out: dict[tuple[str, str], list[Event]] = {}
    for e in events:
        out.setdefault((e.machine, e.instance), []).append(e)
    return out
