"""The adapter contract, enforced: what ``observe`` must return, and whose fault an
exception is (the adapter's own code, or the implementation behind it)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from settled.conformance._lockstep._shrink import Divergence
from settled.model import Protocol, System, Value

from .._adapter import Adapter, AdapterError, Refused
from ._action import Action


class Contract:
    """What ``observe()`` must return for one machine and one adapter class."""

    def __init__(self, protocol: Protocol, unobservable: frozenset[str]) -> None:
        ghosts = {v.name for v in protocol.variables if v.ghost}
        names = {v.name for v in protocol.variables}
        wrong = sorted(set(unobservable) - (names - ghosts))
        if wrong:
            raise AdapterError(
                f"Adapter.unobservable names {wrong}, which are not observable variables of "
                f"{protocol.name}; its variables are {sorted(names - ghosts)}")
        self.protocol, self.unobservable, self.ghosts = protocol, frozenset(unobservable), ghosts
        self.keys = frozenset({"state"} | (names - ghosts - self.unobservable))
        self.allowed = {v.name: frozenset((_kind(d), d) for d in v.domain)
                        for v in protocol.variables if v.name in self.keys}
        self.allowed["state"] = frozenset((str, s) for s in protocol.state_names)
        self.domains = {v.name: v.domain for v in protocol.variables}
        self.domains["state"] = protocol.state_names

    def check(self, i: int, observed: object) -> dict[str, Value]:
        """``observed`` as a dict, or :class:`AdapterError` naming what is wrong with it."""
        where = f"observe({i})"
        if not isinstance(observed, Mapping):
            raise AdapterError(f"{where} returned {type(observed).__name__}, not a mapping of "
                               "the model's variable names to values")
        keys = set(observed)
        if keys != self.keys:
            missing, extra = sorted(self.keys - keys), sorted(keys - self.keys)
            parts = []
            if missing:
                parts.append(f"left out {missing} (return every variable in the model's words, "
                             "or declare it in Adapter.unobservable)")
            for k in extra:
                if k in self.ghosts:
                    parts.append(f"returned the ghost variable {k!r} (the model's own history, "
                                 "never observed)")
                elif k in self.unobservable:
                    parts.append(f"returned {k!r}, which the adapter declares unobservable")
                else:
                    parts.append(f"returned the unknown key {k!r} (keys are 'state' and "
                                 f"{sorted(self.keys - {'state'})})")
            raise AdapterError(f"{where} " + "; ".join(parts))
        outside = []
        for k, value in observed.items():
            try:
                ok = (_kind(value), value) in self.allowed[k]
            except TypeError:  # unhashable: a list where the domain holds tuples
                ok = False
            if ok:
                continue
            kinds = {_kind(d) for d in self.domains[k]}
            if _kind(value) not in kinds:  # the adapter's own contract: values of the right kind
                raise AdapterError(f"{where} gave {k}={value!r} ({type(value).__name__}), not a "
                                   f"value of its kind ({', '.join(sorted(t.__name__ for t in kinds))})"
                                   f"; its domain is {domain_text(self.domains[k])}")
            outside.append(f"{k}={value!r} is outside its domain {domain_text(self.domains[k])}")
        if outside:
            raise OutsideDomain(f"q{i} left the model's domain: " + "; ".join(outside), i,
                                dict(observed))
        return dict(observed)


class OutsideDomain(Divergence):
    """The implementation reached a value the model's domain does not hold (a fourth
    submission where at most three may be): a divergence, not the adapter's fault."""

    def __init__(self, message: str, instance: int | None, observed: dict[str, Value]) -> None:
        super().__init__(message)
        self.instance, self.observed = instance, observed


def domain_text(shown: tuple[Value, ...]) -> str:
    return str(f"{list(shown[:6])} ... ({len(shown)} values)" if len(shown) > 8 else list(shown))


def _kind(value: object) -> type:
    """A value's kind for the domain check: an enum of strings is a string; True is no 1."""
    return str if isinstance(value, str) else type(value)


_CONTRACTS: dict[tuple[int, type], Contract] = {}


def contract_for(protocol: Protocol, adapter: Adapter) -> Contract:
    key = (id(protocol), type(adapter))
    found = _CONTRACTS.get(key)
    if found is None or found.protocol is not protocol:
        found = _CONTRACTS[key] = Contract(protocol, frozenset(getattr(adapter, "unobservable",
                                                                        frozenset())))
    return found


def adapter_code(adapter: object) -> frozenset[object]:
    """The code objects of the adapter's own methods (nested functions included)."""
    cls = type(adapter)
    found = _ADAPTER_CODE.get(cls)
    if found is not None:
        return found
    codes: set[object] = set()

    def add(code: Any) -> None:
        if code in codes:
            return
        codes.add(code)
        for const in code.co_consts:
            if hasattr(const, "co_consts"):
                add(const)

    for klass in cls.__mro__:
        if klass in (Adapter, object) or klass.__module__ == "abc":
            continue
        for attr in vars(klass).values():
            fn = getattr(attr, "__func__", attr)
            for f in (fn, getattr(attr, "fget", None)):
                code = getattr(f, "__code__", None)
                # Only what the class body defines: a class attribute may hold an
                # implementation's function (a lookup hook), which stays the implementation's.
                if code is not None and getattr(f, "__qualname__", "").startswith(
                        klass.__qualname__ + "."):
                    add(code)
    found = _ADAPTER_CODE[cls] = frozenset(codes)
    return found


_ADAPTER_CODE: dict[type, frozenset[object]] = {}


def blame_adapter(adapter: object, exc: BaseException) -> bool:
    """Whether ``exc`` started in the adapter's own code rather than the implementation's.

    The innermost frame decides; an exception the adapter raised *from* an
    implementation error is the implementation's.
    """
    if isinstance(exc, AdapterError):
        return True
    cause = exc.__cause__ or (None if exc.__suppress_context__ else exc.__context__)
    if cause is not None and not blame_adapter(adapter, cause):
        return False
    tb = exc.__traceback__
    if tb is None:
        return False
    while tb.tb_next is not None:
        tb = tb.tb_next
    return tb.tb_frame.f_code in adapter_code(adapter)


def adapter_fault(adapter: object, exc: BaseException, doing: str) -> AdapterError:
    if isinstance(exc, AdapterError):
        return exc
    tb = exc.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    where = (f" at {Path(tb.tb_frame.f_code.co_filename).name}:{tb.tb_lineno}"
             if tb is not None else "")
    return AdapterError(f"the adapter's own code raised {type(exc).__name__} while {doing}"
                        f"{where}: {exc}")



def perform_refused(adapter: Adapter, instance: int | None, action: Action,
                    why: Callable[[], str] = lambda: "") -> None:
    """Ask the implementation to take ``action``, which the model forbids: it must refuse
    (raise :class:`Refused`). Anything else is a divergence, or the adapter's own fault;
    ``why()`` says why the model forbids it."""
    try:
        adapter.perform(instance, action.trigger, action.params)  # type: ignore[arg-type]
    except Refused:
        return
    except Exception as exc:
        if blame_adapter(adapter, exc):
            raise adapter_fault(adapter, exc, f"performing {action.text()}") from exc
        raise Divergence(f"the implementation raised {type(exc).__name__} instead of "
                         f"{action.text()}: {exc}") from exc
    reason = why()
    raise Divergence(f"the implementation did not {action.text()}, which the model forbids"
                     + (f": {reason}" if reason else ""))



def check_system_observation(system: System, observed: object) -> dict[str, Value]:
    """``observed`` as a dict of the system's variables, or :class:`AdapterError` saying why not."""
    where = "observe(None)"
    if not isinstance(observed, Mapping):
        raise AdapterError(f"{where} returned {type(observed).__name__}, not a mapping of the "
                           f"system's variables {list(system.variable_names)} to values")
    keys, wanted = set(observed), set(system.variable_names)
    if keys != wanted:
        parts = []
        if wanted - keys:
            parts.append(f"left out the system variable(s) {sorted(wanted - keys)} (return "
                         "every variable of the system)")
        if keys - wanted:
            parts.append(f"returned the unknown key(s) {sorted(map(str, keys - wanted))} (the "
                         f"system's variables are {sorted(wanted)})")
        raise AdapterError(f"{where} " + "; ".join(parts))
    outside = []
    for v in system.variables:
        value = observed[v.name]
        if any(_kind(value) is _kind(d) and value == d for d in v.domain):
            continue
        kinds = {_kind(d) for d in v.domain}
        if _kind(value) not in kinds:
            raise AdapterError(f"{where} gave {v.name}={value!r} ({type(value).__name__}), not a "
                               f"value of its kind; its domain is {domain_text(v.domain)}")
        outside.append(f"{v.name}={value!r} is outside its domain {domain_text(v.domain)}")
    if outside:
        raise OutsideDomain("the system left the model's domain: " + "; ".join(outside), None,
                            dict(observed))
    return dict(observed)


def adapter_error_in(exc: BaseException) -> AdapterError | None:
    """The :class:`AdapterError` behind ``exc`` (Hypothesis may group exceptions), if any."""
    if isinstance(exc, AdapterError):
        return exc
    if isinstance(exc, BaseExceptionGroup):
        for inner in exc.exceptions:
            found = adapter_error_in(inner)
            if found is not None:
                return found
    return None
