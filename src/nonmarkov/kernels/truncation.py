"""SVD truncation with the library's ``epsrel`` convention.

Keep the smallest rank k such that the discarded singular values satisfy
sqrt(sum_{i >= k} s_i^2) <= epsrel * s_0 (s sorted descending). The cut never
splits a multiplet of (nearly) equal singular values: the subspace it would
keep is not defined there, and rounding (different LAPACKs, backends) would
pick different ones.

:func:`rank_rule` is the rule, written once against an array namespace: the
NumPy engine calls it through :func:`kept_rank` on the host, the compiled JAX
engine traces it with ``jax.numpy`` (no host synchronisation).
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
