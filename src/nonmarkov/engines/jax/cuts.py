"""The cuts of the compiled zip-up step, on padded arrays with static shapes.

:func:`cut` is the truncated SVD with the rank rule of
:func:`~nonmarkov.kernels.truncation.rank_rule` traced. :func:`zip_up_cut` is
the host's zip-up cut (:func:`~nonmarkov.kernels.window.zip_up_from_oldest`):
a plain :func:`cut` where the real matrix has a side below
:data:`~nonmarkov.kernels.truncation.SKETCH_MIN_SIDE`, else
:func:`~nonmarkov.kernels.truncation.sketched_truncated_svd` step for step:
the same Gaussian test columns (:func:`~nonmarkov.kernels.truncation.sketch_gaussians`,
laid out over the padded columns), the same blocks, power iteration, missed
norm and growth, with the sketch's variable widths masked inside a buffer of
static width W (the sketch bucket). A cut that needs more than W columns
reports the width it wants, and the caller redoes the step with a wider
bucket. Requires JAX.
"""

from __future__ import annotations

import math
from typing import Any

from ...kernels.truncation import SKETCH_MIN_SIDE, SKETCH_OVERSAMPLING, rank_rule
from .modules import jax_modules
from .padding import padded_qr

#: how the sketch loop ended
_GOING, _DONE, _PLAIN, _WIDER = 0, 1, 2, 3


def cut(matrix: Any, keep: int, epsrel: Any, max_rank: int | None, svd: Any) -> tuple[Any, ...]:
    """Truncated SVD of a padded ``matrix`` (R, C) whose padding rows and columns are
    exact zeros: ``u`` (R, keep), ``s`` (keep,), ``vh`` (keep, C) and the kept rank
    (int32; it may exceed ``keep``, which the caller reports).

    Everything beyond the rank is zero, and so are the rows of ``u`` and the
    columns of ``vh`` where ``matrix`` is zero (the SVD leaves rounding noise there,
    which multiplied through the window would become slow subnormal numbers).
    ``keep`` may exceed min(R, C): the result is padded with zeros.
    """
    _, jnp, lax = jax_modules()
    u, s, vh = lax.linalg.svd(matrix, full_matrices=False, algorithm=svd)
    rank = rank_rule(s, epsrel, max_rank, jnp)
    return _kept(matrix, u, s, vh, rank, keep)


def _kept(matrix: Any, u: Any, s: Any, vh: Any, rank: Any, keep: int) -> tuple[Any, ...]:
    """(u, s, vh) masked beyond ``rank`` and off the nonzero rows and columns of
    ``matrix``, cut or padded to ``keep`` values; and the rank."""
    _, jnp, _ = jax_modules()
    width = s.shape[0]
    kept = jnp.arange(width) < rank
    rows = jnp.any(matrix != 0.0, axis=1).astype(matrix.dtype)
    columns = jnp.any(matrix != 0.0, axis=0).astype(matrix.dtype)
    s = jnp.where(kept, s, 0.0)
    u = u * kept.astype(u.dtype)[None, :] * rows[:, None]
    vh = vh * kept.astype(vh.dtype)[:, None] * columns[None, :]
    if width >= keep:
        return u[:, :keep], s[:keep], vh[:keep], rank
    extra = keep - width
    return (
        jnp.pad(u, ((0, 0), (0, extra))),
        jnp.pad(s, (0, extra)),
        jnp.pad(vh, ((0, extra), (0, 0))),
        rank,
    )


def zip_up_cut(
    matrix: Any,
    groups: Any,
    columns: Any,
    growth: Any,
    copies: int,
    keep: int,
    epsrel: Any,
    max_rank: int | None,
    gaussians: Any,
    svd: Any,
) -> tuple[Any, ...]:
    """The zip-up cut of a padded ``matrix`` (R, C), rows (l, c) with the ``copies``
    of a row fastest, as the host makes it.

    ``groups`` and ``columns`` (int32 scalars) are the real matrix's rows / copies
    (the site's left bond) and columns; ``growth`` what the previous cut kept beyond
    its left bond. ``gaussians`` (C, 2 W) are the test columns of the padded
    columns, or None for buckets whose every cut is plain (no sketch compiled).
    Returns u (R, keep), s (keep,), vh (keep, C), the rank (int32) and the sketch
    width the cut wanted beyond W (int32, 0 when it fitted).
    """
    _, jnp, lax = jax_modules()
    if gaussians is None:
        return (*cut(matrix, keep, epsrel, max_rank, svd), jnp.int32(0))
    rows = groups * copies
    small = jnp.minimum(rows, columns) < SKETCH_MIN_SIDE

    def plain(_: Any) -> tuple[Any, ...]:
        return (*cut(matrix, keep, epsrel, max_rank, svd), jnp.int32(0))

    def sketched(_: Any) -> tuple[Any, ...]:
        status, left, values, right, rank, wanted = _sketch(
            matrix, groups, rows, columns, growth, copies, epsrel, max_rank, gaussians, svd
        )
        kept = _kept(matrix, left, values, right, rank, keep)
        done = (*kept, jnp.int32(0))
        return lax.cond(
            status == _DONE,
            lambda _: done,
            lambda _: (*cut(matrix, keep, epsrel, max_rank, svd), wanted),
            None,
        )

    return lax.cond(small, plain, sketched, None)


def _sketch(
    matrix: Any,
    groups: Any,
    rows: Any,
    columns: Any,
    growth: Any,
    copies: int,
    epsrel: Any,
    max_rank: int | None,
    gaussians: Any,
    svd: Any,
) -> tuple[Any, ...]:
    """The loop of :func:`~nonmarkov.kernels.truncation.sketched_truncated_svd` in a
    buffer of W = ``gaussians.shape[1]`` / 2 columns. Returns the status (done: the
    sketch's SVD follows; plain: a plain SVD is the host's choice; wider: W is too
    narrow), the left vectors (R, K), values (K,), right vectors (K, C) and rank of
    a done cut, and the total sketch width a wider one wanted."""
    _, jnp, lax = jax_modules()
    dtype = matrix.dtype
    total_rows, total_columns = matrix.shape
    width_cap = gaussians.shape[1] // 2
    positions = jnp.arange(width_cap)
    if copies > 1:
        bond = total_rows // copies
        root = math.sqrt(copies)
        grouped = matrix.reshape(bond, copies, total_columns)
        means = grouped.sum(axis=1) / root  # Q0^H A, (D, C)
        residual = (grouped - means[:, None, :] / root).reshape(total_rows, total_columns)
        first = SKETCH_OVERSAMPLING + jnp.maximum(growth, 0)
        known = groups
    else:
        bond = 0
        means = jnp.zeros((0, total_columns), dtype)
        residual = matrix
        first = groups + jnp.maximum(growth, 0) + SKETCH_OVERSAMPLING
        known = jnp.int32(0)
    projected_rows = bond + width_cap
    values = min(projected_rows, total_columns)

    def pays(width: Any) -> Any:
        if copies > 1:
            return width + SKETCH_OVERSAMPLING < jnp.minimum(rows, columns)
        return 2 * width < jnp.minimum(rows, columns)

    def qr(block: Any, mask: Any) -> Any:
        return padded_qr(block)[0] * mask

    def orthogonalise(block: Any, basis: Any) -> Any:
        block = block - basis @ (basis.conj().T @ block)
        if copies > 1:
            grouped = block.reshape(bond, copies, width_cap)
            block = (grouped - grouped.mean(axis=1, keepdims=True)).reshape(block.shape)
        return block

    def block_step(state: tuple[Any, ...]) -> tuple[Any, ...]:
        residual, basis, parts, used, width = state[:5]
        mask = (positions < width).astype(dtype)[None, :]
        test = lax.dynamic_slice(gaussians, (jnp.int32(0), used), (total_columns, width_cap))
        block = qr(residual @ (test.astype(dtype) * mask), mask)
        block = qr(residual @ (block.conj().T @ residual).conj().T, mask)
        block = qr(orthogonalise(block, basis), mask)
        part = block.conj().T @ residual  # (W, C), zero beyond the block's width
        missed = _missed_norm(residual, block, part)
        basis = basis + jnp.roll(block, used, axis=1)
        parts = parts + jnp.roll(part, used, axis=0)
        used = used + width
        projected = jnp.concatenate([means, parts], axis=0)  # [Q0 Q1]^H A, (D + W, C)
        real = known + used  # rows of the host's projection

        def decompose(_: Any) -> tuple[Any, ...]:
            u, s, vh = lax.linalg.svd(projected, full_matrices=False, algorithm=svd)
            u = u * jnp.any(projected != 0.0, axis=1).astype(dtype)[:, None]
            index = jnp.arange(values + 1)
            spectrum = jnp.concatenate([s, jnp.zeros((1,), s.dtype)])
            spectrum = jnp.where(index < real, spectrum, jnp.where(index == real, missed, 0.0))
            rank = rank_rule(spectrum, epsrel, max_rank, jnp)
            return u, s, vh, rank, rank < real

        def skip(_: Any) -> tuple[Any, ...]:
            return (
                jnp.zeros((projected_rows, values), dtype),
                jnp.zeros((values,), missed.dtype),
                jnp.zeros((values, total_columns), dtype),
                jnp.int32(0),
                jnp.asarray(False),
            )

        close = missed <= epsrel * jnp.linalg.norm(projected)
        u, s, vh, rank, done = lax.cond(close, decompose, skip, None)
        residual = jnp.where(done, residual, residual - block @ part)
        status = jnp.where(done, jnp.int32(_DONE), jnp.int32(_GOING))
        return residual, basis, parts, used, used, status, u, s, vh, rank, state[-1]

    def body(state: tuple[Any, ...]) -> tuple[Any, ...]:
        used, width = state[3], state[4]
        going = pays(known + used + width)
        fits = used + width <= width_cap

        def stop(state: tuple[Any, ...]) -> tuple[Any, ...]:
            # a sketch that no longer pays is the host's plain SVD, not a wider bucket
            status = jnp.where(going, jnp.int32(_WIDER), jnp.int32(_PLAIN))
            wanted = jnp.where(going, used + width, 0).astype(jnp.int32)
            return (*state[:5], status, *state[6:10], wanted)

        return lax.cond(going & fits, block_step, stop, state)

    start = (
        residual,
        jnp.zeros((total_rows, width_cap), dtype),
        jnp.zeros((width_cap, total_columns), dtype),
        jnp.int32(0),
        jnp.asarray(first, jnp.int32),
        jnp.int32(_GOING),
        jnp.zeros((projected_rows, values), dtype),
        jnp.zeros((values,), matrix.real.dtype),
        jnp.zeros((values, total_columns), dtype),
        jnp.int32(0),
        jnp.int32(0),
    )
    state = lax.while_loop(lambda state: state[5] == _GOING, body, start)
    _, basis, _, _, _, status, u, s, vh, rank, wanted = state
    if copies > 1:
        left = basis @ u[bond:] + jnp.repeat(u[:bond] / math.sqrt(copies), copies, axis=0)
    else:
        left = basis @ u
    return status, left, s, vh, rank, wanted


def _missed_norm(residual: Any, block: Any, part: Any) -> Any:
    """|residual - block part|_F as on the host: from the norms where their difference
    is well above its rounding error, else formed."""
    _, jnp, lax = jax_modules()
    total = jnp.vdot(residual, residual).real
    missed_squared = total - jnp.vdot(part, part).real
    return lax.cond(
        missed_squared > 1e-10 * total,
        lambda _: jnp.sqrt(jnp.maximum(missed_squared, 0.0)),
        lambda _: jnp.linalg.norm(residual - block @ part),
        None,
    )
