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

import functools
import math
from typing import Any

import numpy as default_np
import scipy.linalg as default_la
from scipy.linalg import lapack

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
    if xp is default_np and size <= _LOOP_RULE_SIZE and s.dtype == default_np.float64:
        return default_np.int32(_rank_by_loop(s.tolist(), epsrel, max_rank))
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


#: spectra up to this length take :func:`_rank_by_loop` on the host (a few array calls
#: cost more than the loop there: the rule was 18 % of a small-bond window step)
_LOOP_RULE_SIZE = 64


def _rank_by_loop(s: list[float], epsrel: float, max_rank: int | None) -> int:
    """:func:`rank_rule` of a short host spectrum in plain Python: the same floating-point
    operations in the same order (tail sums accumulated from the end, as the cumulative
    sum does), so the same rank."""
    size = len(s)
    cut = epsrel * s[0]
    total = 0.0
    rank = 0
    for k in range(size - 1, -1, -1):  # tail[k] > cut holds for k < rank (non-increasing)
        total += s[k] * s[k]
        if math.sqrt(total) > cut:
            rank = k + 1
            break
    rank = max(rank, 1)
    end = size
    for i in range(max(rank, 1), size):
        if s[i] < s[i - 1] * (1.0 - MULTIPLET_TOLERANCE) or s[i] == 0.0:
            end = i
            break
    rank = end
    if max_rank is not None:
        rank = min(rank, max_rank)
    return rank


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
    """Thin SVD of ``matrix`` (m, n), truncated with ``epsrel`` (:func:`rank_rule`).

    Returns u (m, k), s (k,), vh (k, n). A host (NumPy) matrix is factored by
    :func:`host_svd` (LAPACK's divide and conquer called directly, a wide matrix
    through its conjugate transpose, as the backend's SVD does on NumPy); other
    arrays by the backend's SVD (``la.svd``).
    """
    if isinstance(matrix, default_np.ndarray) and 0 not in matrix.shape:
        rows, cols = matrix.shape
        if rows < cols:
            v, s, uh = host_svd(matrix.conj().T)
            u, vh = uh.conj().T, v.conj().T
        else:
            u, s, vh = host_svd(matrix)
        rank = int(rank_rule(s, epsrel, max_rank))
    else:
        u, s, vh = la.svd(matrix)
        rank = kept_rank(s, epsrel, max_rank)
    return u[:, :rank], s[:rank], vh[:rank, :]


#: LAPACK divide-and-conquer SVD and its workspace query, by dtype character
_GESDD: dict[str, tuple[Any, Any]] = {}
#: workspace size of that SVD, by (dtype character, rows, columns)
_GESDD_WORK: dict[tuple[str, int, int], int] = {}


def host_svd(matrix: default_np.ndarray) -> tuple[Any, Any, Any]:
    """Thin SVD of a tall host matrix (m >= n) with LAPACK's gesdd called directly
    (its workspace size cached per shape), QR iteration (gesvd) where it does not
    converge: the routines of the backend's SVD on NumPy, without the wrappers'
    checks and workspace queries, which cost as much as the factorisation at the
    bonds of a window step."""
    char = matrix.dtype.char
    routines = _GESDD.get(char)
    if routines is None:
        routines = _GESDD[char] = lapack.get_lapack_funcs(("gesdd", "gesdd_lwork"), (matrix,))
    gesdd, query = routines
    rows, cols = matrix.shape
    key = (char, rows, cols)
    work = _GESDD_WORK.get(key)
    if work is None:
        optimal = query(rows, cols, compute_uv=1, full_matrices=0)[0].real
        work = _GESDD_WORK[key] = max(1, int(optimal))
    u, s, vh, info = gesdd(matrix, compute_uv=1, full_matrices=0, lwork=work)
    if info != 0:
        return default_la.svd(
            matrix, full_matrices=False, lapack_driver="gesvd", check_finite=False
        )
    return u, s, vh


#: columns of a range sketch beyond the expected rank (8 measured faster than 16)
SKETCH_OVERSAMPLING = 8
SKETCH_SEED = 20261201
#: smaller side below which a plain SVD is faster than any sketch (measured
#: crossover 50-70 for copied rows of spin 1/2 and spin 1 windows)
SKETCH_MIN_SIDE = 64


def sketched_truncated_svd(
    matrix: Any,
    epsrel: float,
    expected_rank: int,
    max_rank: int | None = None,
    copies: int = 1,
    column_classes: int = 1,
) -> tuple[Any, Any, Any]:
    """:func:`truncated_svd` of ``matrix`` (m, n) from a randomized range sketch.

    The range is sketched with a Gaussian test matrix (fixed seed, so runs
    repeat) and one power iteration; the SVD of the projection ``q^H matrix``
    gives the kept triplets. What the sketch misses, ``|matrix - q q^H
    matrix|_F``, is measured and counted as discarded (it is orthogonal to
    the rest), so the cut keeps the guarantee of :func:`truncated_svd`:
    discarded norm at most ``epsrel`` times the largest singular value,
    possibly at a slightly larger rank. Where the rule would keep every
    sketched value, the sketch grows by a block of the residual (the work
    done is kept); where a wider sketch would cost more than a plain SVD
    (:func:`_sketch_pays`), the plain SVD it is.

    ``copies`` > 1 says that the rows come in consecutive groups of that many
    nearly equal copies (rows ``(g, copies)``, copies fastest): the group means
    span most of the range exactly and for free, and only the residual (the
    rows minus their group mean) is sketched, starting at ``expected_rank`` - g
    + :data:`SKETCH_OVERSAMPLING` columns (at least the oversampling).
    Otherwise the sketch starts at ``expected_rank`` +
    :data:`SKETCH_OVERSAMPLING` columns. The test matrix is the fixed grid of
    :func:`sketch_gaussians` with the columns read as (``column_classes``,
    cols / ``column_classes``), class slowest, so that a padded copy of the
    matrix (more columns per class, zero there) meets the same numbers. Host
    (NumPy) only; :mod:`nonmarkov.engines.jax.sketch` is its compiled twin.
    Returns u (m, k), s (k,), vh (k, n).
    """
    rows, cols = matrix.shape
    if min(rows, cols) < SKETCH_MIN_SIDE:
        return truncated_svd(matrix, epsrel, max_rank)
    if copies > 1:
        groups = rows // copies
        root = math.sqrt(copies)
        means = matrix.reshape(groups, copies, cols).sum(axis=1) / root  # Q0^H A, (g, n)
        residual = (matrix.reshape(groups, copies, cols) - means[:, None, :] / root).reshape(
            rows, cols
        )
        width = SKETCH_OVERSAMPLING + max(0, int(expected_rank) - groups)
    else:
        groups, means, residual = 0, matrix[:0], matrix
        width = int(expected_rank) + SKETCH_OVERSAMPLING
    per_class = cols // column_classes
    basis = matrix[:, :0]  # Q1 (m, w1): orthonormal, orthogonal to the group means
    projected = means  # [Q0 Q1]^H A, (g + w1, n)
    while _sketch_pays(groups + basis.shape[1] + width, rows, cols, copies):
        test = sketch_gaussians(column_classes, per_class, basis.shape[1], width)
        block = default_np.linalg.qr(residual @ test)[0]
        block = default_np.linalg.qr(residual @ (block.conj().T @ residual).conj().T)[0]
        block = default_np.linalg.qr(_orthogonalise(block, basis, copies))[0]
        part = block.conj().T @ residual
        missed = _missed_norm(residual, block, part)
        basis = default_np.concatenate([basis, block], axis=1)
        projected = default_np.concatenate([projected, part], axis=0)
        # |projected|_F >= s_max: more missed than the cut may drop means grow first
        if missed <= epsrel * float(default_np.linalg.norm(projected)):
            u, s, vh = la.svd(projected)
            rank = kept_rank(default_np.append(s, missed), epsrel, max_rank)
            if rank < projected.shape[0]:
                u = u[:, :rank]
                left = basis @ u[groups:]
                if copies > 1:
                    left = left + default_np.repeat(u[:groups] / math.sqrt(copies), copies, axis=0)
                return left, s[:rank], vh[:rank, :]
        residual = residual - block @ part  # the next block sketches what is still missed
        width = basis.shape[1]
    return truncated_svd(matrix, epsrel, max_rank)


def sketch_gaussians(classes: int, columns: int, start: int, width: int) -> Any:
    """Standard normal numbers G[(p, k), j] (classes * columns, width) for columns
    j = start .. start + width - 1 of the sketch: each entry a fixed function of
    (p, k, j) and :data:`SKETCH_SEED` alone (a counter-based generator), so any
    sub-block is the same numbers whatever the size asked for. Read-only."""
    grid = _gaussian_grid(classes, _power_of_two(columns), _power_of_two(start + width))
    return grid[:, :columns, start : start + width].reshape(classes * columns, width)


def _power_of_two(size: int) -> int:
    return 1 << max(int(size) - 1, 0).bit_length()


@functools.lru_cache(maxsize=16)
def _gaussian_grid(classes: int, columns: int, width: int) -> Any:
    """G[p, k, j] (classes, columns, width): Box-Muller on two splitmix64 hashes of
    (:data:`SKETCH_SEED`, p, k, j)."""
    index = default_np.ogrid[:classes, :columns, :width]
    p, k, j = (axis.astype(default_np.uint64) for axis in index)
    key = _splitmix(_splitmix(_splitmix(default_np.uint64(SKETCH_SEED) ^ p) ^ k) ^ j)
    scale = 2.0**-53
    first = ((key >> default_np.uint64(11)) + default_np.uint64(1)).astype(float) * scale
    second = (_splitmix(key) >> default_np.uint64(11)).astype(float) * scale
    grid = default_np.sqrt(-2.0 * default_np.log(first)) * default_np.cos(2.0 * math.pi * second)
    grid.setflags(write=False)
    return grid


def _splitmix(x: Any) -> Any:
    """The splitmix64 finaliser of uint64 ``x`` (wrapping arithmetic)."""
    with default_np.errstate(over="ignore"):
        x = x + default_np.uint64(0x9E3779B97F4A7C15)
        x = (x ^ (x >> default_np.uint64(30))) * default_np.uint64(0xBF58476D1CE4E5B9)
        x = (x ^ (x >> default_np.uint64(27))) * default_np.uint64(0x94D049BB133111EB)
        return x ^ (x >> default_np.uint64(31))


def _sketch_pays(width: int, rows: int, cols: int, copies: int) -> bool:
    """Whether a sketch of ``width`` columns is cheaper than a plain SVD of the
    (rows, cols) matrix. Without copies the sketch costs several products of the
    whole matrix at that width, so it must be narrower than half the smaller
    side; with copies it is sketched from the residual at a small width, and the
    projection pays while it has fewer rows than the matrix."""
    if copies > 1:
        return width + SKETCH_OVERSAMPLING < min(rows, cols)
    return 2 * width < min(rows, cols)


def _missed_norm(residual: Any, block: Any, part: Any) -> float:
    """|residual - block part|_F for an orthonormal ``block`` and ``part`` = block^H
    residual: from the norms, |residual|^2 - |part|^2, where that difference is
    well above its rounding error (it is relative to |residual|^2), else formed."""
    total = float(default_np.vdot(residual, residual).real)
    missed_squared = total - float(default_np.vdot(part, part).real)
    if missed_squared > 1e-10 * total:
        return math.sqrt(missed_squared)
    return float(default_np.linalg.norm(residual - block @ part))


def _orthogonalise(block: Any, basis: Any, copies: int) -> Any:
    """``block`` (m, w) minus its parts along ``basis`` (m, w1) and, for
    ``copies`` > 1, along the group means (classical Gram-Schmidt, once: the
    block was sketched from a residual already orthogonal to both)."""
    if basis.shape[1]:
        block = block - basis @ (basis.conj().T @ block)
    if copies > 1:
        rows, width = block.shape
        grouped = block.reshape(rows // copies, copies, width)
        block = (grouped - grouped.mean(axis=1, keepdims=True)).reshape(rows, width)
    return block
