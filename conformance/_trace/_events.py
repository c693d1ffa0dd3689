"""Reading a trace: the documented limits, the errors an unreadable log raises, and the
decoding of one line.

One typed ``msgspec`` pass is both the JSON parse and the envelope's schema check;
``params`` and ``vars`` stay raw bytes (the replay memo's keys) until a check needs them.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from importlib import resources
from typing import Annotated, Any, Literal

import msgspec

from settled.model import Value

SCHEMA_ID = "settled.trace/1"

# Documented limits (README, "settled check"): past any of them the input is unreadable (exit 2).
CLOSURE_LIMIT = 4096  # configurations the hidden-step search may reach before an instance is undecided
MAX_LINE_BYTES = 1 << 20  # one event line, newline excluded
MAX_NESTING = 32  # brackets nested in one line; a valid event nests 2 deep
MAX_FILE_BYTES = 1 << 36  # 64 GiB read in one check
MAX_INSTANCES = 5_000_000  # distinct (machine, instance) pairs open in one check
SHOWN_CANDIDATES = 8  # candidate configurations listed per violation before collapsing

_MEMO_LIMIT = 500_000  # replay memo entries kept before the memo is started afresh


def one_line(text: str) -> str:
    """``text`` with each line break and other unprintable character escaped (a field named
    ``"\\n"`` is quoted as ``\\n``), so an error about hostile input still prints on one line."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else c.encode("unicode_escape").decode("ascii")
                   for c in text)


class TraceError(ValueError):
    """The input is not a readable trace; names the line and what is wrong, on one line."""

    def __init__(self, line: int, message: str) -> None:
        message = one_line(message)
        super().__init__(f"line {line}: {message}")
        self.line = line
        self.message = message


class CheckerFault(RuntimeError):
    """The checker itself failed (a defect, or memory ran out); names the input line."""

    def __init__(self, line: int, cause: BaseException) -> None:
        what = one_line(f"{type(cause).__name__}: {cause}" if str(cause) else type(cause).__name__)
        super().__init__(f"the checker failed while reading line {line} ({what}); no verdict "
                         "was reached. This is a defect of the checker, not of the trace: "
                         "please report it with the line.")
        self.line = line
        self.cause = what


def load_schema() -> dict[str, Any]:
    text = resources.files("settled.conformance").joinpath("trace.schema.json").read_text("utf-8")
    schema: dict[str, Any] = json.loads(text)
    return schema


# --------------------------------------------------------------------------
# Decoding: one typed pass is the JSON parse and the envelope's schema check
# --------------------------------------------------------------------------
NonEmpty = Annotated[str, msgspec.Meta(min_length=1)]


class _Event(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    """The envelope of ``trace.schema.json``; params and vars stay raw until needed."""

    schema: Literal["settled.trace/1"]
    machine: NonEmpty
    instance: Annotated[str, msgspec.Meta(min_length=1, max_length=200)]
    seq: Annotated[int, msgspec.Meta(ge=1)]
    trigger: NonEmpty
    params: msgspec.Raw
    from_: NonEmpty = msgspec.field(name="from")
    to: NonEmpty
    vars: msgspec.Raw
    at: str = ""


_DECODE = msgspec.json.Decoder(_Event).decode
_PARAMS = msgspec.json.Decoder(dict[str, str | int | bool]).decode
_VARS = msgspec.json.Decoder(dict[str, str | int | bool | None]).decode


@dataclass(frozen=True, slots=True)
class Event:
    """One decoded event, as the public API and the diagnostics see it."""

    line: int
    machine: str
    instance: str
    seq: int
    trigger: str
    params: Mapping[str, Value]
    source: str
    dest: str
    vars: Mapping[str, Value]
    raw: Mapping[str, Any] = field(compare=False)


def _nesting(line: bytes) -> int:
    depth = deepest = 0
    in_string = escaped = False
    for ch in line:
        if in_string:
            if escaped:
                escaped = False
            elif ch == 0x5C:
                escaped = True
            elif ch == 0x22:
                in_string = False
        elif ch == 0x22:
            in_string = True
        elif ch in (0x5B, 0x7B):
            depth += 1
            deepest = max(deepest, depth)
        elif ch in (0x5D, 0x7D):
            depth -= 1
    return deepest


def _unreadable(line_no: int, line: bytes, exc: Exception) -> TraceError:
    if len(line) > MAX_LINE_BYTES:
        return TraceError(line_no, f"the line is {len(line):,} bytes, over the limit of "
                                   f"{MAX_LINE_BYTES:,} bytes per event")
    if (line.count(b"[") + line.count(b"{") > MAX_NESTING
            and (depth := _nesting(line)) > MAX_NESTING):
        return TraceError(line_no, f"values nested {depth} deep, over the limit of {MAX_NESTING} "
                                   "(params and vars are flat objects)")
    try:
        line.decode("utf-8")
    except UnicodeDecodeError as bad:
        return TraceError(line_no, f"not UTF-8 text (byte {bad.start + 1} of the line: {bad.reason})")
    if isinstance(exc, RecursionError):
        return TraceError(line_no, "values nested too deeply to decode (params and vars are flat)")
    if line.startswith(b"\xef\xbb\xbf"):
        return TraceError(line_no, "a byte-order mark inside the file (only the first line may "
                                   "start with one)")
    message = str(exc)
    if isinstance(exc, msgspec.ValidationError):
        message = (message.replace("`$.from_`", "`$.from`").replace("`from_`", "`from`")
                   .replace("Object contains unknown field", "unknown field"))
        return TraceError(line_no, f"{message} (see the {SCHEMA_ID} schema)")
    try:
        json.loads(line)
    except json.JSONDecodeError as bad:
        return TraceError(line_no, f"not JSON ({bad.msg} at column {bad.colno})")
    except (ValueError, RecursionError):
        pass
    return TraceError(line_no, f"not JSON ({message})")


def parse_line(line_no: int, text: str | bytes) -> Event:
    """Decode one line into an :class:`Event` (params and vars decoded); TraceError if unreadable."""
    raw = text.encode("utf-8", "surrogateescape") if isinstance(text, str) else text
    try:
        e = _DECODE(raw)
    except (msgspec.MsgspecError, RecursionError, ValueError) as exc:
        raise _unreadable(line_no, raw, exc) from None
    params = _decode_params(line_no, bytes(e.params))
    values = _decode_vars(line_no, bytes(e.vars))
    return Event(line_no, e.machine, e.instance, e.seq, e.trigger, params, e.from_, e.to, values,
                 _as_dict(raw))


def _decode_params(line_no: int, raw: bytes) -> dict[str, Value]:
    return _decode_flat(line_no, raw, _PARAMS, "params", "strings, integers and booleans")


def _decode_vars(line_no: int, raw: bytes) -> dict[str, Value]:
    return _decode_flat(line_no, raw, _VARS, "vars", "strings, integers, booleans and nulls")


def _decode_flat(line_no: int, raw: bytes, decode: Any, name: str,
                 kinds: str) -> dict[str, Value]:
    """A flat object field of an event (``params``, ``vars``); integral floats are taken as
    integers; anything else is a one-line :class:`TraceError` naming the field."""
    why: Exception
    try:
        return decode(raw)  # type: ignore[no-any-return]
    except msgspec.ValidationError as exc:
        integral = _integers(raw, exc)
        if integral is not None:
            return _decode_flat(line_no, integral, decode, name, kinds)
        why = exc
    except (msgspec.MsgspecError, RecursionError) as exc:
        why = exc
    raise TraceError(line_no, f"{name}: {_where(why, name)} (a flat object of {kinds}; see the "
                              f"{SCHEMA_ID} schema)") from None


def _integers(raw: bytes, exc: Exception) -> bytes | None:
    """The object with integral numbers written as integers (2.0 and 2e0 are 2, as JSON
    Schema says), when a float is what the typed decoder refused and rewriting changes it."""
    if "got `float`" not in str(exc):
        return None
    try:
        obj = json.loads(raw, parse_float=_integral)
    except (ValueError, RecursionError):
        return None
    if not isinstance(obj, dict) or any(type(x) is float for x in obj.values()):
        return None
    again = json.dumps(obj, ensure_ascii=False).encode()
    return again if again != raw else None


def _where(exc: BaseException, name: str) -> str:
    if isinstance(exc, RecursionError):
        return "nested too deeply"
    return str(exc).replace("`$", f"`$.{name}")


def _as_dict(raw: str | bytes) -> dict[str, Any]:
    try:
        obj = json.loads(raw)
    except (ValueError, RecursionError):
        return {}
    return obj if isinstance(obj, dict) else {}


def read_events(lines: Iterable[str | bytes]) -> Iterator[Event]:
    for n, text in enumerate(lines, start=1):
        if text.strip():
            yield parse_line(n, text.removeprefix("\ufeff") if isinstance(text, str) and n == 1
                             else text)


_BOM = b"\xef\xbb\xbf"


def _retry(line_no: int, line: str | bytes, exc: Exception) -> _Event | None:
    """The event of a line that failed to decode: a first line after its BOM; None if blank."""
    raw = line.encode("utf-8", "surrogatepass") if isinstance(line, str) else line
    if line_no == 1 and raw.startswith(_BOM):
        raw = raw[len(_BOM):]
        try:
            return _DECODE(raw)
        except (msgspec.MsgspecError, RecursionError, ValueError) as again:
            exc = again
    if not raw.strip():
        return None
    if isinstance(exc, msgspec.ValidationError) and b"float" in str(exc).encode():
        # JSON Schema calls 2.0 an integer; so does the checker (the rare path only).
        try:
            obj = json.loads(raw, parse_float=_integral)
            return _DECODE(json.dumps(obj, ensure_ascii=False).encode())
        except (ValueError, RecursionError, msgspec.MsgspecError):
            pass
    raise _unreadable(line_no, raw, exc)


def _integral(text: str) -> int | float:
    x = float(text)
    return int(x) if x.is_integer() else x
