"""Kernels of TEBD on a chain MPS whose sites carry an extra (augmented) leg.

A site tensor is ``S[l, p, a, r]``: left bond l, physical (Liouville) index p
(d^2), augmented leg a (the open bond of the site's process tensor, 1 for
none) and right bond r. The chain state is the contraction of the sites over
their bonds. No physics, no configuration: arrays on the backend proxy.

Two-site update (:func:`two_site_update`): a site with an augmented leg
(a > 1) is first split so that the gate only meets the part that carries the
physical legs, ``left = q_l r_l`` over (l, a) | (p, r) and ``right = r_r q_r``
over (l', p') | (a', r'), each an SVD truncated with ``epsrel`` (a site
without one is its own part: the rule depends on the leg alone, so that every
engine splits the same sites); then
``theta[k, p, p', j] = r_l r_r`` has the gate applied and is split by a
truncated SVD (:func:`nonmarkov.kernels.truncation.truncated_svd`, the
library's epsrel rule). When the sites outside the pair are orthonormal
towards it, the cut is the optimal one in the 2-norm of the vectorised state.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from ..backends.numerical_backend import np
from .truncation import truncated_svd


def split_left(site: Any, epsrel: float, max_rank: int | None) -> tuple[Any, Any]:
    """``site`` (l, p, a, r) as q (l, a, k) times r (k, p, r), k <= l a.

    q is an isometry over (l, a) when the site has an augmented leg (a > 1);
    else q is None and r is the site itself, (l, p, r).
    """
    lb, p, a, r = site.shape
    matrix = np.transpose(site, (0, 2, 1, 3)).reshape(lb * a, p * r)
    if a == 1:
        return None, matrix.reshape(lb, p, r)
    u, s, vh = truncated_svd(matrix, epsrel, max_rank)
    return u.reshape(lb, a, -1), (s[:, None] * vh).reshape(-1, p, r)


def split_right(site: Any, epsrel: float, max_rank: int | None) -> tuple[Any, Any]:
    """``site`` (l, p, a, r) as r (l, p, k) times q (k, a, r), k <= a r, for a site
    with an augmented leg (a > 1); else q is None and r the site itself, (l, p, r)."""
    lb, p, a, r = site.shape
    matrix = site.reshape(lb * p, a * r)
    if a == 1:
        return matrix.reshape(lb, p, r), None
    u, s, vh = truncated_svd(matrix, epsrel, max_rank)
    return (u * s[None, :]).reshape(lb, p, -1), vh.reshape(-1, a, r)


def join_left(q: Any, part: Any, shape: tuple[int, int, int, int]) -> Any:
    """The left site (l, p, a, chi) from q (l, a, k) (or None) and part (k, p, chi)."""
    lb, p, a, _ = shape
    if q is None:
        merged = part.reshape(lb, a, p, -1)
    else:
        merged = np.tensordot(q, part, axes=([2], [0]))
    return np.transpose(merged, (0, 2, 1, 3))


def join_right(part: Any, q: Any, shape: tuple[int, int, int, int]) -> Any:
    """The right site (chi, p, a, r) from part (chi, p, k) and q (k, a, r) (or None)."""
    _, p, a, r = shape
    if q is None:
        return part.reshape(part.shape[0], p, a, r)
    return np.tensordot(part, q, axes=([2], [0]))


def two_site_update(
    left: Any,
    right: Any,
    gate: Any,
    epsrel: float,
    centre_right: bool,
    max_rank: int | None = None,
) -> tuple[Any, Any, float]:
    """Apply ``gate`` (p p', p p') to the physical legs of neighbouring sites.

    ``left`` (l, p, a, m), ``right`` (m, p', a', r); the gate maps the pair's
    Liouville index p * p'_dim + p' (left site first). Returns the new sites
    (l, p, a, chi) and (chi, p', a', r) and the log of the norm divided out
    of them (the singular values are normalised to norm 1). With
    ``centre_right`` the singular values go to the right site (the left one
    is then an isometry over (l, p, a)), else to the left one.
    """
    q_l, r_l = split_left(left, epsrel, max_rank)
    r_r, q_r = split_right(right, epsrel, max_rank)
    k, p, _ = r_l.shape
    _, p2, j = r_r.shape
    theta = (r_l.reshape(k * p, -1) @ r_r.reshape(-1, p2 * j)).reshape(k, p * p2, j)
    theta = np.matmul(gate, theta).reshape(k * p, p2 * j)  # the gate on each (k, ., j)
    u, s, vh = truncated_svd(theta, epsrel, max_rank)
    norm = np.linalg.norm(s)
    s = s / norm
    if centre_right:
        part_l, part_r = u, s[:, None] * vh
    else:
        part_l, part_r = u * s[None, :], vh
    new_left = join_left(q_l, part_l.reshape(k, p, -1), left.shape)
    new_right = join_right(part_r.reshape(-1, p2, j), q_r, right.shape)
    return new_left, new_right, math.log(float(np.to_host(norm)))


def orthonormalise_right(site: Any, following: Any) -> tuple[Any, Any]:
    """Move the gauge centre from ``site`` (l, p, a, r) to ``following`` (r, ...):
    site = Q R with Q an isometry over (l, p, a); returns (Q (l, p, a, k), R following)."""
    lb, p, a, r = site.shape
    q, upper = np.linalg.qr(site.reshape(lb * p * a, r))
    moved = np.tensordot(upper, following, axes=([1], [0]))
    return q.reshape(lb, p, a, -1), moved


def orthonormalise_left(previous: Any, site: Any) -> tuple[Any, Any]:
    """Move the gauge centre from ``site`` (l, p, a, r) to ``previous`` (..., l):
    site = L Q with Q an isometry over (p, a, r); returns (previous L, Q (k, p, a, r))."""
    lb, p, a, r = site.shape
    q, upper = np.linalg.qr(site.reshape(lb, p * a * r).T)
    moved = np.tensordot(previous, upper.T, axes=([previous.ndim - 1], [0]))
    return moved, q.T.reshape(-1, p, a, r)


def apply_site_map(site: Any, superoperator: Any) -> Any:
    """``superoperator`` (p', p) applied to the physical leg of ``site`` (l, p, a, r)."""
    return np.transpose(np.tensordot(superoperator, site, axes=([1], [1])), (1, 0, 2, 3))


def apply_process_step(
    site: Any, transform_in: Any, tensor: Any, classes: Any, transform_out: Any
) -> Any:
    """A process tensor's step on ``site`` (l, p, a, r): the basis change in,
    ``tensor`` T[a, a', c] on the augmented leg (class c of each Liouville
    index), the basis change out. Returns (l, p, a', r)."""
    site = apply_site_map(site, transform_in)
    lb, p, a, r = site.shape
    expanded = np.transpose(tensor[:, :, classes], (2, 0, 1))  # (p, a, a')
    moved = np.transpose(site, (1, 0, 3, 2)).reshape(p, lb * r, a)
    site = np.matmul(moved, expanded).reshape(p, lb, r, -1)  # one matrix per p
    site = np.transpose(site, (1, 0, 3, 2))
    return apply_site_map(site, transform_out)


def capped_sites(sites: Sequence[Any], caps: Sequence[Any]) -> list[Any]:
    """Each site (l, p, a, r) with its augmented leg closed by its cap (a,): (l, p, r)."""
    return [np.tensordot(site, cap, axes=([2], [0])) for site, cap in zip(sites, caps)]


def environments(transfers: Sequence[Any]) -> tuple[list[Any], list[Any]]:
    """Left and right environments of a chain of transfer matrices E_k (l, r).

    ``left[k]`` (l_k,) is the product of E_0..E_{k-1} closed on the left by the
    trivial bond, ``right[k]`` (r_{k-1},) that of E_k..E_{n-1} closed on the
    right; ``left[n]`` and ``right[0]`` are (1,) and hold the total.
    """
    n = len(transfers)
    left = [np.ones((1,), dtype=transfers[0].dtype)]
    for k in range(n):
        left.append(left[-1] @ transfers[k])
    right = [np.ones((1,), dtype=transfers[0].dtype)]
    for k in range(n - 1, -1, -1):
        right.insert(0, transfers[k] @ right[0])
    return left, right


def group_vector(
    capped: Sequence[Any], transfers: Sequence[Any], left: Any, right: Any, group: Sequence[int]
) -> Any:
    """The chain state contracted to the sites of ``group`` (ascending): a tensor with
    one physical leg per site of the group, (p_i, p_j, ...); the sites between
    and outside are traced (``transfers``), the augmented legs capped."""
    first = group[0]
    state = np.einsum("l,lpr->pr", left, capped[first])  # (p..., r)
    for previous, site in zip(group[:-1], group[1:]):
        for between in range(previous + 1, site):
            state = np.tensordot(state, transfers[between], axes=([state.ndim - 1], [0]))
        state = np.tensordot(state, capped[site], axes=([state.ndim - 1], [0]))
    return np.tensordot(state, right, axes=([state.ndim - 1], [0]))
