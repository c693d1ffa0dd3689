"""Running SPIN on a rendered model (``_promela``): pan's safety search, its report in our
terms (:class:`SpinResult`), SPIN's findings as ours, and the two engines' counts and findings
side by side (:class:`Agreement`)."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # _promela re-exports this module's names: no import cycle at run time
    from ._promela import Check, PromelaModel


class SpinUnavailable(RuntimeError):
    """SPIN or a C compiler is missing (the message names the package)."""


class SpinFailed(RuntimeError):
    """spin, cc or pan failed (the message carries its last line)."""


@dataclass
class SpinFinding:
    check: Check
    depth: int  # pan's depth of the first (shortest, breadth-first) occurrence
    steps: tuple[Any, ...] = ()  # the shortest run, by our names (the model's labels)


@dataclass
class SpinResult:
    """What pan reported, in our terms.

    ``states`` is pan's "states, stored" minus 1 (the process before its first d_step,
    which checks the initial configuration); ``steps`` is pan's "transitions" (stored +
    matched) minus 2 (pan counts the root as a transition, and that first d_step) minus
    one ``timeout`` self-loop per configuration without steps (``no_step_states``: in the
    counting run the ``timeout`` option writes ``@T`` to pan's standard error, executed
    exactly once per such stored state, so pan counts them itself; the labels' ``@L``
    prints are left out of that run).

    With ``bitstate`` every count is a LOWER bound: a state whose hash bits were all set
    by other states is taken for seen and not expanded, so its steps and its successors
    may be missing too. :attr:`coverage_estimate` says how likely that was."""

    model: str
    stored: int
    matched: int
    transitions: int
    depth: int
    errors: int
    findings: list[SpinFinding]
    seconds: float  # the pan process's wall-clock time (pan's own figure is rounded)
    memory_mb: float
    bitstate: bool
    hash_factor: float | None
    complete: bool
    compile_seconds: float
    no_step_states: int = 0
    compiler: str = ""  # the C compiler that built pan (its file name: tcc, cc, gcc)
    raw: str = field(repr=False, default="")
    cores: int = 1
    handoff_depth: int | None = None  # multi-core: pan's -z
    core_states: tuple[int, ...] = ()  # multi-core: states each core stored (pan's %g figure)
    hash_bits: int | None = None  # bitstate: the hash array holds 2**hash_bits bits (-w)
    table_bits: int | None = None  # exhaustive, sized: pan's hash table has 2**table_bits slots
    bits_per_state: int | None = None  # bitstate: pan's -k

    @property
    def coverage_estimate(self) -> float | None:
        """Bitstate only: a first-order estimate of the fraction of states pan saw.

        pan prints the hash factor ``h`` (bits in the array per stored state) and the bits
        set per state ``k``. When the last state was stored, each of its ``k`` bits was set
        already with probability at most ``1 - e^(-k/h)``, so a new state was taken for a
        seen one with probability at most ``p = (1 - e^(-k/h))^k``, and every state before
        it with less. The estimate is ``1 - p``: it counts the states mistaken for seen
        ones, not the states reached only through them, so it is an estimate, not a bound.
        None without bitstate, or when pan printed no hash factor."""
        import math

        if not self.bitstate or not self.hash_factor or not self.bits_per_state:
            return None
        k = self.bits_per_state
        return 1.0 - (1.0 - math.exp(-k / self.hash_factor)) ** k

    @property
    def states(self) -> int:
        return self.stored - 1

    @property
    def steps(self) -> int:
        """Labelled steps executed: one per (configuration, enabled label), as our
        explorer's labelled steps."""
        return self.transitions - 2 - self.no_step_states


def tools(compiler: str | None = None) -> tuple[str, str]:
    """(spin, cc) paths, or :class:`SpinUnavailable` naming the package.

    The C compiler for pan: ``compiler`` when given; else ``$CC`` when it is set (a name on
    the PATH or a path); else Debian's ``tcc`` when it is installed; else ``cc`` or ``gcc``.
    tcc compiles pan.c in a fraction of a second where gcc ``-O0`` takes seconds for one
    machine and minutes to hours for a system's (megabytes of C); its pan runs a little
    slower, and the counts are pan's either way."""
    import os
    import shutil

    spin = shutil.which("spin")
    if spin is None:
        raise SpinUnavailable("spin is not installed (Debian/Ubuntu: apt-get install spin)")
    chosen = compiler or os.environ.get("CC", "").strip()
    if chosen:
        cc = shutil.which(chosen)
        if cc is None:
            if compiler:
                raise SpinUnavailable(f"the C compiler {chosen!r} is not on the PATH; install it")
            raise SpinUnavailable(f"the C compiler {chosen!r} (CC) is not on the PATH; install "
                                  "it, or unset CC to use tcc or cc")
        return spin, cc
    cc = shutil.which("tcc") or shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        raise SpinUnavailable("no C compiler for SPIN's pan (Debian/Ubuntu: apt-get install tcc)")
    return spin, cc


_ERROR = re.compile(r"^(?:cpu\d+: )?pan:\d+: assertion violated \(fail!=(\d+)\) "
                    r"\(at depth (\d+)\)", re.M)
# One line per core at the end of a multi-core run: that core's depth, states, transitions.
_CORE = re.compile(r"^cpu(\d+): Depth=\s*\d+ States=\s*([\d.e+]+) Transitions=", re.M)
# The deadlock option's mark in the counting run: one write(2) of three bytes per execution,
# never split or interleaved by the other cores' buffered output (a pipe writes at most
# PIPE_BUF bytes atomically), where a buffered printf of several processes could be.
_MARK = 'c_code { (void) write(2, "@T\\n", 3); }'
# pan's default hand-off depth in multi-core mode (-z): a state at that depth goes to the
# next core's work queue. Smaller values crash pan 6.5.2 here (segmentation fault on the
# query machine), so it is left at pan's default and reported.
HANDOFF_DEPTH = 20
HASH_BITS = 28  # bitstate: pan's -w28, a 2^28-bit (32 MB) hash array
# spin's own optimisations off, all three: dataflow (-o1), dead variables (-o2) and statement
# merging (-o3). Together they make `spin -a` about 9 times faster on a system's model (51 s to
# 6 s on the approval system here; the 3-query system's: about 13 CPU-minutes to 1.3-2) and leave
# every count as it was (the engines' agreement tests hold it); a trail is replayed with the
# same options, or its steps would not be the model's.
SPIN_OPTIONS = ("-o1", "-o2", "-o3")


def _num(pattern: str, text: str, cast: Callable[[str], Any] = int) -> Any:
    m = re.search(pattern, text, re.M)
    return cast(m.group(1)) if m else None


def _count(text: str) -> int:
    return int(float(text)) if ("e" in text or "." in text) else int(text)


def _keep_only(k: int) -> Callable[[re.Match[str]], str]:
    """A substitution keeping only the assertion of check ``k`` (the others skip)."""
    def keep(m: re.Match[str]) -> str:
        return m.group(0) if m.group(1) == str(k) else "skip"
    return keep


def run_spin(model: PromelaModel, *, bitstate: bool = False, cores: int = 1,
             memory_mb: int = 4096, trails: bool = True, optimize: str = "-O0",
             hash_bits: int = HASH_BITS, compiler: str | None = None,
             expected_states: int | None = None) -> SpinResult:
    """Explore ``model`` with pan, every error counted (``-c0``), then one shortest trail per
    failing check, replayed and mapped to our labels.

    One core: a breadth-first search (``-DBFS``), so the first error of each check is at
    its shortest depth. ``cores`` > 1: SPIN's multi-core depth-first search (pan compiled
    with ``-DNCORE=<cores>``, one shared state table, work handed to the next core at depth
    :data:`HANDOFF_DEPTH`); the per-core state counts are in :attr:`SpinResult.core_states`.
    ``bitstate``: pan's bitstate hashing (``-DBITSTATE``, a ``2**hash_bits``-bit array,
    pan's default 3 bits per state): a state whose bits are all set already is taken for
    seen, so the counts are a lower bound (:attr:`SpinResult.coverage_estimate`). Bitstate
    runs on one core only: pan's multi-core bitstate search sets its shared bits without a
    lock and may store a state twice, so its counts would bound nothing (ValueError). The
    trails always come from a single-core breadth-first search of the one failing check
    (bitstate too when ``bitstate``), so they are shortest whatever the search was.
    ``expected_states`` sizes an exhaustive search's hash table (pan's ``-w``, at least
    twice the slots, :func:`table_bits`); without it pan keeps its default, 2**24 slots.

    ``compiler`` is the C compiler for ``pan`` (:func:`tools`: by default ``$CC``, else
    tcc, else cc) and ``optimize`` its flag: gcc ``-O0`` compiles the query machine's
    ``pan.c`` in about 9 s here, ``-O2`` in about 50 s, tcc in 0.3 s, for a search of under
    a second each. spin, cc or pan failing (pan killed by a signal, or ending without
    its report) is :class:`SpinFailed`."""
    import tempfile
    import time

    _check_search(bitstate, cores, hash_bits)
    with tempfile.TemporaryDirectory(prefix="settled-spin-") as tmp:
        pan = _Pan(tmp, optimize, cores, bitstate, memory_mb, compiler)
        base = ["-DNOREDUCE", "-DSAFETY", f"-DMEMLIM={memory_mb}"]
        if bitstate:
            base.append("-DBITSTATE")
        flags = [*base, f"-DNCORE={cores}" if cores > 1 else "-DBFS"]
        counting = re.sub(r'\n\s*printf\("@L \d+\\n"\);', "", model.text)
        counting = counting.replace('printf("@T\\n");', _MARK)
        compile_s = pan.build(counting, flags)
        # the depth-first stack of a multi-core run takes -m entries of memory (53 MB here)
        args = ["./pan", "-c0", "-m1000000" if cores > 1 else "-m10000000"]
        sized = None if bitstate or expected_states is None else table_bits(expected_states)
        if bitstate:
            args.append(f"-w{hash_bits}")
        elif sized is not None:
            args.append(f"-w{sized}")
        t0 = time.perf_counter()
        done = pan.run(args)
        seconds = time.perf_counter() - t0
        out = done.stdout + done.stderr
        if "states, stored" not in out:
            raise SpinFailed("pan stopped without a report: "
                             + (out.strip().splitlines() or ["no output"])[-1])
        first: dict[int, int] = {}
        for m in _ERROR.finditer(out):
            first.setdefault(int(m.group(1)), int(m.group(2)))
        found = [SpinFinding(model.checks[k - 1], d) for k, d in sorted(first.items())]
        if trails:
            for f in found:
                f.steps = pan.trail(model, f, [*base, "-DBFS"], args[3:])
    got = _result(model, out, found, seconds, compile_s, done.stderr, bitstate, cores,
                  hash_bits, Path(pan.cc).name)
    got.table_bits = sized
    return got


TABLE_BITS = (18, 28)  # an exhaustive search's hash table: 2**18 slots (2 MB) to 2**28 (2 GB)


def table_bits(states: int) -> int:
    """pan's ``-w`` for an exhaustive search of about ``states`` states: the power of two at
    least twice that, within :data:`TABLE_BITS` (pan's default is 24)."""
    low, high = TABLE_BITS
    return min(high, max(low, (2 * max(1, states) - 1).bit_length()))


def _check_search(bitstate: bool, cores: int, hash_bits: int) -> None:
    if cores < 1:
        raise ValueError(f"run_spin: cores must be at least 1, got {cores}")
    if bitstate and cores > 1:
        # pan's multi-core bitstate search sets the shared bits without a lock: two cores
        # reaching one state together both store it (18,057 stored of the query machine's
        # 18,054 here), so its counts are neither lower nor upper bounds.
        raise ValueError("run_spin: bitstate with several cores stores some states twice; "
                         "its counts bound nothing")
    if bitstate and not 10 <= hash_bits <= 40:
        raise ValueError(f"run_spin: hash_bits {hash_bits} is outside 10..40")


class _Pan:
    """spin, cc and pan in one working directory."""

    def __init__(self, tmp: str, optimize: str, cores: int, bitstate: bool,
                 memory_mb: int, compiler: str | None = None) -> None:
        self.work = Path(tmp)
        self.spin, self.cc = tools(compiler)
        self.optimize, self.cores, self.bitstate, self.memory_mb = (optimize, cores, bitstate,
                                                                    memory_mb)

    def build(self, text: str, flags: list[str]) -> float:
        import subprocess
        import time

        (self.work / "model.pml").write_text(text, encoding="utf-8")
        t0 = time.perf_counter()
        for cmd in ([self.spin, *SPIN_OPTIONS, "-a", "model.pml"],
                    [self.cc, self.optimize, "-w", "-o", "pan", *flags, "pan.c"]):
            done = subprocess.run(cmd, cwd=self.work, capture_output=True, text=True)
            if done.returncode != 0:
                last = (done.stderr or done.stdout).strip().splitlines()[-1:] or ["?"]
                raise SpinFailed(f"{Path(cmd[0]).name} failed: {last[0]}")
        return time.perf_counter() - t0

    def run(self, args: list[str]) -> Any:
        import signal
        import subprocess

        done = subprocess.run(args, cwd=self.work, capture_output=True, text=True)
        if done.returncode < 0:
            try:
                name = signal.Signals(-done.returncode).name
            except ValueError:
                name = f"signal {-done.returncode}"
            raise SpinFailed(f"pan was killed by {name} "
                             f"({'multi-core, ' if self.cores > 1 else ''}"
                             f"{'bitstate, ' if self.bitstate else ''}{self.memory_mb} MB limit)")
        return done

    def trail(self, model: PromelaModel, f: SpinFinding, flags: list[str],
              extra: list[str]) -> tuple[Any, ...]:
        """The shortest run to ``f``'s check: a breadth-first search of that check alone,
        its trail replayed into the model's labels."""
        import subprocess

        k = model.checks.index(f.check) + 1
        only = model.text.replace("byte fail;", f"byte fail;\n#define ONLY {k}", 1)
        only = re.sub(r"assert\(fail != (\d+)\)", _keep_only(k), only)
        self.build(only, flags)
        self.run(["./pan", "-c1", "-m10000000", *extra])
        if not (self.work / "model.pml.trail").exists():
            raise SpinFailed(f"pan wrote no trail for {f.check.kind} {f.check.name}")
        replay = subprocess.run([self.spin, *SPIN_OPTIONS, "-t", "-B", "model.pml"], cwd=self.work,
                                capture_output=True, text=True)
        labels = [int(n) for n in re.findall(r"@L (\d+)", replay.stdout)]
        (self.work / "model.pml.trail").unlink()
        return tuple(model.labels[n] for n in labels)


def _result(model: PromelaModel, out: str, found: list[SpinFinding], seconds: float,
            compile_s: float, stderr: str, bitstate: bool, cores: int,
            hash_bits: int, compiler: str) -> SpinResult:
    """pan's report as a :class:`SpinResult`."""
    # pan prints a count past 10^7 or so as 1.2345e+07: read both forms (the rounded one is
    # pan's own precision)
    per_core: dict[int, int] = {}
    for m in _CORE.finditer(out):  # the last line of each core is its total
        per_core[int(m.group(1))] = int(float(m.group(2)))
    return SpinResult(
        model=model.name or model.protocol.name,
        stored=_num(r"^\s*([\d.e+]+) states, stored", out, _count),
        matched=_num(r"^\s*([\d.e+]+) states, matched", out, _count),
        transitions=_num(r"^\s*([\d.e+]+) transitions", out, _count),
        depth=_num(r"depth reached (\d+)", out),
        errors=_num(r"errors: (\d+)", out), findings=found,
        seconds=round(seconds, 4),
        memory_mb=_num(r"^\s*([\d.]+)\s+total actual memory usage", out, float) or 0.0,
        bitstate=bitstate, hash_factor=_num(r"hash factor: ([\d.e+]+)", out, float),
        complete="search not completed" not in out and "max search depth too small" not in out,
        compile_seconds=round(compile_s, 3), raw=out, compiler=compiler,
        no_step_states=len(re.findall(r"^@T$", stderr, re.M)),
        cores=cores, handoff_depth=HANDOFF_DEPTH if cores > 1 else None,
        core_states=tuple(per_core.get(c, 0) for c in range(cores)) if cores > 1 else (),
        hash_bits=hash_bits if bitstate else None,
        bits_per_state=_num(r"bits set per state: (\d+)", out) if bitstate else None)


def findings(model: PromelaModel, result: SpinResult) -> list[Any]:
    """SPIN's findings as our :class:`Finding` objects, each with its shortest run replayed
    through the table (``Protocol.fire``): numbered steps and ITF, as the explorer gives."""
    from settled.conformance._counterexample import Counterexample, Finding, TraceStep, replay

    p = model.protocol
    out = []
    for f in result.findings:
        c = f.check
        steps = [TraceStep(0, t.trigger, tuple(params.items())) for t, params in f.steps]
        configs = tuple(replay(p, steps)) if f.steps or c.kind != "deadlock" else ()
        if c.kind == "invariant":
            inv = p.invariants[c.index]
            name, rules, text = inv.name, inv.rules, inv.meaning
        elif c.kind == "step_property":
            sp = p.step_properties[c.index]
            name, rules, text = sp.name, sp.rules, sp.meaning
        elif c.kind == "domain":
            var = p.variables[c.index]
            value = p.view(configs[-1][0])[var.name] if configs else None
            name, rules = var.name, ()
            text = f"{var.name} = {value!r} is outside its declared domain {list(var.domain)}"
        else:
            name = configs[-1][0].state if configs else "?"
            rules, text = (), f"no step is possible and not every instance has settled ({name})"
        meta = {"kind": c.kind, "property": name, "rules": list(rules), "instance": 0,
                "description": text, "engine": "spin"}
        cx = Counterexample(p, tuple(steps), configs, meta) if configs else None
        out.append(Finding(c.kind, name, text, tuple(rules), 0, cx))
    return out


# --------------------------------------------------------------------------
# The two engines side by side
# --------------------------------------------------------------------------
def our_steps(result: Any) -> int:
    """Our explorer's labelled steps on one machine: one per (configuration, enabled label),
    the unit pan's transitions count (``ExploreResult.edges`` counts joined pairs instead)."""
    local = result._space.local
    if result._space.n != 1:
        raise ValueError("our_steps: one instance of a machine only")
    return sum(len(local.labels_from(c)) for c in range(local.expanded))


@dataclass
class Agreement:
    """Our explorer's states, labelled steps and findings against SPIN's.

    ``bound`` is ``equal`` (an exhaustive SPIN search: every figure must be equal) or
    ``at_most`` (a bitstate search, whose counts are lower bounds: SPIN must have seen at
    most our states and steps, and found only findings we found). An ``at_most`` agreement
    that saw less than we did is :attr:`partial`: it passes by leaving something out, and
    says so."""

    model: str
    ours: dict[str, Any]
    spin: dict[str, Any]
    bound: str = "equal"

    @property
    def disagreements(self) -> list[str]:
        out = []
        for k in self.ours:
            mine, theirs = self.ours[k], self.spin[k]
            if self.bound == "equal" and mine != theirs:
                out.append(f"{k}: ours {mine!r}, SPIN {theirs!r}")
            elif self.bound == "at_most" and k == "findings":
                extra = [f for f in theirs if f not in mine]
                if extra:
                    out.append(f"findings: SPIN's bitstate search found {extra!r}, ours did not")
            elif self.bound == "at_most" and theirs > mine:
                out.append(f"{k}: SPIN's bitstate search saw {theirs!r}, more than our "
                           f"{mine!r}: a bitstate count is a lower bound")
        return out

    @property
    def agree(self) -> bool:
        return not self.disagreements

    @property
    def partial(self) -> bool:
        """A bitstate search that saw fewer states, steps or findings than ours."""
        return self.bound == "at_most" and any(self.spin[k] != self.ours[k] for k in self.ours)

    @property
    def missed(self) -> list[str]:
        """What a partial search left out, in words."""
        if not self.partial:
            return []
        out = [f"{k}: SPIN saw {self.spin[k]:,} of our {self.ours[k]:,}"
               for k in ("states", "steps") if self.spin[k] != self.ours[k]]
        left = [f for f in self.ours["findings"] if f not in self.spin["findings"]]
        if left:
            out.append(f"findings: SPIN did not find {left!r}")
        return out

    def to_json(self) -> dict[str, Any]:
        return {"model": self.model, "ours": self.ours, "spin": self.spin, "agree": self.agree,
                "disagreements": self.disagreements, "bound": self.bound,
                "partial": self.partial, "missed": self.missed}


def compare(result: Any, spin: SpinResult) -> Agreement:
    """States, labelled steps and the (kind, property) findings of the safety checks both
    engines make: invariants, step properties, domains, and whether a deadlock exists (pan
    reports the first per check, our explorer every deadlocked state). A bitstate search
    is held to "at most ours" (:class:`Agreement`)."""
    ours_found = {(f.kind, f.name) for f in result.violations}
    ours_found |= {("deadlock", "")} if result.deadlocks else set()
    spin_found = {(f.check.kind, f.check.name) for f in spin.findings}
    return Agreement(spin.model,
                     {"states": result.states, "steps": our_steps(result),
                      "findings": [list(f) for f in sorted(ours_found)]},
                     {"states": spin.states, "steps": spin.steps,
                      "findings": [list(f) for f in sorted(spin_found)]},
                     "at_most" if spin.bitstate else "equal")
