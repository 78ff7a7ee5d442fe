"""The engine interface: what an algorithm asks of a backend.

Two engines, one implementation of each per backend (:mod:`.host` on the
NumPy kernels, :mod:`.jax` compiled); :func:`nonmarkov.engines.window_engine`
and :func:`~nonmarkov.engines.chain_engine` choose one from the active backend
and the :class:`~nonmarkov.options.EngineOptions`. An algorithm is written once
against these protocols and never asks which backend runs.

- A **window engine** holds the memory window of TEMPO or PT-TEMPO (an MPS over
  the most recent time points, :mod:`nonmarkov.kernels.window`) and advances it
  by steps: couple a new point to every site, truncate with ``epsrel``, and
  trace out (``'trace'``, TEMPO) or split off (``'finalize'``, PT-TEMPO) the
  oldest point once the memory is full. It is made from a :class:`WindowSpec`.
- A **chain engine** propagates a system state through process-tensor steps
  (:mod:`nonmarkov.kernels.chain`): a whole run (:meth:`ChainEngine.run`), or
  step by step for algorithms that branch the state (correlations).

All arrays that cross the interface are host (NumPy) arrays unless a method
says otherwise; each engine keeps its own arrays where it computes.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
from collections.abc import Callable, Sequence
from typing import Any, Protocol

import numpy as default_np

from ..backends.numerical_backend import np
from ..kernels.tebd import environments, group_vector

#: How the oldest point of a full window is handled.
OLDEST_MODES = ("trace", "finalize")


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

    def __post_init__(self) -> None:
        if self.oldest not in OLDEST_MODES:
            raise ValueError(f"oldest must be one of {list(OLDEST_MODES)}; got {self.oldest!r}")
        if self.leaving_rows is not None and (self.memory is None or self.memory < 2):
            raise ValueError(
                f"a lumped coupling to the leaving point needs a memory of >= 2 points; "
                f"got memory={self.memory}"
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


class WindowEngine(Protocol):
    """A memory window that advances by steps (see the module docstring)."""

    #: how many steps a caller should hand over per call (progress granularity)
    steps_per_call: int

    @property
    def memory(self) -> int:
        """Points kept in the window, 0 for no memory cut."""

    def advance(
        self, propagators: Sequence[tuple[Any, Any]]
    ) -> tuple[default_np.ndarray, list[int]]:
        """One step per (between (x, x), second (x, x)) pair ('trace' windows).

        ``between`` takes the front's point to the new one (the second half
        step of the last step times the first half step of this one);
        ``second`` is this step's second half step. Returns the read-out
        vectors (steps, x), ``out_map @ second @ state``, and the largest bond
        of the window after each step.
        """

    def advance_finalize(self, num_steps: int) -> tuple[list[tuple[Any, float]], list[int]]:
        """``num_steps`` steps of a 'finalize' window.

        Returns per step (the split-off oldest site M[l, c, r] (k, m, k') or
        None while the window fills, the log-scale before the step) and the
        largest bond after each step.
        """

    def expect_steps(self, num_steps: int) -> None:
        """The caller will run ``num_steps`` more steps (in several calls): a hint for
        planning how to run them, never a change of what they compute."""

    def host_window(self) -> tuple[list[default_np.ndarray], float]:
        """The window, newest first: front (1, x, k), sites (k, m, k'); and the
        front's log-scale ('finalize' windows)."""

    def load_window(self, window: Sequence[Any], log_scale: float, steps: int = 0) -> None:
        """Continue from a window of :meth:`host_window` (host arrays, newest first)
        with the front's log-scale ``log_scale``, after ``steps`` window steps
        (a resumed build)."""


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

    Parameters
    ----------
    initial : (d^2,) the vectorised initial state.
    num_steps : number of steps N.
    propagators : ``propagators(k)`` -> (first, second), (d^2, d^2) each.
    constant_propagators : whether they are the same at every step.
    controls : ``controls(k)`` -> (before, after), the superoperators applied
        before and after the propagation of step k, each (d^2, d^2) or None;
        or None (no controls at all).
    process_tensors : the process tensors (each of at least N steps).
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


class ChainEngine(Protocol):
    """Propagation of a system state through process-tensor steps."""

    def run(self, run: ChainRun) -> default_np.ndarray:
        """The read-out vectors (d^2,) after every step, (N, d^2), or after the last
        step only, (1, d^2)."""

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
        steps of both passes (2N)."""

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
        step. Engines without automatic differentiation raise a ValueError."""


class LastArguments:
    """``function(*arrays)``, computed again only when called with other array objects.

    A time-independent system returns the same propagator arrays at every
    step; what is derived from them (products, basis changes, device copies)
    is then computed once. Compares by identity, so it is cheap and exact.
    """

    def __init__(self, function: Callable[..., Any]):
        self._function = function
        self._arguments: tuple[Any, ...] | None = None
        self._value: Any = None

    def __call__(self, *arguments: Any) -> Any:
        previous = self._arguments
        if (
            previous is None
            or len(previous) != len(arguments)
            or any(a is not b for a, b in zip(arguments, previous))
        ):
            self._arguments = arguments
            self._value = self._function(*arguments)
        return self._value


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


class GaugedChain:
    """The gauge-centre bookkeeping both TEBD engines share (the same algorithm on
    their own kernels): the sites left of ``_centre`` are left isometries, those
    right of it right isometries; a layer of gates sweeps from the centre's nearer
    end, after one QR sweep if a site map or process-tensor step broke the gauge.

    Subclasses hold ``_sites``, ``_log_scale`` and a ``_traces`` cache, and give the
    two QR moves of the centre, the two-site update (which leaves the centre on its
    right or left site) and ``_device`` (a host array on the engine's backend).
    """

    _sites: list[Any]
    _centre: int = 0
    _canonical: bool = False
    _log_scale: float = 0.0
    _traces: dict[int, Any]

    def _move_right(self, k: int) -> None:
        """Move the centre from site ``k`` to ``k`` + 1 (QR of site ``k``)."""
        raise NotImplementedError

    def _move_left(self, k: int) -> None:
        """Move the centre from site ``k`` to ``k`` - 1 (QR of site ``k``)."""
        raise NotImplementedError

    def _two_site(self, site: int, gate: Any, centre_right: bool) -> None:
        raise NotImplementedError

    def _device(self, array: Any) -> Any:
        raise NotImplementedError

    def _move_centre(self, target: int) -> None:
        while self._centre < target:
            self._move_right(self._centre)
            self._centre += 1
        while self._centre > target:
            self._move_left(self._centre)
            self._centre -= 1

    def _canonicalise(self) -> None:
        """One QR sweep over the whole chain, towards the end nearer to the centre."""
        n = len(self._sites)
        if self._centre >= n / 2:
            self._centre = 0
            self._move_centre(n - 1)
        else:
            self._centre = n - 1
            self._move_centre(0)
        self._canonical = True

    def apply_gates(self, gates: Sequence[tuple[int, Any]]) -> None:
        """See :meth:`TebdEngine.apply_gates`."""
        if not gates:
            return
        if not self._canonical:
            self._canonicalise()
        ascending = self._centre <= (len(self._sites) - 1) / 2
        for site, gate in sorted(gates, key=lambda entry: entry[0], reverse=not ascending):
            self._move_centre(site if ascending else site + 1)
            self._two_site(site, self._device(gate), ascending)

    def _trace_vector(self, d2: int) -> Any:
        """vec(1) of a site of Liouville dimension ``d2``, on the engine's backend."""
        if d2 not in self._traces:
            d = math.isqrt(d2)
            self._traces[d2] = self._device(default_np.identity(d).reshape(-1))
        return self._traces[d2]

    def _read_capped(
        self, capped: list[Any], groups: Sequence[tuple[int, ...]]
    ) -> tuple[complex, list[default_np.ndarray]]:
        """:meth:`TebdEngine.read_out` from the sites with their caps applied."""
        transfers = [
            np.tensordot(site, self._trace_vector(site.shape[1]), axes=([1], [0]))
            for site in capped
        ]
        left, right = environments(transfers)
        scale = math.exp(self._log_scale)
        total = complex(np.to_host(left[-1])[0]) * scale
        vectors = []
        for group in groups:
            vector = group_vector(capped, transfers, left[group[0]], right[group[-1] + 1], group)
            vectors.append(default_np.asarray(np.to_host(vector)) * scale)
        return total, vectors
