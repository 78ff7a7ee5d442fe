"""Compiled (``jax.jit``) batched contraction: a batch of system states through
the same process-tensor steps in one ``lax.scan``, ``jax.vmap``-ped over the
members.

The scan of one member is that of :mod:`.chain` (the padded tables of distinct
(step tensor, cap) pairs, exact zero padding), with its own half-step
propagators: a table of distinct propagator pairs (one row when they are
constant, else one per step, controls folded in) and each step's row of it.
``jax.vmap`` maps it over the members: the states and, when the propagators
differ between members, the propagator tables; the process tensors' tables are
shared. Requires JAX.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

import numpy as default_np

from ..base import ChainRun
from ..eager import folded
from .chain import platform_of
from .compiler import compile_kernel


def _member(
    state: Any,
    firsts: Any,
    seconds: Any,
    propagator_rows: Any,
    baths: tuple[tuple[Any, ...], ...],
    record_all: bool,
) -> Any:
    """The scan of one member (traced; ``jax.vmap`` adds the batch).

    Shapes: state (B_1, ..., B_n, d^2); firsts and seconds (U, d^2, d^2), the
    distinct propagator pairs, and propagator_rows (N,) int, each step's row;
    each entry of ``baths`` is (transform_in, transform_out, classes (d^2,) int,
    table (U', B, B, m), cap table (U', B), rows (N,) int). Returns the read-outs
    (N, d^2), or (1, d^2) for the last step only.
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
        state = apply(state, firsts[rows[0]])
        caps = []
        for axis, (transform_in, transform_out, classes, table, cap_table, _) in enumerate(baths):
            row = rows[axis + 1]
            caps.append(cap_table[row])
            state = apply(state, transform_in)
            expanded = table[row][:, :, classes]  # (b, b', alpha)
            moved = jnp.moveaxis(state, axis, -2)
            moved = jnp.einsum("...ba,bca->...ca", moved, expanded)
            state = apply(jnp.moveaxis(moved, -2, axis), transform_out)
        state = apply(state, seconds[rows[0]])
        return state, (close(state, caps) if record_all else None)

    xs = (propagator_rows,) + tuple(bath[5] for bath in baths)
    state, readouts = lax.scan(step, state, xs)
    if record_all:
        return readouts
    return close(state, [bath[4][bath[5][-1]] for bath in baths])[None]


@functools.cache
def _compiled_batch(record_all: bool, per_member: bool, backend: str) -> Any:
    import jax

    axis = 1 if per_member else None
    mapped = jax.vmap(
        functools.partial(_member, record_all=record_all),
        in_axes=(0, axis, axis, None, None),
        out_axes=1,
    )
    return compile_kernel(mapped, platform=backend)


def propagator_table(
    run: ChainRun,
) -> tuple[default_np.ndarray, default_np.ndarray, default_np.ndarray, bool]:
    """(firsts, seconds, rows, per_member): the distinct folded propagator pairs of
    ``run`` as (U, d^2, d^2) (shared) or (U, B, d^2, d^2) (per member), and each
    step's row (N,) int32. One row when the propagators are constant and there
    are no controls, else one per step."""
    steps = 1 if run.constant_propagators and run.controls is None else run.num_steps
    pairs = []
    for step in range(steps):
        before, after = (None, None) if run.controls is None else run.controls(step)
        pairs.append(folded(*run.propagators(step), before, after))
    per_member = any(default_np.ndim(a) == 3 for pair in pairs for a in pair)
    members, d2 = default_np.shape(run.initial)
    shape = (members, d2, d2) if per_member else (d2, d2)
    firsts = default_np.stack([default_np.broadcast_to(p[0], shape) for p in pairs])
    seconds = default_np.stack([default_np.broadcast_to(p[1], shape) for p in pairs])
    rows = default_np.arange(run.num_steps, dtype=default_np.int32) % steps
    return firsts, seconds, rows, per_member


def run_batch(
    initial: Any,
    firsts: Any,
    seconds: Any,
    rows: Any,
    per_member: bool,
    baths: Sequence[tuple[Any, ...]],
    record_all: bool,
    device: Any = None,
) -> default_np.ndarray:
    """Contract all steps of all members on ``device`` (None: JAX's default); one
    transfer in, one out.

    ``initial`` (B, d^2); ``firsts``/``seconds`` (U, [B,] d^2, d^2) and ``rows``
    (N,) as from :func:`propagator_table`; ``baths`` per process tensor
    (transform_in, transform_out, classes, table, cap table, rows) as from
    :func:`~.chain.stack_padded`. Returns the read-outs on the host, (N, B, d^2)
    with ``record_all`` else (1, B, d^2).
    """
    import jax

    dtype = baths[0][3].dtype
    initial = default_np.asarray(initial)
    members, d2 = initial.shape
    bonds = tuple(bath[3].shape[1] for bath in baths)
    padded = default_np.zeros((members,) + bonds + (d2,), dtype)
    padded[(slice(None),) + (0,) * len(bonds)] = initial
    placed = jax.device_put(
        (
            padded,
            default_np.asarray(firsts, dtype),
            default_np.asarray(seconds, dtype),
            rows,
            baths,
        ),
        device,
    )
    compiled = _compiled_batch(bool(record_all), bool(per_member), platform_of(device))
    return default_np.asarray(jax.device_get(compiled(*placed)))
