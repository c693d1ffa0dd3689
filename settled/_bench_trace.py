"""The ``trace_check`` section of ``settled bench``: the trace checker against ``json.loads``.

Writes a large trace of the query machine fast (:func:`fast_trace_lines`, byte for byte
what ``_tracegen`` writes), then times cold checks of it next to a bare ``json.loads``
pass, and the same runs logged under 1,000 worker names next to 2. Its own room: the trace
generator is most of it, and nothing else in the bench writes traces.
"""

from __future__ import annotations

import json
import random
import time
from bisect import bisect_right
from collections.abc import Iterator
from dataclasses import dataclass
from itertools import accumulate, chain, count, islice
from pathlib import Path
from typing import Any

from settled._bench_sizes import FULL, SEED, Say, Sizes, _rate, _ratio
from settled.conformance import _trace
from settled.conformance._trace._tracegen import event_of
from settled.model import QUERY, Config, Protocol, Step

__all__ = ["bench_trace_check", "fast_trace_lines", "write_trace"]


@dataclass(frozen=True, slots=True)
class _Moves:
    """What a random walk may do from one configuration, worked out once."""

    steps: tuple[Step, ...]
    cumulative: tuple[int, ...]
    total: float
    tails: tuple[str | None, ...]  # the event's JSON after "seq", None for an unlogged step


def _moves(p: Protocol, c: Config) -> _Moves:
    steps = tuple(p.enabled(c))
    # The weights of _tracegen.walk: settling early makes a dull run.
    weights = [1 if s.after.state in p.terminal_states else 6 for s in steps]
    cumulative = tuple(accumulate(weights))
    tails: list[str | None] = []
    for s in steps:
        if s.transition.observable is None:
            tails.append(None)
            continue
        event = event_of(p, "", 0, c, s)
        for key in ("schema", "machine", "instance", "seq"):
            del event[key]
        tails.append(json.dumps(event, separators=(",", ":"))[1:])
    return _Moves(steps, cumulative, (cumulative[-1] + 0.0) if steps else 0.0, tuple(tails))


def _instance_batches(p: Protocol, seed: int, max_steps: int = 60) -> Iterator[list[str]]:
    """The lines of ``_tracegen.trace_lines``, one list per instance, without end.

    Memoises each configuration's steps, weights and event JSON, and draws
    with the arithmetic of ``random.choices`` so the same seed gives the
    same bytes (the tests compare the two).
    """
    rng, memo = random.Random(seed), dict[Config, _Moves]()
    head = f'{{"schema":{json.dumps(_trace.SCHEMA_ID)},"machine":{json.dumps(p.name)},"instance":'
    for i in count():
        config, seq, lines = p.initial_config(), 0, []
        instance = head + json.dumps(f"{p.name}-{i}") + ',"seq":'
        for _ in range(max_steps):
            moves = memo.get(config) or memo.setdefault(config, _moves(p, config))
            if not moves.steps:
                break
            k = bisect_right(moves.cumulative, rng.random() * moves.total, 0, len(moves.steps) - 1)
            if moves.tails[k] is not None:
                seq += 1
                lines.append(f"{instance}{seq},{moves.tails[k]}")
            config = moves.steps[k].after
        yield lines


def fast_trace_lines(p: Protocol, instances: int, seed: int = 0, max_steps: int = 60) -> Iterator[str]:
    """Exactly ``_tracegen.trace_lines(p, instances, seed, max_steps)``, several times faster."""
    return chain.from_iterable(islice(_instance_batches(p, seed, max_steps), instances))


def write_trace(path: Path, min_events: int, seed: int = SEED,
                worker_names: int | None = None) -> tuple[int, int]:
    """Write whole random walks of ``QUERY`` until at least ``min_events``; (events, instances).

    With ``worker_names``, every claim is made under a fresh name drawn in turn from that
    many (``pod-0``, ``pod-1``, ...), and the claiming worker's later events carry it: the
    same runs, logged by a fleet whose workers all have their own names.
    """
    events = instances = 0
    fresh = count()
    with path.open("w", encoding="utf-8") as out:
        for lines in _instance_batches(QUERY, seed):
            if events >= min_events:
                break
            if worker_names is not None:
                lines = _renamed(lines, fresh, worker_names)
            out.write("\n".join(lines) + "\n" if lines else "")
            events, instances = events + len(lines), instances + 1
    return events, instances


_WORKER_KEYS = tuple(f'"worker":"w{k}"' for k in range(2))


def _renamed(lines: list[str], fresh: Iterator[int], pool: int) -> list[str]:
    names = list(_WORKER_KEYS)
    out = []
    for line in lines:
        for k, key in enumerate(_WORKER_KEYS):
            if key in line:
                if '"trigger":"claim"' in line:
                    names[k] = f'"worker":"pod-{next(fresh) % pool}"'
                line = line.replace(key, names[k])
                break
        out.append(line)
    return out


def _json_pass(path: Path) -> float:
    start = time.perf_counter()
    with path.open(encoding="utf-8") as f:
        for line in f:
            json.loads(line)
    return time.perf_counter() - start


def _timed_check(path: Path, events: int) -> tuple[float, float]:
    """Seconds (wall clock, then this process's CPU) for one cold ``settled check`` of the file."""
    # The checker keeps its memo per process; earlier sections (the lockstep kit checks every
    # run's log) would hand it a warm one, whereas ``settled check`` starts cold.
    _trace.REPLAYERS.clear()
    start, cpu = time.perf_counter(), time.process_time()
    report = _trace.check_file(path)
    seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
    if not report.ok or report.events != events:
        raise RuntimeError(f"bench: the model's own trace did not check clean: "
                           f"{json.dumps(report.to_json(), default=str)[:2000]}")
    return seconds, cpu


MANY_WORKER_NAMES = 1_000


def bench_trace_check(directory: Path, sizes: Sizes = FULL, say: Say = lambda _: None) -> dict[str, Any]:
    """The trace checker's events per second on a generated file, against bare ``json.loads``;
    then the same runs logged under 1,000 worker names against the same under 2. Each check
    starts cold (as ``settled check`` does); each figure is the best of interleaved rounds."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "trace.jsonl"
    start = time.perf_counter()
    events, instances = write_trace(path, sizes.trace_events)
    made = time.perf_counter() - start
    say(f"trace_check: wrote {events:,} events of {instances:,} instances in {made:.1f}s; checking")
    many = directory / "many-workers.jsonl"
    many_events, _ = write_trace(many, sizes.trace_events, worker_names=MANY_WORKER_NAMES)
    # Interleaved rounds, best of each, so a burst of noise from other work hits both sides.
    rounds = max(2, sizes.rounds)
    check_s = check_cpu = json_s = many_s = float("inf")
    for r in range(rounds):
        say(f"trace_check: round {r + 1}/{rounds}: check, json.loads pass, then the same runs "
            f"with every claim under a fresh name of {MANY_WORKER_NAMES:,}")
        wall, cpu = _timed_check(path, events)
        check_s, check_cpu = min(check_s, wall), min(check_cpu, cpu)
        json_s = min(json_s, _json_pass(path))
        many_s = min(many_s, _timed_check(many, many_events)[0])
    rate, many_rate = _rate(events, check_s), _rate(many_events, many_s)
    return {"events": events, "events_per_second": rate,
            "ratio_to_json_parse": _ratio(check_s, json_s),
            "ratio_to_json_parse_means": "check seconds (cold: on a small file, the first sight of "
                                         "each path dominates) / seconds of json.loads on every line of "
                                         "the same file (lower is faster; 1.0 = as fast as parsing)",
            "many_workers_ratio": _ratio(many_rate, rate),
            "many_workers_ratio_means": f"events/s with {MANY_WORKER_NAMES:,} worker names (a "
                                        "fresh one at every claim) / events/s of the same runs "
                                        "with 2 names",
            "many_workers_events_per_second": many_rate, "many_workers_names": MANY_WORKER_NAMES,
            # On a shared machine the wall clock includes waiting for a core; CPU time does not.
            "events_per_cpu_second": _rate(events, check_cpu),
            "rounds": rounds, "instances": instances, "check_seconds": round(check_s, 2),
            "check_cpu_seconds": round(check_cpu, 2),
            "json_parse_seconds": round(json_s, 2), "many_workers_seconds": round(many_s, 2),
            "generate_seconds": round(made, 2), "file_bytes": path.stat().st_size}
