"""Padded arrays on the JAX device: the factorisations that keep padding exact
(the bond buckets are the planner's, :mod:`.planner`).

The compiled kernels work on arrays padded with zeros to a few bucket sizes,
so that XLA compiles once per bucket. Padding must stay exactly zero: rounding
noise on it would be multiplied into subnormal numbers, which make LAPACK on a
CPU up to 100x slower. Requires JAX.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as default_np

from .modules import jax_modules


def _used_columns(matrix: Any, bond: int) -> Any:
    """(bond,) 1 where a right-bond index of ``matrix`` (rows, m * bond) has a nonzero entry.

    An SVD leaves rounding noise (~1e-16) in the right singular vectors on
    columns that are exactly zero (padding); multiplied through the chain,
    such noise makes later QR steps produce subnormal numbers, which are
    very slow on a CPU. Zeroing it is exact.
    """
    _, jnp, _ = jax_modules()
    used = jnp.any(matrix.reshape(matrix.shape[0], -1, bond) != 0.0, axis=(0, 1))
    return used.astype(matrix.dtype)


def extent(array: Any, axis: int) -> Any:
    """Used length of ``axis``: one past the last index with a nonzero entry (int32)."""
    _, jnp, _ = jax_modules()
    others = tuple(k for k in range(array.ndim) if k != axis)
    used = jnp.any(array != 0.0, axis=others)
    return jnp.max(jnp.where(used, jnp.arange(1, used.shape[0] + 1, dtype=jnp.int32), 0))


def padded_qr(matrix: Any) -> tuple[Any, Any]:
    """QR of a tall (n, w) matrix whose padding columns are exactly zero.

    The zero columns are filled with unit vectors in the last rows (padding
    rows as a rule) before the decomposition and their columns of R are set
    to zero afterwards, so Q R equals ``matrix`` exactly whatever the fill.
    Without the fill LAPACK completes Q on the padding through products of
    tiny numbers that become subnormal, which is up to 100x slower on a CPU.
    """
    _, jnp, _ = jax_modules()
    rows, width = matrix.shape
    unused = jnp.all(matrix == 0.0, axis=0)
    fill = jnp.eye(rows, width, k=width - rows, dtype=matrix.dtype)
    q, r = jnp.linalg.qr(matrix + fill * unused.astype(matrix.dtype)[None, :])
    return q, jnp.where(unused[None, :], jnp.zeros((), r.dtype), r)


def svd_algorithm(name: str, platform: str) -> Any:
    """The ``algorithm`` argument of :func:`_svd` for a :data:`nonmarkov.config.VALID_JAX_SVD`
    name: a ``jax.lax.linalg.SvdAlgorithm``, or None (JAX's default)."""
    from jax import lax

    if name == "default":
        return None
    return getattr(lax.linalg.SvdAlgorithm, name.upper())


def _svd(matrix: Any, algorithm: Any) -> tuple[Any, Any, Any]:
    """Thin SVD of a (p, q) matrix as (u s, s, vh): (p, k), (k,) descending, (k, q),
    k = min(p, q), with the configured algorithm (see :func:`svd_algorithm`)."""
    from jax import lax

    u, s, vh = lax.linalg.svd(matrix, full_matrices=False, algorithm=algorithm)
    return u * s[None, :].astype(u.dtype), s, vh


def padded_window(
    window: Sequence[Any], bond: int, capacity: int, dim_m: int, dtype: Any
) -> tuple[default_np.ndarray, default_np.ndarray]:
    """A host window (front (1, x, k), sites (l, m, r)) padded with zeros on the host:
    the front (x, ``bond``) and ``capacity`` sites (capacity, bond, m, bond)."""
    first = window[0]
    front = default_np.zeros((first.shape[1], bond), dtype)
    front[:, : first.shape[2]] = first[0]
    sites = default_np.zeros((capacity, bond, dim_m, bond), dtype)
    for j, site in enumerate(window[1:]):
        sites[j, : site.shape[0], :, : site.shape[2]] = site
    return front, sites


def trimmed_window(front: Any, sites: Any, last_bond: int) -> list[default_np.ndarray]:
    """The host window of a padded one (front (x, D), the sites in use (n, D, m, D)),
    each bond cut to its used extent (the padding is exact zeros beyond the kept
    ranks); ``last_bond``: the right bond of the oldest site."""
    rights = [_host_extent(front, 1)] + [_host_extent(site, 2) for site in sites]
    lefts = [1] + [_host_extent(site, 0) for site in sites]
    bonds = [max(right, left, 1) for right, left in zip(rights[:-1], lefts[1:])]
    bonds.append(last_bond)
    window = [default_np.asarray(front)[None, :, : bonds[0]]]
    for j, site in enumerate(sites):
        window.append(default_np.asarray(site)[: bonds[j], :, : bonds[j + 1]])
    return window


def _host_extent(array: Any, axis: int) -> int:
    """One past the last index of ``axis`` with a nonzero entry, on the host."""
    others = tuple(k for k in range(array.ndim) if k != axis)
    used = default_np.flatnonzero(default_np.any(default_np.asarray(array) != 0.0, axis=others))
    return int(used[-1]) + 1 if used.size else 0
