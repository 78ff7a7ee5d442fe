"""Compiled (``jax.jit``) contraction of process tensors with a system state.

The steps of :mod:`nonmarkov.kernels.chain` for a whole run at once: the state
``v[b_1, ..., b_n, alpha]`` is carried through a ``lax.scan`` over the
steps; at each step the half-step propagators and every process tensor's
transforms and step tensor are applied, and (optionally) the bonds are closed
with that step's caps to give the read-out. The step tensors of a process
tensor are padded with zeros to one bond dimension and stacked, so the scan
has static shapes; the padding carries exact zeros and changes nothing.

Everything here is array algebra; requires JAX.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

import numpy as default_np

from .compiler import compile_kernel

#: Largest stacked, padded step tensors (all process tensors) run by the compiled scan.
SCAN_BYTES = 2 * 2**30


def scan_fits(process_tensors: Sequence[Any], num_steps: int, dtype: Any) -> bool:
    """Whether ``num_steps`` steps of ``process_tensors``, padded to their largest bond
    and stacked, take at most :data:`SCAN_BYTES`."""
    size = default_np.dtype(dtype).itemsize
    total = 0
    for pt in process_tensors:
        bonds = pt.get_bond_dimensions()
        classes = int(default_np.asarray(pt.get_step_tensor(0)[1]).max()) + 1
        total += num_steps * int(bonds.max()) ** 2 * classes * size
    return total <= SCAN_BYTES


def stack_padded(tensors: Sequence[Any], caps: Sequence[Any],
                 dtype: Any) -> tuple[default_np.ndarray, default_np.ndarray]:
    """Host arrays: step tensors T_k[b, b', c] -> (N, B, B, m), caps_k[b'] -> (N, B).

    B is the largest bond dimension; missing entries are zero.
    """
    bond = max(max(t.shape[0], t.shape[1]) for t in tensors)
    num_classes = tensors[0].shape[2]
    stacked = default_np.zeros((len(tensors), bond, bond, num_classes), dtype)
    stacked_caps = default_np.zeros((len(tensors), bond), dtype)
    for k, (tensor, cap) in enumerate(zip(tensors, caps)):
        stacked[k, :tensor.shape[0], :tensor.shape[1]] = tensor
        stacked_caps[k, :cap.shape[0]] = cap
    return stacked, stacked_caps


def _run(state: Any, first: Any, second: Any, baths: tuple[tuple[Any, ...], ...],
         record_all: bool) -> Any:
    """The scan over steps (traced by ``jax.jit``).

    Shapes: state (B_1, ..., B_n, d^2), first and second (d^2, d^2); each
    entry of ``baths`` is (transform_in (d^2, d^2), transform_out (d^2, d^2),
    classes (d^2,) int, tensors (N, B, B, m), caps (N, B)). Returns the
    read-outs (N, d^2), or (1, d^2) for the last step only.
    """
    import jax.numpy as jnp
    from jax import lax

    def apply(state: Any, matrix: Any) -> Any:
        return jnp.tensordot(state, matrix, axes=([state.ndim - 1], [1]))

    def close(state: Any, caps: Sequence[Any]) -> Any:
        for cap in caps:
            state = jnp.tensordot(cap, state, axes=([0], [0]))
        return state

    def step(state: Any, inputs: tuple[Any, ...]) -> tuple[Any, Any]:
        tensors, caps = inputs
        state = apply(state, first)
        for axis, (transform_in, transform_out, classes, _, _) in enumerate(baths):
            state = apply(state, transform_in)
            expanded = tensors[axis][:, :, classes]  # (b, b', alpha)
            moved = jnp.moveaxis(state, axis, -2)
            moved = jnp.einsum("...ba,bca->...ca", moved, expanded)
            state = apply(jnp.moveaxis(moved, -2, axis), transform_out)
        state = apply(state, second)
        readout = close(state, caps) if record_all else None
        return state, readout

    inputs = (tuple(bath[3] for bath in baths), tuple(bath[4] for bath in baths))
    state, readouts = lax.scan(step, state, inputs)
    if record_all:
        return readouts
    return close(state, [bath[4][-1] for bath in baths])[None]


@functools.cache
def _compiled_run(record_all: bool, backend: str) -> Any:
    return compile_kernel(functools.partial(_run, record_all=record_all))


def run_chain(state: Any, first: Any, second: Any,
              baths: Sequence[tuple[Any, Any, Any, Any, Any]],
              record_all: bool) -> default_np.ndarray:
    """Contract all steps on the device; one transfer in, one out.

    ``state`` (1, ..., 1, d^2) host array; ``first``/``second`` (d^2, d^2) the
    half-step propagators of every step; ``baths`` per process tensor
    (transform_in, transform_out, classes, stacked tensors (N, B, B, m),
    stacked caps (N, B)) as from :func:`stack_padded`. Returns the read-outs
    on the host, (N, d^2) with ``record_all`` else (1, d^2) for the last step.
    """
    import jax

    dtype = baths[0][3].dtype if baths else default_np.asarray(first).dtype
    bonds = tuple(bath[3].shape[1] for bath in baths)
    padded = default_np.zeros(bonds + (state.shape[-1],), dtype)
    padded[(0,) * len(bonds)] = default_np.asarray(state).reshape(-1)
    on_host = tuple((default_np.asarray(b[0], dtype), default_np.asarray(b[1], dtype),
                     default_np.asarray(b[2], default_np.int32), b[3], b[4]) for b in baths)
    device = jax.device_put((padded, default_np.asarray(first, dtype),
                             default_np.asarray(second, dtype), on_host))
    readouts = _compiled_run(bool(record_all), jax.default_backend())(*device)
    return default_np.asarray(jax.device_get(readouts))
