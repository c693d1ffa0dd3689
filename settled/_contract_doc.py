"""The adapter contract's tables in conformance/README.md, generated from the declarations.

Each bundled machine gets its triggers (actor, parameters, the name the event log
uses, whether a caller may be refused) and its variables (domain, whether the
log records it, whether ``observe()`` must return it). A test keeps the README's
section equal to :func:`contract_section`; ``python -m settled._contract_doc``
rewrites it.
"""

from __future__ import annotations

import sys
from pathlib import Path

from settled.model import MACHINES, Protocol

HEADING = "## Triggers, parameters and variables of the bundled machines"
README = Path(__file__).resolve().parent.parent / "conformance" / "README.md"


def _values(domain: tuple[object, ...]) -> str:
    if domain and all(isinstance(x, tuple) for x in domain):
        return f"tuples of epochs per worker, e.g. {domain[1] if len(domain) > 1 else domain[0]}"
    return ", ".join(str(x) for x in domain)


def _machine(p: Protocol) -> list[str]:
    out = [f"### `{p.name}`", "", "| trigger | actor | params | logged as | refusable |",
           "| --- | --- | --- | --- | --- |"]
    seen: dict[str, tuple[str, str, str]] = {}
    for t in p.transitions:
        params = ", ".join(f"`{x.name}` ∈ {{{', '.join(map(str, x.domain))}}}" for x in t.params)
        logged = "not logged" if t.observable is None else f"`{t.observable}`"
        row = (t.actor, params or "—", logged)
        if seen.setdefault(t.trigger, row) is row:
            refusable = "yes" if t.trigger in p.refusable else ""
            out.append(f"| `{t.trigger}` | {row[0]} | {row[1]} | {row[2]} | {refusable} |")
    out += ["", "| variable | domain | in the event log | in observe() |",
            "| --- | --- | --- | --- |"]
    for v in p.variables:
        required = ("never (a ghost: the model's own history)" if v.ghost else "required")
        logged = "yes" if v.logged and not v.ghost else "no"
        out.append(f"| `{v.name}` | {v.meaning} | {_values(v.domain)} | {logged} | {required} |")
    return out


def contract_section() -> str:
    out = [HEADING, "",
           "Generated from the declarations (`python -m settled._contract_doc` rewrites it; a test",
           "keeps it in step). The same tables, with every guard and effect, are in",
           "[`diagrams/SPEC.md`](../diagrams/SPEC.md). \"not logged\" steps leave no event",
           "(a crash, the platform's own progress, a lost answer to a cancel). A trigger listed",
           "twice in the model (one per source state) is listed once here.", ""]
    for p in MACHINES.values():
        out += [*_machine(p), ""]
    return "\n".join(out)


def with_section(text: str) -> str:
    """``text`` (the README) with its generated section replaced; it runs to the end."""
    head = text.split(HEADING, 1)[0]
    return head + contract_section()


def main() -> int:
    README.write_text(with_section(README.read_text(encoding="utf-8")), encoding="utf-8")
    print(f"wrote {README}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
