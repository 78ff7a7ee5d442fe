"""Kernels that contract process-tensor MPOs with system states.

The state during the contraction is an array ``v[b_1, ..., b_n, alpha]``: one
open bond per process tensor and the Liouville index alpha (d^2). Step
tensors are ``T[b, b', c]`` with a class c per Liouville index. A batch of
states has the member first, ``v[m, b_1, ..., b_n, alpha]``: a step tensor acts
on bond axis i + 1 (:func:`apply_step_tensor`), superoperators are shared,
(d^2, d^2), or one per member, (B, d^2, d^2) (:func:`apply_superoperators`), and
every contraction is one batched matrix product over the whole batch. No physics.
"""

from __future__ import annotations

from typing import Any

from ..backends.numerical_backend import np


def apply_superoperator(state: Any, superoperator: Any) -> Any:
    """Apply a (d^2, d^2) matrix to the last axis of ``state``."""
    return np.tensordot(state, superoperator, axes=([state.ndim - 1], [1]))


def apply_superoperators(state: Any, superoperators: Any) -> Any:
    """Apply (d^2, d^2) (shared) or (B, d^2, d^2) (member m's to member m) to the
    last axis of ``state`` (B, ..., d^2)."""
    if superoperators.ndim == 2:
        return apply_superoperator(state, superoperators)
    members, d2 = state.shape[0], state.shape[-1]
    flat = state.reshape(members, -1, d2)
    return np.matmul(flat, np.swapaxes(superoperators, 1, 2)).reshape(state.shape)


def apply_step_tensor(state: Any, tensor: Any, classes: Any, axis: int) -> Any:
    """Contract bond ``axis`` of ``state`` (..., b, ..., d^2) with a step tensor
    T[b, b', c]: each Liouville index alpha picks the slice ``T[:, :, classes[alpha]]``;
    the bond dimension on ``axis`` changes from b to b'. One batched matrix product
    per alpha over all other axes (batches, branches, the other bonds), several times
    faster than the equivalent einsum once there are any.
    """
    expanded = np.moveaxis(tensor[:, :, classes], 2, 0)  # (alpha, b, b')
    moved = np.moveaxis(state, axis, -2)  # (..., b, alpha)
    shape = moved.shape
    flat = np.moveaxis(moved.reshape(-1, shape[-2], shape[-1]), 2, 0)  # (alpha, X, b)
    product = np.matmul(flat, expanded)  # (alpha, X, b')
    result = np.moveaxis(product, 0, 2).reshape(shape[:-2] + (tensor.shape[1], shape[-1]))
    return np.moveaxis(result, -2, axis)


def cap_before(tensor: Any, weights: Any, cap: Any, xp: Any = np) -> Any:
    """The cap before a step: T[b, b', c] weighted by ``weights[c]``, closed by ``cap[b']``.

    ``xp``: the array namespace (default the backend proxy; ``numpy`` for host
    arrays that must stay on the host).
    """
    return xp.einsum("bcp,p,c->b", tensor, weights, cap)


def future_caps(tensors: list[Any], weights: Any, last_cap: Any = None, xp: Any = np) -> list[Any]:
    """Vectors that close the bond after each step with a weighted (traced) future.

    ``caps[k][b]`` contracts step tensors k+1..N-1, each with the class
    weights ``weights[c]``, and ``last_cap`` (default ones: the trivial end
    bond) after step N-1; ``caps[N-1]`` is ``last_cap``.
    """
    cap = (
        xp.ones((tensors[-1].shape[1],), dtype=tensors[-1].dtype) if last_cap is None else last_cap
    )
    caps: list[Any] = [None] * len(tensors)
    caps[-1] = cap
    for k in range(len(tensors) - 1, 0, -1):
        cap = cap_before(tensors[k], weights, cap, xp)
        caps[k - 1] = cap
    return caps


def close_bonds(state: Any, caps: list[Any]) -> Any:
    """Contract every bond axis of ``state`` with its cap vector; returns (d^2,)."""
    for cap in caps:
        state = np.tensordot(cap, state, axes=([0], [0]))
    return state


def close_bonds_batched(state: Any, caps: list[Any]) -> Any:
    """Contract every bond axis of ``state`` (B, b_1, ..., b_n, d^2) with its cap
    vector; returns (B, d^2)."""
    for cap in caps:
        state = np.tensordot(state, cap, axes=([1], [0]))  # (B, b_2, ..., d^2)
    return state
