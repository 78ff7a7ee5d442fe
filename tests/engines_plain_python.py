"""The smallest chain engine: the chain contract of ``nonmarkov.engines.base`` on
plain NumPy arrays and Python loops, written to be read (docs/ARCHITECTURE.md,
"Adding an engine").

The state of a chain is an array ``v[b_1, ..., b_n, alpha]``: one open bond per
process tensor and the Liouville index alpha (d^2); an algorithm that steps a
batch of states puts the batch axis before alpha. A process tensor's step
tensor is ``T[b, b', c]``, with a class ``c = classes[alpha]`` for each alpha.
Step k of a run is: the control before it, the first half-step propagator,
each process tensor's step k in its own basis (``transform_in``, the step
tensor, ``transform_out``), the second half-step propagator, the control after
it. A read-out closes every bond with the process tensor's cap, the vector of
a traced future.

This engine computes with NumPy whatever the active backend (every array it
returns is a host array, as the contract allows); it has no adjoint and no
automatic differentiation, and says so.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from typing import Any

import numpy

from nonmarkov.engines.base import ChainCapabilities, ChainRun
from nonmarkov.options import EngineOptions
from nonmarkov.process_tensors.base import BaseProcessTensor


def apply_superoperator(state: numpy.ndarray, matrix: numpy.ndarray) -> numpy.ndarray:
    """``matrix`` (d^2, d^2) applied to the Liouville index (the last axis) of ``state``."""
    return state @ numpy.asarray(matrix).T


def apply_step_tensor(
    state: numpy.ndarray, tensor: numpy.ndarray, classes: numpy.ndarray, axis: int
) -> numpy.ndarray:
    """Contract bond ``axis`` of ``state`` with a step tensor T[b, b', c]: the entries
    of Liouville index alpha go through the matrix ``T[:, :, classes[alpha]]``."""
    moved = numpy.moveaxis(state, axis, -2)  # (..., b, alpha)
    result = numpy.zeros(moved.shape[:-2] + (tensor.shape[1], moved.shape[-1]), dtype=complex)
    for alpha, c in enumerate(classes):
        result[..., :, alpha] = moved[..., :, alpha] @ tensor[:, :, c]
    return numpy.moveaxis(result, -2, axis)


def close_bonds(state: numpy.ndarray, caps: Sequence[numpy.ndarray]) -> numpy.ndarray:
    """Contract the bond axes of ``state`` (the leading ones) with their caps."""
    for cap in caps:
        state = numpy.tensordot(cap, state, axes=([0], [0]))
    return state


class PlainProcessTensor:
    """A process tensor prepared for :meth:`PlainChainEngine.step` (the
    ``PreparedProcessTensor`` protocol): its basis changes, classes, step tensors
    and caps, read through the process-tensor protocol."""

    def __init__(self, pt: BaseProcessTensor, num_steps: int):
        self._pt = pt
        self.transform_in = numpy.asarray(pt.transform_in)
        self.transform_out = numpy.asarray(pt.transform_out)
        self.classes = numpy.asarray(pt.get_step_tensor(0)[1]) if num_steps else None

    def tensor(self, step: int) -> numpy.ndarray:
        """T[b, b', c] of ``step``."""
        return numpy.asarray(self._pt.get_step_tensor(step)[0])

    def cap(self, step: int) -> numpy.ndarray:
        """The vector (b',) that closes the bond after ``step`` with a traced future
        (the process tensor's cap of the next step, in OQuPy's layout)."""
        return numpy.asarray(self._pt.get_cap_tensor(step + 1))


class PlainChainEngine:
    """The chain contract (``nonmarkov.engines.base.ChainEngine``) on NumPy loops."""

    #: no member axis, no adjoint method, no automatic differentiation:
    #: ``engines.chain_engine`` refuses a request for any of them with this engine in place
    capabilities = ChainCapabilities(batch=False, adjoint=False, differentiable=False)

    def __init__(self, options: EngineOptions | None = None):
        self.options = options  # nothing here to tune

    def stepping(self) -> contextlib.AbstractContextManager[Any]:
        """The states of :meth:`step` are NumPy arrays on any backend; an algorithm's
        own operations on them need no other place to run."""
        return contextlib.nullcontext()

    def prepare(
        self, process_tensors: Sequence[BaseProcessTensor], num_steps: int, record_all: bool
    ) -> list[PlainProcessTensor]:
        """The process tensors ready for :meth:`step` (caps are read when asked for,
        so ``record_all`` changes nothing here)."""
        return [PlainProcessTensor(pt, num_steps) for pt in process_tensors]

    def step(
        self,
        state: Any,
        step: int,
        first: Any,
        second: Any,
        prepared: Sequence[PlainProcessTensor],
        before: Any = None,
        after: Any = None,
    ) -> numpy.ndarray:
        """``state`` (bonds..., [batch,] d^2) from t_step to t_step+1."""
        state = numpy.asarray(state, dtype=complex)
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
        prepared: Sequence[PlainProcessTensor],
        before: Any = None,
        after: Any = None,
    ) -> numpy.ndarray:
        """Not declared in :attr:`capabilities`, so never asked for."""
        raise NotImplementedError("PlainChainEngine has no member axis")

    def step_transposed(
        self,
        adjoint: Any,
        step: int,
        first: Any,
        second: Any,
        prepared: Sequence[PlainProcessTensor],
        before: Any = None,
        after: Any = None,
    ) -> numpy.ndarray:
        """The transpose of :meth:`step`: every operation transposed, in reverse order."""
        adjoint = numpy.asarray(adjoint, dtype=complex)
        if after is not None:
            adjoint = apply_superoperator(adjoint, numpy.asarray(after).T)
        adjoint = apply_superoperator(adjoint, numpy.asarray(second).T)
        for axis in reversed(range(len(prepared))):
            pt = prepared[axis]
            adjoint = apply_superoperator(adjoint, pt.transform_out.T)
            adjoint = apply_step_tensor(adjoint, pt.tensor(step).swapaxes(0, 1), pt.classes, axis)
            adjoint = apply_superoperator(adjoint, pt.transform_in.T)
        adjoint = apply_superoperator(adjoint, numpy.asarray(first).T)
        if before is not None:
            adjoint = apply_superoperator(adjoint, numpy.asarray(before).T)
        return adjoint

    def run(self, run: ChainRun) -> numpy.ndarray:
        """The read-outs (N, d^2) after every step, or (1, d^2) after the last."""
        prepared = self.prepare(run.process_tensors, run.num_steps, run.record_all)
        initial = numpy.asarray(run.initial, dtype=complex)
        state = initial.reshape((1,) * len(prepared) + (initial.size,))
        readouts = []
        for step in range(run.num_steps):
            before, after = (None, None) if run.controls is None else run.controls(step)
            first, second = run.propagators(step)
            state = self.step(state, step, first, second, prepared, before, after)
            if run.record_all or step == run.num_steps - 1:
                readouts.append(close_bonds(state, [pt.cap(step) for pt in prepared]))
            run.on_step(1)
        return numpy.asarray(readouts).reshape(-1, initial.size)

    def adjoint(
        self, run: ChainRun, target: Callable[[numpy.ndarray], numpy.ndarray]
    ) -> tuple[numpy.ndarray, numpy.ndarray]:
        """Not declared in :attr:`capabilities`, so never asked for."""
        raise NotImplementedError("PlainChainEngine has no adjoint method")

    def differentiable(
        self,
        process_tensors: Sequence[Any],
        num_steps: int,
        record_all: bool,
        generator: Callable[[Any], Any],
        dt: float,
    ) -> Callable[..., Any]:
        """Not declared in :attr:`capabilities`, so never asked for."""
        raise NotImplementedError("PlainChainEngine has no automatic differentiation")
