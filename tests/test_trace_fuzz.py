"""The trace checker under hostile input, and against a plain concrete replay.

Fuzz: Hypothesis mutates valid traces (truncation, type swaps, seq edits,
nesting, random bytes, shuffled lines); the checker never raises anything but
``TraceError`` (exit 2, with a line and a reason) and otherwise returns
exit 0 or 1 with a reason per violation.

Property: traces written by random runs of a *three*-worker model conform
(the checker replays a two-role abstraction of workers), and a single-field
mutation is judged exactly as a naive replay through the concrete model
judges it: conforming, or a violation at the mutated line (or, when the
mutated line is accepted, at a later line it makes inconsistent).
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from functools import cache
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from settled.conformance._trace import CheckReport, TraceError, check_lines
from settled.conformance._trace._tracegen import trace_lines, walk
from settled.model import Config, Protocol, build_query_machine

pytestmark = pytest.mark.rule("Q14")

THREE_WORKERS = build_query_machine(workers=3, max_epoch=4, max_task_version=3)
JSON_VALUES = st.one_of(st.none(), st.booleans(), st.integers(-2**70, 2**70), st.text(max_size=8),
                        st.lists(st.integers(), max_size=2),
                        st.dictionaries(st.text(max_size=3), st.integers(), max_size=2))


def base_lines(seed: int, instances: int = 2) -> list[str]:
    return list(trace_lines(THREE_WORKERS, instances, seed=seed, max_steps=25))


@st.composite
def mutated(draw: st.DrawFn) -> list[bytes]:
    lines = [x.encode() for x in base_lines(draw(st.integers(0, 10_000)))]
    assume(lines)
    for _ in range(draw(st.integers(1, 3))):
        i = draw(st.integers(0, len(lines) - 1))
        kind = draw(st.sampled_from(["truncate", "type", "seq", "nest", "bytes", "drop", "dup",
                                     "swap", "key"]))
        if kind == "truncate":
            blob = b"\n".join(lines)
            lines = blob[: draw(st.integers(0, len(blob)))].split(b"\n")
        elif kind == "bytes":
            at = draw(st.integers(0, len(lines[i])))
            lines[i] = lines[i][:at] + draw(st.binary(min_size=1, max_size=6)) + lines[i][at:]
        elif kind in ("drop", "dup", "swap"):
            if kind == "drop":
                del lines[i]
            elif kind == "dup":
                lines.insert(i, lines[i])
            else:
                j = draw(st.integers(0, len(lines) - 1))
                lines[i], lines[j] = lines[j], lines[i]
        else:
            try:
                event = json.loads(lines[i])
            except ValueError:
                continue  # an earlier mutation broke the line already
            if not isinstance(event, dict):
                continue
            where = draw(st.sampled_from([event, event.get("params"), event.get("vars")]))
            if not isinstance(where, dict):
                where = event
            keys = sorted(where) or ["worker"]
            key = draw(st.sampled_from(keys))
            if kind == "type":
                where[key] = draw(JSON_VALUES)
            elif kind == "seq":
                event["seq"] = draw(st.one_of(st.integers(-3, 40), st.integers(2**62, 2**66)))
            elif kind == "nest":
                value: Any = where.get(key)
                for _ in range(draw(st.integers(1, 80))):
                    value = [value]
                where[key] = value
            else:
                where[draw(st.text(max_size=5))] = where.pop(key, None)
            lines[i] = json.dumps(event).encode()
        if not lines:
            break
    return lines


def judged(report: CheckReport) -> None:
    assert report.exit_code in (0, 1)
    assert report.events > 0 and report.instances >= 1
    for v in report.violations:
        assert v.line >= 1 and v.message, v
        assert v.kind in ("step", "out_of_domain", "incomplete_log")
        assert "\n" not in v.message


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mutated())
def test_mangled_traces_never_raise_and_always_say_why(lines: list[bytes]) -> None:
    try:
        report = check_lines(lines)
    except TraceError as exc:
        assert exc.line >= 0 and exc.message and "\n" not in str(exc)
        return
    judged(report)


@pytest.mark.parametrize("key", ["\n", "a\r\nb", "\u2028", "\x00", "\t"])
def test_a_field_named_with_a_line_break_is_a_one_line_error_that_names_it(key: str) -> None:
    """Found by the long campaign: an unknown field named ``"\\n"`` came back in the
    decoder's message as a raw line break. Every TraceError escapes what would break its
    line (the field is named as ``\\n``); in params and vars such a name is a violation,
    which quotes it the same way."""
    event = json.loads(base_lines(1)[0])
    event[key] = "drafted"
    with pytest.raises(TraceError) as caught:
        check_lines([json.dumps(event)])
    text = str(caught.value)
    assert len(text.splitlines()) == 1 and text.isprintable(), text
    assert f"unknown field `{key.encode('unicode_escape').decode('ascii')}`" in text
    del event[key]
    for field in ("vars", "params"):
        event[field][key] = "drafted"
        report = check_lines([json.dumps(event)])
        del event[field][key]
        assert not report.ok and report.violations
        message = report.violations[0].message
        assert len(message.splitlines()) == 1 and message.isprintable(), message
        assert repr(key) in message


@pytest.mark.slow
@settings(max_examples=3000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mutated())
def test_mangled_traces_long_campaign(lines: list[bytes]) -> None:
    test_mangled_traces_never_raise_and_always_say_why.hypothesis.inner_test(lines)  # type: ignore[attr-defined]


@settings(max_examples=60, deadline=None)
@given(st.binary(max_size=300))
def test_random_bytes_are_unreadable_or_judged(blob: bytes) -> None:
    try:
        judged(check_lines(blob.split(b"\n")))
    except TraceError as exc:
        assert exc.message


# --------------------------------------------------------------------------
# Against a naive replay through the concrete model
# --------------------------------------------------------------------------
@cache
def concrete(workers: int, epochs: int, versions: int) -> Protocol:
    return build_query_machine(workers, epochs, versions)


def oracle(lines: list[str]) -> dict[str, int | None]:
    """Per instance, the first line no configuration of the concrete model explains."""
    events = [json.loads(x) | {"line": n} for n, x in enumerate(lines, start=1)]
    names = sorted({e["params"]["worker"] for e in events if "worker" in e["params"]})
    ints = [x for e in events for k, x in e["vars"].items()
            if k in ("lease_epoch", "submit_epoch") and type(x) is int]
    versions = [x for e in events for k, x in e["vars"].items()
                if k in ("task_version", "authorized_version") and type(x) is int]
    p = concrete(max(len(names), 1), max([*ints, 0]) + 1, max([*versions, 1]) + 1)
    verdicts: dict[str, int | None] = {}
    sets: dict[str, frozenset[Config]] = {}
    index = {v.name: i for i, v in enumerate(p.variables)}
    for e in events:
        inst = e["instance"]
        if inst in verdicts and verdicts[inst] is not None:
            continue
        verdicts.setdefault(inst, None)
        configs = sets.get(inst, frozenset({p.initial_config()}))
        params = {k: (names.index(x) if k == "worker" else x) for k, x in e["params"].items()}
        after = set()
        for c in closure(p, configs):
            if c.state != e["from"]:
                continue
            for s in p.enabled(c):
                if (s.transition.observable == e["trigger"] and dict(s.params) == params
                        and s.after.state == e["to"]
                        and all(k in index and s.after.values[index[k]] == x
                                and type(s.after.values[index[k]]) is type(x)
                                for k, x in e["vars"].items())):
                    after.add(s.after)
        if not after:
            verdicts[inst] = e["line"]
        sets[inst] = frozenset(after)
    return verdicts


def closure(p: Protocol, configs: frozenset[Config]) -> Iterator[Config]:
    seen, frontier = set(configs), list(configs)
    while frontier:
        c = frontier.pop()
        for s in p.enabled(c):
            if s.transition.observable is None and s.after not in seen:
                seen.add(s.after)
                frontier.append(s.after)
    return iter(seen)


def verdicts_of(report: CheckReport, instances: set[str]) -> dict[str, int | None]:
    out: dict[str, int | None] = dict.fromkeys(instances)
    out.update({v.instance: v.line for v in report.violations})
    return out


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(0, 100_000))
def test_runs_of_a_three_worker_model_conform(seed: int) -> None:
    rng = random.Random(seed)
    lines = [json.dumps(e) for i in range(3) for e in walk(THREE_WORKERS, f"q{i}", rng, 40)]
    assume(lines)
    report = check_lines(lines)
    assert report.ok, report.violations[0].text()


@st.composite
def single_field_mutation(draw: st.DrawFn) -> tuple[list[str], int]:
    rng = random.Random(draw(st.integers(0, 100_000)))
    lines = [json.dumps(e) for e in walk(THREE_WORKERS, "q", rng, 40)]
    assume(lines)
    i = draw(st.integers(0, len(lines) - 1))
    event = json.loads(lines[i])
    p = THREE_WORKERS
    choice = draw(st.sampled_from(["trigger", "from", "to", "var", "worker"]))
    if choice in ("from", "to"):
        event[choice] = draw(st.sampled_from(p.state_names))
    elif choice == "trigger":
        event["trigger"] = draw(st.sampled_from(sorted({t.observable for t in p.transitions
                                                        if t.observable})))
    elif choice == "worker":
        assume("worker" in event["params"])
        event["params"]["worker"] = draw(st.sampled_from(["w0", "w1", "w2", "w-new"]))
    else:
        key = draw(st.sampled_from(sorted(event["vars"])))
        old = event["vars"][key]
        if isinstance(old, bool):
            event["vars"][key] = not old
        elif isinstance(old, int):
            event["vars"][key] = max(0, old + draw(st.sampled_from([-1, 1, 2])))
        else:
            event["vars"][key] = "requested" if old == "none" else "none"
    lines[i] = json.dumps(event)
    return lines, i + 1


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(single_field_mutation())
def test_a_single_field_mutation_is_judged_as_the_concrete_model_judges_it(
        case: tuple[list[str], int]) -> None:
    lines, line = case
    report = check_lines(lines)
    expected = oracle(lines)
    assert verdicts_of(report, set(expected)) == expected, (
        [v.text() for v in report.violations], expected)
    # ...which is: still consistent, or reported at the mutated line; an accepted change may
    # make a later line fail (a renamed worker no longer holds the lease), never an earlier one.
    assert expected["q"] is None or expected["q"] >= line


_SCHEMA = None


def schema_valid(line: bytes, first: bool) -> bool:
    import fastjsonschema

    from settled.conformance._trace import MACHINES, load_schema

    global _SCHEMA
    if _SCHEMA is None:
        _SCHEMA = fastjsonschema.compile(load_schema())
    try:
        text = line.decode("utf-8")
        event = json.loads(text.removeprefix("\ufeff") if first else text)
        _SCHEMA(event)
    except (ValueError, RecursionError, fastjsonschema.JsonSchemaException):  # not UTF-8 too
        return False
    numbers = [event["seq"], *event["params"].values(), *event["vars"].values()]
    fits = all(not isinstance(x, int | float) or abs(x) < 2**63 for x in numbers)
    return fits and event["machine"] in MACHINES


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mutated())
def test_every_line_the_schema_accepts_gets_a_verdict_not_an_error(lines: list[bytes]) -> None:
    """What the published schema accepts (integers within 64 bits, a known machine) is judged:
    conforming or a violation, never refused as unreadable."""
    assume(any(x.strip() for x in lines))
    assume(all(schema_valid(x, i == 0) for i, x in enumerate(lines) if x.strip()))
    judged(check_lines(lines))
