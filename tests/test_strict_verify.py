"""`settled verify` is strict by default: anything a run leaves unchecked fails it by name,
unless the caller names it with --allow-unchecked, and then the report prints it."""

from __future__ import annotations

from typing import Any

import pytest

from settled import _cmd_verify, _verify

OK = {"ok": True, "states": 1, "states_unreduced": 1, "edges": 1, "seconds": 0.0, "findings": []}


@pytest.fixture
def quick(monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """Every check passes at once; ``parts`` says what the lockstep leaves unchecked."""
    parts: dict[str, Any] = {"not_checked": [], "system_checked": True}
    monkeypatch.setattr(_verify, "check_static", lambda p: {})
    monkeypatch.setattr(_verify, "check_explore", lambda p, watch=None: dict(OK))
    monkeypatch.setattr(_verify, "check_system", lambda s, watch=None: dict(OK))
    monkeypatch.setattr(_verify, "check_lockstep", lambda *a, **k: (
        {"ok": True, "store": "SQLite files", "not_checked": list(parts["not_checked"]),
         "quiescence": {"checked": parts.get("quiescence", True)}},
        {"ok": True, "events": 1}, None))
    monkeypatch.setattr(_verify, "check_system_lockstep", lambda *a: (
        {"checked": True, "ok": True, "not_checked": []} if parts["system_checked"]
        else {"checked": False, "ok": False, "why": "no adapter drives it"}))
    monkeypatch.setattr(_verify, "check_concurrent", lambda *a: {"checked": True, "ok": True})
    monkeypatch.setattr(_verify, "check_crash", lambda *a: {"ok": True})
    monkeypatch.setattr(_verify, "check_views", lambda root, write: [])
    monkeypatch.setattr(_verify, "expected_unchecked", lambda machines: {
        "approval.retries_allowed": "declared", "approval.system_lockstep": "none",
        "approval.quiescence": "no own_turn"})
    return parts


def test_everything_checked_passes(quick: dict[str, Any]) -> None:
    result = _verify.verify(None, machines=["approval"])
    assert result["ok"] and result["unchecked"] == {"allowed": [], "refused": []}


def test_an_unobservable_variable_fails_verify_unless_named(quick: dict[str, Any]) -> None:
    quick["not_checked"] = ["retries_allowed"]
    strict = _verify.verify(None, machines=["approval"])
    assert not strict["ok"] and not strict["machines"]["approval"]["ok"]
    assert strict["unchecked"]["refused"] == ["approval.retries_allowed"]
    named = _verify.verify(None, machines=["approval"],
                           allow_unchecked=["approval.retries_allowed"])
    assert named["ok"] and named["unchecked"] == {"allowed": ["approval.retries_allowed"],
                                                  "refused": []}


def test_a_system_no_adapter_drives_fails_verify_unless_named(quick: dict[str, Any]) -> None:
    quick["system_checked"] = False
    strict = _verify.verify(None, machines=["approval"])
    assert not strict["ok"] and strict["unchecked"]["refused"] == ["approval.system_lockstep"]
    named = _verify.verify(None, machines=["approval"],
                           allow_unchecked=["approval.system_lockstep"])
    assert named["ok"]


def test_an_unquiesced_machine_fails_verify_unless_named(quick: dict[str, Any]) -> None:
    quick["quiescence"] = False
    strict = _verify.verify(None, machines=["approval"])
    assert not strict["ok"] and strict["unchecked"]["refused"] == ["approval.quiescence"]
    named = _verify.verify(None, machines=["approval"], allow_unchecked=["approval.quiescence"])
    assert named["ok"] and named["unchecked"]["allowed"] == ["approval.quiescence"]


def test_an_exception_for_something_checked_is_bad_input(quick: dict[str, Any]) -> None:
    with pytest.raises(ValueError, match=r"names \['query.held'\]"):
        _verify.verify(None, machines=["approval"], allow_unchecked=["query.held"])


def test_the_report_prints_each_unchecked_thing(quick: dict[str, Any],
                                                capsys: pytest.CaptureFixture[str]) -> None:
    quick["not_checked"] = ["retries_allowed"]
    quick["system_checked"] = False
    result = _verify.verify(None, machines=["approval"],
                            allow_unchecked=["approval.system_lockstep"])
    _cmd_verify.details(result)
    err = capsys.readouterr().err
    assert "NOT CHECKED: approval.retries_allowed" in err and "this fails the run" in err
    assert "ALLOWED UNCHECKED: approval.system_lockstep" in err
    assert "1 NOT CHECKED" in _cmd_verify._unchecked_cell(result["unchecked"])


def test_what_a_real_run_leaves_unchecked_is_known_before_it() -> None:
    """The bundled adapters declare nothing unobservable, every system and concurrent
    campaign is driven, and every runtime takes its own turns in the quiescence phase."""
    assert _verify.expected_unchecked(["query", "approval", "ledger"]) == {}
