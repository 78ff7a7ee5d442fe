"""The eager chain engine: process tensors contracted with system states step by
step with the kernels of :mod:`nonmarkov.kernels.chain` on the backend proxy (one
state, or members on a leading axis). The chain engine of the NumPy backend, and of
the JAX backend where its compiled scan does not pay.
"""

from __future__ import annotations

import contextlib
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
from ..options import EngineOptions
from ..process_tensors.base import BaseProcessTensor, SimpleProcessTensor, trace_weights
from ..process_tensors.uniform import UniformProcessTensor
from .base import (
    BranchStep,
    ChainCapabilities,
    ChainRun,
    PreparedProcessTensor,
)
from .shared import LastArguments

#: Step tensors of a streamed process tensor kept on the host between the backward
#: (caps) and the forward pass, so that a small one is read only once.
STREAM_CACHE_BYTES = 64 * 2**20


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


def through_process_tensors(
    state: Any,
    step: int,
    prepared: Sequence[PreparedProcessTensor],
    apply: Callable[[Any, Any], Any],
    members: bool = False,
    transposed: bool = False,
) -> Any:
    """``state`` through step ``step`` of each process tensor: its transform in, its
    step tensor on the tensor's bond axis (after the member axis with ``members``),
    its transform out, each map applied by ``apply`` (one state or members).
    ``transposed``: the transpose of that (an adjoint state, the process tensors
    in reverse order)."""
    order = range(len(prepared))
    for axis in reversed(order) if transposed else order:
        pt = prepared[axis]
        tensor = pt.tensor(step)
        maps = (pt.transform_in, pt.transform_out)
        if transposed:
            tensor = np.swapaxes(tensor, 0, 1)
            maps = (pt.transform_out.T, pt.transform_in.T)
        state = apply(state, maps[0])
        state = apply_step_tensor(state, tensor, pt.classes, axis + int(members))
        state = apply(state, maps[1])
    return state


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
        state = through_process_tensors(state, step, prepared, apply_superoperator)
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
        state = through_process_tensors(state, step, prepared, apply_superoperators, members=True)
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
        adjoint = through_process_tensors(
            adjoint, step, prepared, apply_superoperator, transposed=True
        )
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
