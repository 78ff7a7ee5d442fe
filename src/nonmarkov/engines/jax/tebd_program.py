"""The compiled program of a PT-TEBD step: the operations that
:class:`~nonmarkov.engines.jax.tebd.JaxTebdEngine` queues (QR moves, two-site
updates, site maps, process-tensor steps, the read-out) as one pure function of
padded sites and traced true bonds, compiled once per program, bucket and shape.

A two-site update (:func:`_two_site`) is that of
:func:`nonmarkov.kernels.tebd.two_site_update` with every factor masked to the
true sizes and the kept rank (:func:`.cuts.cut`), so the padding changes nothing.
Requires JAX.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from typing import Any

import numpy as default_np

from ...backends.numerical_backend import np
from ...kernels.tebd import environments, group_vector
from . import planner
from .compiler import compile_kernel
from .cuts import cut
from .modules import jax_modules
from .padding import svd_algorithm

#: the operations of a program: (RIGHT, k), (LEFT, k), (GATE, k, centre_right, gate,
#: split_left, split_right), (MAP, k, map), (PROCESS, k, in, tensor, classes, out, size),
#: (READ, groups); the integers after k index the program's inputs
RIGHT, LEFT, GATE, MAP, PROCESS, READ = range(6)


def _keep(size: int, used: Any, dtype: Any) -> Any:
    _, jnp, _ = jax_modules()
    return (jnp.arange(size) < used).astype(dtype)


def _two_site(
    left: Any,
    right: Any,
    gate: Any,
    epsrel: Any,
    true: Any,
    centre_right: bool,
    width: int,
    split: int,
    split_left: bool,
    split_right: bool,
    max_rank: int | None,
    svd: Any,
) -> tuple[Any, Any, Any, Any, Any]:
    """The update of :func:`nonmarkov.kernels.tebd.two_site_update` on padded sites.

    ``left`` (L, p, A, M), ``right`` (M, q, A', R), ``gate`` (p q, p q); ``true``
    the int32 true sizes (l, a, a', r); the new bond gets ``width`` columns, the
    part of a split site that meets the gate at most ``split``;
    ``split_left``/``split_right``: whether the site has an augmented leg (true
    a > 1, as the host decides). Returns the new sites, the log of the norm divided
    out, the kept rank and the largest rank of the splits (int32; above ``width``
    or ``split`` the result is cut and the caller redoes it).
    """
    _, jnp, _ = jax_modules()
    big_l, p, big_a, big_m = left.shape
    _, q, big_a2, big_r = right.shape
    dtype = left.dtype
    matrix = jnp.transpose(left, (0, 2, 1, 3)).reshape(big_l * big_a, p * big_m)
    split_rank = jnp.int32(0)
    if split_left:
        u, s, vh, rank = cut(matrix, min(split, *matrix.shape), epsrel, max_rank, svd)
        split_rank = jnp.maximum(split_rank, rank)
        q_l = u.reshape(big_l, big_a, -1)
        r_l = (s.astype(dtype)[:, None] * vh).reshape(-1, p, big_m)
    else:
        q_l, r_l = None, matrix.reshape(big_l * big_a, p, big_m)
    matrix = right.reshape(big_m * q, big_a2 * big_r)
    if split_right:
        u, s, vh, rank = cut(matrix, min(split, *matrix.shape), epsrel, max_rank, svd)
        split_rank = jnp.maximum(split_rank, rank)
        r_r = (u * s.astype(dtype)[None, :]).reshape(big_m, q, -1)
        q_r = vh.reshape(-1, big_a2, big_r)
    else:
        r_r, q_r = matrix.reshape(big_m, q, big_a2 * big_r), None
    k, j = r_l.shape[0], r_r.shape[2]
    theta = jnp.einsum("kpm,mqj->kpqj", r_l, r_r).reshape(k, p * q, j)
    theta = jnp.einsum("xy,kyj->kxj", gate, theta).reshape(k * p, q * j)
    u, s, vh, rank = cut(theta, width, epsrel, max_rank, svd)
    norm = jnp.sqrt(jnp.sum(s * s))
    s = (s / norm).astype(dtype)
    weight = s if centre_right else jnp.ones_like(s)
    part_r = (weight[:, None] * vh).reshape(width, q, j)
    weight = jnp.ones_like(s) if centre_right else s
    part_l = (u * weight[None, :]).reshape(k, p, width)
    if q_l is None:
        new_left = part_l.reshape(big_l, big_a, p, width)
    else:
        new_left = jnp.einsum("lak,kpc->lapc", q_l, part_l)
    new_left = jnp.transpose(new_left, (0, 2, 1, 3))
    if q_r is None:
        new_right = part_r.reshape(width, q, big_a2, big_r)
    else:
        new_right = jnp.einsum("cpk,kar->cpar", part_r, q_r)
    # rounding noise on the padding (from the SVDs) is set back to exact zeros
    new_left = new_left * (
        _keep(big_l, true[0], dtype)[:, None, None, None]
        * _keep(big_a, true[1], dtype)[None, None, :, None]
    )
    new_right = new_right * (
        _keep(big_a2, true[2], dtype)[None, None, :, None]
        * _keep(big_r, true[3], dtype)[None, None, None, :]
    )
    return new_left, new_right, jnp.log(norm), rank, split_rank


def _masked_qr(matrix: Any, row_keep: Any, columns: Any) -> tuple[Any, Any]:
    """QR of a (rows, cols) padded matrix with Q (rows, cols) and R (cols, cols),
    Q masked to the used rows and both to the first ``columns`` columns."""
    _, jnp, _ = jax_modules()
    rows, cols = matrix.shape
    if rows < cols:
        matrix = jnp.pad(matrix, ((0, cols - rows), (0, 0)))
    q, upper = jnp.linalg.qr(matrix)
    q = q[:rows]
    keep = _keep(cols, columns, matrix.dtype)
    return q * row_keep[:, None] * keep[None, :], upper * keep[:, None]


def _right_move(site: Any, following: Any, true: Any) -> tuple[Any, Any]:
    """Gauge centre from ``site`` (L, p, A, R) to ``following``; ``true`` (l, a, r)."""
    _, jnp, _ = jax_modules()
    big_l, p, big_a, big_r = site.shape
    dtype = site.dtype
    rows = (
        _keep(big_l, true[0], dtype)[:, None, None]
        * jnp.ones((1, p, 1), dtype)
        * _keep(big_a, true[1], dtype)[None, None, :]
    ).reshape(-1)
    q, upper = _masked_qr(site.reshape(big_l * p * big_a, big_r), rows, true[2])
    return q.reshape(big_l, p, big_a, big_r), jnp.tensordot(upper, following, axes=([1], [0]))


def _left_move(previous: Any, site: Any, true: Any) -> tuple[Any, Any]:
    """Gauge centre from ``site`` (L, p, A, R) to ``previous``; ``true`` (l, a, r)."""
    _, jnp, _ = jax_modules()
    big_l, p, big_a, big_r = site.shape
    dtype = site.dtype
    rows = (
        jnp.ones((p, 1, 1), dtype)
        * _keep(big_a, true[1], dtype)[None, :, None]
        * _keep(big_r, true[2], dtype)[None, None, :]
    ).reshape(-1)
    q, upper = _masked_qr(site.reshape(big_l, p * big_a * big_r).T, rows, true[0])
    moved = jnp.tensordot(previous, upper.T, axes=([previous.ndim - 1], [0]))
    return moved, q.T.reshape(big_l, p, big_a, big_r)


def _process_step(
    site: Any, transform_in: Any, tensor: Any, classes: Any, transform_out: Any
) -> Any:
    """:func:`nonmarkov.kernels.tebd.apply_process_step` on a padded site (L, p, A, R)
    and step tensor (A, A', c)."""
    _, jnp, _ = jax_modules()
    site = jnp.einsum("xp,lpar->lxar", transform_in, site)
    site = jnp.einsum("lpar,abp->lpbr", site, tensor[:, :, classes])
    return jnp.einsum("yx,lxar->lyar", transform_out, site)


def _read(sites: Sequence[Any], caps: Sequence[Any], groups: tuple[tuple[int, ...], ...]) -> Any:
    """The trace (without the chain's scale) and the group vectors of
    :meth:`~nonmarkov.engines.base.TebdEngine.read_out` from padded sites and caps."""
    _, jnp, _ = jax_modules()
    capped = [jnp.tensordot(site, cap, axes=([2], [0])) for site, cap in zip(sites, caps)]
    transfers = []
    for site in capped:
        trace = jnp.eye(math.isqrt(site.shape[1]), dtype=site.dtype).reshape(-1)
        transfers.append(jnp.tensordot(site, trace, axes=([1], [0])))
    left, right = environments(transfers)
    vectors = tuple(
        group_vector(capped, transfers, left[group[0]], right[group[-1] + 1], group)
        for group in groups
    )
    return left[-1][0], vectors


def run_program(
    sites: tuple[Any, ...],
    bonds: Any,
    legs: Any,
    matrices: tuple[Any, ...],
    tensors: tuple[Any, ...],
    classes: tuple[Any, ...],
    sizes: Any,
    caps: tuple[Any, ...],
    epsrel: Any,
    *,
    program: tuple[tuple[Any, ...], ...],
    width: int,
    split: int,
    max_rank: int | None,
    svd: Any,
) -> tuple[Any, ...]:
    """Run the operations of ``program`` (see :data:`RIGHT`) on the padded ``sites``.

    ``bonds`` (n + 1,) and ``legs`` (n,) int32: the true sizes at the start;
    ``matrices`` the gates, maps and basis changes, ``tensors`` the padded step
    tensors (A, A', c), ``classes`` their class index per Liouville index,
    ``sizes`` the true leg after each process step, ``caps`` the padded caps of a
    read-out; ``width`` and ``split`` the buckets of the bonds and of the splits.
    Returns the sites, the true bonds, the sum of the logs of the norms divided
    out, the largest ranks wanted by the cuts of the bonds and by the splits, and
    the read-out (or None).
    """
    _, jnp, _ = jax_modules()
    out = list(sites)
    log_norm = jnp.zeros((), out[0].real.dtype)
    wanted = split_wanted = jnp.int32(0)
    read = None
    for op in program:
        kind, k = op[0], op[1] if len(op) > 1 else 0
        if kind == RIGHT:
            true = jnp.stack([bonds[k], legs[k], bonds[k + 1]])
            out[k], out[k + 1] = _right_move(out[k], out[k + 1], true)
        elif kind == LEFT:
            true = jnp.stack([bonds[k], legs[k], bonds[k + 1]])
            out[k - 1], out[k] = _left_move(out[k - 1], out[k], true)
        elif kind == GATE:
            _, _, centre_right, gate, split_l, split_r = op
            true = jnp.stack([bonds[k], legs[k], legs[k + 1], bonds[k + 2]])
            out[k], out[k + 1], log, rank, split_rank = _two_site(
                out[k],
                out[k + 1],
                matrices[gate],
                epsrel,
                true,
                centre_right,
                width,
                split,
                split_l,
                split_r,
                max_rank,
                svd,
            )
            bonds = bonds.at[k + 1].set(rank)
            wanted = jnp.maximum(wanted, rank)
            split_wanted = jnp.maximum(split_wanted, split_rank)
            log_norm = log_norm + log
        elif kind == MAP:
            out[k] = jnp.einsum("xp,lpar->lxar", matrices[op[2]], out[k])
        elif kind == PROCESS:
            _, _, first, tensor, index, last, size = op
            out[k] = _process_step(
                out[k], matrices[first], tensors[tensor], classes[index], matrices[last]
            )
            legs = legs.at[k].set(sizes[size])
        else:
            read = _read(out, caps, op[1])
    return tuple(out), bonds, log_norm, wanted, split_wanted, read


@functools.cache
def program_kernel(
    program: tuple[tuple[Any, ...], ...],
    width: int,
    split: int,
    max_rank: int | None,
    svd: str,
    platform: str,
) -> Any:
    """The compiled :func:`run_program` (cached per backend process; XLA caches per shape)."""
    return compile_kernel(
        functools.partial(
            run_program,
            program=program,
            width=width,
            split=split,
            max_rank=max_rank,
            svd=svd_algorithm(svd, platform),
        ),
        platform=platform,
    )


def leg_size(size: int) -> int:
    """The padded size of an augmented leg: 1 stays 1 (a site without a bath)."""
    return 1 if size == 1 else planner.bond_bucket(size)


def zero_padded(array: Any, shape: tuple[int, ...]) -> default_np.ndarray:
    """A host copy of ``array`` padded with zeros to ``shape``."""
    array = default_np.asarray(np.to_host(array))
    out = default_np.zeros(shape, dtype=np.dtype_complex)
    out[tuple(slice(0, n) for n in array.shape)] = array
    return out
