"""Compiled (``jax.jit``) contraction of process tensors with a system state.

The steps of :mod:`nonmarkov.kernels.chain` for a whole run at once: the state
``v[b_1, ..., b_n, alpha]`` is carried through a ``lax.scan`` over the
steps; at each step the half-step propagators and every process tensor's
transforms and step tensor are applied, and (optionally) the bonds are closed
with that step's caps to give the read-out. The distinct (step tensor, cap)
pairs of a process tensor are padded with zeros to one bond dimension and
stacked into a table, and the scan runs over each step's row of it: static
shapes, exact zero padding, and a uniform process tensor (whose steps repeat
one tensor) takes a table of K + 1 rows for any number of steps.

Everything here is array algebra; requires JAX.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

import numpy as default_np

from .compiler import compile_kernel

#: Largest tables of padded step tensors (all process tensors) run by the compiled scan.
SCAN_BYTES = 2 * 2**30


def distinct_steps(tensors: Sequence[Any], caps: Sequence[Any]) -> tuple[list[int], list[int]]:
    """The steps whose (tensor, cap) pair first appears there (the same array objects
    count as the same), and each step's index into them."""
    first: list[int] = []
    rows: list[int] = []
    seen: dict[tuple[int, int], int] = {}
    for step, (tensor, cap) in enumerate(zip(tensors, caps)):
        key = (id(tensor), id(cap))
        if key not in seen:
            seen[key] = len(first)
            first.append(step)
        rows.append(seen[key])
    return first, rows


def table_bytes(tensors: Sequence[Any], caps: Sequence[Any], dtype: Any) -> int:
    """Bytes of the table :func:`stack_padded` makes of ``tensors``."""
    first, _ = distinct_steps(tensors, caps)
    bond = max(max(t.shape[0], t.shape[1]) for t in tensors)
    return len(first) * bond**2 * tensors[0].shape[2] * default_np.dtype(dtype).itemsize


def stack_padded(
    tensors: Sequence[Any], caps: Sequence[Any], dtype: Any
) -> tuple[default_np.ndarray, default_np.ndarray, default_np.ndarray]:
    """Host arrays: the distinct pairs of step tensors T_k[b, b', c] and caps_k[b']
    as a table (U, B, B, m) and (U, B), and the row of each step (N,) int32.

    B is the largest bond dimension; missing entries are zero.
    """
    first, rows = distinct_steps(tensors, caps)
    bond = max(max(t.shape[0], t.shape[1]) for t in tensors)
    num_classes = tensors[0].shape[2]
    table = default_np.zeros((len(first), bond, bond, num_classes), dtype)
    cap_table = default_np.zeros((len(first), bond), dtype)
    for row, step in enumerate(first):
        tensor, cap = tensors[step], caps[step]
        table[row, : tensor.shape[0], : tensor.shape[1]] = tensor
        cap_table[row, : cap.shape[0]] = cap
    return table, cap_table, default_np.asarray(rows, dtype=default_np.int32)


def _run(
    state: Any, first: Any, second: Any, baths: tuple[tuple[Any, ...], ...], record_all: bool
) -> Any:
    """The scan over steps (traced by ``jax.jit``).

    Shapes: state (B_1, ..., B_n, d^2), first and second (d^2, d^2); each
    entry of ``baths`` is (transform_in (d^2, d^2), transform_out (d^2, d^2),
    classes (d^2,) int, table (U, B, B, m), cap table (U, B), rows (N,) int).
    Returns the read-outs (N, d^2), or (1, d^2) for the last step only.
    """
    import jax.numpy as jnp
    from jax import lax

    def apply(state: Any, matrix: Any) -> Any:
        return jnp.tensordot(state, matrix, axes=([state.ndim - 1], [1]))

    def close(state: Any, caps: Sequence[Any]) -> Any:
        for cap in caps:
            state = jnp.tensordot(cap, state, axes=([0], [0]))
        return state

    def step(state: Any, rows: tuple[Any, ...]) -> tuple[Any, Any]:
        state = apply(state, first)
        caps = []
        for axis, (transform_in, transform_out, classes, table, cap_table, _) in enumerate(baths):
            caps.append(cap_table[rows[axis]])
            state = apply(state, transform_in)
            expanded = table[rows[axis]][:, :, classes]  # (b, b', alpha)
            moved = jnp.moveaxis(state, axis, -2)
            moved = jnp.einsum("...ba,bca->...ca", moved, expanded)
            state = apply(jnp.moveaxis(moved, -2, axis), transform_out)
        state = apply(state, second)
        readout = close(state, caps) if record_all else None
        return state, readout

    state, readouts = lax.scan(step, state, tuple(bath[5] for bath in baths))
    if record_all:
        return readouts
    return close(state, [bath[4][bath[5][-1]] for bath in baths])[None]


@functools.cache
def _compiled_run(record_all: bool, backend: str) -> Any:
    return compile_kernel(functools.partial(_run, record_all=record_all))


def run_chain(
    state: Any,
    first: Any,
    second: Any,
    baths: Sequence[tuple[Any, Any, Any, Any, Any, Any]],
    record_all: bool,
) -> default_np.ndarray:
    """Contract all steps on the device; one transfer in, one out.

    ``state`` (1, ..., 1, d^2) host array; ``first``/``second`` (d^2, d^2) the
    half-step propagators of every step; ``baths`` per process tensor
    (transform_in, transform_out, classes, table (U, B, B, m), cap table (U, B),
    rows (N,)) as from :func:`stack_padded`. Returns the read-outs
    on the host, (N, d^2) with ``record_all`` else (1, d^2) for the last step.
    """
    import jax

    dtype = baths[0][3].dtype if baths else default_np.asarray(first).dtype
    bonds = tuple(bath[3].shape[1] for bath in baths)
    padded = default_np.zeros(bonds + (state.shape[-1],), dtype)
    padded[(0,) * len(bonds)] = default_np.asarray(state).reshape(-1)
    on_host = tuple(
        (
            default_np.asarray(b[0], dtype),
            default_np.asarray(b[1], dtype),
            default_np.asarray(b[2], default_np.int32),
            b[3],
            b[4],
            b[5],
        )
        for b in baths
    )
    device = jax.device_put(
        (padded, default_np.asarray(first, dtype), default_np.asarray(second, dtype), on_host)
    )
    readouts = _compiled_run(bool(record_all), jax.default_backend())(*device)
    return default_np.asarray(jax.device_get(readouts))
