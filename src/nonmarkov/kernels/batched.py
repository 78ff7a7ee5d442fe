"""Kernels that contract process-tensor MPOs with a batch of system states.

The batched state is ``v[m, b_1, ..., b_n, alpha]``: the member m of the batch
first, then one open bond per process tensor and the Liouville index alpha
(d^2). Superoperators are shared, (d^2, d^2), or one per member, (B, d^2, d^2);
every contraction is one batched matrix product over the whole batch. No physics.
"""

from __future__ import annotations

from typing import Any

from ..backends.numerical_backend import np


def apply_superoperators(state: Any, superoperators: Any) -> Any:
    """Apply (d^2, d^2) (shared) or (B, d^2, d^2) (member m's to member m) to the
    last axis of ``state`` (B, ..., d^2)."""
    if superoperators.ndim == 2:
        return np.tensordot(state, superoperators, axes=([state.ndim - 1], [1]))
    members, d2 = state.shape[0], state.shape[-1]
    flat = state.reshape(members, -1, d2)
    return np.matmul(flat, np.swapaxes(superoperators, 1, 2)).reshape(state.shape)


def apply_step_tensor_batched(state: Any, tensor: Any, classes: Any, axis: int) -> Any:
    """Contract bond ``axis`` (>= 1) of ``state`` (B, ..., d^2) with a step tensor
    T[b, b', c]: each Liouville index alpha picks ``T[:, :, classes[alpha]]``; one
    batched matrix product per alpha over all members and other bonds."""
    expanded = np.moveaxis(tensor[:, :, classes], 2, 0)  # (alpha, b, b')
    moved = np.moveaxis(state, axis, -2)  # (B, ..., b, alpha)
    shape = moved.shape
    flat = np.moveaxis(moved.reshape(-1, shape[-2], shape[-1]), 2, 0)  # (alpha, X, b)
    product = np.matmul(flat, expanded)  # (alpha, X, b')
    result = np.moveaxis(product, 0, 2).reshape(shape[:-2] + (tensor.shape[1], shape[-1]))
    return np.moveaxis(result, -2, axis)


def close_bonds_batched(state: Any, caps: list[Any]) -> Any:
    """Contract every bond axis of ``state`` (B, b_1, ..., b_n, d^2) with its cap
    vector; returns (B, d^2)."""
    for cap in caps:
        state = np.tensordot(state, cap, axes=([1], [0]))  # (B, b_2, ..., d^2)
    return state
