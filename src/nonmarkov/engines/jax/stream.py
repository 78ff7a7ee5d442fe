"""A chain run on process tensors read from files, streamed to the device: the step
tensors copied a chunk of steps at a time and scanned by one compiled kernel (the
member scan of :mod:`.scan`) while the next chunk is read; the adjoint method the
same way, forward and then backward over the chunks. Requires JAX.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any

import numpy as default_np

from .compiler import compile_kernel
from .scan import adjoint_backward, adjoint_forward, member_scan, platform_of


@functools.cache
def _compiled_chunk(per_member: bool, backend: str) -> Any:
    import jax

    axis = 1 if per_member else None
    mapped = jax.vmap(
        functools.partial(member_scan, record_all=True, carry=True),
        in_axes=(0, axis, axis, None, None),
        out_axes=(0, 1),
    )
    return compile_kernel(mapped, platform=backend)


def _scan_tables(
    baths: Sequence[tuple[Any, ...]], rows: default_np.ndarray, dtype: Any
) -> tuple[tuple[Any, ...], ...]:
    """Per process tensor of a chunk, the member scan's table: (transform_in,
    transform_out, classes, step table, cap table) of :func:`chunk_table` and the
    chunk's ``rows`` into them."""
    return tuple(
        (
            default_np.asarray(transform_in, dtype),
            default_np.asarray(transform_out, dtype),
            default_np.asarray(classes, default_np.int32),
            table,
            cap_table,
            rows,
        )
        for transform_in, transform_out, classes, table, cap_table in baths
    )


def chunk_table(
    tensors: Sequence[Any], caps: Sequence[Any], bond: int, size: int, dtype: Any
) -> tuple[default_np.ndarray, default_np.ndarray]:
    """The step tensors T_k[b, b', c] and caps_k[b'] of a chunk as a table (size + 1, bond,
    bond, m) and (size + 1, bond), zero-padded; the last row is the identity, a step
    that changes nothing (the padding of a short last chunk)."""
    num_classes = tensors[0].shape[2]
    table = default_np.zeros((size + 1, bond, bond, num_classes), dtype)
    cap_table = default_np.zeros((size + 1, bond), dtype)
    for row, (tensor, cap) in enumerate(zip(tensors, caps)):
        table[row, : tensor.shape[0], : tensor.shape[1]] = tensor
        cap_table[row, : cap.shape[0]] = cap
    table[size] = default_np.eye(bond, dtype=dtype)[:, :, None]
    return table, cap_table


def run_stream(
    initial: Any,
    firsts: Any,
    seconds: Any,
    rows: Any,
    per_member: bool,
    chunks: Any,
    size: int,
    record_all: bool,
    on_step: Callable[[int], None],
    dtype: Any,
    device: Any = None,
) -> default_np.ndarray:
    """A run whose step tensors come a chunk at a time (process tensors read from
    files): the state stays on ``device``, each chunk's tables are copied there and
    scanned by one compiled kernel (the same for every chunk: a short last chunk is
    padded with identity steps) while the next chunk is read.

    ``initial`` (B, d^2); ``firsts``/``seconds`` (U, [B,] d^2, d^2) and ``rows``
    (N,) as from :func:`propagator_table`; ``chunks`` yields, per chunk of at most
    ``size`` steps, its number of steps and per process tensor (transform_in,
    transform_out, classes, table, cap table) with the tables of :func:`chunk_table`
    in ``dtype``. Returns the read-outs on the host, (N, B, d^2) with ``record_all``
    else (1, B, d^2).
    """
    import jax

    initial = default_np.asarray(initial)
    members, d2 = initial.shape
    identity = default_np.broadcast_to(
        default_np.eye(d2, dtype=dtype), (1,) + default_np.shape(firsts)[1:]
    )
    firsts = default_np.concatenate([default_np.asarray(firsts, dtype), identity])
    seconds = default_np.concatenate([default_np.asarray(seconds, dtype), identity])
    kernel = _compiled_chunk(bool(per_member), platform_of(device))
    state: Any = None
    firsts, seconds = jax.device_put((firsts, seconds), device)
    collected, start = [], 0
    for count, baths in chunks:
        if state is None:
            bonds = tuple(bath[3].shape[1] for bath in baths)
            padded = default_np.zeros((members,) + bonds + (d2,), dtype)
            padded[(slice(None),) + (0,) * len(bonds)] = initial
            state = jax.device_put(padded, device)
        step_rows = default_np.full(size, len(firsts) - 1, default_np.int32)
        step_rows[:count] = rows[start : start + count]
        bath_rows = default_np.full(size, size, default_np.int32)
        bath_rows[:count] = default_np.arange(count)
        tables = jax.device_put(_scan_tables(baths, bath_rows, dtype), device)
        state, readouts = kernel(state, firsts, seconds, jax.device_put(step_rows, device), tables)
        collected.append(readouts[:count] if record_all else readouts[count - 1 : count])
        start += count
        on_step(count)
    if not record_all:
        collected = collected[-1:]
    return default_np.concatenate([default_np.asarray(a) for a in jax.device_get(collected)])


@functools.cache
def _compiled_adjoint_chunk(backend: str) -> tuple[Any, Any]:
    return (
        compile_kernel(adjoint_forward, platform=backend),
        compile_kernel(adjoint_backward, platform=backend),
    )


def adjoint_stream(
    initial: Any,
    steps: tuple[Any, Any, Any, Any],
    chunk: Callable[[int], tuple[int, list[tuple[Any, ...]]]],
    num_steps: int,
    size: int,
    last_caps: Sequence[Any],
    target: Callable[[default_np.ndarray], default_np.ndarray],
    record_all: bool,
    on_step: Callable[[int], None],
    dtype: Any,
    device: Any = None,
) -> tuple[default_np.ndarray, default_np.ndarray]:
    """The adjoint method (:func:`~.scan.adjoint_chain`) on step tensors read a chunk at a
    time: the forward pass chunk by chunk (the states before each step kept on the
    device), ``target`` of the final read-out on the host, then the backward pass over
    the chunks in reverse, each chunk's tables read again; two compiled kernels for
    every chunk and two for a shorter last one (not padded: the backward pass would
    run through the padding first).

    ``initial`` (d^2,); ``steps``: (first, second, before, after), each (N, d^2, d^2)
    host arrays; ``chunk(i)`` -> (steps in chunk i, per process tensor (transform_in,
    transform_out, classes, table, cap table) of :func:`chunk_table`); ``last_caps``:
    each process tensor's cap after the last step, padded to its table's bond.
    Returns the read-outs (N, d^2) (or (1, d^2)) and D (N, d^2, d^2, d^2, d^2).
    """
    import jax

    forward, backward = _compiled_adjoint_chunk(platform_of(device))
    d2 = default_np.asarray(initial).size
    chunks = range(0, num_steps, size)

    def placed(index: int) -> tuple[int, Any, Any]:
        count, baths = chunk(index)
        start = index * size
        blocks = [default_np.asarray(a[start : start + count], dtype) for a in steps]
        tables = _scan_tables(baths, default_np.arange(count, dtype=default_np.int32), dtype)
        return count, jax.device_put(tuple(blocks), device), jax.device_put(tables, device)

    state: Any = None
    stored, collected, counts = [], [], []
    for index, _ in enumerate(chunks):
        count, arrays, tables = placed(index)
        if state is None:
            bonds = tuple(bath[3].shape[1] for bath in tables)
            state = default_np.zeros(bonds + (d2,), dtype)
            state[(0,) * len(bonds)] = default_np.asarray(initial).reshape(-1)
            state = jax.device_put(state, device)
        state, kept, readouts = forward(state, *arrays, tables)
        stored.append(kept)
        collected.append(readouts[:count])
        counts.append(count)
        on_step(count)
    readouts = default_np.concatenate([default_np.asarray(a) for a in jax.device_get(collected)])
    adjoint = default_np.asarray(target(readouts[-1]), dtype)
    for cap in reversed(last_caps):
        adjoint = default_np.tensordot(default_np.asarray(cap, dtype), adjoint, axes=0)
    adjoint = jax.device_put(adjoint, device)
    derivatives = []
    for index in reversed(range(len(counts))):
        count, arrays, tables = placed(index)
        adjoint, chunk_derivatives = backward(adjoint, stored[index], *arrays, tables)
        stored[index] = None
        derivatives.append(chunk_derivatives[:count])
        on_step(count)
    derivatives.reverse()
    kept_readouts = readouts if record_all else readouts[-1:]
    return kept_readouts, default_np.concatenate(
        [default_np.asarray(a) for a in jax.device_get(derivatives)]
    )
