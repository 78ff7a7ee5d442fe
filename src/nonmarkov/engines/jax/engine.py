"""The chain engine of the JAX backend: one compiled scan, or the host engine's
steps on the JAX proxies (the window engine is :mod:`.window`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as default_np

from ...backends.numerical_backend import np, numpy_in_this_thread
from ...options import EngineOptions, resolve
from ...process_tensors.base import BaseProcessTensor
from ..base import ChainRun
from ..host import HostChainEngine, in_memory
from . import placement
from .chain import (
    adjoint_chain,
    differentiable_chain,
    run_chain,
    stack_padded,
    table_bytes,
)
from .planner import SCAN_BYTES


class JaxChainEngine(HostChainEngine):
    """The chain engine of the JAX backend (see :class:`~nonmarkov.engines.base.ChainEngine`).

    A run without controls on process tensors in memory whose tables of padded
    step tensors fit :data:`~.planner.SCAN_BYTES` runs as one compiled ``lax.scan``
    (:func:`~.chain.run_chain`: one transfer in, one out; the propagators of every
    step are stacked on the host); anything else runs the host engine's steps on
    the JAX proxies. The scans run on the device :func:`~.placement.place` chooses for
    their size (``device`` option).
    """

    def __init__(self, options: EngineOptions | None = None):
        super().__init__(options)
        self._options = resolve(options)

    def _device(self, baths: Sequence[tuple[Any, ...]], dim_d2: int) -> Any:
        """The device of a scan over ``baths`` (as from :meth:`_tables`)."""
        work = placement.chain_work(1, [bath[3].shape[1] for bath in baths], dim_d2)
        return placement.place(self._options.device, work).device

    def run(self, run: ChainRun) -> default_np.ndarray:
        """See :meth:`~nonmarkov.engines.base.ChainEngine.run`."""
        pts = list(run.process_tensors)
        if not (
            run.controls is None and run.num_steps > 0 and pts and all(in_memory(pt) for pt in pts)
        ):
            return super().run(run)
        baths = self._tables(pts, run.num_steps, np.dtype_complex)
        if baths is None:
            return super().run(run)
        first, second = _stacked_propagators(run)
        readouts = run_chain(
            default_np.asarray(run.initial).reshape(-1),
            first,
            second,
            baths,
            run.record_all,
            self._device(baths, first.shape[-1]),
        )
        run.on_step(run.num_steps)
        return readouts

    def adjoint(
        self, run: ChainRun, target: Callable[[default_np.ndarray], default_np.ndarray]
    ) -> tuple[default_np.ndarray, default_np.ndarray]:
        """See :meth:`~nonmarkov.engines.base.ChainEngine.adjoint`: two compiled scans
        (:func:`~.chain.adjoint_chain`) where the process tensors are in memory and
        fit :data:`~.planner.SCAN_BYTES`, else the host engine's steps."""
        pts = list(run.process_tensors)
        baths = (
            self._tables(pts, run.num_steps, np.dtype_complex)
            if pts and run.num_steps > 0 and all(in_memory(pt) for pt in pts)
            else None
        )
        if baths is None:
            return super().adjoint(run, target)
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
            self._device(baths, d2),
        )
        run.on_step(2 * run.num_steps)
        return readouts, derivatives

    @staticmethod
    def _tables(
        pts: Sequence[BaseProcessTensor], num_steps: int, dtype: Any
    ) -> list[tuple[Any, ...]] | None:
        """Per process tensor (transform_in, transform_out, classes, table, cap table,
        rows) for :mod:`.chain`, or None if the tables exceed :data:`~.planner.SCAN_BYTES`."""
        with numpy_in_this_thread():  # the caps on the host, once
            prepared = HostChainEngine().prepare(pts, num_steps, True)
            steps = [
                (
                    [pt.get_step_tensor(k)[0] for k in range(num_steps)],
                    [on_host.cap(k) for k in range(num_steps)],
                )
                for pt, on_host in zip(pts, prepared)
            ]
        if sum(table_bytes(tensors, caps, dtype) for tensors, caps in steps) > SCAN_BYTES:
            return None
        return [
            (
                pt.transform_in,
                pt.transform_out,
                default_np.asarray(pt.get_step_tensor(0)[1], dtype=int),
                *stack_padded(tensors, caps, dtype),
            )
            for pt, (tensors, caps) in zip(pts, steps)
        ]

    def differentiable(
        self,
        process_tensors: Sequence[BaseProcessTensor],
        num_steps: int,
        record_all: bool,
        generator: Callable[[Any], Any],
        dt: float,
    ) -> Callable[..., Any]:
        """See :meth:`~nonmarkov.engines.base.ChainEngine.differentiable`."""
        pts = list(process_tensors)
        if not all(in_memory(pt) for pt in pts):
            raise ValueError(
                "automatic differentiation needs process tensors in memory: a file-backed "
                "one streams its steps; load it whole first"
            )
        baths = self._tables(pts, num_steps, np.dtype_complex)
        if baths is None:
            raise ValueError(
                f"the padded step tensors of these process tensors exceed "
                f"{SCAN_BYTES / 2**30:.0f} GiB, too large for the compiled scan"
            )
        return differentiable_chain(baths, generator, dt, record_all)


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
