"""Compiled branch sweeps (correlations) on the JAX chain engine: one kernel call per
grid time on a state padded to the tables' bonds and a power of two of branches
(:meth:`~nonmarkov.engines.base.ChainEngine.sweep`). Requires JAX.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any

import numpy as default_np

from ..base import BranchStep
from .compiler import compile_kernel
from .scan import apply_matrix, close_caps, host_baths, platform_of, process_step

#: the branch-sweep kernels this process has run, by kernel key
SWEPT: set[tuple[Any, ...]] = set()


def branch_bucket(count: int) -> int:
    """The padded size of ``count`` branches or read-outs: the next power of two."""
    return 1 << max(0, int(count) - 1).bit_length()


def sweep_shapes(steps: Sequence[BranchStep]) -> list[tuple[int, int, int, bool]]:
    """Per grid time of a branch sweep, its kernel's shape: the padded branches before
    and after the time's branching, the padded read-outs, and whether a propagation
    follows. The padded sizes only grow during a sweep (a power of two at least the
    largest count so far), so that a sweep compiles a kernel per growth, not one per
    rise and fall of its branches."""
    shapes = []
    before = reads = 1
    for k, branching in enumerate(steps):
        count = len(branching.keep) + sum(len(sources) for _, sources in branching.children)
        after = max(before, branch_bucket(count))
        reads = max(reads, branch_bucket(sum(len(s) for s, _ in branching.readouts)))
        shapes.append((before, after, reads, k < len(steps) - 1))
        before = after
    return shapes


def _branch_step(
    state: Any,
    firsts: Any,
    seconds: Any,
    pair: Any,
    bath_rows: tuple[Any, ...],
    cap_rows: tuple[Any, ...],
    slots: tuple[Any, Any, Any],
    reads: tuple[Any, Any],
    maps: Any,
    baths: tuple[tuple[Any, ...], ...],
    propagate: bool,
) -> tuple[Any, Any]:
    """One grid time of a branch sweep for one member (traced; ``jax.vmap`` adds the
    members): read out, branch, propagate.

    Shapes: state (B_1, ..., B_n, P, d^2); firsts, seconds (U, d^2, d^2) and ``pair``,
    the step's row; ``bath_rows`` and ``cap_rows``, each bath's row of its table for the
    step and of its cap table for the time (a last row of ones at t_0); ``slots``
    (sources (P',) int, maps (P',) int into ``maps`` (K, d^2, d^2), mask (P',)): the
    branches after the time; ``reads`` (sources (Q,) int, vectors (Q, d^2)). Returns
    the state (B_1, ..., B_n, P', d^2) and the values (Q,).
    """
    import jax.numpy as jnp

    closed = close_caps(state, [bath[4][row] for row, bath in zip(cap_rows, baths)])  # (P, d^2)
    values = jnp.sum(closed[reads[0]] * reads[1], axis=-1)
    gathered = jnp.take(state, slots[0], axis=-2)
    state = jnp.einsum("...pa,pba->...pb", gathered, maps[slots[1]]) * slots[2][:, None]
    if propagate:
        state = apply_matrix(
            process_step(apply_matrix(state, firsts[pair]), bath_rows, baths), seconds[pair]
        )
    return state, values


@functools.cache
def _compiled_branch_step(propagate: bool, per_member: bool, backend: str) -> Any:
    import jax

    axis = 1 if per_member else None
    mapped = jax.vmap(
        functools.partial(_branch_step, propagate=propagate),
        in_axes=(0, axis, axis, None, None, None, None, None, None, None),
    )
    return compile_kernel(mapped, platform=backend)


def _padded(parts: Sequence[Any], size: int, tail: tuple[int, ...], dtype: Any) -> Any:
    """``parts`` joined along their first axis and padded with zeros to ``size`` rows."""
    padded = default_np.zeros((size,) + tail, dtype)
    if parts:
        joined = default_np.concatenate([default_np.asarray(part, dtype) for part in parts])
        padded[: len(joined)] = joined
    return padded


class MemoryTables:
    """The step tensors of a branch sweep from process tensors in memory: the tables
    of :func:`~.scan.stack_padded` on the device once, each grid time a row of them.

    ``baths`` as from :func:`~.scan.stack_padded` (caps of every propagated step);
    each cap table gets a last row of ones, the caps at t_0 (bonds 1)."""

    def __init__(self, baths: Sequence[tuple[Any, ...]], device: Any):
        import jax

        self.dtype = baths[0][3].dtype
        self.bonds = tuple(bath[3].shape[1] for bath in baths)
        ones = [default_np.ones((1, bath[4].shape[1]), self.dtype) for bath in baths]
        on_host = tuple(
            bath[:4] + (default_np.concatenate([bath[4], one]),) + bath[5:]
            for bath, one in zip(host_baths(baths, self.dtype), ones)
        )
        self._rows = [bath[5] for bath in on_host]
        self._ones = [bath[4].shape[0] - 1 for bath in on_host]
        self._tables = jax.device_put(on_host, device)

    def at(self, k: int) -> tuple[Any, tuple[Any, ...], tuple[Any, ...]]:
        """(tables, each bath's row of step k, each bath's cap row at t_k)."""
        step = min(k, len(self._rows[0]) - 1)  # (the last time propagates nothing)
        return (
            self._tables,
            tuple(default_np.int32(rows[step]) for rows in self._rows),
            tuple(
                default_np.int32(rows[k - 1] if k else one)
                for rows, one in zip(self._rows, self._ones)
            ),
        )


class StreamedTables:
    """The step tensors of a branch sweep read on the host (process tensors in files),
    one grid time at a time: per bath a table of that step's tensor and the cap before
    it (else ones, at t_0), padded to the bath's largest bond and copied to the device.

    ``prepared``: the eager engine's prepared process tensors (caps of every step,
    host arrays); ``bonds`` and ``classes``: each one's largest bond and number of
    classes; ``num_steps``: the steps propagated."""

    def __init__(
        self,
        prepared: Sequence[Any],
        bonds: Sequence[int],
        classes: Sequence[int],
        num_steps: int,
        dtype: Any,
        device: Any,
    ):
        self.dtype = dtype
        self.bonds = tuple(int(bond) for bond in bonds)
        self._classes = [int(count) for count in classes]
        self._prepared = prepared
        self._num_steps = num_steps
        self._device = device

    def at(self, k: int) -> tuple[Any, tuple[Any, ...], tuple[Any, ...]]:
        """(tables, each bath's row of step k, each bath's cap row at t_k)."""
        import jax

        from ...backends.numerical_backend import numpy_in_this_thread

        baths = []
        with numpy_in_this_thread():
            for on_host, bond, count in zip(self._prepared, self.bonds, self._classes):
                table = default_np.zeros((1, bond, bond, count), self.dtype)
                caps = default_np.zeros((2, bond), self.dtype)
                caps[1] = 1.0
                if k < self._num_steps:
                    tensor = on_host.tensor(k)
                    table[0, : tensor.shape[0], : tensor.shape[1]] = tensor
                if k:
                    cap = on_host.cap(k - 1)
                    caps[0, : cap.shape[0]] = cap
                baths.append(
                    (
                        default_np.asarray(on_host.transform_in, self.dtype),
                        default_np.asarray(on_host.transform_out, self.dtype),
                        default_np.asarray(on_host.classes, default_np.int32),
                        table,
                        caps,
                        default_np.zeros(1, default_np.int32),
                    )
                )
        rows = tuple(default_np.int32(0) for _ in baths)
        cap_rows = tuple(default_np.int32(0 if k else 1) for _ in baths)
        return jax.device_put(tuple(baths), self._device), rows, cap_rows


def run_sweep(
    initial: Any,
    firsts: Any,
    seconds: Any,
    rows: Any,
    per_member: bool,
    tables: MemoryTables | StreamedTables,
    steps: Sequence[BranchStep],
    on_step: Callable[[int], None],
    device: Any = None,
) -> list[list[default_np.ndarray]]:
    """A branch sweep (:meth:`~nonmarkov.engines.base.ChainEngine.sweep`) on ``device``:
    the state on the device, padded to the tables' bonds and to a power of two of
    branches; one compiled kernel call per grid time (:func:`_branch_step`, one kernel
    per shape of :func:`sweep_shapes`); the values read back once, at the end.

    ``initial`` (B, d^2); ``firsts``/``seconds``/``rows``/``per_member`` as from
    :func:`~.scan.propagator_table`; ``tables``: the step tensors and caps, in memory
    or streamed. Returns the values per grid time per read-out group, (B, n).
    """
    import jax

    initial = default_np.asarray(initial)
    dtype = tables.dtype
    members, d2 = initial.shape
    bonds = tables.bonds
    padded = default_np.zeros((members,) + bonds + (1, d2), dtype)
    padded[(slice(None),) + (0,) * len(bonds)] = initial[:, None, :]
    distinct: dict[bytes, int] = {default_np.eye(d2, dtype=dtype).tobytes(): 0}
    stack = [default_np.eye(d2, dtype=dtype)]
    for branching in steps:
        for superoperator, _ in branching.children:
            matrix = default_np.asarray(superoperator, dtype)
            if distinct.setdefault(matrix.tobytes(), len(stack)) == len(stack):
                stack.append(matrix)
    maps = default_np.zeros((branch_bucket(len(stack)), d2, d2), dtype)
    maps[: len(stack)] = stack
    state, firsts, seconds, maps = jax.device_put(
        (padded, default_np.asarray(firsts, dtype), default_np.asarray(seconds, dtype), maps),
        device,
    )
    platform = platform_of(device)
    collected = []
    for k, (branching, shape) in enumerate(zip(steps, sweep_shapes(steps))):
        _, width, reads, propagate = shape
        sources = [branching.keep] + [group for _, group in branching.children]
        maps_of = [default_np.zeros(len(branching.keep))] + [
            default_np.full(len(group), distinct[default_np.asarray(op, dtype).tobytes()])
            for op, group in branching.children
        ]
        count = sum(len(group) for group in sources)
        slots = (
            _padded(sources, width, (), default_np.int32),
            _padded(maps_of, width, (), default_np.int32),
            _padded([default_np.ones(count)], width, (), dtype),
        )
        read_in = (
            _padded([group for group, _ in branching.readouts], reads, (), default_np.int32),
            _padded(
                [default_np.broadcast_to(v, (len(g), d2)) for g, v in branching.readouts],
                reads,
                (d2,),
                dtype,
            ),
        )
        step = min(k, len(rows) - 1)  # (the last time propagates nothing)
        baths, bath_rows, cap_rows = tables.at(k)
        state, values = _compiled_branch_step(propagate, per_member, platform)(
            state,
            firsts,
            seconds,
            default_np.int32(rows[step]),
            bath_rows,
            cap_rows,
            slots,
            read_in,
            maps,
            baths,
        )
        collected.append(values)
        if propagate:
            on_step(1)
    fetched = jax.device_get(collected)
    results = []
    for branching, values in zip(steps, fetched):
        offsets = default_np.cumsum([0] + [len(s) for s, _ in branching.readouts])
        results.append(
            [
                default_np.asarray(values[:, offsets[i] : offsets[i + 1]])
                for i in range(len(branching.readouts))
            ]
        )
    return results
