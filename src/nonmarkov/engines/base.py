"""The engine contracts: what an algorithm asks of a backend.

One typed contract per kind of engine, each a :class:`typing.Protocol` (an engine
implements its methods; nothing is inherited or registered), with what the engine
can do declared as data (a frozen ``*Capabilities`` dataclass, the engine's
``capabilities`` attribute):

- :class:`TraceWindowEngine` and :class:`FinalizeWindowEngine`: the memory window
  of TEMPO (the oldest point traced out, every step read out) and of PT-TEMPO
  (the oldest point split off and returned), made from a :class:`WindowSpec`
  (:mod:`nonmarkov.kernels.window`); :class:`WindowEngine` is an implementation
  of both modes, the one chosen by ``spec.oldest``;
- :class:`ChainEngine`: a system state through process-tensor steps
  (:mod:`nonmarkov.kernels.chain`), a whole :class:`ChainRun` or step by step;
- :class:`TebdEngine`: a chain MPS with augmented legs (:mod:`nonmarkov.kernels.tebd`),
  made from a :class:`TebdSpec`.

:mod:`nonmarkov.engines` (``__init__``) is the one place that chooses an
implementation and checks a request against its capabilities; shared
implementation lives in :mod:`.shared`. All arrays that cross the interface are
host (NumPy) arrays unless a method says otherwise; each engine keeps its own
arrays where it computes.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Callable, Sequence
from typing import Any, Protocol

import numpy as default_np

from ..options import check_trace_weight

#: How the oldest point of a full window is handled.
OLDEST_MODES = ("trace", "finalize")

#: Where an engine can compute: the host CPU, or a JAX device of these platforms.
DEVICES = ("cpu", "gpu", "tpu")


@dataclasses.dataclass(frozen=True)
class WindowCapabilities:
    """What a window engine can do (checked by :func:`nonmarkov.engines.window_engine`).

    Parameters
    ----------
    modes : the ``spec.oldest`` modes it runs (:data:`OLDEST_MODES`).
    resume : whether it gives its window back and continues from one
        (``host_window``, ``load_window``: a resumed PT-TEMPO build).
    devices : the platforms it computes on (:data:`DEVICES`).
    tail : whether it runs exponential tail modes (``spec.tail``).
    trace_weight : whether it holds the sites in a weighted class basis
        (``spec.trace_weight`` other than 1).
    """

    modes: tuple[str, ...] = OLDEST_MODES
    resume: bool = True
    devices: tuple[str, ...] = ("cpu",)
    tail: bool = False
    trace_weight: bool = False


@dataclasses.dataclass(frozen=True)
class ChainCapabilities:
    """What a chain engine can do (checked by :func:`nonmarkov.engines.chain_engine`).

    Parameters
    ----------
    batch : runs with a member axis (:class:`ChainRun` with ``initial`` (B, d^2))
        and :meth:`ChainEngine.step_members`: B states through the same
        process-tensor steps in one batched contraction per step.
    adjoint : :meth:`ChainEngine.adjoint`, the adjoint method of the gradients.
    differentiable : :meth:`ChainEngine.differentiable`, automatic differentiation.
    differentiable_files : ``differentiable`` on process tensors read from files
        (streamed) as well as in memory.
    devices : the platforms it computes on (:data:`DEVICES`).
    """

    batch: bool = True
    adjoint: bool = True
    differentiable: bool = False
    differentiable_files: bool = False
    devices: tuple[str, ...] = ("cpu",)


@dataclasses.dataclass(frozen=True)
class TebdCapabilities:
    """What a TEBD engine can do (checked by :func:`nonmarkov.engines.tebd_engine`).

    Parameters
    ----------
    max_rank : whether it honours :attr:`TebdSpec.max_rank`, a hard cap on bonds.
    devices : the platforms it computes on (:data:`DEVICES`).
    """

    max_rank: bool = True
    devices: tuple[str, ...] = ("cpu",)


@dataclasses.dataclass(frozen=True)
class WindowSpec:
    """What a memory window is made of, after its first point (host arrays).

    A point's index x (x = d^2 for TEMPO, x = m classes for PT-TEMPO) has a
    class c(x) among m; the influence couples classes through lag matrices
    whose rows (the carrier values, r of them) may be shared by several x.

    Parameters
    ----------
    front : (x,) the first point's vector, normalised.
    log_scale : log of the factor ``front`` was divided by.
    projector : (x, m) class projector P[x, c].
    first : (x, m) coupling of a new point x to the point before it (lag 1)
        times its own factor.
    carrier : (x,) int, the row (< r) of the lag matrices used by each x.
    lag_rows : ``lag_rows(lag)`` -> (r, m), the distinct rows of the lag matrix
        of ``lag`` >= 1.
    out_map : (x, x) applied to every read-out vector ('trace').
    epsrel : truncation threshold (:mod:`nonmarkov.kernels.truncation`).
    memory : points kept in the window (dkmax), or None for no memory cut.
    oldest : ``'trace'`` (TEMPO: the oldest point is traced out and every step
        is read out) or ``'finalize'`` (PT-TEMPO: it is split off and returned;
        a new point couples to the front through every class, with no system).
    max_rank : optional hard cap on every bond.
    leaving_rows : optional ``leaving_rows(n)`` -> (r, m), the coupling of a new
        point to the n-th point that leaves the window (n = 1, 2, ...; it sits
        at lag ``memory``), in place of ``lag_rows(memory)``: the lumped
        coupling of a memory cut with an extra correlation time. Engines keep
        the device copy of a returned array while the same object comes back.
    tail : optional (couple (r, D, D), merge (m, D, D)) of exponential tail modes
        (:mod:`nonmarkov.kernels.tail`): a point that leaves the window goes into a
        last site of D mode states (``'trace'``: instead of being traced;
        ``'finalize'``: and is split off from it, its index kept).
    trace_weight : the weight w > 0 of the class sum, the direction along which a
        traced point is read, against the other directions of a site's class
        index in the norm every cut is made in (:func:`~nonmarkov.kernels.window.
        trace_basis`; docs/trace_weight.md); 1 for the flat norm. ``'trace'`` only.
    """

    front: Any
    log_scale: float
    projector: Any
    first: Any
    carrier: Any
    lag_rows: Callable[[int], Any]
    out_map: Any
    epsrel: float
    memory: int | None
    oldest: str
    max_rank: int | None = None
    leaving_rows: Callable[[int], Any] | None = None
    tail: tuple[Any, Any] | None = None
    trace_weight: float = 1.0

    def __post_init__(self) -> None:
        if self.oldest not in OLDEST_MODES:
            raise ValueError(f"oldest must be one of {list(OLDEST_MODES)}; got {self.oldest!r}")
        if self.leaving_rows is not None and (self.memory is None or self.memory < 2):
            raise ValueError(
                f"a lumped coupling to the leaving point needs a memory of >= 2 points; "
                f"got memory={self.memory}"
            )
        if self.tail is not None and self.memory is None:
            raise ValueError("tail modes need a window with a memory cut")
        weight = check_trace_weight(self.trace_weight)
        if weight != 1.0 and self.oldest != "trace":
            raise ValueError(
                "a trace_weight other than 1 weights the direction a traced point is read "
                f"along: it needs oldest='trace'; got oldest={self.oldest!r}"
            )

    def leaving(self, step: int) -> Any:
        """Rows (r, m) of the coupling at lag ``memory`` in window step ``step``
        (1, 2, ... after the first point): ``leaving_rows(n)`` when the n-th point
        leaves the window at that step, else None (``lag_rows(memory)`` applies)."""
        if self.leaving_rows is None or self.memory is None or step < self.memory:
            return None
        return self.leaving_rows(step - self.memory + 1)

    @property
    def num_rows(self) -> int:
        """r, the number of distinct rows of the lag matrices."""
        return int(default_np.max(self.carrier)) + 1


class WindowEngineBase(Protocol):
    """What both window contracts have: the window itself and how it is handed over."""

    #: what the engine can do
    capabilities: WindowCapabilities
    #: how many steps a caller should hand over per call (progress granularity)
    steps_per_call: int

    @property
    def memory(self) -> int:
        """Points kept in the window, 0 for no memory cut."""

    def expect_steps(self, num_steps: int) -> None:
        """The caller will run ``num_steps`` more steps (in several calls): a hint for
        planning how to run them, never a change of what they compute."""

    def host_window(self) -> tuple[list[default_np.ndarray], float]:
        """The window, newest first: front (1, x, k), sites (k, m, k'); and the
        front's log-scale (``capabilities.resume``)."""

    def load_window(self, window: Sequence[Any], log_scale: float, steps: int = 0) -> None:
        """Continue from a window of :meth:`host_window` (host arrays, newest first)
        with the front's log-scale ``log_scale``, after ``steps`` window steps
        (a resumed build; ``capabilities.resume``)."""


class TraceWindowEngine(WindowEngineBase, Protocol):
    """A ``'trace'`` window (TEMPO): the oldest point of a full window is traced out
    and every step is read out."""

    def advance(
        self, propagators: Sequence[tuple[Any, Any]]
    ) -> tuple[default_np.ndarray, list[int]]:
        """One step per (between (x, x), second (x, x)) pair.

        ``between`` takes the front's point to the new one (the second half
        step of the last step times the first half step of this one);
        ``second`` is this step's second half step. Returns the read-out
        vectors (steps, x), ``out_map @ second @ state``, and the largest bond
        of the window after each step.
        """


class FinalizeWindowEngine(WindowEngineBase, Protocol):
    """A ``'finalize'`` window (PT-TEMPO): the oldest point of a full window is split
    off and returned; a new point couples to the front through every class."""

    def advance_finalize(self, num_steps: int) -> tuple[list[tuple[Any, float]], list[int]]:
        """``num_steps`` steps.

        Returns per step (the split-off oldest site M[l, c, r] (k, m, k') or
        None while the window fills, the log-scale before the step) and the
        largest bond after each step.
        """


class WindowEngine(TraceWindowEngine, FinalizeWindowEngine, Protocol):
    """An implementation of both window contracts; an instance runs the mode of its
    spec (``spec.oldest``), as :func:`nonmarkov.engines.trace_window_engine` and
    :func:`~nonmarkov.engines.finalize_window_engine` hand it out."""


class PreparedProcessTensor(Protocol):
    """A process tensor made ready for a chain engine's steps."""

    transform_in: Any
    transform_out: Any
    classes: Any

    def tensor(self, step: int) -> Any:
        """The step tensor T[b, b', c] of ``step`` on the engine's backend."""

    def cap(self, step: int) -> Any:
        """The vector that closes the bond after ``step`` (traced future)."""


@dataclasses.dataclass(frozen=True)
class ChainRun:
    """A whole propagation of a state through process-tensor steps (host arrays).

    Step k takes the state from t_k to t_{k+1}: ``controls(k)[0]`` (the control
    before the propagation), ``propagators(k)[0]`` (first half step), each
    process tensor's step k in its own basis, ``propagators(k)[1]``, then
    ``controls(k)[1]`` (the control after the propagation); the read-out after
    step k is the state at t_{k+1}. (How a :class:`~nonmarkov.Control`'s pre-
    and post-controls map onto these: :func:`nonmarkov.methods.dynamics.chain_controls`.)

    A run may have a member axis (``capabilities.batch``): B states through the
    same process-tensor steps, each member with its own propagators and controls
    where they are given per member; a single run is a run without it.

    Parameters
    ----------
    initial : (d^2,) the vectorised initial state; (B, d^2) with a member axis.
    num_steps : number of steps N.
    propagators : ``propagators(k)`` -> (first, second), (d^2, d^2) each; with a
        member axis also (B, d^2, d^2), one per member. Return the same
        array objects while they do not change (their derived arrays are reused).
    constant_propagators : whether they are the same at every step.
    controls : ``controls(k)`` -> (before, after), the superoperators applied
        before and after the propagation of step k, each (d^2, d^2) or None
        (with a member axis: or (B, d^2, d^2)); or None (no controls at all).
    process_tensors : the process tensors, shared by all members (each of at
        least N steps).
    record_all : read out after every step (else after the last only).
    on_step : called with the number of steps done since the last call (progress).
    """

    initial: Any
    num_steps: int
    propagators: Callable[[int], tuple[Any, Any]]
    constant_propagators: bool
    controls: Callable[[int], tuple[Any, Any]] | None
    process_tensors: Sequence[Any]
    record_all: bool
    on_step: Callable[[int], None] = lambda count: None


@dataclasses.dataclass(frozen=True)
class BranchStep:
    """What a branch sweep (:meth:`ChainEngine.sweep`) does at one grid time t_k,
    before the propagation of step k (host arrays).

    The state holds P branches per member, (B, bonds..., P, d^2). First the
    read-outs, then the new list of branches: ``keep`` first, then each group of
    ``children`` in order.

    Parameters
    ----------
    readouts : per group, (sources (n,) int, vector (d^2,)): the values
        vector . (branch sources[i] with its bonds closed by the caps at t_k),
        (B, n) per group.
    keep : (n_0,) int, the branches that go on unchanged.
    children : per group, (superoperator (d^2, d^2), sources (n,) int): new
        branches, the superoperator applied to each source branch.
    """

    readouts: Sequence[tuple[Any, Any]]
    keep: Any
    children: Sequence[tuple[Any, Any]]


class ChainEngine(Protocol):
    """Propagation of a system state through process-tensor steps."""

    #: what the engine can do
    capabilities: ChainCapabilities

    def run(self, run: ChainRun) -> default_np.ndarray:
        """The read-out vectors (d^2,) after every step, (N, d^2), or after the last
        step only, (1, d^2); with a member axis (B, d^2) per read-out, (N, B, d^2) or
        (1, B, d^2). Host arrays."""

    def stepping(self) -> contextlib.AbstractContextManager[Any]:
        """A context for an algorithm that steps the state itself (:meth:`prepare`,
        :meth:`step`): inside it, the algorithm's own array operations on the states
        run where the steps do (the backend proxies follow)."""

    def prepare(
        self, process_tensors: Sequence[Any], num_steps: int, record_all: bool
    ) -> list[PreparedProcessTensor]:
        """The process tensors ready for :meth:`step`; caps for every step if
        ``record_all``, else for the last."""

    def step(
        self,
        state: Any,
        step: int,
        first: Any,
        second: Any,
        prepared: Sequence[PreparedProcessTensor],
        before: Any = None,
        after: Any = None,
    ) -> Any:
        """Take ``state`` (bonds..., [batch,] d^2), on the engine's backend, from
        t_step to t_step+1: ``before`` (if not None), ``first``, the process
        tensors' step, ``second``, ``after`` (if not None); all four (d^2, d^2)
        host arrays."""

    def step_members(
        self,
        state: Any,
        step: int,
        first: Any,
        second: Any,
        prepared: Sequence[PreparedProcessTensor],
        before: Any = None,
        after: Any = None,
    ) -> Any:
        """:meth:`step` of a state with a member axis first, (B, bonds..., [branches,]
        d^2), on the engine's backend: ``first``, ``second``, ``before`` and ``after``
        each a host array (d^2, d^2) shared by the members or (B, d^2, d^2) one per
        member, the controls possibly None (``capabilities.batch``; algorithms that
        step the states of a batch themselves)."""

    def sweep(self, run: ChainRun, steps: Sequence[BranchStep]) -> list[list[default_np.ndarray]]:
        """A branch sweep (``capabilities.batch``; correlations): ``run`` has a member
        axis, each member's initial state one branch; at each grid time t_k, k = 0 ..
        len(steps) - 1, ``steps[k]`` reads out and branches the states, then step k
        of ``run`` propagates every branch (after the last, none; ``run.num_steps`` is
        len(steps) - 1). Returns per grid time, per read-out group, the values (B, n)
        as host arrays; ``run.on_step(1)`` per step."""

    def step_transposed(
        self,
        adjoint: Any,
        step: int,
        first: Any,
        second: Any,
        prepared: Sequence[PreparedProcessTensor],
        before: Any = None,
        after: Any = None,
    ) -> Any:
        """The transpose of :meth:`step`: take an adjoint vector (bonds after ``step``...,
        [batch,] d^2) back to one with the bonds before it, (bonds..., [batch,] d^2):
        ``after``^T, ``second``^T, each process tensor's step transposed (the last
        process tensor first), ``first``^T, ``before``^T. For any states x and y,
        y . step(x) = step_transposed(y) . x, summed over bonds and d^2."""

    def adjoint(
        self, run: ChainRun, target: Callable[[default_np.ndarray], default_np.ndarray]
    ) -> tuple[default_np.ndarray, default_np.ndarray]:
        """The adjoint method (:mod:`nonmarkov.methods.gradient`) on ``run``: its
        forward pass, then ``target(final read-out (d^2,))`` -> (d^2,), then the
        backward pass. Returns the read-outs as :meth:`run` and the derivative
        tensors D (N, d^2, d^2, d^2, d^2) of each step; ``run.on_step`` counts the
        steps of both passes (2N). (``capabilities.adjoint``)"""

    def differentiable(
        self,
        process_tensors: Sequence[Any],
        num_steps: int,
        record_all: bool,
        generator: Callable[[Any], Any],
        dt: float,
    ) -> Callable[..., Any]:
        """A differentiable ``dynamics(parameters, initial, after=None)`` of a run of
        ``num_steps`` steps: the read-outs (N, d^2) (or (1, d^2), the last only) of
        the half-step propagators expm(L(p) dt/2) of ``generator(p)`` -> L (d^2, d^2)
        for each row p of parameters (2N, M), from the vectorised initial state
        (d^2,), with the superoperators after (N, d^2, d^2) applied after each
        step (``capabilities.differentiable``)."""


@dataclasses.dataclass(frozen=True)
class TebdSpec:
    """The initial state of a chain for a TEBD engine (host arrays).

    Parameters
    ----------
    sites : one tensor per site, S[l, p, a, r] (left bond, physical Liouville
        index d_k^2, augmented leg: the open bond of the site's process tensor,
        right bond); the outer bonds are 1. The chain state is their product.
    epsrel : truncation threshold of every cut (:mod:`nonmarkov.kernels.truncation`).
    max_rank : optional hard cap on every bond.
    """

    sites: Sequence[Any]
    epsrel: float
    max_rank: int | None = None


class TebdEngine(Protocol):
    """A chain MPS with augmented legs, changed by gates, site maps and process-tensor
    steps (:mod:`nonmarkov.kernels.tebd`). Gates, maps and the prepared process
    tensors' arrays are host arrays or arrays of the engine's backend; read-outs
    come back on the host."""

    #: what the engine can do
    capabilities: TebdCapabilities

    def apply_gates(self, gates: Sequence[tuple[int, Any]]) -> None:
        """One layer of two-site gates on disjoint pairs: ``(site, gate)`` acts on the
        sites (site, site + 1), gate (p p', p p') on the pair's Liouville index
        (left site first); every new bond truncated with ``epsrel``."""

    def apply_site_maps(self, maps: Sequence[tuple[int, Any]]) -> None:
        """``(site, superoperator (p, p))`` applied to each named site's physical leg."""

    def apply_process_steps(self, steps: Sequence[tuple[int, PreparedProcessTensor, int]]) -> None:
        """``(site, prepared process tensor, step)``: that step of the process tensor
        (basis change in, step tensor on the augmented leg, basis change out)."""

    def read_out(
        self, caps: Sequence[Any], groups: Sequence[tuple[int, ...]]
    ) -> tuple[complex, list[default_np.ndarray]]:
        """Close each site's augmented leg with ``caps[k]`` (a_k,) and trace the chain:
        the total (the trace of the state) and, per group of ascending sites, the
        reduced state with one physical leg per site, (p_i, p_j, ...), host arrays."""

    def bond_dimensions(self) -> list[int]:
        """The n - 1 bonds between the sites."""

    def host_sites(self) -> list[default_np.ndarray]:
        """The site tensors (l, p, a, r) on the host, the chain's scale included."""
