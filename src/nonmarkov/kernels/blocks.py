"""Kernels for uniform (repeating) process-tensor blocks.

Chains are lists of site tensors ``M[l, p, r]`` in the order of the memory
window (:mod:`nonmarkov.kernels.window`): site 0 is the newest point, ``l`` points
towards newer sites and ``r`` towards older ones. ``p`` is a class index.

Everything here is a function of arrays written against the backend proxy;
no physics.
"""

from __future__ import annotations

from typing import Any

from ..backends.numerical_backend import np
from .truncation import truncated_svd


def left_orthonormalise(sites: list[Any]) -> list[Any]:
    """QR sweep from site 0 to the last site.

    Returns a new list in which every site but the last satisfies
    sum_{l, p} M[l, p, r] conj(M[l, p, r']) = delta_{r r'}; the last site holds
    the norm. Shapes may shrink; the function represented is unchanged.
    """
    sites = list(sites)
    for j in range(len(sites) - 1):
        chi_l, dim_p, chi_r = sites[j].shape
        q, r = np.linalg.qr(sites[j].reshape(chi_l * dim_p, chi_r))
        sites[j] = q.reshape(chi_l, dim_p, -1)
        sites[j + 1] = np.tensordot(r, sites[j + 1], axes=([1], [0]))
    return sites


def split_last_bond(
    sites: list[Any], epsrel: float, max_rank: int | None = None
) -> tuple[list[Any], Any, Any]:
    """Schmidt decomposition at the right bond of the last site.

    ``sites`` must be left-orthonormal except the last one (see
    :func:`left_orthonormalise`). The last site M[l, p, b] is split by a
    truncated SVD into an isometry U[l, p, s] and the coefficients S Vh[s, b].

    Returns (isometric chain, singular values (s,), coefficients (s, b)): the
    chain maps the Schmidt index s to orthonormal functions of the classes,
    and chain @ coefficients reproduces the input within ``epsrel``.
    """
    last = sites[-1]
    chi_l, dim_p, chi_b = last.shape
    u, s, vh = truncated_svd(last.reshape(chi_l * dim_p, chi_b), epsrel, max_rank)
    chain = list(sites[:-1]) + [u.reshape(chi_l, dim_p, -1)]
    return chain, s, s[:, None] * vh


def contract_from_newest(sites: list[Any], vectors: list[Any]) -> Any:
    """sum over all classes of the chain, site j weighted by ``vectors[j][p]``.

    Returns the vector (r,) on the right bond of the last (oldest) site; the
    left bond of site 0 must be trivial.
    """
    vector = np.ones((1,), dtype=sites[0].dtype)
    for site, weights in zip(sites, vectors):
        vector = np.einsum("l,lpr,p->r", vector, site, weights)
    return vector


def shifted_overlap(chain: Any, own_factor: Any, lag_matrices: list[Any]) -> Any:
    """Matrix elements of "drop the oldest point, add a new one" in a chain's span.

    ``chain`` holds K isometric sites V[l, p, r] (newest first; the last
    site's right bond is the Schmidt index s). For each value c of the
    oldest point the map takes a function g(f_1..f_K) of the K classes
    (f_1 oldest) to

        (A_c g)(f'_1..f'_K) = g(c, f'_1..f'_{K-1}) own(f'_K)
                              prod_{j=1}^{K} lag_j[f'_K, f'_{K-j}],  f'_0 = c,

    i.e. the new newest point f'_K couples to each older point at lag j.

    Parameters
    ----------
    chain : list of K sites, newest first.
    own_factor : (m,) factor of the new point.
    lag_matrices : K matrices lag_j[new, old] (m, m), j = 1..K.

    Returns M[c, s', s] = <V_s'| A_c |V_s>, shape (m, chi, chi).
    """
    k = len(chain)
    first = chain[0]
    # environment [s' bond (conjugate chain), bond of the shifted chain, class of f'_K]
    env = np.einsum("xa,x->ax", np.conj(first[0]), own_factor)[:, None, :]
    for j in range(1, k):
        bra = np.conj(chain[j])
        ket = chain[j - 1]
        env = np.einsum("abx,apr,bps,xp->rsx", env, bra, ket, lag_matrices[j - 1])
    oldest = chain[k - 1]
    return np.einsum("abx,bcs,xc->cas", env, oldest, lag_matrices[k - 1])


def dense_transfer(tensor: Any, classes: Any, before: Any, after: Any) -> Any:
    """The map of one step on a state v[b, alpha] as a dense matrix.

    The step applies ``before`` (d^2, d^2) to alpha, the step tensor
    T[b, b', classes[alpha]] to the bond, then ``after``. Returns
    K[(b', alpha'), (b, alpha)] of shape (chi d^2, chi d^2), row-major.
    """
    expanded = tensor[:, :, classes]  # (b, b', beta)
    full = np.einsum("xy,bcy,ya->cxba", after, expanded, before)
    chi, d2 = tensor.shape[1], before.shape[0]
    return full.reshape(chi * d2, tensor.shape[0] * d2)
