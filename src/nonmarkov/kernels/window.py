"""Kernels of the memory window: an MPS over the most recent time points.

The window is a list of site tensors ``M[l, p, r]`` ordered from the newest
point (site 0, left end) to the oldest. ``p`` runs over the m distinct
"classes" of a point's index (the values on which the couplings depend).

One step of TEMPO or PT-TEMPO couples a new point to every site of the
window: site j (lag j + 1) is multiplied by a lag matrix ``I_j[c, p]``, where
c is the class of the new point, carried along the chain as an MPO bond of
num_rows values. Applied exactly, the MPO multiplies every bond by num_rows;
the truncation brings it back. Two sweeps do a step (``sweep=``):

- ``'zip_up'`` (the host default): :func:`zip_up_from_oldest` applies the
  couplings from the oldest site to the newest and cuts each bond at once
  (truncated SVD with ``epsrel``), so the enlarged bond exists on one site at
  a time; the cut sees the older sites' copies of the carrier, which differ
  little at long lags, and keeps about the final rank. It leaves the sites
  right-orthonormal with the norm in the front, and
  :func:`truncate_left_to_right` then cuts every bond of that state at its
  exact Schmidt values, leaving the window left-orthonormal with the norm in
  the oldest site: the gauge the next zip-up starts from. The first pass is
  not an optimal truncation of the exact product (its cut does not see the
  newer sites' weights); its error adds to the second pass's.
- ``'exact'``: :func:`sweep_left_to_right` applies the couplings from the
  newest site to the oldest with a QR on every site (no truncation: bonds
  num_rows times the rank) and :func:`truncate_right_to_left` cuts every bond
  at the Schmidt values of the exact product (the optimal truncation of the
  whole state), leaving the sites right-orthonormal with the norm in the
  front. The compiled JAX step does this sweep.

The oldest site can be kept, traced out (summed over p: its memory has
ended) or finalised (split off as a fixed tensor, e.g. of a process tensor).

A traced window may hold its sites' class index in a weighted basis
(:func:`trace_basis`, ``class_basis=``): q = A p, with the class sum (the one
direction along which a point is ever read once it is older than the front)
scaled by a weight w against the directions orthogonal to it. Every cut is
then made in that weighted norm; the lag matrices become A diag(I_j[c]) A^-1
(a matrix per row), and a traced site is read with the covector 1^T A^-1.

Everything here is a function of arrays, written against the backend proxy;
no physics.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as default_np

from .._threads import large_work_threads
from ..backends.numerical_backend import np
from .truncation import SKETCH_MIN_SIDE, sketched_truncated_svd, truncated_svd

OLDEST_ACTIONS = ("keep", "trace", "finalize")
SWEEPS = ("zip_up", "exact")
#: the site that holds the norm of the window after a step of each sweep
NORM_SITE = {"zip_up": -1, "exact": 0}


def trace_basis(num_classes: int, weight: float) -> tuple[Any, Any]:
    """The weighted basis of a site's class index: A (m, m) = diag(w, 1, ..., 1) H,
    with H real orthogonal and its first row the normalised class sum (1, ..., 1) /
    sqrt(m), and A^-1 (m, m). Host arrays."""
    m = int(num_classes)
    ones = default_np.full((m, 1), 1.0 / math.sqrt(m))
    columns = default_np.concatenate([ones, default_np.eye(m)[:, : m - 1]], axis=1)
    q = default_np.linalg.qr(columns)[0]
    h = q.T * default_np.sign(q[0, 0])  # first row +ones / sqrt(m)
    scale = default_np.ones(m)
    scale[0] = float(weight)
    return scale[:, None] * h, h.T / scale[None, :]


def matrix_lags(rows: Any, basis: Any, inverse: Any) -> Any:
    """Lag rows I[c, p] (r, m) as the sites of a weighted basis (:func:`trace_basis`)
    see them: the matrices A diag(I[c]) A^-1, (r, m, m). Host arrays."""
    return default_np.einsum("qs,cs,sp->cqp", basis, default_np.asarray(rows), inverse)


def normalise(front: Any) -> tuple[Any, float]:
    """Divide ``front`` by its Frobenius norm; return it and the log of the norm."""
    norm = float(np.to_host(np.linalg.norm(front.reshape(-1))))
    if norm == 0.0:
        return front, 0.0
    return front / norm, math.log(norm)


def trace_vectors(
    sites: list[Any], last_index: int | None = None, covector: Any | None = None
) -> tuple[Any, float]:
    """Contract sites (all classes summed) from the oldest to site 0; with
    ``last_index`` the oldest site is read at that index instead of summed (the
    vacuum of tail modes, :mod:`nonmarkov.kernels.tail`); with ``covector`` (m,)
    the class index is read with it instead of summed (a weighted basis,
    :func:`trace_basis`).

    Returns the vector (k,) on site 0's left bond (divided by a scale to stay
    in range) and the log of that scale.
    """
    vector = np.ones((1,), dtype=sites[-1].dtype) if sites else None
    log_scale = 0.0
    for position, site in enumerate(reversed(sites)):
        if position == 0 and last_index is not None:
            closed = site[:, last_index, :]
        elif covector is not None:
            closed = np.einsum("lpr,p->lr", site, covector)
        else:
            closed = site.sum(axis=1)
        vector = closed @ vector
        norm = float(np.to_host(np.max(np.abs(vector))))
        if norm > 0.0:
            vector = vector / norm
            log_scale += math.log(norm)
    return vector, log_scale


def _times(site: Any, matrix: Any) -> Any:
    """Site M[l, p, r] times a matrix on its right bond, (l, p, r'): one matrix product
    (a tensordot costs more in call overhead than the product at small bonds)."""
    chi_l, dim_p, chi_r = site.shape
    return (site.reshape(chi_l * dim_p, chi_r) @ matrix).reshape(chi_l, dim_p, -1)


def _in_basis(coupled: Any, class_basis: tuple[Any, Any] | None) -> Any:
    """The new point's product (x, p, r) with site 0's class index in the window's
    basis (:func:`trace_basis`), or as it is for the class basis."""
    if class_basis is None:
        return coupled
    return np.einsum("qp,xpr->xqr", class_basis[0], coupled)


def _couple(site: Any, lag: Any) -> Any:
    """Site M[l, p, r] times lag I[c, p] (or a matrix per row, I[c, q, p]), as (c, l, p * r)."""
    chi_l, dim_p, chi_r = site.shape
    if lag.ndim == 3:
        coupled = np.einsum("cqp,lpr->clqr", lag, site)
    else:
        coupled = site[None, :, :, :] * lag[:, None, :, None]
    return coupled.reshape(lag.shape[0], chi_l, dim_p * chi_r)


def sweep_left_to_right(
    theta: Any,
    first_rows: Any,
    carrier_rows: Any,
    num_rows: int,
    site_lags: list[Any],
    sites: list[Any],
    epsrel: float,
    oldest: str,
    max_rank: int | None = None,
    class_basis: tuple[Any, Any] | None = None,
) -> tuple[list[Any], Any]:
    """Couple the new point to the window and orthonormalise, newest site first.

    Every bond is orthonormalised with a QR decomposition (no truncation),
    except the bond to a finalised oldest site, which is cut with ``epsrel``
    (the chain left of it is then orthonormal, so the cut is optimal).

    Parameters
    ----------
    theta : (x, p, r) site 0 seen from the new point's index x.
    first_rows : (x, p) coupling of each x to the point before it (lag 1)
        times its own factor.
    carrier_rows : (x,) int, the row of the lag matrices that each x uses (a
        value of the carrier bond c < ``num_rows``: classes whose rows are
        equal in every lag matrix share one).
    site_lags : ``I_j[c, p]`` (num_rows, m) for the window positions j = 1..n-1
        (lags 2..n).
    sites : the window ``M_j[l, p, r]``, j = 0..n-1 (site 0 enters through
        ``theta``).
    oldest : ``'keep'``, ``'trace'`` or ``'finalize'`` for site n-1.
    class_basis : optional (A (m, m), covector (m,)): the sites' class index is
        held in the weighted basis of :func:`trace_basis` (A and 1^T A^-1); the
        lags are then matrices per row, (num_rows, m, m), in that basis.

    Returns
    -------
    window : the new window, front (1, x, k) first; all sites left-orthonormal
        except the last, which holds the norm.
    finalized : the split-off oldest site (k, p, r), right-orthonormal, or None.
    """
    n = len(sites)
    coupled = _in_basis(theta * first_rows[:, :, None], class_basis)  # (x, p, r)
    dim_x, dim_p, chi_r = theta.shape
    if n > 1:  # open the carrier bond c (= row of x) towards the older sites
        carrier = carrier_rows[:, None] == np.arange(num_rows)[None, :]
        coupled = coupled[:, :, :, None] * carrier[:, None, None, :].astype(theta.dtype)
    q, carry = np.linalg.qr(coupled.reshape(dim_x, -1))
    window = [q.reshape(1, dim_x, -1)]
    for j in range(n):
        rank = carry.shape[0]
        last = j == n - 1
        if j > 0:
            site = sites[j]
            dim_p, chi_r = site.shape[1], site.shape[2]
            carry_by_class = carry.reshape(rank, site.shape[0], num_rows).transpose(2, 0, 1)
            # the product and the QR: about k (p r c) min(k p, r c) multiply-adds each
            work = rank * dim_p * chi_r * num_rows * min(rank * dim_p, chi_r * num_rows)
            with large_work_threads(work):
                product = np.matmul(carry_by_class, _couple(site, site_lags[j - 1]))  # (c, k, p r)
            if last:
                carry = np.sum(product, axis=0)
            else:
                carry = product.transpose(1, 2, 0)  # (k, p r, c)
        tensor = carry.reshape(rank, dim_p, -1)
        if not last:
            with large_work_threads(tensor.size * min(rank * dim_p, tensor.shape[2])):
                q, carry = np.linalg.qr(tensor.reshape(rank * dim_p, -1))
            window.append(q.reshape(rank, dim_p, -1))
            continue
        if oldest == "trace":
            if class_basis is None:
                vector = np.sum(tensor, axis=(1, 2))
            else:
                vector = np.einsum("kpr,p->k", tensor, class_basis[1])
            previous = window.pop()
            window.append(np.tensordot(previous, vector, axes=([2], [0]))[:, :, None])
            return window, None
        if oldest == "finalize":
            u, s, vh = truncated_svd(tensor.reshape(rank, -1), epsrel, max_rank)
            previous = window.pop()
            window.append(_times(previous, u * s[None, :]))
            return window, vh.reshape(-1, dim_p, chi_r)
        window.append(tensor)
    return window, None


def zip_up_from_oldest(
    theta: Any,
    first_rows: Any,
    carrier_rows: Any,
    num_rows: int,
    site_lags: list[Any],
    sites: list[Any],
    epsrel: float,
    oldest: str,
    max_rank: int | None = None,
    class_basis: tuple[Any, Any] | None = None,
) -> tuple[Any, list[Any]]:
    """Couple the new point to the window from the oldest site to the newest,
    cutting every bond with ``epsrel`` on the way.

    A lag given as a matrix per row, (r, q, p), acts on the site's index (the
    tail modes of the oldest site, :mod:`nonmarkov.kernels.tail`, or the
    classes in a weighted basis, ``class_basis``).

    Site j (oldest first) times its lag matrix and the carry from the older
    sites, ``T[(l, c), (p, k)]``, is split by a truncated SVD: ``vh`` becomes
    the site (right-orthonormal), ``u s`` the carry ``((l, c), k')`` to site
    j - 1. The cut keeps about l of the num_rows * l rows' values (l, the
    site's left bond, is what the last step kept there), mostly along the means
    of the num_rows copies of each row, so the SVD is sketched from those means
    (:func:`~nonmarkov.kernels.truncation.sketched_truncated_svd`, same
    guarantee), expecting as many values beyond l as the previous cut kept. A
    traced oldest site becomes the first carry ``((l, c), 1)``.
    Arguments as for :func:`sweep_left_to_right` (``oldest='finalize'`` is
    done by :func:`truncate_left_to_right`).

    Returns
    -------
    front : (x, p, k) the new point and site 0, holding the norm.
    tail : the sites j = 1..n-1 (without a traced one), right-orthonormal.
    """
    coupled = _in_basis(theta * first_rows[:, :, None], class_basis)  # (x, p, r)
    carry = None
    tail: list[Any] = []
    growth = 0  # what the last cut kept beyond its old bond: the next one's expected rise
    for j in range(len(sites) - 1, 0, -1):
        site, lag = sites[j], site_lags[j - 1]
        chi_l, dim_p, chi_r = site.shape
        if carry is None:
            if lag.ndim == 3:  # a matrix per carrier row on the oldest site's index
                weighted = np.einsum("cqp,lpr->clqr", lag, site)
            else:
                weighted = site[None, :, :, :] * lag[:, None, :, None]  # (c, l, p, r)
            if oldest == "trace":
                if class_basis is None:
                    traced = np.sum(weighted, axis=(2, 3)).T
                else:
                    traced = np.einsum("clpr,p->lc", weighted, class_basis[1])
                carry = traced.reshape(chi_l * num_rows, 1)
                continue
            chi_k = chi_r
        else:
            chi_k = carry.shape[1]
        # the site's product and cut: about (c l) (p k) l multiply-adds each
        with large_work_threads(num_rows * chi_l * dim_p * chi_k * chi_l):
            if carry is None:
                matrix = weighted.transpose(1, 0, 2, 3)
            else:  # one product over r: ((l, p), (c, k)), weighted by lag[c, p]
                product = site.reshape(chi_l * dim_p, chi_r) @ carry.reshape(chi_r, -1)
                product = product.reshape(chi_l, dim_p, num_rows, chi_k)
                if lag.ndim == 3:
                    matrix = np.einsum("lpck,cqp->lcqk", product, lag)
                else:
                    matrix = (product * lag.T[None, :, :, None]).transpose(0, 2, 1, 3)
            matrix = matrix.reshape(chi_l * num_rows, dim_p * chi_k)
            if min(matrix.shape) < SKETCH_MIN_SIDE:
                u, s, vh = truncated_svd(matrix, epsrel, max_rank)
            else:
                u, s, vh = sketched_truncated_svd(
                    matrix, epsrel, chi_l + growth, max_rank, num_rows, column_classes=dim_p
                )
        growth = max(0, s.shape[0] - chi_l)
        tail.append(vh.reshape(-1, dim_p, chi_k))
        carry = u * s[None, :]
    tail.reverse()
    if carry is None:
        return coupled, tail
    picked = carry.reshape(theta.shape[2], num_rows, -1)[:, carrier_rows, :]  # (r, x, k)
    return np.einsum("xpr,rxk->xpk", coupled, picked), tail


def truncate_left_to_right(
    front: Any, tail: list[Any], epsrel: float, oldest: str, max_rank: int | None = None
) -> tuple[list[Any], Any]:
    """SVD truncation sweep from the new point to the oldest site.

    ``front`` (x, p, k) holds the norm and the ``tail`` sites are
    right-orthonormal (as :func:`zip_up_from_oldest` leaves them), so every
    bond is cut at its exact Schmidt values. Returns the window, front
    (1, x, k') first, left-orthonormal with the norm in the last site, and,
    for ``oldest='finalize'``, the oldest site split off right-orthonormal
    (the last cut's ``s`` stays on its left), else None.
    """
    window: list[Any] = []
    current = front.reshape(1, front.shape[0], -1)  # the first cut splits x | (p, k)
    for index in range(len(tail) + 1):
        chi_l, dim_p, chi_r = current.shape
        with large_work_threads(chi_l * dim_p * chi_r * min(chi_l * dim_p, chi_r)):
            u, s, vh = truncated_svd(current.reshape(chi_l * dim_p, chi_r), epsrel, max_rank)
            if index == 0:
                right = vh.reshape(-1, *front.shape[1:])
            else:
                following = tail[index - 1]
                right = (vh @ following.reshape(following.shape[0], -1)).reshape(
                    -1, *following.shape[1:]
                )
        if oldest == "finalize" and index == len(tail):
            window.append((u * s[None, :]).reshape(chi_l, dim_p, -1))
            return window, right
        window.append(u.reshape(chi_l, dim_p, -1))
        current = s[:, None, None] * right
    window.append(current)
    return window, None


def advance_window(
    window: list[Any],
    theta: Any,
    first_rows: Any,
    carrier_rows: Any,
    num_rows: int,
    site_lags: list[Any],
    epsrel: float,
    oldest: str,
    max_rank: int | None = None,
    sweep: str = "zip_up",
    class_basis: tuple[Any, Any] | None = None,
) -> tuple[list[Any], Any]:
    """One step of the window: couple a new point, truncate, handle the oldest.

    ``sweep`` (see the module docstring): ``'zip_up'`` returns the window
    left-orthonormal with the norm in the oldest site, ``'exact'``
    right-orthonormal with the norm in the front (:data:`NORM_SITE`). Returns
    the new window and the finalised site (right-orthonormal) or None.
    Arguments as for :func:`sweep_left_to_right`.
    """
    if oldest not in OLDEST_ACTIONS:
        raise ValueError(f"oldest must be one of {list(OLDEST_ACTIONS)}; got {oldest!r}")
    # the two sweeps take the same arguments
    arguments: tuple[Any, ...] = (theta, first_rows, carrier_rows, num_rows, site_lags, window)
    arguments += (epsrel, oldest, max_rank, class_basis)
    if sweep == "zip_up":
        if oldest == "trace" and len(window) == 1:  # the point before the new one leaves
            traced = np.sum(theta * first_rows[:, :, None], axis=(1, 2))
            return [traced.reshape(1, -1, 1)], None
        front, tail = zip_up_from_oldest(*arguments)
        return truncate_left_to_right(front, tail, epsrel, oldest, max_rank)
    if sweep != "exact":
        raise ValueError(f"sweep must be one of {list(SWEEPS)}; got {sweep!r}")
    new_window, finalized = sweep_left_to_right(*arguments)
    return truncate_right_to_left(new_window, epsrel, max_rank), finalized


def truncate_right_to_left(
    window: list[Any], epsrel: float, max_rank: int | None = None
) -> list[Any]:
    """Plain SVD truncation sweep from the last site to the front.

    Optimal when the window is left-orthonormal with the norm in the last
    site: every bond is then cut at its exact Schmidt values. Leaves the
    sites right-orthonormal and the norm in the front.
    """
    window = list(window)
    for j in range(len(window) - 1, 0, -1):
        site = window[j]
        chi_l, dim_p, chi_r = site.shape
        with large_work_threads(chi_l * dim_p * chi_r * min(chi_l, dim_p * chi_r)):
            u, s, vh = truncated_svd(site.reshape(chi_l, dim_p * chi_r), epsrel, max_rank)
        window[j] = vh.reshape(-1, dim_p, chi_r)
        window[j - 1] = _times(window[j - 1], u * s[None, :])
    return window
