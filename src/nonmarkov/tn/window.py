"""Kernels of the memory window: an MPS over the most recent time points.

The window is a list of site tensors ``M[l, p, r]`` ordered from the newest
point (site 0, left end) to the oldest. ``p`` runs over the m distinct
"classes" of a point's index (the values on which the couplings depend).

One step of TEMPO or PT-TEMPO couples a new point to every site of the
window: site j (lag j + 1) is multiplied by a lag matrix ``I_j[c, p]``, where
c is the class of the new point, carried along the chain as an MPO bond of
dimension m. The kernels apply these couplings and truncate the bonds in one
sweep. Sweeps alternate in direction from step to step: a sweep must start
where the previous one left the norm, so that the part of the chain it has
not visited yet is (nearly) orthonormal and the singular values it cuts are
those of the whole state. ``sweep_sites`` + ``front_update`` sweep from the
oldest site to the newest (right to left) and leave right-orthonormal sites
with the norm in the front; ``sweep_left_to_right`` does the opposite and
leaves the norm in the oldest site.

The oldest site can be kept, traced out (summed over p: its memory has
ended) or finalised (split off as a fixed tensor, e.g. of a process tensor).

Everything here is a function of arrays, written against the backend proxy;
no physics.
"""

from __future__ import annotations

import math
from typing import Any

from ..backends.numerical_backend import np
from .truncation import truncated_svd

OLDEST_ACTIONS = ("keep", "trace", "finalize")


def _split_right(matrix: Any, left_shape: tuple[int, int], right_shape: tuple[int, int],
                 epsrel: float, max_rank: int | None) -> tuple[Any, Any]:
    """SVD-truncate ``matrix`` ((l c), (p r)) into a carry (l, c, k) and a site (k, p, r)."""
    u, s, vh = truncated_svd(matrix, epsrel, max_rank)
    rank = s.shape[0]
    carry = (u * s[None, :]).reshape(left_shape + (rank,))
    site = vh.reshape((rank,) + right_shape)
    return carry, site


def sweep_sites(sites: list[Any], lag_matrices: list[Any], epsrel: float, oldest: str,
                max_rank: int | None = None) -> tuple[Any, list[Any], Any]:
    """Couple the new point to sites 1..n-1 and truncate, oldest first.

    Parameters
    ----------
    sites : window tensors ``M_j[l, p, r]``, j = 0..n-1 (n >= 2); site 0 is
        not touched here (see :func:`front_update`).
    lag_matrices : ``I_j[c, p]`` (m, m) for j = 0..n-1.
    epsrel : truncation tolerance.
    oldest : ``'keep'``, ``'trace'`` or ``'finalize'`` for site n-1.

    Returns
    -------
    carry : (r_0, m, k) array to be contracted into site 0's right bond.
    new_sites : right-orthonormal sites 1..n-1 (without the oldest when it
        was traced or finalised).
    finalized : the split-off oldest site (k, p, r), or None.
    """
    n = len(sites)
    new_sites: list[Any] = []
    finalized = None
    carry = None
    for j in range(n - 1, 0, -1):
        site = sites[j]
        lag = lag_matrices[j]
        chi_l, dim_p, chi_r = site.shape
        dim_c = lag.shape[0]
        if carry is None:
            coupled = site[:, None, :, :] * lag[None, :, :, None]  # (l, c, p, r)
            if oldest == "trace":
                carry = np.sum(coupled, axis=(2, 3))[:, :, None]
                continue
            matrix = coupled.reshape(chi_l * dim_c, dim_p * chi_r)
            carry, new_site = _split_right(matrix, (chi_l, dim_c), (dim_p, chi_r), epsrel,
                                           max_rank)
            if oldest == "finalize":
                finalized = new_site
            else:
                new_sites.append(new_site)
            continue
        rank = carry.shape[2]
        coupled = np.einsum("lpr,cp,rck->lcpk", site, lag, carry)
        matrix = coupled.reshape(chi_l * dim_c, dim_p * rank)
        carry, new_site = _split_right(matrix, (chi_l, dim_c), (dim_p, rank), epsrel, max_rank)
        new_sites.append(new_site)
    new_sites.reverse()
    return carry, new_sites, finalized


def front_update(theta: Any, row_classes: Any, first_lag: Any, own_factor: Any,
                 carry: Any | None, epsrel: float, oldest: str,
                 max_rank: int | None = None) -> tuple[Any, Any, Any]:
    """Couple the new point to site 0 and split off the new front site.

    Parameters
    ----------
    theta : (x, p, r) site 0 seen from the new point's index x (for TEMPO
        the propagator is already applied; for PT-TEMPO x is the class).
    row_classes : (x,) int array, the class of each value of x.
    first_lag : ``I_0[c, p]`` (m, m), the lag-1 coupling matrix.
    own_factor : (m,) the new point's coupling to itself.
    carry : (r, m, k) from :func:`sweep_sites`, or None if site 0 is the
        oldest site of the window.
    oldest : what to do with site 0 when ``carry`` is None.

    Returns
    -------
    front : (1, x, k') the new newest site, holding the norm.
    site0 : (k', p, k) right-orthonormal old site 0, or None if traced or
        finalised.
    finalized : site 0 when ``oldest == 'finalize'`` and ``carry`` is None.
    """
    lag_rows = first_lag[row_classes, :] * own_factor[row_classes][:, None]  # (x, p)
    dim_x, dim_p, chi_r = theta.shape
    if carry is None:
        coupled = theta * lag_rows[:, :, None]
        if oldest == "trace":
            return np.sum(coupled, axis=(1, 2)).reshape(1, dim_x, 1), None, None
        matrix = coupled.reshape(dim_x, dim_p * chi_r)
        rank_shape = (dim_p, chi_r)
    else:
        carry_rows = carry[:, row_classes, :]  # (r, x, k)
        coupled = np.einsum("xpr,xp,rxk->xpk", theta, lag_rows, carry_rows)
        rank_shape = (dim_p, carry.shape[2])
        matrix = coupled.reshape(dim_x, -1)
    u, s, vh = truncated_svd(matrix, epsrel, max_rank)
    rank = s.shape[0]
    front = (u * s[None, :]).reshape(1, dim_x, rank)
    site0 = vh.reshape((rank,) + rank_shape)
    if carry is None and oldest == "finalize":
        return front, None, site0
    return front, site0, None


def normalise(front: Any) -> tuple[Any, float]:
    """Divide ``front`` by its Frobenius norm; return it and the log of the norm."""
    norm = float(np.to_host(np.linalg.norm(front.reshape(-1))))
    if norm == 0.0:
        return front, 0.0
    return front / norm, math.log(norm)


def trace_vectors(sites: list[Any]) -> tuple[Any, float]:
    """Contract sites (all classes summed) from the oldest to site 0.

    Returns the vector (k,) on site 0's left bond (divided by a scale to stay
    in range) and the log of that scale.
    """
    vector = np.ones((1,), dtype=sites[-1].dtype) if sites else None
    log_scale = 0.0
    for site in reversed(sites):
        vector = np.einsum("lpr,r->l", site, vector)
        norm = float(np.to_host(np.max(np.abs(vector))))
        if norm > 0.0:
            vector = vector / norm
            log_scale += math.log(norm)
    return vector, log_scale


def sweep_left_to_right(theta: Any, row_classes: Any, lag_matrices: list[Any], own_factor: Any,
                        sites: list[Any], epsrel: float, oldest: str,
                        max_rank: int | None = None) -> tuple[list[Any], Any]:
    """Couple the new point to the window and truncate, newest site first.

    Parameters
    ----------
    theta : (x, p, r) site 0 seen from the new point's index x.
    row_classes : (x,) class of each x.
    lag_matrices : ``I_j[c, p]`` for the sites j = 0..n-1.
    own_factor : (m,) the new point's coupling to itself.
    sites : the window ``M_j[l, p, r]``, j = 0..n-1 (site 0 is replaced by
        ``theta``).
    oldest : ``'keep'``, ``'trace'`` or ``'finalize'`` for site n-1.

    Returns
    -------
    window : the new window, front (1, x, k) first; all sites left-orthonormal
        except the last, which holds the norm.
    finalized : the split-off oldest site (k, p, r), right-orthonormal, or None.
    """
    n = len(sites)
    lag_rows = lag_matrices[0][row_classes, :] * own_factor[row_classes][:, None]  # (x, p)
    coupled = theta * lag_rows[:, :, None]  # (x, p, r)
    dim_x = theta.shape[0]
    num_classes = lag_matrices[0].shape[0]
    if n == 1:
        block = coupled.reshape(1, dim_x, theta.shape[1], theta.shape[2])
    else:
        carrier = (row_classes[:, None] == np.arange(num_classes)[None, :]).astype(theta.dtype)
        block = np.einsum("xpr,xc->xprc", coupled, carrier)[None]  # (1, x, p, r, c) -> below
        block = block.reshape(1, dim_x, theta.shape[1], theta.shape[2] * num_classes)
    # split off the new front site
    u, s, vh = truncated_svd(block.reshape(dim_x, -1), epsrel, max_rank)
    window = [u.reshape(1, dim_x, -1)]
    carry = (s[:, None] * vh)  # (k, p * r [* c])
    finalized = None
    for j in range(n):
        rank = carry.shape[0]
        site = sites[j]
        dim_p = site.shape[1]
        if j == 0:
            dim_p, chi_r = theta.shape[1], theta.shape[2]
            tensor = carry.reshape(rank, dim_p, chi_r, -1)  # (k, p, r, c) or (k, p, r, 1)
        else:
            lag = lag_matrices[j]
            carry3 = carry.reshape(rank, site.shape[0], num_classes)
            chi_r = site.shape[2]
            if j == n - 1:
                tensor = np.einsum("klc,lpr,cp->kpr", carry3, site, lag)[..., None]
            else:
                tensor = np.einsum("klc,lpr,cp->kprc", carry3, site, lag)
        last = j == n - 1
        if last:
            tensor = tensor.reshape(rank, dim_p, chi_r)
            if oldest == "trace":
                vector = np.sum(tensor, axis=(1, 2))
                previous = window.pop()
                window.append(np.tensordot(previous, vector, axes=([2], [0]))[:, :, None])
            elif oldest == "finalize":
                u, s, vh = truncated_svd(tensor.reshape(rank, -1), epsrel, max_rank)
                finalized = vh.reshape(-1, dim_p, chi_r)
                previous = window.pop()
                window.append(np.tensordot(previous, u * s[None, :], axes=([2], [0])))
            else:
                window.append(tensor)
            break
        matrix = tensor.reshape(rank * dim_p, -1)
        u, s, vh = truncated_svd(matrix, epsrel, max_rank)
        window.append(u.reshape(rank, dim_p, -1))
        carry = s[:, None] * vh
    return window, finalized


def advance_window(window: list[Any], theta: Any, row_classes: Any, lag_matrices: list[Any],
                   own_factor: Any, epsrel: float, oldest: str, left_to_right: bool,
                   max_rank: int | None = None) -> tuple[list[Any], Any, int]:
    """One step of the window: couple a new point, truncate, handle the oldest.

    ``left_to_right`` chooses the sweep direction (alternate it every step).
    Returns the new window, the finalised site (or None) and the index of
    the site that holds the norm (0 or -1).
    """
    if left_to_right:
        new_window, finalized = sweep_left_to_right(
            theta, row_classes, lag_matrices, own_factor, window, epsrel, oldest, max_rank)
        return new_window, finalized, -1
    n = len(window)
    carry, rest, finalized = None, [], None
    if n >= 2:
        carry, rest, finalized = sweep_sites(window, lag_matrices, epsrel, oldest, max_rank)
    front, site0, finalized0 = front_update(theta, row_classes, lag_matrices[0], own_factor,
                                            carry, epsrel, oldest if n == 1 else "keep",
                                            max_rank)
    finalized = finalized if finalized is not None else finalized0
    return [front] + ([site0] if site0 is not None else []) + rest, finalized, 0
