"""The chain engine of the JAX backend: one compiled scan, or the eager engine's
steps with the NumPy kernels on the host, as the planner decides (the window
engine is :mod:`.window`).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from typing import Any

import numpy as default_np

from ...backends.numerical_backend import np, numpy_in_this_thread
from ...options import EngineOptions, resolve
from ...process_tensors.base import BaseProcessTensor
from ..base import DEVICES, BranchStep, ChainCapabilities, ChainRun, PreparedProcessTensor
from ..eager_chain import EagerChainEngine, in_memory
from . import placement, planner
from .branches import SWEPT, MemoryTables, StreamedTables, run_sweep, sweep_shapes
from .planner import SCAN_BYTES
from .scan import (
    SCANNED,
    adjoint_chain,
    differentiable_chain,
    propagator_table,
    run_members,
    stack_padded,
    table_bytes,
)
from .stream import adjoint_stream, chunk_table, run_stream

#: Steps of a process tensor read from a file copied to the device at a time (one
#: compiled kernel scans each chunk while the next is read).
STREAM_STEPS = 64


def _placement(choice: str, work: float) -> placement.Placement | None:
    """:func:`~.placement.place`, or None where the size rule alone puts ``work`` on the
    host CPU (the ``'auto'`` device option, work below :data:`~.planner.ACCELERATOR_WORK`):
    then no JAX backend is asked, and a run the planner keeps on the host costs no JAX
    start-up."""
    if choice == "auto" and work < planner.ACCELERATOR_WORK:
        return None
    return placement.place(choice, work)


def _device(placed: placement.Placement | None, choice: str, work: float) -> Any:
    """The JAX device of a compiled run: ``placed``'s, else :func:`~.placement.place`'s."""
    return (placed or placement.place(choice, work)).device


def _on_accelerator(placed: placement.Placement | None) -> bool:
    return placed is not None and placed.where == placement.ACCELERATOR


class StepsOnHost:
    """``prepare``, ``step``, ``step_members`` and ``sweep`` of the eager chain engine
    with the NumPy kernels on the host, for algorithms that step the state themselves
    (mean field) and for what the compiled paths leave on the host: each step is small,
    and eager JAX operations would dispatch and compile per shape. Mixed in before the
    eager engine's class."""

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

    def sweep(self, run: ChainRun, steps: Sequence[BranchStep]) -> list[list[default_np.ndarray]]:
        """A branch sweep, the eager engine's with the NumPy kernels on the host."""
        with numpy_in_this_thread():
            return super().sweep(run, steps)  # type: ignore[misc]

    def step_members(self, state: Any, step: int, *arguments: Any, **keywords: Any) -> Any:
        """One step of a state with a member axis, the host engine's with the NumPy kernels."""
        with numpy_in_this_thread():
            return super().step_members(state, step, *arguments, **keywords)  # type: ignore[misc]


class JaxChainEngine(StepsOnHost, EagerChainEngine):
    """The chain engine of the JAX backend (see :class:`~nonmarkov.engines.base.ChainEngine`).

    A run is a batch (a single run a batch of one): one compiled ``lax.scan``
    ``jax.vmap``-ped over the members (:func:`~.scan.run_members`: one transfer in,
    one out; the distinct propagator pairs of the steps, controls folded in, stacked
    on the host) where its process tensors are in memory, their tables of padded step
    tensors fit :data:`~.planner.SCAN_BYTES` and the scan pays
    (:func:`~.planner.scan_pays`; on an accelerator always); else the eager engine's
    steps with the NumPy kernels on the host. The scans run on the device
    :func:`~.placement.place` chooses for their size (``device`` option).
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
        self, entry: str, run: ChainRun, steps: int, propagator_rows: int = 0
    ) -> tuple[list[tuple[Any, ...]], Any, tuple[Any, ...]] | None:
        """The tables, the device and the kernel key of a compiled scan of ``run`` over
        ``steps`` scan steps, or None (recorded with its reason) for the host steps.
        Decided from the process tensors' bonds before any table is built;
        ``propagator_rows``: the distinct propagator pairs the scan holds besides the
        tables."""
        pts = list(run.process_tensors)
        reason = "no process tensor, or not in memory"
        if run.num_steps > 0 and pts and all(map(in_memory, pts)):
            bonds = [tuple(int(b) for b in pt.get_bond_dimensions()) for pt in pts]
            members, d2 = default_np.shape(default_np.atleast_2d(run.initial))
            work = placement.chain_work(members, [max(b, default=1) for b in bonds], d2)
            placed = _placement(self._options.device, work)
            key: tuple[Any, ...] = (entry, run.num_steps, run.record_all, members, d2)
            key += (propagator_rows, str(placed and placed.device), tuple(bonds))
            pays, reason = planner.scan_pays(steps, work, key in SCANNED, self._options)
            if pays or _on_accelerator(placed):
                itemsize = default_np.dtype(np.dtype_complex).itemsize
                extra = 2 * propagator_rows * members * d2 * d2 * itemsize  # at most
                baths = scan_tables(pts, run.num_steps, np.dtype_complex, extra)
                if baths is not None:
                    self.decisions.append((entry, planner.COMPILED, reason))
                    return baths, _device(placed, self._options.device, work), key
                reason = f"tables above {SCAN_BYTES / 2**30:.0f} GiB"
        self.decisions.append((entry, planner.HOST, reason))
        return None

    def step_transposed(self, adjoint: Any, step: int, *arguments: Any, **keywords: Any) -> Any:
        """See :meth:`~nonmarkov.engines.base.ChainEngine.step_transposed` (NumPy kernels)."""
        with numpy_in_this_thread():
            return super().step_transposed(adjoint, step, *arguments, **keywords)

    def run(self, run: ChainRun) -> default_np.ndarray:
        """See :meth:`~nonmarkov.engines.base.ChainEngine.run`: a run without a member
        axis is a batch of one."""
        distinct = 1 if run.constant_propagators and run.controls is None else run.num_steps
        pts = list(run.process_tensors)
        if run.num_steps > 0 and pts and not all(map(in_memory, pts)):
            streamed = self._stream(run, distinct)
            if streamed is not None:
                return streamed
            with numpy_in_this_thread():
                return super().run(run)
        plan = self._scan_plan("run", run, run.num_steps, distinct)
        if plan is None:
            with numpy_in_this_thread():
                return super().run(run)
        baths, device, key = plan
        firsts, seconds, rows, per_member = propagator_table(run)
        initial = default_np.atleast_2d(default_np.asarray(run.initial))
        readouts = run_members(
            initial, firsts, seconds, rows, per_member, baths, run.record_all, device
        )
        SCANNED.add(key)
        run.on_step(run.num_steps)
        return readouts[:, 0] if default_np.ndim(run.initial) == 1 else readouts

    def _sweep_tables(
        self,
        pts: list[BaseProcessTensor],
        num_steps: int,
        bonds: list[int],
        streamed: bool,
        device: Any,
    ) -> MemoryTables | StreamedTables | None:
        """The step tensors of a compiled branch sweep: in memory, the padded tables on the
        device (None if above :data:`~.planner.SCAN_BYTES`); with a process tensor read
        from a file, every process tensor a grid time at a time, the caps from the host's
        backward pass."""
        dtype = np.dtype_complex
        if not streamed:
            baths = scan_tables(pts, num_steps, dtype)
            return None if baths is None else MemoryTables(baths, device)
        with numpy_in_this_thread():
            prepared = EagerChainEngine.prepare(self, pts, num_steps, True)
        classes = [pt.get_step_tensor(0)[0].shape[2] for pt in pts]
        return StreamedTables(prepared, bonds, classes, num_steps, dtype, device)

    def _stream_plan(
        self, entry: str, run: ChainRun, steps: int, distinct: int
    ) -> tuple[Callable[[int], tuple[int, list[Any]]], int, Any, tuple[Any, ...]] | None:
        """For a run on process tensors read from files: (``chunk(i)``, the chunk size,
        the device, the kernel key) of a streamed compiled run over ``steps`` scan steps
        (:data:`STREAM_STEPS` steps a chunk, the caps from the host's backward pass), or
        None (the decision recorded) for the eager engine's streamed steps on the host."""
        pts = list(run.process_tensors)
        bonds = [max((int(b) for b in pt.get_bond_dimensions()), default=1) for pt in pts]
        members, d2 = default_np.shape(default_np.atleast_2d(run.initial))
        work = placement.chain_work(members, bonds, d2)
        placed = _placement(self._options.device, work)
        dtype = np.dtype_complex
        step_bytes = (
            sum(bond * bond * pt.get_step_tensor(0)[0].shape[2] for bond, pt in zip(bonds, pts))
            * default_np.dtype(dtype).itemsize
        )
        size = max(1, min(STREAM_STEPS, run.num_steps, SCAN_BYTES // (2 * step_bytes)))
        key: tuple[Any, ...] = ("stream", entry, size, distinct, run.record_all, members, d2)
        key += (str(placed and placed.device), tuple(bonds))
        pays, reason = planner.scan_pays(steps, work, key in SCANNED, self._options)
        if not (pays or _on_accelerator(placed)):
            self.decisions.append((entry, planner.HOST, f"{reason}; files stream on the host"))
            return None
        self.decisions.append((entry, planner.COMPILED, f"{reason}; files in chunks of {size}"))
        with numpy_in_this_thread():  # the caps on the host, a backward pass over the files
            prepared = EagerChainEngine.prepare(self, pts, run.num_steps, True)

        def chunk(index: int) -> tuple[int, list[Any]]:
            start = index * size
            count = min(size, run.num_steps - start)
            baths = []
            with numpy_in_this_thread():
                for bond, on_host in zip(bonds, prepared):
                    steps = range(start, start + count)
                    tensors = [on_host.tensor(k) for k in steps]
                    caps = [on_host.cap(k) for k in steps]
                    baths.append(
                        (on_host.transform_in, on_host.transform_out, on_host.classes)
                        + chunk_table(tensors, caps, bond, size, dtype)
                    )
            return count, baths

        return chunk, size, _device(placed, self._options.device, work), key

    def _stream(self, run: ChainRun, distinct: int) -> default_np.ndarray | None:
        """:meth:`run` with process tensors read from files: the state on the device,
        the step tensors copied there :data:`STREAM_STEPS` steps at a time and scanned
        by one compiled kernel (:func:`~.stream.run_stream`), where that pays; else None
        (the decision recorded) for the eager engine's streamed steps on the host."""
        plan = self._stream_plan("run", run, run.num_steps, distinct)
        if plan is None:
            return None
        chunk, size, device, key = plan
        count = -(-run.num_steps // size)
        firsts, seconds, rows, per_member = propagator_table(run)
        readouts = run_stream(
            default_np.atleast_2d(default_np.asarray(run.initial)),
            firsts,
            seconds,
            rows,
            per_member,
            (chunk(index) for index in range(count)),
            size,
            run.record_all,
            run.on_step,
            np.dtype_complex,
            device,
        )
        SCANNED.add(key)
        return readouts[:, 0] if default_np.ndim(run.initial) == 1 else readouts

    def sweep(self, run: ChainRun, steps: Sequence[BranchStep]) -> list[list[default_np.ndarray]]:
        """See :meth:`~nonmarkov.engines.base.ChainEngine.sweep`: one compiled kernel call
        per grid time on the device (:func:`~.branches.run_sweep`; a kernel per bucket of
        branches and read-outs; process tensors read from files streamed a grid time at
        a time) where the kernels pay (each must repay its compilation with its share of
        the steps, :func:`~.planner.scan_pays`; on an accelerator always), else the eager
        engine's sweep with the NumPy kernels on the host."""
        pts = list(run.process_tensors)
        reason = "no step or no process tensor"
        if len(steps) > 1 and pts:
            bonds = [max((int(b) for b in pt.get_bond_dimensions()), default=1) for pt in pts]
            members, d2 = default_np.shape(run.initial)
            shapes = sweep_shapes(steps)
            branches = sum(shape[0] for shape in shapes) / len(shapes)
            work = placement.chain_work(max(1, round(members * branches)), bonds, d2)
            placed = _placement(self._options.device, work)
            streamed = not all(map(in_memory, pts))
            common = (members, d2, streamed, str(placed and placed.device), tuple(bonds))
            kernels = {shape + common for shape in shapes}
            new = len(kernels - SWEPT)
            share = max(1, run.num_steps // max(1, new))
            pays, reason = planner.scan_pays(share, work, new == 0, self._options)
            reason += f" ({new} of {len(kernels)} branch kernels to compile)"
            if pays or _on_accelerator(placed):
                device = _device(placed, self._options.device, work)
                tables = self._sweep_tables(pts, run.num_steps, bonds, streamed, device)
                if tables is not None:
                    self.decisions.append(("sweep", planner.COMPILED, reason))
                    firsts, seconds, rows, per_member = propagator_table(run)
                    values = run_sweep(
                        run.initial,
                        firsts,
                        seconds,
                        rows,
                        per_member,
                        tables,
                        steps,
                        run.on_step,
                        device,
                    )
                    SWEPT.update(kernels)
                    return values
                reason = f"tables above {SCAN_BYTES / 2**30:.0f} GiB"
        self.decisions.append(("sweep", planner.HOST, reason))
        return super().sweep(run, steps)

    def adjoint(
        self, run: ChainRun, target: Callable[[default_np.ndarray], default_np.ndarray]
    ) -> tuple[default_np.ndarray, default_np.ndarray]:
        """See :meth:`~nonmarkov.engines.base.ChainEngine.adjoint`: two compiled scans
        (:func:`~.scan.adjoint_chain`) where the process tensors fit
        :data:`~.planner.SCAN_BYTES` and the scans pay, process tensors read from files
        streamed a chunk at a time (:func:`~.stream.adjoint_stream`), else the eager
        engine's steps."""
        pts = list(run.process_tensors)
        if run.num_steps > 0 and pts and not all(map(in_memory, pts)):
            streamed = self._stream_plan("adjoint", run, 2 * run.num_steps, run.num_steps)
            if streamed is None:
                with numpy_in_this_thread():
                    return super().adjoint(run, target)
            chunk, size, device, key = streamed
            with numpy_in_this_thread():
                caps = EagerChainEngine.prepare(self, pts, run.num_steps, False)
                last = [on_host.cap(run.num_steps - 1) for on_host in caps]
            bonds = [max((int(b) for b in pt.get_bond_dimensions()), default=1) for pt in pts]
            padded = [default_np.zeros(bond, complex) for bond in bonds]
            for vector, cap in zip(padded, last):
                vector[: len(cap)] = cap
            readouts, derivatives = adjoint_stream(
                default_np.asarray(run.initial).reshape(-1),
                _adjoint_steps(run),
                chunk,
                run.num_steps,
                size,
                padded,
                target,
                run.record_all,
                run.on_step,
                np.dtype_complex,
                device,
            )
            SCANNED.add(key)
            return readouts, derivatives
        plan = self._scan_plan("adjoint", run, 2 * run.num_steps)
        if plan is None:
            with numpy_in_this_thread():
                return super().adjoint(run, target)
        baths, device, key = plan
        first, second, before, after = _adjoint_steps(run)
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
    cap table, rows) for :mod:`.scan` in ``dtype``, or None if the tables and
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


def _adjoint_steps(run: ChainRun) -> tuple[Any, Any, Any, Any]:
    """(first, second, before, after) of every step of ``run``, (N, d^2, d^2) each, the
    identity for a missing control."""
    first, second = _stacked_propagators(run)
    d2 = first.shape[-1]
    identity = default_np.eye(d2)
    before = default_np.empty((run.num_steps, d2, d2), complex)
    after = default_np.empty((run.num_steps, d2, d2), complex)
    for k in range(run.num_steps):
        pair = (None, None) if run.controls is None else run.controls(k)
        before[k] = identity if pair[0] is None else pair[0]
        after[k] = identity if pair[1] is None else pair[1]
    return first, second, before, after


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
