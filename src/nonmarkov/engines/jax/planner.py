"""Where and how the JAX window engine runs the next steps: a pure function of
what the run has seen; and every tuning constant of the JAX engines.

:func:`next_plan` takes the current :class:`Plan`, the run's
:class:`WindowStats` and the engine options, and returns the next plan:

- **host or compiled.** The compiled zip-up step (:mod:`.zipup`) runs the
  host's algorithm at every bond: plain cuts where the bucket's cut matrices
  (D c, m D) have a side below
  :data:`~nonmarkov.kernels.truncation.SKETCH_MIN_SIDE`, the copies-aware sketch
  (:mod:`.cuts`) beyond. A kernel is compiled only when the steps left repay
  it: the time saved per step (a host step less a compiled one,
  :data:`COMPILED_STEP_SHARE` of it until measured) times the steps left must
  exceed the compile time (:data:`COMPILE_SECONDS` until one is measured;
  nothing once the kernel is in this process's cache). The host steps go on
  while it compiles in the background. On a CPU the sketching buckets stay on
  the host unless ``compiled='on'`` (:data:`SKETCH_ON_CPU`);
- **the bond bucket** of the compiled step: the smallest of
  :data:`BOND_BUCKETS` that holds the largest rank seen; a step that wants
  more is redone in the bucket that holds it; likewise the **sketch bucket** W
  (:func:`sketch_bucket`), the columns a compiled sketch may use;
- **the chunk**: compiled steps between two fetches of their results; one step
  after the largest rank rose (a redo then costs one step), doubling while it
  holds, up to the ``chunk`` option and :data:`CHUNK_SECONDS` of steps.

With ``deterministic`` options the measured times are replaced by the models
(:data:`HOST_SITE_SECONDS` per window site, :data:`COMPILE_SECONDS`) and a
compilation is waited for, so that a run repeats bit for bit. The ``compiled``
option forces the choice (``'on'``: compiled wherever it is the host's
algorithm, from the first step; ``'off'``: never).
"""

from __future__ import annotations

import dataclasses
import math

from ...kernels.truncation import SKETCH_MIN_SIDE
from ...options import EngineOptions

#: Seconds a compilation of the zip-up step is assumed to take before one is measured
#: (0.2-1.4 s on a loaded 2-core CPU for buckets 4-12; benchmarks/README.md).
COMPILE_SECONDS = 1.5
#: A compiled step costs this share of a host step until one is measured (measured
#: 0.5 on a CPU for a 30-site window at bonds 4-12, B1 for 300 steps).
COMPILED_STEP_SHARE = 0.5
#: A compilation must be repaid this many times over by the steps left: it competes
#: with the host steps for the cores while it runs, and its estimate is rough
#: (measured: on a loaded 2-core CPU three background compilations slowed a
#: 300-step B1 run from 3.5 s on NumPy to 9.4 s).
PAYBACK = 3.0
#: Modelled seconds of a host step per window site (deterministic mode).
HOST_SITE_SECONDS = 2e-4
#: Most seconds of measured compiled steps in one chunk (a chunk is redone whole when
#: a rank outgrows the bucket).
CHUNK_SECONDS = 0.5

#: Chunks of at least this many compiled steps measure the time of a compiled step
#: (one step's time is mostly its dispatch and fetch).
MEASURED_CHUNK = 4
#: Bond dimensions a compiled window (and the padded chains of the other JAX engines)
#: may use; the smallest one that holds the wanted ranks is taken. Steps of at most
#: 25 % up to 56 (4, 6, 8, 10, 12, 14, 16, 20, ..., 56) and of at most 12.5 % from
#: there on (64, 72, 80, ..., 128, 144, ...), where a bucket 25 % too large would
#: cost up to ~2x per step.
BOND_BUCKETS: tuple[int, ...] = tuple(
    sorted(
        {4, 6}
        | {2**k + i * 2 ** (k - 2) for k in range(3, 6) for i in range(4)}
        | {2**k + i * 2 ** (k - 3) for k in range(6, 14) for i in range(8)}
    )
)
#: Largest tables of padded step tensors (all process tensors) run by the compiled
#: scans of the chain engines.
SCAN_BYTES = 2 * 2**30
#: Work per dependent kernel of a step (about the multiply-adds of one factorisation
#: or contraction) from which ``device='auto'`` runs on the accelerator (:mod:`.placement`).
ACCELERATOR_WORK = 1.0e7

#: Modelled seconds of a host (NumPy) chain step: a fixed part (calls; measured 0.2-0.7
#: ms a step for process tensors of bond 60-100) and a part per unit of
#: :func:`~.placement.chain_work` ...
CHAIN_STEP_SECONDS = 1e-4
SECONDS_PER_WORK = 1e-9
#: ... and of a compilation of a chain scan (0.13-0.33 s measured on a CPU).
SCAN_COMPILE_SECONDS = 0.3

#: Narrowest sketch bucket W (columns of a compiled sketch): the host's first block
#: is SKETCH_OVERSAMPLING plus the growth of the previous cut, mostly 8-12 columns.
SKETCH_BUCKET = 16
#: Whether the compiled step runs sketching buckets on a CPU in ``compiled='auto'``:
#: no, measured slower than the host there (benchmarks/README.md, "compiled sketch").
SKETCH_ON_CPU = False

HOST, COMPILED = "host", "compiled"


def bond_bucket(rank: int, minimum: int = 1) -> int:
    """Smallest of :data:`BOND_BUCKETS` >= max(rank, minimum) (a power of two beyond)."""
    need = max(int(rank), int(minimum), 1)
    for size in BOND_BUCKETS:
        if size >= need:
            return size
    return 2 ** math.ceil(math.log2(need))


@dataclasses.dataclass(frozen=True)
class Plan:
    """What the window engine does next.

    where : ``'host'`` (the NumPy kernels) or ``'compiled'`` (:mod:`.zipup`).
    bond : the bond bucket D of the compiled step.
    sketch : the sketch bucket W of the compiled step (0: its cuts are all plain).
    chunk : compiled steps per fetch.
    compile : whether the kernel of ``bond`` should be compiled (in the background
        while the host steps go on, or waited for in deterministic mode).
    reason : why, in words (kept in the run's statistics).
    """

    where: str = HOST
    bond: int = 4
    chunk: int = 1
    compile: bool = False
    reason: str = "start"
    sketch: int = 0


@dataclasses.dataclass(frozen=True)
class WindowStats:
    """What a window run has seen (the planner's input).

    largest_rank : the largest bond of the last steps (or wanted by them).
    largest_seen : the largest bond of the run before them.
    sites : sites of the window now.
    steps_left : steps not yet run: of the whole run where the caller announced it
        (``expect_steps``), else of the current call.
    num_rows, dim_m : the carrier's rows c and the classes m of a point.
    host_seconds : measured seconds of a host step (0: not measured).
    compiled_seconds : measured seconds of a compiled step (0: not measured).
    compile_seconds : measured seconds of a compilation in this process (0: none).
    kernel_ready : whether the kernel of the planned bucket is compiled.
    accelerator : whether the compiled steps would run on an accelerator.
    """

    largest_rank: int
    largest_seen: int
    sites: int
    steps_left: int
    num_rows: int
    dim_m: int
    host_seconds: float = 0.0
    compiled_seconds: float = 0.0
    compile_seconds: float = 0.0
    kernel_ready: bool = False
    accelerator: bool = False


@dataclasses.dataclass
class WindowRunStats:
    """What a window run did: steps on each side, the device of the compiled steps
    and how often it changed, kernels it compiled (distinct shapes not yet in the
    process), seconds compiling, redone chunks, fetches, and each change of plan
    as (step, where, bond, reason)."""

    host_steps: int = 0
    compiled_steps: int = 0
    device: str | None = None
    device_moves: int = 0
    kernels_compiled: int = 0
    compile_seconds: float = 0.0
    redos: int = 0
    fetches: int = 0
    decisions: list[tuple[int, str, int, str]] = dataclasses.field(default_factory=list)


def plain_cuts(bond: int, num_rows: int, dim_m: int) -> bool:
    """Whether every zip-up cut (D c, m D) of bucket ``bond`` is a plain SVD on the
    host (a side below :data:`~nonmarkov.kernels.truncation.SKETCH_MIN_SIDE`), so
    that its compiled step needs no sketch."""
    return min(bond * num_rows, bond * dim_m) < SKETCH_MIN_SIDE


def sketch_bucket(width: int, bond: int, num_rows: int, dim_m: int) -> int:
    """The sketch bucket W of bond bucket ``bond`` that holds ``width`` columns: 0
    where every cut is plain, else the smallest power of two >= max(width,
    :data:`SKETCH_BUCKET`), at most the D c rows of a cut matrix (a sketch that pays
    is narrower)."""
    if plain_cuts(bond, num_rows, dim_m):
        return 0
    return min(max(SKETCH_BUCKET, 1 << max(int(width) - 1, 0).bit_length()), bond * num_rows)


def next_bond(plan: Plan, largest_seen: int, largest_rank: int) -> int:
    """The bond bucket of the next plan: the plan's, or the one that holds the largest
    bond seen (buckets never shrink)."""
    return max(plan.bond, bond_bucket(max(largest_seen, largest_rank)))


def next_plan(plan: Plan, stats: WindowStats, options: EngineOptions) -> Plan:
    """The plan for the next steps (see the module docstring)."""
    bond = next_bond(plan, stats.largest_seen, stats.largest_rank)
    rising = stats.largest_rank > stats.largest_seen
    chunk = 1 if rising else min(2 * plan.chunk, options.chunk)
    if stats.compiled_seconds > 0.0 and not options.deterministic:
        chunk = min(chunk, max(1, int(CHUNK_SECONDS / stats.compiled_seconds)))
    if options.compiled == "off":
        return Plan(HOST, bond, chunk, False, "compiled='off'")
    if options.window_sweep == "exact":
        return Plan(HOST, bond, chunk, False, "the exact sweep runs on the host")
    sketch = sketch_bucket(plan.sketch, bond, stats.num_rows, stats.dim_m)
    if options.compiled == "on":
        return Plan(COMPILED, bond, chunk, not stats.kernel_ready, "compiled='on'", sketch)
    if sketch and not (stats.accelerator or SKETCH_ON_CPU):
        return Plan(HOST, bond, chunk, False, f"bond {bond}: a sketch on a CPU", sketch)
    host = stats.host_seconds
    if options.deterministic or host <= 0.0:
        host = HOST_SITE_SECONDS * max(stats.sites, 1)
    if plan.where == COMPILED:  # stay while a measured compiled step is cheaper
        if stats.compiled_seconds <= host or options.deterministic:
            return Plan(COMPILED, bond, chunk, not stats.kernel_ready, "compiled", sketch)
        reason = "a compiled step costs more than a host step"
        return Plan(HOST, bond, chunk, False, reason, sketch)
    compiled = stats.compiled_seconds or COMPILED_STEP_SHARE * host
    compile_cost = 0.0 if stats.kernel_ready else (stats.compile_seconds or COMPILE_SECONDS)
    saving = stats.steps_left * (host - compiled)
    if saving > PAYBACK * compile_cost:
        where = COMPILED if stats.kernel_ready else HOST
        reason = f"{stats.steps_left} steps save {saving:.2g} s > {PAYBACK:g} x compile"
        return Plan(where, bond, chunk, not stats.kernel_ready, reason, sketch)
    reason = (
        f"{stats.steps_left} steps save {max(saving, 0.0):.2g} s <= {PAYBACK:g} x compile "
        f"{compile_cost:.2g} s"
    )
    return Plan(HOST, bond, chunk, False, reason, sketch)


def grown(
    plan: Plan, wanted: int, num_rows: int, dim_m: int, options: EngineOptions, accelerator: bool
) -> Plan:
    """The plan after a compiled step wanted a rank ``wanted`` above the plan's bucket:
    the smallest bucket that holds it (headroom was measured to cost more in padded
    steps than it saved in compilations: B1 for 1000 steps 13.5 s with 50 % headroom,
    against 10.8 s on NumPy), chunks of one step; the host where that bucket sketches
    on a CPU (see :func:`next_plan`)."""
    bond = max(plan.bond, bond_bucket(wanted))
    sketch = sketch_bucket(plan.sketch, bond, num_rows, dim_m)
    if sketch and not (accelerator or SKETCH_ON_CPU or options.compiled == "on"):
        return Plan(HOST, bond, 1, False, f"bond {wanted}: a sketch on a CPU", sketch)
    return Plan(COMPILED, bond, 1, True, f"rank {wanted} outgrew bucket {plan.bond}", sketch)


def wider(plan: Plan, width: int, num_rows: int, dim_m: int) -> Plan:
    """The plan after a compiled step wanted a sketch of ``width`` columns, beyond
    the plan's sketch bucket: the bucket that holds it, chunks of one step."""
    sketch = sketch_bucket(width, plan.bond, num_rows, dim_m)
    reason = f"a sketch of {width} columns outgrew bucket {plan.sketch}"
    return Plan(COMPILED, plan.bond, 1, True, reason, sketch)


def scan_pays(steps: int, work: float, ready: bool, options: EngineOptions) -> tuple[bool, str]:
    """Whether a chain of ``steps`` steps of ``work`` each (:func:`~.placement.chain_work`)
    runs as a compiled scan (``ready``: its kernel is compiled in this process) rather
    than with the NumPy kernels on the host, and why: the modelled host time saved
    must repay the compilation :data:`PAYBACK` times over, as for the window."""
    if options.compiled != "auto":
        return options.compiled == "on", f"compiled={options.compiled!r}"
    host = steps * (CHAIN_STEP_SECONDS + work * SECONDS_PER_WORK)
    saving = host * (1.0 - COMPILED_STEP_SHARE)
    cost = 0.0 if ready else SCAN_COMPILE_SECONDS
    pays = saving > PAYBACK * cost
    relation = ">" if pays else "<="
    return pays, f"{steps} steps save {saving:.2g} s {relation} {PAYBACK:g} x compile {cost:.2g} s"
