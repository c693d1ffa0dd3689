"""The Informal Trace Format (Apalache ADR-015): how counterexamples leave ``settled``.

One writer for every producer of traces here (the explorer, the lockstep kit,
the trace checker), so that a trace written by any of them opens in the
Apalache / Quint tooling and in the ITF Trace Viewer. See ``docs/ITF.md``.

Values are encoded by kind (``to_itf_value``): integers always as
``{"#bigint": "n"}`` (plain JSON numbers are no longer allowed in ITF),
tuples as ``#tup``, sets as ``#set``, mappings with string keys as records and
any other mapping as ``#map``. Sets and maps carry no order, but the files are
committed and diffed, so their entries are sorted by their encoded JSON text
and every file is written with sorted keys: the same trace is the same bytes.

Each state also carries Quint's model-based-testing variables,
``mbt::actionTaken`` and ``mbt::nondetPicks``, so a Quint-style driver can
replay the trace step by step.
"""

from __future__ import annotations

import enum
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

FORMAT_DESCRIPTION = "https://apalache-mc.org/docs/adr/015adr-trace.html"
ACTION_TAKEN = "mbt::actionTaken"
NONDET_PICKS = "mbt::nondetPicks"
NONE_VARIANT: dict[str, Any] = {"tag": "None", "value": {"#tup": []}}

Json = Any  # a JSON-ready value (dict, list, str, bool, None)


@dataclass(frozen=True, slots=True)
class Unserializable:
    """What ``read_itf`` gives back for ``{"#unserializable": text}``."""

    text: str


def _order(encoded: Json) -> str:
    return json.dumps(encoded, sort_keys=True, separators=(",", ":"))


def to_itf_value(x: Any) -> Json:
    """Encode one Python value as an ITF value (see the table in ``docs/ITF.md``)."""
    # bool before int (bool is an int) and Enum before str/int (StrEnum is a str).
    if isinstance(x, bool):
        return x
    if isinstance(x, enum.Enum):
        return to_itf_value(x.value)
    if isinstance(x, str):
        return x
    if isinstance(x, int):
        return {"#bigint": str(x)}
    if isinstance(x, tuple):
        return {"#tup": [to_itf_value(e) for e in x]}
    if isinstance(x, list):
        return [to_itf_value(e) for e in x]
    if isinstance(x, (set, frozenset)):
        return {"#set": sorted((to_itf_value(e) for e in x), key=_order)}
    if isinstance(x, Mapping):
        if all(isinstance(k, str) and not k.startswith("#") for k in x):
            return {k: to_itf_value(v) for k, v in x.items()}
        pairs = [[to_itf_value(k), to_itf_value(v)] for k, v in x.items()]
        return {"#map": sorted(pairs, key=_order)}
    if isinstance(x, Unserializable):
        return {"#unserializable": x.text}
    return {"#unserializable": repr(x)}


def from_itf_value(x: Json) -> Any:
    """Decode one ITF value; the inverse of :func:`to_itf_value` up to kind.

    Tuples, sets and maps come back as ``tuple``, ``frozenset`` and ``dict``;
    records as ``dict``; an enum comes back as its value.
    """
    if isinstance(x, list):
        return [from_itf_value(e) for e in x]
    if not isinstance(x, dict):
        return x  # bool, str, and plain JSON numbers (older writers; readers still accept them)
    if set(x) == {"#bigint"}:
        return int(x["#bigint"])
    if set(x) == {"#tup"}:
        return tuple(from_itf_value(e) for e in x["#tup"])
    if set(x) == {"#set"}:
        return frozenset(from_itf_value(e) for e in x["#set"])
    if set(x) == {"#map"}:
        return {from_itf_value(k): from_itf_value(v) for k, v in x["#map"]}
    if set(x) == {"#unserializable"}:
        return Unserializable(str(x["#unserializable"]))
    return {k: from_itf_value(v) for k, v in x.items()}


def nondet_picks(params: Mapping[str, Any], names: Sequence[str]) -> dict[str, Json]:
    """Quint's ``mbt::nondetPicks``: every name, ``Some(value)`` if chosen, else ``None``."""
    picks: dict[str, Json] = {}
    for name in sorted({*names, *params}):
        if name in params and params[name] is not None:
            picks[name] = {"tag": "Some", "value": to_itf_value(params[name])}
        else:
            picks[name] = NONE_VARIANT
    return picks


def itf_trace(protocol_name: str, var_names: Sequence[str], states: Sequence[Mapping[str, Any]],
              actions: Sequence[tuple[str, Mapping[str, Any]]], meta: Mapping[str, Any],
              loop: int | None = None, *, nondet_names: Sequence[str] = ()) -> dict[str, Json]:
    """An ITF trace object.

    ``states`` are Python values by variable name; ``actions`` has one
    ``(trigger, params)`` per state *after* the first (the first state's action
    is ``"init"``). ``meta`` goes into ``#meta`` (it must be JSON-ready); its
    ``status`` and ``description`` fill the fixed fields. ``nondet_names``
    lists parameters that appear in ``mbt::nondetPicks`` even when no step of
    this trace chose them.
    """
    if len(actions) != max(len(states) - 1, 0):
        raise ValueError(f"itf_trace: {len(states)} states need {max(len(states) - 1, 0)} actions "
                         f"(one per step), got {len(actions)}")
    names = list(var_names)
    picks_names = sorted({*nondet_names, *(k for _, p in actions for k in p)})
    head: dict[str, Json] = {
        "format": "ITF",
        "format-description": FORMAT_DESCRIPTION,
        "source": protocol_name,
        "status": meta.get("status", "ok"),
        "description": meta.get("description", ""),
    }
    head.update({k: v for k, v in meta.items() if k not in head})
    out_states: list[dict[str, Json]] = []
    for i, state in enumerate(states):
        missing = [n for n in names if n not in state]
        if missing:
            raise ValueError(f"itf_trace: state {i} has no value for {missing}")
        trigger, params = ("init", {}) if i == 0 else actions[i - 1]
        encoded: dict[str, Json] = {"#meta": {"index": i}}
        encoded.update({n: to_itf_value(state[n]) for n in names})
        encoded[ACTION_TAKEN] = trigger
        encoded[NONDET_PICKS] = nondet_picks(params, picks_names)
        out_states.append(encoded)
    trace: dict[str, Json] = {
        "#meta": head,
        "vars": [*names, ACTION_TAKEN, NONDET_PICKS],
        "states": out_states,
    }
    if loop is not None:
        if not 0 <= loop < len(states):
            raise ValueError(f"itf_trace: loop index {loop} is outside the {len(states)} states")
        trace["loop"] = loop
    return trace


def dumps_itf(trace: Mapping[str, Json]) -> str:
    """The deterministic text of a trace: sorted keys, two-space indent, final newline."""
    return json.dumps(trace, sort_keys=True, indent=2, ensure_ascii=False) + "\n"


def write_itf(path: str | Path, trace: Mapping[str, Json]) -> Path:
    """Write ``trace`` to ``path`` (conventionally ``*.itf.json``); returns the path."""
    out = Path(path)
    out.write_text(dumps_itf(trace), encoding="utf-8")
    return out


def read_itf(source: str | Path | Mapping[str, Json]) -> dict[str, Any]:
    """Read a trace (a path or an already parsed object) and decode its values.

    Returns ``{"#meta": ..., "vars": [...], "states": [...], "loop"?: n}`` with
    every state's values decoded by :func:`from_itf_value`; ``#meta`` entries
    are kept as they are.
    """
    raw: Mapping[str, Json] = (source if isinstance(source, Mapping)
                               else json.loads(Path(source).read_text(encoding="utf-8")))
    if "vars" not in raw or "states" not in raw:
        raise ValueError("not an ITF trace: 'vars' and 'states' are required")
    states = []
    for state in raw["states"]:
        decoded = {k: (v if k == "#meta" else from_itf_value(v)) for k, v in state.items()}
        states.append(decoded)
    out: dict[str, Any] = {"#meta": dict(raw.get("#meta", {})), "vars": list(raw["vars"]),
                           "states": states}
    if "loop" in raw:
        out["loop"] = raw["loop"]
    if "params" in raw:
        out["params"] = list(raw["params"])
    return out
