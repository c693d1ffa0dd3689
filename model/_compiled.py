"""One machine's semantics, generated from its expressions and compiled once.

:func:`compile_machine` writes the Python source of a protocol's successor
function and of its invariants, and compiles it once. Per control state
there is one function that takes the configuration's values (a tuple, in
declaration order) and returns every step the table allows: for each
parameter choice, the first transition of its trigger group whose guards
hold (the order ``Protocol.enabled`` defines), as ``(label, destination,
values after, broken step properties)``.

What the generator knows is folded away before Python sees it: a
parameter's value (each parameter choice gets its own branch), the step's
trigger and actor, the states before and after, and every variable the
step does not write (``unchanged(x)`` of an unwritten ``x`` is true). So a
guard on parameters alone decides at generation time whether a branch
exists, and most step properties vanish from most steps. The rest reads
local variables, not dictionaries.

The explorer runs these functions; ``Protocol.enabled`` and ``fire`` keep
the per-declaration compiled functions, whose results a test compares with
these on every reachable configuration.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from . import expr as x
from ._compiled_gen import UNKNOWN, _after, _Ctx, _lit, gen
from ._expr_compile import _set

if TYPE_CHECKING:
    from ._core import Protocol
    from ._parts import Invariant, Params, StepProperty, Transition

# A step: (label id, destination state, values after, indices of broken step properties).
GenStep = tuple[int, str, tuple[Any, ...], tuple[int, ...]]


@dataclass(frozen=True)
class CompiledMachine:
    """A protocol's generated successor and invariant functions."""

    source: str
    successors: Mapping[str, Callable[[tuple[Any, ...]], list[GenStep]]]
    labels: tuple[tuple[Transition, Params], ...]
    broken_invariants: Callable[[str, tuple[Any, ...]], tuple[int, ...]]


# The explorer's sinks, given once to ``CompiledExplorer.make``: ``get(key)`` the id of a known
# configuration key (``(state, *values)``) or None; ``new(key, cid)`` a new one's id, reached
# from ``cid``; ``dests(id)`` and ``lids(label)`` record one step; ``broken(cid, invariants,
# domains)`` what a configuration breaks; ``bsteps(cid, props, run=1)`` what its last ``run`` steps break.
Expand = Callable[[tuple[Any, ...], int], None]


@dataclass(frozen=True)
class CompiledExplorer:
    """A protocol's generated expansion functions, for the explorer (see ``compile_explorer``).

    ``make(*sinks)`` gives, per control state, ``expand(key, cid)``: check configuration
    ``cid`` (its key ``(state, *values)``), and unless a value is outside its domain, record
    every step it allows through the sinks, in ``Protocol.enabled``'s order."""

    source: str
    states: tuple[str, ...]
    _make: Callable[..., tuple[Expand, ...]]
    labels: tuple[tuple[Transition, Params], ...]
    label_states: tuple[str, ...]
    broken_invariants: Callable[[str, tuple[Any, ...]], tuple[int, ...]]

    def make(self, *sinks: Callable[..., Any]) -> dict[str, Expand]:
        return dict(zip(self.states, self._make(*sinks), strict=True))


def compile_machine(p: Protocol, *, step_properties: bool = True) -> CompiledMachine:
    """Generate and compile ``p``'s successor function (see the module's docstring)."""
    index = {n: i for i, n in enumerate(p.variable_names)}
    unpack = _unpack(index)
    consts: list[Any] = []
    labels: list[tuple[Transition, Params]] = []
    lines: list[str] = []
    names: dict[str, str] = {}
    emit = _emit_list(p.step_properties if step_properties else ())
    for k, (state, plan) in enumerate(p._plan.items()):
        fname = f"_succ_{k}"
        names[state] = fname
        lines += [f"def {fname}(values):", f"    {unpack} = values" if index else "    pass",
                  "    out = []"]
        for params, fitting in plan:
            lines += _plan_entry(state, params, fitting, index, consts, labels, emit, 1)
        lines += ["    return out", ""]
    lines += _invariants(p, index, unpack, consts)
    scope = _exec(p, lines, consts)
    successors = {state: scope[fname] for state, fname in names.items()}
    return CompiledMachine("\n".join(lines) + "\n", successors, tuple(labels),
                           scope["_invariants"])


def compile_explorer(p: Protocol) -> CompiledExplorer:
    """Generate and compile ``p``'s expansion functions: per control state, the configuration's
    invariants (with the state known) and the domains of the variables a step into that state
    writes (every configuration expanded is inside its domains, so only those can leave
    them), then its steps as in :func:`compile_machine`, each successor interned and recorded
    in place rather than returned."""
    index = {n: i for i, n in enumerate(p.variable_names)}
    unpack = ", ".join(["_", *(f"v{i}" for i in range(len(index)))])
    consts: list[Any] = []
    labels: list[tuple[Transition, Params]] = []
    label_states: list[str] = []
    lines = ["def _make(get, new, dests, lids, broken, bsteps):",
             "    more_dests, more_lids = dests.__self__.extend, lids.__self__.extend"]
    names: dict[str, str] = {}
    emit = _emit_interned(p.step_properties)
    for k, (state, plan) in enumerate(p._plan.items()):
        names[state] = f"_x_{k}"
        body = [f"    def _x_{k}(key, cid):", f"        {unpack} = key"]
        body += _checks(p, state, index, consts)
        for params, fitting in plan:
            body += _plan_entry(state, params, fitting, index, consts, labels, emit, 2)
        lines += _batch_self_loops(_merge_equal_ifs(body))
        label_states += [state] * (len(labels) - len(label_states))
        lines += ["        return", ""]
    lines += ["    return (" + "".join(f"{f}, " for f in names.values()) + ")", ""]
    lines += _invariants(p, index, _unpack(index), consts)
    scope = _exec(p, lines, consts)
    return CompiledExplorer("\n".join(lines) + "\n", tuple(names), scope["_make"],
                            tuple(labels), tuple(label_states), scope["_invariants"])


def _unpack(index: Mapping[str, int]) -> str:
    return ", ".join(f"v{i}" for i in range(len(index))) + ("," if len(index) == 1 else "")


def _exec(p: Protocol, lines: list[str], consts: list[Any]) -> dict[str, Any]:
    scope: dict[str, Any] = {f"_k{i}": c for i, c in enumerate(consts)}
    scope["_set"] = _set
    exec(compile("\n".join(lines) + "\n", f"<generated {p.name}>", "exec"), scope)  # our own
    return scope


# How a step the generator found is given back: (ctx, label, destination) -> lines.
Emit = Callable[[_Ctx, int, str], list[str]]


def _step_props(props: Sequence[StepProperty], ctx: _Ctx) -> list[str]:
    """Lines that leave the indices of the step properties this step breaks in ``bad``."""
    body = ["bad = ()"]
    for k, sp in enumerate(props):
        s, v = gen(sp.expr, ctx)
        if v is UNKNOWN:
            body.append(f"if not {s}: bad += ({k},)")
        elif not v:
            body.append(f"bad += ({k},)")
    return body


def _step_props_memo(props: Sequence[StepProperty]) -> Callable[[_Ctx], list[str]]:
    """:func:`_step_props`, generated once per distinct step as the properties can see it:
    its trigger, actor, states before and after, the variables it writes, and the values of
    the parameters the properties read (all that ``_compiled_gen._var`` reads of ``ctx``, but
    the variables' names and the shared table of constants). Plan entries that differ only
    in parameters no property reads share their lines."""
    read_params = sorted({name for sp in props for space, name in sp.reads if space == "P"})
    memo: dict[tuple[Any, ...], list[str]] = {}

    def lines(ctx: _Ctx) -> list[str]:
        given = ctx.params or {}
        key = (ctx.trigger, ctx.actor, ctx.before, ctx.after, ctx.written,
               tuple((type(v), v) for v in (given.get(n) for n in read_params)))
        found = memo.get(key)
        if found is None:
            found = memo[key] = _step_props(props, ctx)
        return found
    return lines


def _after_tuple(ctx: _Ctx, head: str = "") -> str:
    return "(" + ", ".join([*([head] if head else []), *(_after(n, ctx) for n in ctx.index)]) \
        + ("," if len(ctx.index) + bool(head) == 1 else "") + ")"


def _emit_list(props: Sequence[StepProperty]) -> Emit:
    step_props = _step_props_memo(props)

    def emit(ctx: _Ctx, label: int, dest: str) -> list[str]:
        body = [f"n = {_after_tuple(ctx)}" if ctx.written else "n = values",
                *step_props(ctx)]
        return [*body, f"out.append(({label}, {ctx.const(dest)}, n, bad))"]
    return emit


def _emit_interned(props: Sequence[StepProperty]) -> Emit:
    step_props = _step_props_memo(props)

    def emit(ctx: _Ctx, label: int, dest: str) -> list[str]:
        checks = step_props(ctx)
        if dest == ctx.before and not ctx.written:  # a self-loop: no lookup, batched
            return [f"{_SELF} {label} " + _SEP.join(checks[1:])]
        body = [f"n = {_after_tuple(ctx, _lit(dest, ctx))}", "d = get(n)",
                "if d is None: d = new(n, cid)", "dests(d)", f"lids({label})"]
        if len(checks) > 1:
            body += [*checks, "if bad: bsteps(cid, bad)"]
        return body
    return emit


# A self-loop that writes nothing: "#self <label> <its step-property checks>", recorded in a
# batch with its neighbours that check the same (a self-loop reads only the values before it).
_SELF, _SEP = "#self", "\x1f"


def _merge_equal_ifs(lines: list[str]) -> list[str]:
    """``if c: A`` directly followed by ``if c: B`` (the same text, at the same depth) is
    ``if c: A; B``: the two plan entries are independent, the test reads only the values
    before the step, and an ``elif`` after B still runs exactly when c does not hold."""
    out: list[str] = []
    last_if: dict[int, int] = {}  # depth -> index in out of the last "if" line at that depth
    for line in lines:
        depth = len(line) - len(line.lstrip())
        for d in [d for d in last_if if d > depth]:
            del last_if[d]
        if line.lstrip().startswith("if ") and line.endswith(":"):
            i = last_if.get(depth)
            if i is not None and out[i] == line and _block_ends(out, i, depth):
                continue  # the previous block at this depth was exactly this test: extend it
            last_if[depth] = len(out)
        elif line.strip():
            last_if.pop(depth, None)
        out.append(line)
    return out


def _block_ends(out: list[str], i: int, depth: int) -> bool:
    """Every line after ``out[i]`` is inside its block (deeper than ``depth``)."""
    return all(len(x) - len(x.lstrip()) > depth for x in out[i + 1:] if x.strip())


def _batch_self_loops(lines: list[str]) -> list[str]:
    """Runs of self-loop markers with the same checks, at one depth, become two array
    extends (appends for one) and the checks once, which blame every label of the run."""
    out: list[str] = []
    run: list[int] = []
    key = ("", "")  # (pad, checks) of the run
    for line in [*lines, ""]:
        body = line.lstrip()
        marker = body.startswith(_SELF)
        if marker:
            _tag, label, checks = body.split(" ", 2)
            here = (line[:len(line) - len(body)], checks)
            if not run or here == key:
                key = here
                run.append(int(label))
                continue
        out += _self_loops(run, *key)
        run = []
        if marker:
            key, run = here, [int(label)]
        elif line:
            out.append(line)
    return out


def _self_loops(run: list[int], pad: str, checks: str) -> list[str]:
    if not run:
        return []
    if len(run) == 1:
        lines = ["dests(cid)", f"lids({run[0]})"]
    else:
        lines = [f"more_dests((cid,) * {len(run)})", f"more_lids(({', '.join(map(str, run))}))"]
    if checks:
        lines += ["bad = ()", *checks.split(_SEP), f"if bad: bsteps(cid, bad, {len(run)})"]
    return [pad + line for line in lines]


def _plan_entry(state: str, params: Params, fitting: Sequence[Transition],
                index: Mapping[str, int], consts: list[Any],
                labels: list[tuple[Transition, Params]], emit: Emit, depth: int) -> list[str]:
    """One parameter choice: the first transition of the group whose guards hold."""
    out: list[str] = []
    pad = "    " * depth
    keyword = "if"
    for t in fitting:
        dest = state if t.dest is None else t.dest
        written = frozenset(t.effect.writes)
        ctx = _Ctx(index, params, t.trigger, t.actor, state, dest, written, consts=consts)
        conds = []
        never = False
        for g in t.guards:
            s, v = gen(g.expr, ctx)
            if v is UNKNOWN:
                conds.append(s)
            elif not v:
                never = True
                break
        if never:
            continue
        label = len(labels)
        labels.append((t, params))
        body = [f"a{index[n]} = {gen(x.lift(e), ctx)[0]}" for n, e in t.effect.updates.items()]
        body += emit(ctx, label, dest)
        if not conds:  # always enabled: the rest of the group is never reached
            if keyword == "if":
                out += [f"{pad}{b}" for b in body]
            else:
                out += [f"{pad}else:", *(f"{pad}    {b}" for b in body)]
            return out
        out.append(f"{pad}{keyword} {' and '.join(conds)}:")
        out += [f"{pad}    {b}" for b in body]
        keyword = "elif"
    return out


def _checks(p: Protocol, state: str, index: Mapping[str, int], consts: list[Any]) -> list[str]:
    """The explorer's per-state check of a configuration: its broken invariants (the state
    folded in) and the domains a step into ``state`` may have left."""
    ctx = _Ctx(index, None, before=state, consts=consts)
    inv = _broken_lines(p.invariants, ctx, "inv")
    writes = {n for t in p.transitions for s in t.source if t.target(s) == state
              for n in t.effect.writes}
    dom = ["dom = ()"]
    for v in p.variables:
        if v.name in writes:
            i = index[v.name]
            dom.append(f"if v{i} not in {ctx.const(frozenset(v.domain))}: dom += ({i},)")
    pad = "        "
    if len(dom) == 1:
        return [] if len(inv) == 1 else [*(pad + line for line in inv),
                                          f"{pad}if inv: broken(cid, inv, ())"]
    return [*(pad + line for line in (*inv, *dom)), f"{pad}if inv or dom:",
            f"{pad}    broken(cid, inv, dom)", f"{pad}    if dom: return"]


def _broken_lines(checks: Sequence[Invariant], ctx: _Ctx, name: str) -> list[str]:
    lines = [f"{name} = ()"]
    for k, inv in enumerate(checks):
        s, v = gen(inv.expr, ctx)
        if v is UNKNOWN:
            lines.append(f"if not {s}: {name} += ({k},)")
        elif not v:
            lines.append(f"{name} += ({k},)")
    return lines


def _invariants(p: Protocol, index: Mapping[str, int], unpack: str,
                consts: list[Any]) -> list[str]:
    ctx = _Ctx(index, None, state_local="state", consts=consts)
    lines = ["def _invariants(state, values):", f"    {unpack} = values" if index else "    pass"]
    lines += [f"    {line}" for line in _broken_lines(p.invariants, ctx, "bad")]
    return [*lines, "    return bad", ""]
