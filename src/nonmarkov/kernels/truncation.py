"""SVD truncation with the library's ``epsrel`` convention.

Keep the smallest rank k such that the discarded singular values satisfy
sqrt(sum_{i >= k} s_i^2) <= epsrel * s_0 (s sorted descending). The cut never
splits a multiplet of (nearly) equal singular values: the subspace it would
keep is not defined there, and rounding (different LAPACKs, backends) would
pick different ones.

:func:`rank_rule` is the rule, written once against an array namespace: the
NumPy engine calls it through :func:`kept_rank` on the host, the compiled JAX
engine traces it with ``jax.numpy`` (no host synchronisation).
:func:`sketched_truncated_svd` keeps the rule's guarantee from a randomized
range sketch, for matrices whose kept rank is known to be small.
"""

from __future__ import annotations

from typing import Any

import numpy as default_np

from ..backends.numerical_backend import la, np

# relative gap below which neighbouring singular values count as degenerate
MULTIPLET_TOLERANCE = 1e-8


def rank_rule(
    singular_values: Any, epsrel: Any, max_rank: int | None = None, xp: Any = default_np
) -> Any:
    """Kept rank of a descending spectrum (n,), as an int32 scalar of namespace ``xp``.

    The smallest k with sqrt(sum_{i >= k} s_i^2) <= epsrel * s_0, at least 1,
    extended over a multiplet of nearly equal values, at most ``max_rank``.
    Trailing zeros (padding) do not change the result; an empty or zero
    spectrum keeps 1. Traceable (``xp = jax.numpy``): no data-dependent shapes.
    """
    s = xp.asarray(singular_values)
    size = s.shape[0]
    if size == 0:
        return xp.asarray(1, dtype=xp.int32)
    # the tail norms do not increase: the first k at or below the cut is the count above
    rank = xp.maximum(xp.count_nonzero(_tail_norms(s, xp) > epsrel * s[0]), 1)
    # i (>= 1) ends a multiplet when s[i] is not nearly equal to s[i - 1], or zero (else
    # 0 here): the cut moves to the first end at or after it
    tail = s[1:]
    ends = xp.arange(1, size) * ((tail < s[:-1] * (1.0 - MULTIPLET_TOLERANCE)) | (tail == 0.0))
    rank = xp.where(ends >= rank, ends, size).min(initial=size)
    if max_rank is not None:
        rank = xp.minimum(rank, max_rank)
    return xp.asarray(rank, dtype=xp.int32)


def _tail_norms(s: Any, xp: Any) -> Any:
    """tail[k] = norm of s[k:]: a cumulative sum on NumPy; a triangular product
    elsewhere (XLA compiles it much faster than a cumulative sum)."""
    if xp is default_np:
        return default_np.sqrt(default_np.cumsum((s * s)[::-1])[::-1])
    index = xp.arange(s.shape[0])
    upper = (index[None, :] >= index[:, None]).astype(s.dtype)
    return xp.sqrt(upper @ (s * s))


def kept_rank(singular_values: Any, epsrel: float, max_rank: int | None = None) -> int:
    """:func:`rank_rule` on the host: the number of singular values to keep (>= 1)."""
    s = default_np.asarray(np.to_host(singular_values), dtype=float)
    return int(rank_rule(s, epsrel, max_rank))


def truncated_svd(matrix: Any, epsrel: float, max_rank: int | None = None) -> tuple[Any, Any, Any]:
    """Thin SVD of ``matrix`` (m, n), truncated with ``epsrel``.

    Returns u (m, k), s (k,), vh (k, n).
    """
    u, s, vh = la.svd(matrix)
    rank = kept_rank(s, epsrel, max_rank)
    return u[:, :rank], s[:rank], vh[:rank, :]


#: columns of a range sketch beyond the expected rank (8 measured faster than 16)
SKETCH_OVERSAMPLING = 8
SKETCH_SEED = 20261201


def sketched_truncated_svd(
    matrix: Any, epsrel: float, expected_rank: int, max_rank: int | None = None
) -> tuple[Any, Any, Any]:
    """:func:`truncated_svd` of ``matrix`` (m, n) from a randomized range sketch.

    The range is sketched with a Gaussian test matrix (fixed seed, so runs
    repeat) of w = ``expected_rank`` + :data:`SKETCH_OVERSAMPLING` columns and
    one power iteration; ``q`` (m, w) orthonormalises it and the SVD of
    ``q^H matrix`` (w, n) gives the kept triplets. What the sketch misses,
    ``|matrix - q q^H matrix|_F``, is measured and counted as discarded (it is
    orthogonal to the rest), so the cut keeps the guarantee of
    :func:`truncated_svd`: discarded norm at most ``epsrel`` times the largest
    singular value, possibly at a slightly larger rank. Where the rule would
    keep all w values the sketch doubles; a sketch wider than half the smaller
    side is a plain SVD. Host (NumPy) only. Returns u (m, k), s (k,), vh (k, n).
    """
    rows, cols = matrix.shape
    width = int(expected_rank) + SKETCH_OVERSAMPLING
    while 2 * width < min(rows, cols):
        test = default_np.random.default_rng(SKETCH_SEED).standard_normal((cols, width))
        q = default_np.linalg.qr(matrix @ test)[0]
        q = default_np.linalg.qr(matrix @ (matrix.conj().T @ q))[0]
        projected = q.conj().T @ matrix  # (w, n)
        missed = float(default_np.linalg.norm(matrix - q @ projected))
        u, s, vh = la.svd(projected)
        rank = kept_rank(default_np.append(s, missed), epsrel, max_rank)
        if rank < width:
            return q @ u[:, :rank], s[:rank], vh[:rank, :]
        width *= 2
    return truncated_svd(matrix, epsrel, max_rank)
