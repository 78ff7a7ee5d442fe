"""The eager engines: window, chain and TEBD engines run step by step on the backend proxy.

These run the NumPy kernels of :mod:`nonmarkov.kernels` step by step. They are
the engines of the NumPy backend, the first steps of the JAX window engine
(its host start, under :func:`~nonmarkov.backends.numerical_backend.numpy_in_this_thread`)
and the chain engine of the JAX backend for what its compiled scan does not
cover (controls, time-dependent systems, process tensors read from files).
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as default_np

from ..backends.host import to_backend
from ..backends.numerical_backend import np
from ..kernels.chain import (
    apply_step_tensor,
    apply_superoperator,
    apply_superoperators,
    cap_before,
    close_bonds,
    close_bonds_batched,
)
from ..kernels.tebd import (
    apply_process_step,
    apply_site_map,
    capped_sites,
    orthonormalise_left,
    orthonormalise_right,
    two_site_update,
)
from ..kernels.window import NORM_SITE, advance_window, normalise, trace_vectors
from ..options import EngineOptions, resolve
from ..process_tensors.base import BaseProcessTensor, SimpleProcessTensor, trace_weights
from ..process_tensors.uniform import UniformProcessTensor
from .base import (
    BranchStep,
    ChainCapabilities,
    ChainRun,
    PreparedProcessTensor,
    TebdCapabilities,
    TebdSpec,
    WindowCapabilities,
    WindowSpec,
)
from .shared import GaugedChain, LastArguments

#: Step tensors of a streamed process tensor kept on the host between the backward
#: (caps) and the forward pass, so that a small one is read only once.
STREAM_CACHE_BYTES = 64 * 2**20


def host_sweep(options: EngineOptions | None) -> str:
    """The window sweep of the eager engine (:mod:`nonmarkov.kernels.window`) for ``options``."""
    choice = resolve(options).window_sweep
    return "zip_up" if choice == "auto" else choice


class EagerWindowEngine:
    """A memory window advanced with the kernels of :mod:`nonmarkov.kernels.window`
    on the active backend (see :class:`~nonmarkov.engines.base.WindowEngine`)."""

    capabilities = WindowCapabilities()
    steps_per_call = 1

    def __init__(self, spec: WindowSpec, options: EngineOptions | None = None):
        self._spec = spec
        self._projector = to_backend(spec.projector)
        self._first = to_backend(spec.first)
        self._carrier = np.asarray(default_np.asarray(spec.carrier, dtype=int))
        self._num_rows = spec.num_rows
        self._out_map = spec.out_map
        self._lags: list[Any] = []  # lag rows of window positions 1, 2, ... on the backend
        self._window = [to_backend(spec.front).reshape(1, -1, 1)]
        self._log_scale = float(spec.log_scale)
        self._memory = 0 if spec.memory is None else int(spec.memory)
        self._between = LastArguments(to_backend)
        self._leaving = LastArguments(to_backend)
        #: window steps run so far (after the first point)
        self.steps = 0
        m = self._projector.shape[1]
        self._pt_between = default_np.ones((m, m))
        self._sweep = host_sweep(options)

    @property
    def memory(self) -> int:
        """Points kept in the window, 0 for no memory cut."""
        return self._memory

    @property
    def log_scale(self) -> float:
        """Log of the factor the front was divided by."""
        return self._log_scale

    def _site_lags(self, count: int) -> list[Any]:
        while len(self._lags) < count:
            self._lags.append(to_backend(self._spec.lag_rows(len(self._lags) + 2)))
        return self._lags[:count]

    def _step(self, between: Any) -> Any:
        """One step of the window; returns the finalised site or None."""
        window = self._window
        n = len(window)
        full = self._memory and n >= self._memory
        oldest = ("trace" if self._spec.oldest == "trace" else "finalize") if full else "keep"
        theta = np.einsum("ba,ac,ar->bcr", self._between(between), self._projector, window[0][0])
        self.steps += 1
        site_lags = self._site_lags(n - 1)
        leaving = self._spec.leaving(self.steps)
        if leaving is not None:
            site_lags = site_lags[:-1] + [self._leaving(leaving)]
        window, done = advance_window(
            window,
            theta,
            self._first,
            self._carrier,
            self._num_rows,
            site_lags,
            self._spec.epsrel,
            oldest,
            self._spec.max_rank,
            self._sweep,
        )
        holder = NORM_SITE[self._sweep]
        window[holder], log_norm = normalise(window[holder])
        self._window = window
        self._log_scale += log_norm
        return done

    def _largest_bond(self) -> int:
        return max(site.shape[2] for site in self._window)

    def advance(
        self, propagators: Sequence[tuple[Any, Any]]
    ) -> tuple[default_np.ndarray, list[int]]:
        """See :meth:`~nonmarkov.engines.base.WindowEngine.advance`."""
        readouts, ranks = [], []
        for between, second in propagators:
            self._step(between)
            window = self._window
            vector, log_rest = trace_vectors(window[1:]) if len(window) > 1 else (None, 0.0)
            state = window[0][0] if vector is None else window[0][0] @ vector
            state = np.to_host(state).reshape(-1) * math.exp(self._log_scale + log_rest)
            readouts.append(self._out_map @ (second @ state))
            ranks.append(self._largest_bond())
        dim_x = self._projector.shape[0]
        stacked = default_np.asarray(readouts) if readouts else default_np.zeros((0, dim_x))
        return stacked, ranks

    def advance_finalize(self, num_steps: int) -> tuple[list[tuple[Any, float]], list[int]]:
        """See :meth:`~nonmarkov.engines.base.WindowEngine.advance_finalize`."""
        finalised, ranks = [], []
        for _ in range(num_steps):
            log_before = self._log_scale
            done = self._step(self._pt_between)
            finalised.append(
                (None if done is None else default_np.asarray(np.to_host(done)), log_before)
            )
            ranks.append(self._largest_bond())
        return finalised, ranks

    def expect_steps(self, num_steps: int) -> None:
        """See :meth:`~nonmarkov.engines.base.WindowEngine.expect_steps` (nothing to plan)."""

    def host_window(self) -> tuple[list[default_np.ndarray], float]:
        """See :meth:`~nonmarkov.engines.base.WindowEngine.host_window`."""
        return [default_np.asarray(np.to_host(site)) for site in self._window], self._log_scale

    @property
    def window(self) -> list[Any]:
        """The window on the active backend, newest first."""
        return list(self._window)

    def load_window(self, window: Sequence[Any], log_scale: float, steps: int = 0) -> None:
        """Continue from ``window`` (newest first: front (1, x, k), sites (k, m, k'),
        host arrays, e.g. from :meth:`host_window`) whose front has log-scale
        ``log_scale``, after ``steps`` window steps (which point leaves next)."""
        self.steps = int(steps)
        self._window = [to_backend(site) for site in window]
        self._log_scale = float(log_scale)


def in_memory(pt: BaseProcessTensor) -> bool:
    """Whether the step tensors of ``pt`` are held in memory (not read from a file)."""
    return isinstance(pt, SimpleProcessTensor | UniformProcessTensor)


class HostProcessTensor:
    """A process tensor's transforms, step tensors and caps on the active backend.

    In memory (:func:`in_memory`): each distinct step tensor is moved to the
    backend once (a uniform one's repeating tensor once in all). Read from a
    file: step by step, backward for the caps and forward for the dynamics,
    never held whole: the earliest steps read by the backward pass (up to
    :data:`STREAM_CACHE_BYTES`) are kept for the forward pass, the others are
    read again. A process tensor with its own caps (``get_cap``) needs no
    backward pass.
    """

    def __init__(self, pt: BaseProcessTensor, num_steps: int, record_all: bool):
        self._pt = pt
        self.transform_in = to_backend(pt.transform_in)
        self.transform_out = to_backend(pt.transform_out)
        self._on_backend: dict[int, tuple[Any, Any]] = {}  # id(host array) -> both
        self._cache: dict[int, default_np.ndarray] = {}
        self._caps: dict[int, Any] = {}
        self._in_memory = in_memory(pt)
        self.classes: Any = None
        if num_steps == 0 or pt.num_steps == 0:
            return
        first, classes = pt.get_step_tensor(0)
        self.classes = np.asarray(default_np.asarray(classes))
        if pt.get_cap(0) is not None:
            return
        weights = to_backend(trace_weights(classes, pt.dimension))
        length = pt.num_steps
        if length is None:  # no caps of its own, no length: nothing to contract
            raise ValueError(f"{type(pt).__name__} has neither a length nor caps")
        lowest = 0 if record_all else num_steps - 1
        last = pt.get_step_tensor(length - 1)[0]
        cap = np.ones((last.shape[1],), dtype=np.dtype_complex)
        cached_bytes = 0
        for step in range(length - 1, lowest - 1, -1):
            if step < num_steps and (record_all or step == lowest):
                self._caps[step] = cap
            if step > lowest:
                tensor = last if step == length - 1 else pt.get_step_tensor(step)[0]
                cap = cap_before(self._moved(tensor), weights, cap)
                if step < num_steps and not self._in_memory:
                    self._cache[step] = tensor  # keep the earliest (dict order: descending)
                    cached_bytes += tensor.nbytes
                    while cached_bytes > STREAM_CACHE_BYTES and self._cache:
                        cached_bytes -= self._cache.pop(next(iter(self._cache))).nbytes

    def _moved(self, tensor: default_np.ndarray) -> Any:
        """``tensor`` on the backend; once per array for a process tensor in memory."""
        if not self._in_memory:
            return to_backend(tensor)
        entry = self._on_backend.get(id(tensor))
        if entry is None or entry[0] is not tensor:
            entry = self._on_backend[id(tensor)] = (tensor, to_backend(tensor))
        return entry[1]

    def tensor(self, step: int) -> Any:
        """Step tensor T[b, b', c] of ``step`` on the backend."""
        tensor = self._cache.pop(step, None)
        if tensor is None:
            tensor = self._pt.get_step_tensor(step)[0]
        return self._moved(tensor)

    def cap(self, step: int) -> Any:
        """The vector closing the bond after ``step`` (traced future), on the backend."""
        own = self._pt.get_cap(step)
        if own is not None:
            return self._moved(own)
        return self._caps[step]


def folded(first: Any, second: Any, before: Any, after: Any) -> tuple[Any, Any]:
    """(first @ before, after @ second) of host arrays, each (d^2, d^2) or
    (B, d^2, d^2) (broadcast); a None control is left out."""
    if before is not None:
        first = default_np.matmul(first, before)
    if after is not None:
        second = default_np.matmul(after, second)
    return first, second


class EagerChainEngine:
    """The chain engine on the kernels of :mod:`nonmarkov.kernels.chain`, step by step
    (see :class:`~nonmarkov.engines.base.ChainEngine`).

    A run with a member axis steps the whole batch at once with the member-axis
    kernels (the state ``v[m, b_1, ..., b_n, alpha]``, member first): a control is
    folded into the propagator next to it (``first @ before``, ``after @ second``),
    which costs B d^6 instead of a product with the whole state.
    """

    capabilities = ChainCapabilities(batch=True, adjoint=True, differentiable=False)

    def __init__(self, options: EngineOptions | None = None):
        self._controls = LastArguments(
            lambda before, after: (
                None if before is None else to_backend(before),
                None if after is None else to_backend(after),
            )
        )
        self._propagators = LastArguments(
            lambda first, second: (to_backend(first), to_backend(second))
        )
        self._member_propagators = LastArguments(
            lambda first, second, before, after: tuple(
                to_backend(array) for array in folded(first, second, before, after)
            )
        )

    def stepping(self) -> contextlib.AbstractContextManager[Any]:
        """See :meth:`~nonmarkov.engines.base.ChainEngine.stepping`: the active backend."""
        return contextlib.nullcontext()

    def prepare(
        self, process_tensors: Sequence[BaseProcessTensor], num_steps: int, record_all: bool
    ) -> list[PreparedProcessTensor]:
        """See :meth:`~nonmarkov.engines.base.ChainEngine.prepare`."""
        return [HostProcessTensor(pt, num_steps, record_all) for pt in process_tensors]

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
        """See :meth:`~nonmarkov.engines.base.ChainEngine.step`: ``before``, the
        propagation of ``step`` (``first``, the process tensors, ``second``),
        ``after``."""
        first, second = self._propagators(first, second)
        before, after = self._controls(before, after)
        if before is not None:
            state = apply_superoperator(state, before)
        state = apply_superoperator(state, first)
        for axis, pt in enumerate(prepared):
            state = apply_superoperator(state, pt.transform_in)
            state = apply_step_tensor(state, pt.tensor(step), pt.classes, axis)
            state = apply_superoperator(state, pt.transform_out)
        state = apply_superoperator(state, second)
        if after is not None:
            state = apply_superoperator(state, after)
        return state

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
        """See :meth:`~nonmarkov.engines.base.ChainEngine.step_members`: the controls
        folded into the propagators, one batched contraction per operation."""
        first, second = self._member_propagators(first, second, before, after)
        state = apply_superoperators(state, first)
        for axis, pt in enumerate(prepared):
            state = apply_superoperators(state, pt.transform_in)
            state = apply_step_tensor(state, pt.tensor(step), pt.classes, axis + 1)
            state = apply_superoperators(state, pt.transform_out)
        return apply_superoperators(state, second)

    def sweep(self, run: ChainRun, steps: Sequence[BranchStep]) -> list[list[default_np.ndarray]]:
        """See :meth:`~nonmarkov.engines.base.ChainEngine.sweep`: the branches on the
        branch axis of one state (B, bonds..., P, d^2), each step by :meth:`step_members`."""
        prepared = self.prepare(run.process_tensors, run.num_steps, True)
        initial = default_np.asarray(run.initial)
        members, d2 = initial.shape
        axis = 1 + len(prepared)  # the branches
        state = to_backend(initial.reshape((members,) + (1,) * len(prepared) + (1, d2)))
        results: list[list[default_np.ndarray]] = []
        for k, branching in enumerate(steps):
            ones = np.ones((1,), dtype=np.dtype_complex)  # the bonds at t_0
            caps = [pt.cap(k - 1) if k else ones for pt in prepared]
            values = []
            for sources, vector in branching.readouts:
                selected = np.take(state, np.asarray(sources), axis=axis)
                closed = close_bonds_batched(selected, caps)  # (B, n, d^2)
                product = np.tensordot(closed, to_backend(vector), axes=([2], [0]))
                values.append(default_np.asarray(np.to_host(product)))
            results.append(values)
            if k == len(steps) - 1:
                break
            keep = default_np.asarray(branching.keep, dtype=int)
            parts = []
            if len(keep) == state.shape[axis] and not (keep != default_np.arange(len(keep))).any():
                parts.append(state)
            elif len(keep):
                parts.append(np.take(state, np.asarray(keep), axis=axis))
            for superoperator, sources in branching.children:
                selected = np.take(state, np.asarray(sources), axis=axis)
                parts.append(apply_superoperators(selected, to_backend(superoperator)))
            if not parts:
                break
            state = parts[0] if len(parts) == 1 else np.concatenate(parts, axis=axis)
            before, after = (None, None) if run.controls is None else run.controls(k)
            state = self.step_members(state, k, *run.propagators(k), prepared, before, after)
            run.on_step(1)
        return results

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
        """See :meth:`~nonmarkov.engines.base.ChainEngine.step_transposed`."""
        first, second = self._propagators(first, second)
        before, after = self._controls(before, after)
        if after is not None:
            adjoint = apply_superoperator(adjoint, after.T)
        adjoint = apply_superoperator(adjoint, second.T)
        for axis in range(len(prepared) - 1, -1, -1):
            pt = prepared[axis]
            adjoint = apply_superoperator(adjoint, pt.transform_out.T)
            tensor = np.swapaxes(pt.tensor(step), 0, 1)
            adjoint = apply_step_tensor(adjoint, tensor, pt.classes, axis)
            adjoint = apply_superoperator(adjoint, pt.transform_in.T)
        adjoint = apply_superoperator(adjoint, first.T)
        if before is not None:
            adjoint = apply_superoperator(adjoint, before.T)
        return adjoint

    def differentiable(
        self,
        process_tensors: Sequence[BaseProcessTensor],
        num_steps: int,
        record_all: bool,
        generator: Callable[[Any], Any],
        dt: float,
    ) -> Callable[..., Any]:
        """Not declared (``capabilities.differentiable``): :func:`nonmarkov.engines.chain_engine`
        refuses a request for it."""
        raise NotImplementedError("EagerChainEngine has no automatic differentiation")

    def adjoint(
        self, run: ChainRun, target: Callable[[default_np.ndarray], default_np.ndarray]
    ) -> tuple[default_np.ndarray, default_np.ndarray]:
        """See :meth:`~nonmarkov.engines.base.ChainEngine.adjoint`: step by step, the
        forward states kept on the backend."""
        prepared = self.prepare(run.process_tensors, run.num_steps, run.record_all)
        d2 = default_np.asarray(run.initial).size
        state = to_backend(default_np.asarray(run.initial).reshape((1,) * len(prepared) + (d2,)))
        stored, slots, readouts = [], [], []
        for step in range(run.num_steps):
            before, after = (None, None) if run.controls is None else run.controls(step)
            first, second = run.propagators(step)
            stored.append(state)
            slots.append((first, second, before, after))
            state = self.step(state, step, first, second, prepared, before, after)
            if run.record_all or step == run.num_steps - 1:
                vector = close_bonds(state, [pt.cap(step) for pt in prepared])
                readouts.append(default_np.asarray(np.to_host(vector)).reshape(-1))
            run.on_step(1)
        adjoint = to_backend(default_np.asarray(target(readouts[-1])))
        for pt in reversed(prepared):
            adjoint = np.tensordot(pt.cap(run.num_steps - 1), adjoint, axes=0)
        derivatives = [default_np.zeros(0)] * run.num_steps
        identity = default_np.eye(d2, dtype=complex)
        for step in range(run.num_steps - 1, -1, -1):
            first, second, before, after = slots[step]
            source = (
                stored[step]
                if before is None
                else apply_superoperator(stored[step], to_backend(before))
            )
            lam = adjoint if after is None else apply_superoperator(adjoint, to_backend(after).T)
            units = source[..., :, None, None] * np.eye(d2, dtype=np.dtype_complex)
            units = np.reshape(units, source.shape[:-1] + (d2 * d2, d2))
            moved = self.step(units, step, identity, identity, prepared)  # (bonds'..., ab, c)
            bonds = list(range(len(prepared)))
            derivative = np.tensordot(moved, lam, axes=(bonds, bonds))
            derivatives[step] = default_np.asarray(np.to_host(derivative)).reshape((d2,) * 4)
            adjoint = self.step_transposed(adjoint, step, first, second, prepared, before, after)
            stored[step] = None
            run.on_step(1)
        return default_np.asarray(readouts).reshape(-1, d2), default_np.asarray(derivatives)

    def run(self, run: ChainRun) -> default_np.ndarray:
        """See :meth:`~nonmarkov.engines.base.ChainEngine.run`."""
        if default_np.ndim(run.initial) == 2:
            return self._run_members(run)
        prepared = self.prepare(run.process_tensors, run.num_steps, run.record_all)
        d2 = default_np.asarray(run.initial).size
        state = to_backend(default_np.asarray(run.initial).reshape((1,) * len(prepared) + (d2,)))
        readouts = []
        for step in range(run.num_steps):
            before, after = (None, None) if run.controls is None else run.controls(step)
            first, second = run.propagators(step)
            state = self.step(state, step, first, second, prepared, before, after)
            if run.record_all or step == run.num_steps - 1:
                vector = close_bonds(state, [pt.cap(step) for pt in prepared])
                readouts.append(default_np.asarray(np.to_host(vector)).reshape(-1))
            run.on_step(1)
        return default_np.asarray(readouts).reshape(-1, d2)

    def _run_members(self, run: ChainRun) -> default_np.ndarray:
        """:meth:`run` of a run with a member axis: the read-outs (N or 1, B, d^2)."""
        prepared = self.prepare(run.process_tensors, run.num_steps, run.record_all)
        initial = default_np.asarray(run.initial)
        members, d2 = initial.shape
        state = to_backend(initial.reshape((members,) + (1,) * len(prepared) + (d2,)))
        readouts = []
        for step in range(run.num_steps):
            before, after = (None, None) if run.controls is None else run.controls(step)
            state = self.step_members(state, step, *run.propagators(step), prepared, before, after)
            if run.record_all or step == run.num_steps - 1:
                vectors = close_bonds_batched(state, [pt.cap(step) for pt in prepared])
                readouts.append(default_np.asarray(np.to_host(vectors)))
            run.on_step(1)
        if not readouts:
            return default_np.zeros((0, members, d2), dtype=complex)
        return default_np.asarray(readouts)


class DeviceCopies:
    """Backend copies of host arrays that come back as the same objects (gates,
    controls): each is moved once. Arrays already on the backend pass through."""

    def __init__(self) -> None:
        self._copies: dict[int, tuple[Any, Any]] = {}

    def __call__(self, array: Any) -> Any:
        if not isinstance(array, default_np.ndarray):
            return array
        entry = self._copies.get(id(array))
        if entry is None or entry[0] is not array:
            entry = self._copies[id(array)] = (array, to_backend(array))
        return entry[1]


class EagerTebdEngine(GaugedChain):
    """A chain MPS with augmented legs on the kernels of :mod:`nonmarkov.kernels.tebd`
    (see :class:`~nonmarkov.engines.base.TebdEngine`).

    The engine keeps a gauge centre: the sites left of it are isometries over
    (l, p, a), those right of it over (p, a, r), so that each two-site cut is
    truncated where it is optimal in the 2-norm. A layer of gates sweeps from
    the centre's nearer end; a site map or a process-tensor step breaks the
    gauge, which the next layer restores with one QR sweep. The state's scale
    is kept apart as a log (the singular values of each cut are normalised).
    """

    capabilities = TebdCapabilities(max_rank=True)

    def __init__(self, spec: TebdSpec, options: EngineOptions | None = None):
        self._sites = [to_backend(site) for site in spec.sites]
        self._epsrel = float(spec.epsrel)
        self._max_rank = spec.max_rank
        self._log_scale = 0.0
        self._centre = 0
        self._canonical = False
        self._copies = DeviceCopies()
        self._traces: dict[int, Any] = {}

    # -------------------------------------------------------------- the gauge

    def _move_right(self, k: int) -> None:
        sites = self._sites
        sites[k], sites[k + 1] = orthonormalise_right(sites[k], sites[k + 1])

    def _move_left(self, k: int) -> None:
        sites = self._sites
        sites[k - 1], sites[k] = orthonormalise_left(sites[k - 1], sites[k])

    def _device(self, array: Any) -> Any:
        return self._copies(array)

    def _two_site(self, site: int, gate: Any, centre_right: bool) -> None:
        left, right, log_norm = two_site_update(
            self._sites[site],
            self._sites[site + 1],
            gate,
            self._epsrel,
            centre_right,
            self._max_rank,
        )
        self._sites[site], self._sites[site + 1] = left, right
        self._log_scale += log_norm
        self._centre = site + 1 if centre_right else site

    # -------------------------------------------------------------- operations

    def apply_site_maps(self, maps: Sequence[tuple[int, Any]]) -> None:
        """See :meth:`~nonmarkov.engines.base.TebdEngine.apply_site_maps`."""
        for site, superoperator in maps:
            self._sites[site] = apply_site_map(self._sites[site], self._copies(superoperator))
            self._canonical = False

    def apply_process_steps(self, steps: Sequence[tuple[int, PreparedProcessTensor, int]]) -> None:
        """See :meth:`~nonmarkov.engines.base.TebdEngine.apply_process_steps`."""
        for site, pt, step in steps:
            self._sites[site] = apply_process_step(
                self._sites[site], pt.transform_in, pt.tensor(step), pt.classes, pt.transform_out
            )
            self._canonical = False

    def read_out(
        self, caps: Sequence[Any], groups: Sequence[tuple[int, ...]]
    ) -> tuple[complex, list[default_np.ndarray]]:
        """See :meth:`~nonmarkov.engines.base.TebdEngine.read_out`."""
        return self._read_capped(capped_sites(self._sites, [to_backend(c) for c in caps]), groups)

    def bond_dimensions(self) -> list[int]:
        """See :meth:`~nonmarkov.engines.base.TebdEngine.bond_dimensions`."""
        return [int(site.shape[3]) for site in self._sites[:-1]]

    def host_sites(self) -> list[default_np.ndarray]:
        """See :meth:`~nonmarkov.engines.base.TebdEngine.host_sites`."""
        sites = [default_np.asarray(np.to_host(site)) for site in self._sites]
        sites[0] = sites[0] * math.exp(self._log_scale)
        return sites
