"""A machine's progress properties on SPIN: each ``premise ~> goal`` as LTL under the declared
fairness (:func:`render_ltl`), pan's acceptance-cycle search (:func:`run_ltl`) and its verdict
beside ours (:func:`compare_progress`)."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ._promela import ExportError, PromelaModel, _ident, _kind
from ._spin_run import SPIN_OPTIONS, SpinFailed, _count, _num, tools

_CHECK_LINE = re.compile(r"^\s*(if :: .* -> fail = \d+ :: else -> skip fi;|"
                         r"assert\(fail != \d+\); fail = 0;)\s*$")


def _lit(codes: Mapping[Any, int], value: Any) -> str:
    """A value of a progress predicate in Promela (a name by its code)."""
    kind = _kind(value)
    if kind == "bool":
        return "1" if value else "0"
    if kind == "int":
        return str(value)
    if value not in codes:
        raise ExportError(f"the name {value!r} has no code")
    return _ident(value)


def _pred(r_codes: Mapping[Any, int], pred: Any, kinds: Mapping[str, str]) -> str:
    """A machine's predicate (``model._liveness.Pred``) over ``st`` and the variables."""
    return "(" + " && ".join(["started", *pred_parts(r_codes, pred, kinds)]) + ")"


def pred_parts(r_codes: Mapping[Any, int], pred: Any, kinds: Mapping[str, str]) -> list[str]:
    """The conjuncts of a predicate's machine part: its states and its comparisons of the
    machine's variables (a system renders them once per instance)."""
    parts = []
    if pred.states:
        inside = " || ".join(f"st == {_ident(s)}" for s in pred.states)
        parts.append(f"!({inside})" if pred.outside else f"({inside})")
    for c in pred.where:
        if kinds.get(c.variable) == "tuple":
            raise ExportError(f"`{c.text()}`: a tuple in a progress predicate")
        parts.append(f"(v_{c.variable} {c.op} {_lit(r_codes, c.value)})")
    return parts


def render_ltl(model: PromelaModel, liveness: Any, prop: Any) -> str:
    """The machine without its safety checks, every step recording which fairness groups it
    belongs to (``tk_<i>`` for the i-th weak or strong group, ``tf`` for any finite one), a
    stutter option (a run may stop anywhere, as in our check: fair only where no required
    group is enabled), and one LTL formula:

        fairness -> [](premise -> <>goal)

    Fairness, per group: weak ``[]<>(!en_i || tk_i)``, strong ``(<>[]!en_i || []<>tk_i)``,
    finite ``<>[]!tf``; ``never`` groups constrain nothing. ``en_i`` is "some option of
    the group is enabled", rendered from the options' own conditions. The weak groups are
    folded into one monitor in the model (``wf`` counts the groups whose obligation has
    held since the last ``fair``; ``fair`` is set when all have), so the formula carries one
    ``[]<>fair``: SPIN's translation of several ``[]<>`` conjuncts takes seconds to minutes,
    that of this formula milliseconds. SPIN's own ``-f`` (weak fairness among processes)
    means nothing for one process, so fairness is in the model and the formula. Model
    bounds are unknown to SPIN: a cycle our check reports as ``stuck_at_bound`` is a
    violation for SPIN."""
    kinds = {v.name: _kind(v.initial) for v in model.protocol.variables}

    def member(k: int, f: Any) -> bool:
        t, params = model.labels[k]
        return bool(f.steps.matches(t.actor, t.trigger, params))

    return instrument(model, liveness, member, _pred(model.codes, prop.premise, kinds),
                      _pred(model.codes, prop.goal, kinds), inline=False)


def _monitor(required: Sequence[Any]) -> list[str]:
    """The weak groups' monitor, after en and tk are set: obligation wf met, on to the next."""
    weak = [i for i, f in enumerate(required) if f.kind == "weak"]
    lines = [f"if :: wf == {k} && (!en_{i} || tk_{i}) -> wf = {k + 1} :: else -> skip fi;"
             for k, i in enumerate(weak)]
    if weak:
        lines.append(f"if :: wf == {len(weak)} -> wf = 0; fair = 1 :: else -> fair = 0 fi;")
        # only the monitor reads a weak group's tk, just now: cleared, it tells no two states
        # apart (a strong group's tk is read by the formula and stays)
        lines.append(" ".join(f"tk_{i} = 0;" for i in weak))
    return lines


def _formula(required: Sequence[Any], finite: bool) -> str:
    fair = ["([]<>fair)"] if any(f.kind == "weak" for f in required) else []
    fair += [f"((<>[]!en_{i}) || ([]<>tk_{i}))" for i, f in enumerate(required)
             if f.kind == "strong"]
    fair += ["(<>[]!tf)"] if finite else []
    formula = " && ".join(fair) or "true"
    return f"ltl progress {{ ({formula}) -> [](premise -> <>goal) }}"


def instrument(model: PromelaModel, liveness: Any, member: Callable[[int, Any], bool],
               premise: str, goal: str, *, inline: bool) -> str:
    """:func:`render_ltl`'s transformation of a rendered model (a machine's, or with
    ``inline`` a system's, whose options all end in the ``after_step()`` inline):
    ``member(k, f)`` says whether option ``k`` is a step of fairness group ``f``;
    ``premise`` and ``goal`` are the predicates in Promela."""
    required, finite = liveness.required, liveness.finite
    text = "\n".join(ln for ln in model.text.split("\n") if not _CHECK_LINE.match(ln))
    flags = [f"tk_{i}" for i in range(len(required))] + (["tf"] if finite else [])

    def marks(k: int) -> str:
        on = [int(member(k, f)) for f in required]
        if finite:
            on.append(int(any(member(k, f) for f in finite)))
        return " ".join(f"{n} = {b};" for n, b in zip(flags, on, strict=True))

    text = re.sub(r'printf\("@L (\d+)\\n"\);',
                  lambda m: m.group(0) + " " + marks(int(m.group(1))), text)
    # en_<i>: some option of group i is enabled in the configuration; kept as a variable
    # (a function of the configuration, so it tells no two states apart), recomputed after
    # every step: SPIN's LTL parser does not take the options' conditional expressions.
    recompute = []
    for i, f in enumerate(required):
        conds = [f"({c})" for k, c in enumerate(model.conditions) if member(k, f)]
        en = f"({model.in_domain} && ({' || '.join(conds)}))" if conds else "0"
        recompute.append(f"if :: {en} -> en_{i} = 1 :: else -> en_{i} = 0 fi;")
    monitor = _monitor(required)
    start = text.index("  :: d_step { timeout ->")
    end = text.index("  od", start)
    zero = " ".join(f"{n} = 0;" for n in flags)
    stutter = "".join(f" {line}" for line in monitor)
    text = (text[:start] + f'  :: d_step {{ printf("@S\\n"); {zero}{stutter} }}  /* a stutter */\n'
            + text[end:])
    if inline:  # every option and the initial d_step end in after_step(): en and wf there
        body = "".join(f"\n  {line}" for line in recompute + monitor) or "\n  skip"
        if "inline after_step() {\n}" not in text:
            raise ExportError("the system's after_step() holds more than its checks: the "
                              "fairness monitor has no place to go")
        text = text.replace("inline after_step() {\n}", "inline after_step() {" + body + "\n}", 1)
        text = text.replace("  d_step {\n", "  d_step {\n    started = 1;\n", 1)
    else:
        again = "".join(f"\n       {line}" for line in recompute + monitor)
        text = text.replace("\n     }\n", again + "\n     }\n")
        # the initial configuration's en and monitor after its tuples are set
        text = text.replace("  d_step {\n", "  d_step {\n    started = 1;\n", 1)
        text = text.replace("\n  };\n  do\n", again + "\n  };\n  do\n", 1)
    decls = ["bool started;", *(f"bool {n};" for n in flags),
             *(f"bool en_{i};" for i in range(len(required)))]
    if monitor:
        decls += ["byte wf;", "bool fair;"]
    decls += [f"#define premise {premise}", f"#define goal {goal}", _formula(required, finite)]
    return text.replace("byte fail;", "byte fail;\n" + "\n".join(decls), 1)


@dataclass
class SpinLiveness:
    """SPIN's verdict on one progress property: ``holds``, ``violated`` (with the lasso's
    prefix and cycle as the model's labels: a machine's (transition, parameters), a system's
    ``SystemTraceStep``; ``None`` a stutter) or ``not_checked`` (``why`` says what pan did
    not do: such a property is never reported as holding)."""

    name: str
    verdict: str
    prefix: tuple[Any, ...] = ()
    cycle: tuple[Any, ...] = ()
    seconds: float = 0.0
    states: int = 0
    why: str = ""


LTL_HOLDS, LTL_VIOLATED, LTL_NOT_CHECKED = "holds", "violated", "not_checked"


def run_ltl(model: PromelaModel, liveness: Any, prop: Any, *, memory_mb: int = 4096,
            optimize: str = "-O0", depth: int = 1_000_000) -> SpinLiveness:
    """pan's acceptance-cycle search (``-a``) of :func:`render_ltl`'s formula
    (:func:`run_pan_ltl`); a machine the renderer cannot write is ``not_checked``."""
    try:
        text = render_ltl(model, liveness, prop)
    except ExportError as e:
        return SpinLiveness(prop.name, LTL_NOT_CHECKED, why=f"not rendered in Promela: {e}")
    return run_pan_ltl(text, prop.name, model.labels, memory_mb=memory_mb, optimize=optimize,
                       depth=depth)


def run_pan_ltl(text: str, name: str, labels: Sequence[Any], *, memory_mb: int = 4096,
                optimize: str = "-O0", depth: int = 1_000_000) -> SpinLiveness:
    """pan's acceptance-cycle search (``-a``) of an instrumented model ``text``.

    ``holds`` only when pan's report says the never claim was in the search, acceptance
    cycles were searched, the search completed (no depth, memory or other cut) and no
    error was found; ``violated`` only for an acceptance cycle, its trail replayed into
    ``labels`` (option K prints ``@L K``); anything else is ``not_checked`` with pan's
    reason. spin or cc failing is :class:`SpinFailed`."""
    import subprocess
    import tempfile
    from pathlib import Path

    spin, cc = tools()
    with tempfile.TemporaryDirectory(prefix="settled-ltl-") as tmp:
        work = Path(tmp)
        (work / "model.pml").write_text(text, encoding="utf-8")
        for cmd in ([spin, *SPIN_OPTIONS, "-a", "model.pml"],
                    [cc, optimize, "-w", "-o", "pan", "-DNOREDUCE", f"-DMEMLIM={memory_mb}",
                     "pan.c"]):
            done = subprocess.run(cmd, cwd=work, capture_output=True, text=True)
            if done.returncode != 0:
                last = (done.stderr or done.stdout).strip().splitlines()[-1:] or ["?"]
                raise SpinFailed(f"{Path(cmd[0]).name} failed: {last[0]}")
        out, seconds = _timed(subprocess.run, ["./pan", "-a", f"-m{depth}"], work)
        states = _num(r"^\s*([\d.e+]+) states, stored", out, _count) or 0
        why = _why_not(out)
        if why is not None:
            return SpinLiveness(name, LTL_NOT_CHECKED, seconds=seconds, states=states, why=why)
        if not _num(r"errors: (\d+)", out):
            return SpinLiveness(name, LTL_HOLDS, seconds=seconds, states=states)
        replay = subprocess.run([spin, *SPIN_OPTIONS, "-t", "-B", "model.pml"], cwd=work,
                                capture_output=True, text=True)
    prefix, cycle, marked = _lasso_labels(replay.stdout, labels)
    return SpinLiveness(name, LTL_VIOLATED, prefix, cycle, seconds, states,
                        why="" if marked else "the trail replayed without its cycle mark")


def _timed(run: Callable[..., Any], args: list[str], work: Any) -> tuple[str, float]:
    import time

    t0 = time.perf_counter()
    done = run(args, cwd=work, capture_output=True, text=True)
    return done.stdout + done.stderr, time.perf_counter() - t0


def _why_not(out: str) -> str | None:
    """Why pan's acceptance-cycle report decides nothing, or None when it does."""
    if "states, stored" not in out:
        return "pan stopped without a report: " + (out.strip().splitlines() or ["no output"])[-1]
    errors = _num(r"errors: (\d+)", out)
    if errors is None:
        return "pan's report has no error count"
    if errors:
        if not re.search(r"^pan:\d+: acceptance cycle", out, re.M):
            first = re.search(r"^pan:\d+: .*$", out, re.M)
            return "pan's error is not an acceptance cycle: " + (first.group(0) if first else "?")
        return None
    if not re.search(r"^\s*never claim\s+\+", out, re.M):
        return "pan searched without the never claim"
    if not re.search(r"^\s*acceptance\s+cycles\s+\+", out, re.M):
        return "pan did not search for acceptance cycles"
    cut = [w for w in ("max search depth too small", "search not completed",
                       "reached -DMEMLIM bound", "out of memory") if w in out]
    return f"pan's search was cut: {cut[0]}" if cut else None


def _lasso_labels(replayed: str, labels: Sequence[Any]
                  ) -> tuple[tuple[Any, ...], tuple[Any, ...], bool]:
    """The replayed trail's labels before and after its cycle mark (``None``: a stutter),
    and whether the mark was there."""
    prefix: list[Any] = []
    cycle: list[Any] = []
    into = prefix
    for line in replayed.splitlines():
        if "START OF CYCLE" in line:
            into = cycle
        m = re.match(r"^\s*@L (\d+)$", line)
        if m:
            into.append(labels[int(m.group(1))])
        elif line.strip() == "@S":
            into.append(None)
    marked = "START OF CYCLE" in replayed
    return (tuple(prefix), tuple(cycle), True) if marked else (tuple(prefix), (), False)


@dataclass(frozen=True)
class ProgressAgreement:
    """One progress property: our check's verdict (``model``'s fair-cycle search) beside
    SPIN's. SPIN knows no model bound, so a cycle we report stuck at a bound is a violation
    there."""

    name: str
    ours: str  # holds, violated, stuck_at_bound or not_checked (conformance._liveness)
    spin: SpinLiveness

    @property
    def checked(self) -> bool:
        """Both engines decided (neither says not_checked)."""
        return (self.spin.verdict != LTL_NOT_CHECKED
                and self.ours in (LTL_HOLDS, LTL_VIOLATED, "stuck_at_bound"))

    @property
    def agree(self) -> bool:
        expected = LTL_HOLDS if self.ours == LTL_HOLDS else LTL_VIOLATED
        return self.checked and self.spin.verdict == expected

    def to_json(self) -> dict[str, Any]:
        return {"property": self.name, "ours": self.ours, "spin": self.spin.verdict,
                "spin_seconds": round(self.spin.seconds, 3), "spin_states": self.spin.states,
                "why": self.spin.why, "checked": self.checked, "agree": self.agree}


def compare_progress(model: PromelaModel, ours: Any, liveness: Any) -> list[ProgressAgreement]:
    """Every progress property of ``liveness``: ``ours`` (a ``LivenessResult`` of the same
    machine and liveness) beside SPIN's verdict (:func:`run_ltl`, one pan per property)."""
    verdicts = {v.prop.name: v.verdict for v in ours.verdicts}
    return [ProgressAgreement(p.name, verdicts.get(p.name, LTL_NOT_CHECKED),
                              run_ltl(model, liveness, p)) for p in liveness.progress]
