"""The chain engine of the JAX backend: one compiled scan, or the host engine's
steps with the NumPy kernels, as the planner decides (the window engine is
:mod:`.window`).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from typing import Any

import numpy as default_np

from ...backends.numerical_backend import np, numpy_in_this_thread
from ...options import EngineOptions, resolve
from ...process_tensors.base import BaseProcessTensor
from ..base import DEVICES, ChainCapabilities, ChainRun, PreparedProcessTensor
from ..eager import EagerChainEngine, in_memory
from . import batched, placement, planner
from .chain import (
    SCANNED,
    adjoint_chain,
    differentiable_chain,
    run_chain,
    stack_padded,
    table_bytes,
)
from .planner import SCAN_BYTES


class StepsOnHost:
    """``prepare``, ``step`` and ``step_members`` of the host chain engine with the NumPy
    kernels on the host, for algorithms that step the state themselves (mean field,
    correlation sweeps): each step is small, and eager JAX operations would dispatch
    and compile per shape. Mixed in before the host engine's class."""

    decisions: list[tuple[str, str, str]]

    def stepping(self) -> contextlib.AbstractContextManager[Any]:
        """The caller's array operations between steps run with NumPy too."""
        return numpy_in_this_thread()

    def prepare(
        self, process_tensors: Sequence[BaseProcessTensor], num_steps: int, record_all: bool
    ) -> list[PreparedProcessTensor]:
        """The process tensors ready for :meth:`step`, on the host."""
        self.decisions.append(("prepare", planner.HOST, "steps driven by the algorithm"))
        with numpy_in_this_thread():
            return super().prepare(process_tensors, num_steps, record_all)  # type: ignore[misc]

    def step(self, state: Any, step: int, *arguments: Any, **keywords: Any) -> Any:
        """One step of the host engine with the NumPy kernels."""
        with numpy_in_this_thread():
            return super().step(state, step, *arguments, **keywords)  # type: ignore[misc]

    def step_members(self, state: Any, step: int, *arguments: Any, **keywords: Any) -> Any:
        """One step of a state with a member axis, the host engine's with the NumPy kernels."""
        with numpy_in_this_thread():
            return super().step_members(state, step, *arguments, **keywords)  # type: ignore[misc]


class JaxChainEngine(StepsOnHost, EagerChainEngine):
    """The chain engine of the JAX backend (see :class:`~nonmarkov.engines.base.ChainEngine`).

    A run without controls on process tensors in memory whose tables of padded
    step tensors fit :data:`~.planner.SCAN_BYTES` runs as one compiled ``lax.scan``
    (:func:`~.chain.run_chain`: one transfer in, one out; the propagators of every
    step are stacked on the host) where that pays (:func:`~.planner.scan_pays`; on an
    accelerator always); anything else runs the host engine's steps with the NumPy
    kernels. The scans run on the device :func:`~.placement.place` chooses for their
    size (``device`` option). A run with a member axis is one compiled ``lax.scan``
    vmapped over the members (:func:`~.batched.run_batch`, controls and time-dependent
    propagators included) where its process tensors are in memory, its tables fit and
    the scan pays, else the host engine's batched steps with the NumPy kernels.
    ``decisions`` records each run's choice and why.
    """

    capabilities = ChainCapabilities(
        batch=True, adjoint=True, differentiable=True, differentiable_files=False, devices=DEVICES
    )

    def __init__(self, options: EngineOptions | None = None):
        super().__init__(options)
        self._options = resolve(options)
        #: (entry point, 'compiled' or 'host', why) per run
        self.decisions: list[tuple[str, str, str]] = []

    def _scan_plan(
        self, entry: str, run: ChainRun, steps: int, controls: bool = False
    ) -> tuple[list[tuple[Any, ...]], Any, tuple[Any, ...]] | None:
        """The tables, the device and the kernel key of a compiled scan of ``run`` over
        ``steps`` scan steps (``controls``: the scan takes them), or None (recorded with
        its reason) for the host steps. Decided from the process tensors' bonds before
        any table is built."""
        pts = list(run.process_tensors)
        reason = "controls, or process tensors not in memory"
        scannable = controls or run.controls is None
        if scannable and run.num_steps > 0 and pts and all(map(in_memory, pts)):
            bonds = [tuple(int(b) for b in pt.get_bond_dimensions()) for pt in pts]
            d2 = default_np.asarray(run.initial).size
            work = placement.chain_work(1, [max(b, default=1) for b in bonds], d2)
            placed = placement.place(self._options.device, work)
            key = (entry, run.num_steps, run.record_all, d2, str(placed.device), tuple(bonds))
            pays, reason = planner.scan_pays(steps, work, key in SCANNED, self._options)
            if pays or placed.where == placement.ACCELERATOR:
                baths = scan_tables(pts, run.num_steps, np.dtype_complex)
                if baths is not None:
                    self.decisions.append((entry, planner.COMPILED, reason))
                    return baths, placed.device, key
                reason = f"step tensors above {SCAN_BYTES / 2**30:.0f} GiB"
        self.decisions.append((entry, planner.HOST, reason))
        return None

    def step_transposed(self, adjoint: Any, step: int, *arguments: Any, **keywords: Any) -> Any:
        """See :meth:`~nonmarkov.engines.base.ChainEngine.step_transposed` (NumPy kernels)."""
        with numpy_in_this_thread():
            return super().step_transposed(adjoint, step, *arguments, **keywords)

    def run(self, run: ChainRun) -> default_np.ndarray:
        """See :meth:`~nonmarkov.engines.base.ChainEngine.run`."""
        if default_np.ndim(run.initial) == 2:
            return self._run_members(run)
        plan = self._scan_plan("run", run, run.num_steps)
        if plan is None:
            with numpy_in_this_thread():
                return super().run(run)
        baths, device, key = plan
        first, second = _stacked_propagators(run)
        readouts = run_chain(
            default_np.asarray(run.initial).reshape(-1),
            first,
            second,
            baths,
            run.record_all,
            device,
        )
        SCANNED.add(key)
        run.on_step(run.num_steps)
        return readouts

    def _run_members(self, run: ChainRun) -> default_np.ndarray:
        """:meth:`run` of a run with a member axis: one compiled scan vmapped over the
        members (:func:`~.batched.run_batch`) where it applies and pays, else the host
        engine's batched steps with the NumPy kernels."""
        pts = list(run.process_tensors)
        if not (run.num_steps > 0 and pts and all(in_memory(pt) for pt in pts)):
            return self._members_on_host(run, "no process tensor, or not in memory")
        dtype = np.dtype_complex
        firsts, seconds, rows, per_member = batched.propagator_table(run)
        propagator_bytes = 2 * firsts.size * default_np.dtype(dtype).itemsize
        tables = scan_tables(pts, run.num_steps, dtype, propagator_bytes)
        if tables is None:
            return self._members_on_host(run, f"tables above {SCAN_BYTES / 2**30:.0f} GiB")
        baths = tuple(tables)
        members, d2 = default_np.shape(run.initial)
        work = placement.chain_work(members, [bath[3].shape[1] for bath in baths], d2)
        placed = placement.place(self._options.device, work)
        shapes = tuple(tuple(array.shape for array in bath[3:]) for bath in baths)
        key: tuple[Any, ...] = ("batch", run.num_steps, run.record_all, per_member, firsts.shape)
        key += (str(placed.device),) + shapes
        pays, reason = planner.scan_pays(run.num_steps, work, key in SCANNED, self._options)
        if not (pays or placed.where == placement.ACCELERATOR):
            return self._members_on_host(run, reason)
        self.decisions.append(("run", planner.COMPILED, reason))
        readouts = batched.run_batch(
            run.initial, firsts, seconds, rows, per_member, baths, run.record_all, placed.device
        )
        SCANNED.add(key)
        run.on_step(run.num_steps)
        return readouts

    def _members_on_host(self, run: ChainRun, reason: str) -> default_np.ndarray:
        self.decisions.append(("run", planner.HOST, reason))
        with numpy_in_this_thread():
            return super()._run_members(run)

    def adjoint(
        self, run: ChainRun, target: Callable[[default_np.ndarray], default_np.ndarray]
    ) -> tuple[default_np.ndarray, default_np.ndarray]:
        """See :meth:`~nonmarkov.engines.base.ChainEngine.adjoint`: two compiled scans
        (:func:`~.chain.adjoint_chain`) where the process tensors are in memory, fit
        :data:`~.planner.SCAN_BYTES` and the scans pay, else the host engine's steps."""
        plan = self._scan_plan("adjoint", run, 2 * run.num_steps, controls=True)
        if plan is None:
            with numpy_in_this_thread():
                return super().adjoint(run, target)
        baths, device, key = plan
        first, second = _stacked_propagators(run)
        d2 = first.shape[-1]
        identity = default_np.eye(d2)
        before = default_np.empty((run.num_steps, d2, d2), complex)
        after = default_np.empty((run.num_steps, d2, d2), complex)
        for k in range(run.num_steps):
            pair = (None, None) if run.controls is None else run.controls(k)
            before[k] = identity if pair[0] is None else pair[0]
            after[k] = identity if pair[1] is None else pair[1]
        readouts, derivatives = adjoint_chain(
            default_np.asarray(run.initial).reshape(-1),
            first,
            second,
            before,
            after,
            baths,
            target,
            run.record_all,
            device,
        )
        SCANNED.add(key)
        run.on_step(2 * run.num_steps)
        return readouts, derivatives

    def differentiable(
        self,
        process_tensors: Sequence[BaseProcessTensor],
        num_steps: int,
        record_all: bool,
        generator: Callable[[Any], Any],
        dt: float,
    ) -> Callable[..., Any]:
        """See :meth:`~nonmarkov.engines.base.ChainEngine.differentiable`."""
        baths = scan_tables(list(process_tensors), num_steps, np.dtype_complex)
        if baths is None:
            raise ValueError(
                f"the padded step tensors of these process tensors exceed "
                f"{SCAN_BYTES / 2**30:.0f} GiB, too large for the compiled scan"
            )
        return differentiable_chain(baths, generator, dt, record_all)


def scan_tables(
    pts: Sequence[BaseProcessTensor], num_steps: int, dtype: Any, extra_bytes: int = 0
) -> list[tuple[Any, ...]] | None:
    """Per process tensor (transform_in, transform_out, classes (d^2,) int32, table,
    cap table, rows) for :mod:`.chain` in ``dtype``, or None if the tables and
    ``extra_bytes`` exceed :data:`~.planner.SCAN_BYTES`."""
    with numpy_in_this_thread():  # the caps on the host, once
        prepared = EagerChainEngine().prepare(pts, num_steps, True)
        steps = [
            (
                [pt.get_step_tensor(k)[0] for k in range(num_steps)],
                [on_host.cap(k) for k in range(num_steps)],
            )
            for pt, on_host in zip(pts, prepared)
        ]
    needed = sum(table_bytes(tensors, caps, dtype) for tensors, caps in steps)
    if needed + extra_bytes > SCAN_BYTES:
        return None
    return [
        (
            default_np.asarray(pt.transform_in, dtype),
            default_np.asarray(pt.transform_out, dtype),
            default_np.asarray(pt.get_step_tensor(0)[1], default_np.int32),
            *stack_padded(tensors, caps, dtype),
        )
        for pt, (tensors, caps) in zip(pts, steps)
    ]


def _stacked_propagators(run: ChainRun) -> tuple[default_np.ndarray, default_np.ndarray]:
    """The half-step propagators of every step of ``run``, (N, d^2, d^2) each."""
    if run.constant_propagators:
        first, second = run.propagators(0)
        shape = (run.num_steps,) + default_np.shape(first)
        return default_np.broadcast_to(first, shape), default_np.broadcast_to(second, shape)
    pairs = [run.propagators(k) for k in range(run.num_steps)]
    return (
        default_np.stack([pair[0] for pair in pairs]),
        default_np.stack([pair[1] for pair in pairs]),
    )
