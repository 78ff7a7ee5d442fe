"""Kernels for multiplying overlapping chains and recompressing them.

A chain is a list of site tensors ``S[l, p, r]`` ordered left to right
(``l`` is the bond to the site before, ``r`` to the site after; the first
site has l = 1, the last r = 1). Two chains overlap when sites of one and
sites of the other are functions of the same variables: the product of the
two functions is the chain of the site-wise products on the overlap, with the
bond dimensions multiplied there; :func:`multiply_overlapping` forms it and
brings it back to small bonds without holding the large bonds.

Everything here is a function of arrays written against the backend proxy;
no physics.
"""

from __future__ import annotations

import math
from typing import Any

from ..backends.numerical_backend import np
from .blocks import left_orthonormalise
from .truncation import kept_rank, truncated_svd
from .window import normalise, truncate_right_to_left

#: Smallest zip cut for which the Gram-matrix split is accurate enough.
GRAM_MIN_EPSREL = 1e-6


def multiply_overlapping(
    before: list[Any],
    tail: list[Any],
    second: list[Any],
    rows: list[Any],
    epsrel: float,
    zip_epsrel: float,
    max_rank: int | None = None,
) -> tuple[list[Any], float]:
    """Product of two overlapping chains, compressed with ``epsrel``.

    The first chain is ``before + tail``; the second chain ``second`` starts
    at the variable of ``tail[0]``: its first ``len(tail)`` sites share their
    variables with ``tail`` (the product there is site-wise, bond chi_1 chi_2),
    the rest follows. ``rows[i]`` ((p,) or None) is the index of ``tail[i]``
    that goes with each index p of ``second[i]``.

    The product is never formed with chi_1 chi_2 bonds on both sides: a QR
    sweep runs through ``before``, the overlap is zipped left to right (each
    site contracted with the carried bond and split by an SVD cut at
    ``zip_epsrel``), a QR sweep runs through the rest of ``second``, and a
    final SVD sweep right to left cuts every bond at its Schmidt values with
    ``epsrel``. If ``tail`` and ``second`` are right-orthonormal (as
    :func:`compress_chain` leaves them), the environment right of every
    zipped bond is a contraction, so each zip cut changes the product by at
    most its discarded weight.

    Returns the chain (len(before) + len(second) sites, right-orthonormal,
    unit norm in the first site) and the log of the norm divided out.
    """
    sites: list[Any] = []
    carry = None
    for site in before:
        tensor = site if carry is None else np.tensordot(carry, site, axes=([1], [0]))
        k, p, r = tensor.shape
        q, carry = np.linalg.qr(tensor.reshape(k * p, r))
        sites.append(q.reshape(k, p, -1))
    if carry is None:
        raise ValueError("multiply_overlapping needs at least one site in before")
    carry = carry.reshape(carry.shape[0], carry.shape[1], 1)  # (k, chi_1, chi_2 = 1)
    for tail_site, head, row in zip(tail, second, rows):
        if row is not None:
            tail_site = tail_site[:, row, :]
        partial = np.einsum("kab,apc->kbpc", carry, tail_site)
        tensor = np.einsum("kbpc,bpd->kpcd", partial, head)
        k, p, c, d = tensor.shape
        u, rest = _split_off_left(tensor.reshape(k * p, c * d), zip_epsrel, max_rank)
        sites.append(u.reshape(k, p, -1))
        carry = rest.reshape(-1, c, d)
    carry = carry.reshape(carry.shape[0], -1)  # the first chain ends: chi_1 = 1
    for site in second[len(tail) :]:
        tensor = np.tensordot(carry, site, axes=([1], [0]))
        k, p, r = tensor.shape
        q, carry = np.linalg.qr(tensor.reshape(k * p, r))
        sites.append(q.reshape(k, p, -1))
    sites[-1] = np.tensordot(sites[-1], carry, axes=([2], [0]))
    chain = truncate_right_to_left(sites, epsrel, max_rank)
    chain[0], log_norm = normalise(chain[0])
    return chain, log_norm


def _split_off_left(matrix: Any, epsrel: float, max_rank: int | None) -> tuple[Any, Any]:
    """``matrix`` (r, c) ~ u @ rest with u (r, k) orthonormal, cut with ``epsrel``.

    Wide matrices with a loose cut use the eigenvectors of matrix matrix^dag
    (one matrix product and a small Hermitian eigensolver, cheaper than an
    SVD); its singular values are accurate to ~1e-8 of the largest, which
    is why the cut must be at least :data:`GRAM_MIN_EPSREL`. ``rest`` is
    always the exact projection u^dag matrix.
    """
    rows, cols = matrix.shape
    if epsrel < GRAM_MIN_EPSREL or rows >= cols:
        u, s, vh = truncated_svd(matrix, epsrel, max_rank)
        return u, s[:, None] * vh
    values, vectors = np.linalg.eigh(matrix @ np.conj(matrix.T))
    values, vectors = values[::-1], vectors[:, ::-1]  # descending
    singular_values = np.sqrt(np.maximum(values, 0.0))
    u = vectors[:, : kept_rank(singular_values, epsrel, max_rank)]
    return u, np.conj(u.T) @ matrix


def compress_chain(
    sites: list[Any], epsrel: float, max_rank: int | None = None
) -> tuple[list[Any], float]:
    """Cut every bond of a chain at its Schmidt values with ``epsrel``.

    A QR sweep left to right makes the chain left-orthonormal (exact), then
    an SVD sweep right to left truncates each bond (optimal in the 2-norm of
    the whole chain, as in :func:`nonmarkov.kernels.window.truncate_right_to_left`).
    Returns the chain (right-orthonormal, unit norm in the first site) and
    the log of the norm divided out.
    """
    if len(sites) == 1:
        first, log_norm = normalise(sites[0])
        return [first], log_norm
    chain = truncate_right_to_left(left_orthonormalise(sites), epsrel, max_rank)
    chain[0], log_norm = normalise(chain[0])
    return chain, log_norm


def close_right_end(sites: list[Any], vectors: list[Any]) -> tuple[Any, float]:
    """Contract the physical index of each site with ``vectors[j]``, right to left.

    Returns the vector (l,) on the left bond of ``sites[0]`` (the last site's
    right bond must be 1), rescaled to unit largest entry, and the log of
    the scale divided out.
    """
    vector = np.ones((1,), dtype=sites[-1].dtype)
    log_scale = 0.0
    for site, weights in zip(reversed(sites), reversed(vectors)):
        vector = np.einsum("lpr,p,r->l", site, weights, vector)
        scale = float(np.to_host(np.max(np.abs(vector))))
        if scale > 0.0:
            vector = vector / scale
            log_scale += math.log(scale)
    return vector, log_scale
