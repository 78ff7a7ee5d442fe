"""Kernels that contract process-tensor MPOs with a batch of system states.

The batched state is ``v[m, b_1, ..., b_n, alpha]``: the member m of the batch
first, then one open bond per process tensor and the Liouville index alpha
(d^2); a step tensor is contracted with :func:`nonmarkov.kernels.chain.apply_step_tensor`
on bond axis i + 1. Superoperators are shared, (d^2, d^2), or one per member, (B, d^2, d^2);
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


def close_bonds_batched(state: Any, caps: list[Any]) -> Any:
    """Contract every bond axis of ``state`` (B, b_1, ..., b_n, d^2) with its cap
    vector; returns (B, d^2)."""
    for cap in caps:
        state = np.tensordot(state, cap, axes=([1], [0]))  # (B, b_2, ..., d^2)
    return state
