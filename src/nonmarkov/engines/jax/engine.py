"""The JAX engines: the window engine (compiled steps with a host start) and the
chain engine (one compiled scan, or the host engine's steps on the JAX proxies).

Host start. XLA compiles the whole-step kernel of :class:`CompiledWindow` in
about a second on a CPU (more on a GPU), as long as a short TEMPO run takes on
NumPy. With the ``host_start`` option (default on) a window with a memory cut
compiles its first kernel in the background compiler thread while the calling
thread runs the first steps with the NumPy kernels (:class:`HostWindowEngine`
under :func:`~nonmarkov.backends.numerical_backend.numpy_in_this_thread`); the
window then moves to the device (:meth:`CompiledWindow.load_host_window`) and the
steps go on there. A bond that outgrows the bucket being compiled has the next
bucket compiled instead; the host steps stop at bond :data:`HOST_START_BOND`,
where a host step costs more than waiting for a compilation would on an
accelerator. Both are the same algorithm, so the results agree to rounding; how
many steps run on the host depends on the compile time unless the options are
``deterministic`` (:mod:`.scheduling`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import Future
from typing import Any

import numpy as default_np

from ...backends.numerical_backend import np, numpy_in_this_thread
from ...options import EngineOptions, resolve
from ...process_tensors.base import BaseProcessTensor
from ..base import ChainRun, WindowSpec
from ..host import HostChainEngine, HostWindowEngine, in_memory
from . import placement
from .chain import (
    SCAN_BYTES,
    adjoint_chain,
    differentiable_chain,
    run_chain,
    stack_padded,
    table_bytes,
)
from .padding import bond_bucket
from .window import CompiledWindow

#: The host steps stop once a bond of the window reaches this dimension.
HOST_START_BOND = 64


class JaxWindowEngine:
    """The window engine of the JAX backend (see :class:`~nonmarkov.engines.base.WindowEngine`).

    ``compiled`` is the :class:`CompiledWindow` it runs (diagnostics: chunks,
    redos, fetches, bond bucket).
    """

    steps_per_call = 64

    def __init__(self, spec: WindowSpec, options: EngineOptions):
        if options.window_sweep != "exact":
            raise ValueError(
                "JaxWindowEngine runs the 'exact' window sweep; the zip-up sweep runs "
                "on ZipUpWindowEngine (engines.window_engine chooses)"
            )
        self._spec = spec
        # the host start runs the compiled step's sweep, so that both parts agree
        self._options = options.replace(window_sweep="exact")
        self.compiled = CompiledWindow(spec, options, np.dtype_complex)
        #: the host phase: (the host window, the kernel compiling, its bucket) or None
        self._host: tuple[HostWindowEngine, Future, int] | None = None
        self._host_start = options.host_start and self.compiled.memory > 0
        #: steps run on the host (host start) so far
        self.host_steps = 0

    @property
    def memory(self) -> int:
        """Points kept in the window, 0 for no memory cut."""
        return self.compiled.memory

    def _on_host(
        self, run_step: Callable[[HostWindowEngine], tuple[Any, int]], num_steps: int
    ) -> tuple[list[Any], list[int]]:
        """Up to ``num_steps`` host steps while the step kernel compiles (the host phase
        may span several calls); when the phase ends, the window moves to the device.
        ``run_step(host)`` does one step and returns its output and largest bond."""
        compiled = self.compiled
        schedule = compiled.schedule
        if self._host is None:
            self._host_start = False
            bucket = compiled.bond
            with numpy_in_this_thread():
                host = HostWindowEngine(self._spec, self._options)
            self._host = (host, compiled.compile_step_ahead(bucket), bucket)
        host, pending, bucket = self._host
        outputs: list[Any] = []
        ranks: list[int] = []
        going_on = True
        with numpy_in_this_thread():
            while len(outputs) < num_steps:
                going_on = schedule.host_steps_go_on(pending, self.host_steps)
                if not going_on:
                    break
                output, largest = run_step(host)
                outputs.append(output)
                ranks.append(largest)
                self.host_steps += 1
                if largest >= HOST_START_BOND:
                    going_on = False
                    break
                if bond_bucket(largest) > bucket:
                    pending.cancel()  # if it has not started
                    bucket = compiled.grown_bond(largest)
                    pending = compiled.compile_step_ahead(bucket)
            self._host = (host, pending, bucket)
            if len(outputs) == num_steps and going_on:
                going_on = schedule.host_steps_go_on(pending, self.host_steps)
            if going_on:
                return outputs, ranks
            window, log_scale = host.host_window()
        self._host = None
        if schedule.deterministic:
            pending.exception()  # wait: the device steps then find the kernel compiled
        if self.host_steps:
            compiled.load_host_window(window, log_scale, bucket, steps=host.steps)
        return outputs, ranks

    def _host_phase(self) -> bool:
        return self._host_start or self._host is not None

    def advance(
        self, propagators: Sequence[tuple[Any, Any]]
    ) -> tuple[default_np.ndarray, list[int]]:
        """See :meth:`~nonmarkov.engines.base.WindowEngine.advance`."""
        if self._spec.oldest != "trace":
            raise ValueError("advance needs a 'trace' window; use advance_finalize")
        readouts: list[Any] = []
        ranks: list[int] = []
        if self._host_phase() and propagators:

            def run_step(host: HostWindowEngine) -> tuple[Any, int]:
                vectors, largest = host.advance([propagators[len(readouts)]])
                readouts.append(vectors[0])
                return vectors[0], largest[0]

            _, ranks = self._on_host(run_step, len(propagators))
        rest, rest_ranks = self.compiled.advance(propagators[len(readouts) :])
        if readouts:
            rest = default_np.concatenate([default_np.asarray(readouts), rest])
        return rest, ranks + rest_ranks

    def advance_finalize(self, num_steps: int) -> tuple[list[tuple[Any, float]], list[int]]:
        """See :meth:`~nonmarkov.engines.base.WindowEngine.advance_finalize`."""
        if self._spec.oldest != "finalize":
            raise ValueError("advance_finalize needs a 'finalize' window; use advance")
        finalised: list[tuple[Any, float]] = []
        ranks: list[int] = []
        if self._host_phase() and num_steps > 0:

            def run_step(host: HostWindowEngine) -> tuple[Any, int]:
                done, largest = host.advance_finalize(1)
                return done[0], largest[0]

            finalised, ranks = self._on_host(run_step, num_steps)
        m = self.compiled.num_classes
        rest, rest_ranks = self.compiled.advance_finalize(
            num_steps - len(finalised), default_np.ones((m, m)), default_np.eye(m)
        )
        return finalised + rest, ranks + rest_ranks

    def expect_steps(self, num_steps: int) -> None:
        """See :meth:`~nonmarkov.engines.base.WindowEngine.expect_steps` (not used here)."""

    def load_window(self, window: Sequence[Any], log_scale: float, steps: int = 0) -> None:
        """See :meth:`~nonmarkov.engines.base.WindowEngine.load_window`: straight onto
        the device (no host start)."""
        self._host_start, self._host = False, None
        self.compiled.load_host_window(window, log_scale, 1, steps=steps)

    def host_window(self) -> tuple[list[default_np.ndarray], float]:
        """See :meth:`~nonmarkov.engines.base.WindowEngine.host_window`."""
        if self._host is not None:
            with numpy_in_this_thread():
                return self._host[0].host_window()
        return self.compiled.host_window()


class JaxChainEngine(HostChainEngine):
    """The chain engine of the JAX backend (see :class:`~nonmarkov.engines.base.ChainEngine`).

    A run without controls on process tensors in memory whose tables of padded
    step tensors fit :data:`~.chain.SCAN_BYTES` runs as one compiled ``lax.scan``
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
        fit :data:`~.chain.SCAN_BYTES`, else the host engine's steps."""
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
        rows) for :mod:`.chain`, or None if the tables exceed :data:`~.chain.SCAN_BYTES`."""
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
