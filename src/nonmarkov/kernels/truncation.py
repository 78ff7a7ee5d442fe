"""SVD truncation with the library's ``epsrel`` convention.

Keep the smallest rank k such that the discarded singular values satisfy
sqrt(sum_{i >= k} s_i^2) <= epsrel * s_0 (s sorted descending). The cut never
splits a multiplet of (nearly) equal singular values: the subspace it would
keep is not defined there, and rounding (different LAPACKs, backends) would
pick different ones.
"""

from __future__ import annotations

from typing import Any

import numpy as default_np

from ..backends.numerical_backend import la, np

# relative gap below which neighbouring singular values count as degenerate
MULTIPLET_TOLERANCE = 1e-8


def kept_rank(singular_values: Any, epsrel: float, max_rank: int | None = None) -> int:
    """Number of singular values to keep (a Python int, >= 1)."""
    s = default_np.asarray(np.to_host(singular_values), dtype=float)
    if s.size == 0 or s[0] == 0.0:
        return 1
    tail = default_np.sqrt(default_np.cumsum((s**2)[::-1]))[::-1]  # tail[k] = norm of s[k:]
    below = default_np.nonzero(tail <= epsrel * s[0])[0]
    rank = int(below[0]) if below.size else s.size
    rank = max(rank, 1)
    while rank < s.size and s[rank] >= s[rank - 1] * (1.0 - MULTIPLET_TOLERANCE):
        rank += 1
    if max_rank is not None:
        rank = min(rank, max_rank)
    return rank


def truncated_svd(matrix: Any, epsrel: float,
                  max_rank: int | None = None) -> tuple[Any, Any, Any]:
    """Thin SVD of ``matrix`` (m, n), truncated with ``epsrel``.

    Returns u (m, k), s (k,), vh (k, n).
    """
    u, s, vh = la.svd(matrix)
    rank = kept_rank(s, epsrel, max_rank)
    return u[:, :rank], s[:rank], vh[:rank, :]
