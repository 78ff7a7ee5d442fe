"""The batched chain engine: a batch of system states through the same
process-tensor steps, each member with its own propagators and controls.

Every step is one batched contraction over the whole batch (the kernels of
:mod:`nonmarkov.kernels.batched`), not a loop over members. The state is
``v[m, b_1, ..., b_n, alpha]`` (member first); the process tensors' bonds and
step tensors are shared by all members, the half-step propagators and the
controls are shared, (d^2, d^2), or per member, (B, d^2, d^2). A control is
folded into the propagator next to it (``first @ before``, ``after @ second``),
which costs B d^6 instead of a product with the whole state.

:func:`nonmarkov.engines.batched_chain_engine` chooses the implementation
from the active backend: :class:`HostBatchedChainEngine` (the backend proxy's kernels step by
step: NumPy, and JAX where the compiled scan does not apply) or
:class:`~nonmarkov.engines.jax.batched.JaxBatchedChainEngine` (one compiled,
vmapped ``lax.scan``).
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from typing import Any, Protocol

import numpy as default_np

from ..backends.host import to_backend
from ..backends.numerical_backend import np
from ..kernels.batched import apply_superoperators, close_bonds_batched
from ..kernels.chain import apply_step_tensor
from ..options import EngineOptions, resolve
from .base import ChainRun, PreparedProcessTensor
from .host import HostChainEngine
from .shared import LastArguments


class BatchedChainEngine(Protocol):
    """Propagation of a batch of system states through process-tensor steps."""

    def run(self, run: ChainRun) -> default_np.ndarray:
        """The read-outs of a run with a member axis (``run.initial`` (B, d^2)):
        (B, d^2) after every step, (N, B, d^2), or after the last
        step only, (1, B, d^2); host arrays."""

    def stepping(self) -> contextlib.AbstractContextManager[Any]:
        """As :meth:`~nonmarkov.engines.base.ChainEngine.stepping`."""

    def prepare(
        self, process_tensors: Sequence[Any], num_steps: int, record_all: bool
    ) -> list[PreparedProcessTensor]:
        """The process tensors ready for :meth:`step` (as the chain engine's)."""

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
        """Take ``state`` (B, bonds..., [branches,] d^2), on the engine's backend,
        from t_step to t_step+1: ``before``, ``first``, the process tensors' step,
        ``second``, ``after``; each a host array (d^2, d^2) or (B, d^2, d^2), the
        controls possibly None (algorithms that branch the state: correlations)."""


def folded(first: Any, second: Any, before: Any, after: Any) -> tuple[Any, Any]:
    """(first @ before, after @ second) of host arrays, each (d^2, d^2) or
    (B, d^2, d^2) (broadcast); a None control is left out."""
    if before is not None:
        first = default_np.matmul(first, before)
    if after is not None:
        second = default_np.matmul(after, second)
    return first, second


class HostBatchedChainEngine:
    """The batched chain engine on the kernels of :mod:`nonmarkov.kernels.batched`,
    step by step on the active backend (see :class:`BatchedChainEngine`). Process
    tensors are read through the host chain engine's
    :meth:`~nonmarkov.engines.host.HostChainEngine.prepare` (a file streams)."""

    def __init__(self, options: EngineOptions | None = None):
        self._options = resolve(options)
        self._propagators = LastArguments(
            lambda first, second, before, after: tuple(
                to_backend(array) for array in folded(first, second, before, after)
            )
        )

    def stepping(self) -> contextlib.AbstractContextManager[Any]:
        """See :meth:`BatchedChainEngine.stepping`: the active backend."""
        return contextlib.nullcontext()

    def prepare(
        self, process_tensors: Sequence[Any], num_steps: int, record_all: bool
    ) -> list[PreparedProcessTensor]:
        """See :meth:`BatchedChainEngine.prepare`."""
        return HostChainEngine(self._options).prepare(process_tensors, num_steps, record_all)

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
        """See :meth:`BatchedChainEngine.step`."""
        first, second = self._propagators(first, second, before, after)
        state = apply_superoperators(state, first)
        for axis, pt in enumerate(prepared):
            state = apply_superoperators(state, pt.transform_in)
            state = apply_step_tensor(state, pt.tensor(step), pt.classes, axis + 1)
            state = apply_superoperators(state, pt.transform_out)
        return apply_superoperators(state, second)

    def run(self, run: ChainRun) -> default_np.ndarray:
        """See :meth:`BatchedChainEngine.run`."""
        prepared = self.prepare(run.process_tensors, run.num_steps, run.record_all)
        initial = default_np.asarray(run.initial)
        members, d2 = initial.shape
        state = to_backend(initial.reshape((members,) + (1,) * len(prepared) + (d2,)))
        readouts = []
        for step in range(run.num_steps):
            before, after = (None, None) if run.controls is None else run.controls(step)
            state = self.step(state, step, *run.propagators(step), prepared, before, after)
            if run.record_all or step == run.num_steps - 1:
                vectors = close_bonds_batched(state, [pt.cap(step) for pt in prepared])
                readouts.append(default_np.asarray(np.to_host(vectors)))
            run.on_step(1)
        if not readouts:
            return default_np.zeros((0, members, d2), dtype=complex)
        return default_np.asarray(readouts)
