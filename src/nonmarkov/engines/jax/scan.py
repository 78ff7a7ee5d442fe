"""Compiled (``jax.jit``) contraction of process tensors with system states.

The steps of :mod:`nonmarkov.kernels.chain` for a whole run at once: the state
``v[b_1, ..., b_n, alpha]`` of one member is carried through a ``lax.scan`` over
the steps (:func:`member_scan`); at each step the half-step propagators and
every process tensor's transforms and step tensor are applied, and (optionally)
the bonds are closed with that step's caps to give the read-out. The distinct
(step tensor, cap) pairs of a process tensor are padded with zeros to one bond
dimension and stacked into a table, and the scan runs over each step's row of
it: static shapes, exact zero padding, and a uniform process tensor (whose
steps repeat one tensor) takes a table of K + 1 rows for any number of steps.
The propagators are a table too: the distinct (first, second) pairs, controls
folded in, one row when they are constant.

A run is a batch: ``jax.vmap`` maps the one scan over the members
(:func:`run_members`; a single run is a batch of one), sharing the process
tensors' tables and, unless they differ between members, the propagators.
:func:`differentiable_chain` traces the same scan for one member; the adjoint
method (:func:`adjoint_chain`) is two scans of its own (it keeps every state).

Everything here is array algebra; requires JAX.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any

import numpy as default_np

from ..base import ChainRun
from ..eager_chain import folded
from .compiler import compile_kernel

#: the compiled scans this process has run, by kernel key (their kernels are in JAX's
#: cache: a run of the same shapes compiles nothing)
SCANNED: set[tuple[Any, ...]] = set()


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


def apply_matrix(state: Any, matrix: Any) -> Any:
    """``matrix`` (d^2, d^2) on the last axis of ``state``."""
    import jax.numpy as jnp

    return jnp.tensordot(state, matrix, axes=([state.ndim - 1], [1]))


def close_caps(state: Any, caps: Sequence[Any]) -> Any:
    """Contract the bond axes of ``state`` (bonds..., [batch,] d^2) with ``caps``."""
    import jax.numpy as jnp

    for cap in caps:
        state = jnp.tensordot(cap, state, axes=([0], [0]))
    return state


def process_step(
    state: Any, rows: Sequence[Any], baths: Sequence[tuple[Any, ...]], transposed: bool = False
) -> Any:
    """Every process tensor's step (table row ``rows[i]`` of bath i) on ``state``
    (bonds..., [batch,] d^2); ``transposed``: the transpose, the last bath first."""
    import jax.numpy as jnp

    order = range(len(baths) - 1, -1, -1) if transposed else range(len(baths))
    for axis in order:
        transform_in, transform_out, classes, table, _, _ = baths[axis]
        expanded = table[rows[axis]][:, :, classes]  # (b, b', alpha)
        if transposed:
            transform_in, transform_out = transform_out.T, transform_in.T
            expanded = jnp.swapaxes(expanded, 0, 1)
        state = apply_matrix(state, transform_in)
        moved = jnp.einsum("...ba,bca->...ca", jnp.moveaxis(state, axis, -2), expanded)
        state = apply_matrix(jnp.moveaxis(moved, -2, axis), transform_out)
    return state


def _caps_of(rows: Sequence[Any], baths: Sequence[tuple[Any, ...]]) -> list[Any]:
    return [bath[4][row] for row, bath in zip(rows, baths)]


def member_scan(
    state: Any,
    firsts: Any,
    seconds: Any,
    propagator_rows: Any,
    baths: tuple[tuple[Any, ...], ...],
    record_all: bool,
    remat: bool = False,
    carry: bool = False,
) -> Any:
    """The scan of one member over the steps (traced by ``jax.jit``; differentiable;
    ``jax.vmap`` adds the members).

    Shapes: state (B_1, ..., B_n, d^2); firsts and seconds (U, d^2, d^2), the
    distinct half-step propagator pairs (controls folded in), and propagator_rows
    (N,) int, each step's row; each entry of ``baths`` is (transform_in (d^2, d^2),
    transform_out (d^2, d^2), classes (d^2,) int, table (U', B, B, m), cap table
    (U', B), rows (N,) int). ``remat``: recompute each step's intermediates in a
    backward pass (``jax.checkpoint``) instead of storing them, so that reverse-mode
    autodiff holds one state per step. Returns the read-outs (N, d^2), or (1, d^2)
    for the last step only; ``carry``: (the state after the last step, the read-outs
    (N, d^2)), for a run streamed in chunks (:func:`run_stream`).
    """
    import jax
    from jax import lax

    def step(state: Any, rows: tuple[Any, ...]) -> tuple[Any, Any]:
        pair, bath_rows = rows[0], rows[1:]
        state = apply_matrix(
            process_step(apply_matrix(state, firsts[pair]), bath_rows, baths), seconds[pair]
        )
        return state, (close_caps(state, _caps_of(bath_rows, baths)) if record_all else None)

    body = jax.checkpoint(step) if remat else step
    inputs = (propagator_rows,) + tuple(bath[5] for bath in baths)
    state, readouts = lax.scan(body, state, inputs)
    if carry:
        return state, readouts
    if record_all:
        return readouts
    return close_caps(state, [bath[4][bath[5][-1]] for bath in baths])[None]


def adjoint_forward(
    state: Any, first: Any, second: Any, before: Any, after: Any, baths: tuple
) -> tuple[Any, Any, Any]:
    """The forward pass of the adjoint method (traced): the state after the last step,
    every state before its step (N, B_1, ..., B_n, d^2) and every read-out (N, d^2).
    Controls before/after (N, d^2, d^2) act around each step's propagation."""
    from jax import lax

    def step(state: Any, inputs: tuple[Any, ...]) -> tuple[Any, tuple[Any, Any]]:
        rows, first_k, second_k, before_k, after_k = inputs
        stored = state
        state = apply_matrix(
            process_step(apply_matrix(apply_matrix(state, before_k), first_k), rows, baths),
            second_k,
        )
        state = apply_matrix(state, after_k)
        return state, (stored, close_caps(state, _caps_of(rows, baths)))

    inputs = (tuple(bath[5] for bath in baths), first, second, before, after)
    state, (stored, readouts) = lax.scan(step, state, inputs)
    return state, stored, readouts


def adjoint_backward(
    adjoint: Any, stored: Any, first: Any, second: Any, before: Any, after: Any, baths: tuple
) -> tuple[Any, Any]:
    """The backward pass (traced) from ``adjoint`` (B_1, ..., B_n, d^2) after the last
    step: the adjoint before the first step and D_k[a, b, c, e] (N, d^2, d^2, d^2, d^2)
    from the stored states (:mod:`nonmarkov.methods.gradient`)."""
    import jax.numpy as jnp
    from jax import lax

    d2 = adjoint.shape[-1]
    identity = jnp.eye(d2, dtype=adjoint.dtype)
    bonds = list(range(len(baths)))

    def step(adjoint: Any, inputs: tuple[Any, ...]) -> tuple[Any, Any]:
        rows, state, first_k, second_k, before_k, after_k = inputs
        source = apply_matrix(state, before_k)
        units = (source[..., :, None, None] * identity).reshape(source.shape[:-1] + (d2 * d2, d2))
        moved = process_step(units, rows, baths)  # (bonds'..., a b, c)
        lam = apply_matrix(adjoint, after_k.T)
        derivative = jnp.tensordot(moved, lam, axes=(bonds, bonds)).reshape(d2, d2, d2, d2)
        adjoint = apply_matrix(
            process_step(apply_matrix(lam, second_k.T), rows, baths, True), first_k.T
        )
        return apply_matrix(adjoint, before_k.T), derivative

    inputs = (tuple(bath[5] for bath in baths), stored, first, second, before, after)
    return lax.scan(step, adjoint, inputs, reverse=True)


def _adjoint_backward(
    stored: Any, first: Any, second: Any, before: Any, after: Any, baths: tuple, target: Any
) -> Any:
    """:func:`adjoint_backward` from the target (d^2,) closed by the last caps: the
    derivatives."""
    import jax.numpy as jnp

    adjoint = target
    for cap in reversed(_caps_of([bath[5][-1] for bath in baths], baths)):
        adjoint = jnp.tensordot(cap, adjoint, axes=0)
    return adjoint_backward(adjoint, stored, first, second, before, after, baths)[1]


def _adjoint_forward(
    state: Any, first: Any, second: Any, before: Any, after: Any, baths: tuple
) -> tuple[Any, Any]:
    return adjoint_forward(state, first, second, before, after, baths)[1:]


@functools.cache
def _compiled_members(record_all: bool, per_member: bool, backend: str) -> Any:
    import jax

    axis = 1 if per_member else None
    mapped = jax.vmap(
        functools.partial(member_scan, record_all=record_all),
        in_axes=(0, axis, axis, None, None),
        out_axes=1,
    )
    return compile_kernel(mapped, platform=backend)


def host_baths(baths: Sequence[tuple[Any, ...]], dtype: Any) -> tuple[tuple[Any, ...], ...]:
    return tuple(
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


def propagator_table(
    run: ChainRun,
) -> tuple[default_np.ndarray, default_np.ndarray, default_np.ndarray, bool]:
    """(firsts, seconds, rows, per_member): the distinct propagator pairs of ``run``,
    controls folded in (``first @ before``, ``after @ second``), as (U, d^2, d^2)
    (shared) or (U, B, d^2, d^2) (per member), and each step's row (N,) int32. One
    row when the propagators are constant and there are no controls, else one per
    step. A run without a member axis is a batch of one."""
    steps = 1 if run.constant_propagators and run.controls is None else run.num_steps
    pairs = []
    for step in range(steps):
        before, after = (None, None) if run.controls is None else run.controls(step)
        pairs.append(folded(*run.propagators(step), before, after))
    per_member = any(default_np.ndim(a) == 3 for pair in pairs for a in pair)
    members, d2 = default_np.shape(default_np.atleast_2d(run.initial))
    shape = (members, d2, d2) if per_member else (d2, d2)
    firsts = default_np.stack([default_np.broadcast_to(p[0], shape) for p in pairs])
    seconds = default_np.stack([default_np.broadcast_to(p[1], shape) for p in pairs])
    rows = default_np.arange(run.num_steps, dtype=default_np.int32) % steps
    return firsts, seconds, rows, per_member


def run_members(
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

    ``initial`` (B, d^2) host array; ``firsts``/``seconds`` (U, [B,] d^2, d^2) and
    ``rows`` (N,) as from :func:`propagator_table`; ``baths`` per process tensor
    (transform_in, transform_out, classes, table (U', B', B', m), cap table (U', B'),
    rows (N,)) as from :func:`stack_padded`. Returns the read-outs on the host,
    (N, B, d^2) with ``record_all`` else (1, B, d^2).
    """
    import jax

    initial = default_np.asarray(initial)
    dtype = baths[0][3].dtype if baths else default_np.result_type(firsts, complex)
    members, d2 = initial.shape
    bonds = tuple(bath[3].shape[1] for bath in baths)
    padded = default_np.zeros((members,) + bonds + (d2,), dtype)
    padded[(slice(None),) + (0,) * len(bonds)] = initial
    placed = jax.device_put(
        (
            padded,
            default_np.asarray(firsts, dtype),
            default_np.asarray(seconds, dtype),
            default_np.asarray(rows, default_np.int32),
            host_baths(baths, dtype),
        ),
        device,
    )
    compiled = _compiled_members(bool(record_all), bool(per_member), platform_of(device))
    return default_np.asarray(jax.device_get(compiled(*placed)))


def differentiable_chain(
    baths: Sequence[tuple[Any, Any, Any, Any, Any, Any]],
    generator: Callable[[Any], Any],
    dt: float,
    record_all: bool,
) -> Callable[..., Any]:
    """A compiled, differentiable ``dynamics(parameters, initial, after=None)``.

    ``generator(row)`` -> L (d^2, d^2), traceable, of one parameter row (M,);
    ``baths`` as for :func:`run_members`. ``dynamics`` takes parameters (2N, M),
    the vectorised initial state (d^2,) and optionally the superoperators (N,
    d^2, d^2) applied after each step, all JAX arrays or host arrays, and returns
    the read-outs (N, d^2) (or (1, d^2), the last only). The propagators are
    expm(L dt/2) of each row (2N, d^2, d^2), ``after`` folded into the second of
    each step; the one member's scan (:func:`member_scan`) recomputes each step in a
    backward pass (``remat``), so reverse-mode autodiff stores one state per step.
    """
    import jax
    import jax.numpy as jnp

    dtype = baths[0][3].dtype
    bonds = tuple(bath[3].shape[1] for bath in baths)
    tables = jax.device_put(host_baths(baths, dtype))
    zero = jnp.zeros(bonds + (baths[0][0].shape[0],), dtype)
    origin = (0,) * len(bonds)

    def dynamics(parameters: Any, initial: Any, after: Any = None) -> Any:
        exponents = jax.vmap(generator)(jnp.asarray(parameters)) * (0.5 * dt)
        halves = jax.scipy.linalg.expm(exponents.astype(dtype))
        state = zero.at[origin].set(jnp.asarray(initial, dtype).reshape(-1))
        firsts, seconds = halves[0::2], halves[1::2]
        if after is not None:
            seconds = jnp.matmul(jnp.asarray(after, dtype), seconds)
        rows = jnp.arange(firsts.shape[0], dtype=jnp.int32)
        return member_scan(state, firsts, seconds, rows, tables, record_all, remat=True)

    return compile_kernel(dynamics, nested=True)


@functools.cache
def _compiled_adjoint(backend: str) -> tuple[Any, Any]:
    return (
        compile_kernel(_adjoint_forward, platform=backend),
        compile_kernel(_adjoint_backward, platform=backend),
    )


def _initial_state(vector: Any, bonds: tuple[int, ...], dtype: Any) -> default_np.ndarray:
    """The vectorised state (d^2,) as (B_1, ..., B_n, d^2), zero but at bonds 0."""
    padded = default_np.zeros(bonds + (vector.shape[-1],), dtype)
    padded[(0,) * len(bonds)] = default_np.asarray(vector).reshape(-1)
    return padded


def platform_of(device: Any) -> str:
    """The platform of ``device`` (None: JAX's default backend)."""
    if device is None:
        import jax

        return str(jax.default_backend())
    return str(device.platform)


def adjoint_chain(
    state: Any,
    first: Any,
    second: Any,
    before: Any,
    after: Any,
    baths: Sequence[tuple[Any, Any, Any, Any, Any, Any]],
    target: Callable[[default_np.ndarray], default_np.ndarray],
    record_all: bool,
    device: Any = None,
) -> tuple[default_np.ndarray, default_np.ndarray]:
    """The adjoint method on the device: forward scan, ``target(final read-out)``
    on the host, backward scan.

    ``state`` (d^2,) host array; ``first``, ``second``, ``before``, ``after``
    (N, d^2, d^2) host arrays; ``baths`` as for :func:`run_members`; ``target``
    maps the final read-out (d^2,) to the target (d^2,); ``device`` as for
    :func:`run_members`. Returns the read-outs
    (N, d^2) (or (1, d^2), the last only) and D (N, d^2, d^2, d^2, d^2) on the host.
    """
    import jax

    dtype = baths[0][3].dtype
    bonds = tuple(bath[3].shape[1] for bath in baths)
    forward, backward = _compiled_adjoint(platform_of(device))
    placed = jax.device_put(
        (
            _initial_state(default_np.asarray(state), bonds, dtype),
            *(default_np.asarray(a, dtype) for a in (first, second, before, after)),
            host_baths(baths, dtype),
        ),
        device,
    )
    stored, readouts = forward(*placed)
    readouts = default_np.asarray(jax.device_get(readouts))
    vector = jax.device_put(default_np.asarray(target(readouts[-1]), dtype), device)
    derivatives = backward(stored, *placed[1:5], placed[5], vector)
    del stored
    kept = readouts if record_all else readouts[-1:]
    return kept, default_np.asarray(jax.device_get(derivatives))
