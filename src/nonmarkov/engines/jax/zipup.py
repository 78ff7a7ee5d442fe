"""The compiled zip-up window step: :func:`nonmarkov.kernels.window.advance_window`
with ``sweep='zip_up'`` on padded arrays, for ``jax.jit``.

The window is stored padded to a bond bucket D: the front ``F[x, D]`` (site 0,
the newest point) and the older sites ``S[L, D, m, D]`` (capacity L; the first
``count`` in use, ``count`` a device scalar), with exact zeros outside the kept
ranks. A step is two scans over the L sites:

1. the zip-up, oldest site first: each site times its lag matrix and the carry
   from the older sites, ``T[(l, c), (p, k)]``, cut as the host cuts it
   (:func:`.cuts.zip_up_cut`: a plain truncated SVD, or the copies-aware sketch
   where the real matrix is large); ``vh`` becomes the site, ``u s`` the carry
   to the next newer site; a traced oldest site becomes the first carry;
2. the cut of that state from the new point to the oldest site at its exact
   Schmidt values, leaving the window left-orthonormal with the norm in the
   oldest site (split off right-orthonormal for ``oldest='finalize'``).

Sites beyond ``count`` skip their work (``lax.switch``), so a growing window
compiles nothing new. A rank above D, or a sketch wider than its bucket W, is
reported and the caller redoes the step with a larger bucket. Buckets whose
cut matrices all have a side below
:data:`~nonmarkov.kernels.truncation.SKETCH_MIN_SIDE` compile no sketch.
Requires JAX.
"""

from __future__ import annotations

import functools
from typing import Any

from . import compiler
from .cuts import cut, zip_up_cut
from .modules import jax_modules
from .padding import extent, svd_algorithm

#: the site kernels of a step, by name (``lax.switch`` branches pick among them)
SKIP, TRACE, CUT = 0, 1, 2


def couple(carry: Any, site: Any, lag: Any) -> Any:
    """The zip-up matrix of a site: ``T[(l, c), (p, k)]`` (D c, m D) from the site
    ``S[l, p, r]`` (D, m, D), its lag matrix ``I[c, p]`` (c, m), or a matrix per row
    ``I[c, q, p]`` (c, m, m) in a weighted class basis, and the carry ``C[(r, c),
    k]`` (D c, D) from the older sites."""
    _, jnp, _ = jax_modules()
    bond, dim_m, _ = site.shape
    rows = lag.shape[0]
    by_class = jnp.moveaxis(carry.reshape(bond, rows, bond), 1, 0)  # (c, r, k)
    product = jnp.matmul(site.reshape(1, bond * dim_m, bond), by_class)  # (c, l p, k)
    product = product.reshape(rows, bond, dim_m, bond)
    if lag.ndim == 3:
        weighted = jnp.einsum("clpk,cqp->clqk", product, lag)
    else:
        weighted = product * lag[:, None, :, None]
    return jnp.moveaxis(weighted, 0, 1).reshape(bond * rows, dim_m * bond)


def traced(site: Any, lag: Any, covector: Any = None) -> Any:
    """The first carry from a traced oldest site: ``sum_{p, r} S[l, p, r] I[c, p]``
    as ``C[(l, c), k]`` (D c, D), nonzero in column k = 0 only; a matrix per row
    (c, m, m) is read with the weighted basis's ``covector`` (m,)."""
    _, jnp, _ = jax_modules()
    bond = site.shape[0]
    if lag.ndim == 3:
        lag = jnp.einsum("q,cqp->cp", covector, lag)
    vector = jnp.einsum("lpr,cp->lc", site, lag).reshape(-1, 1)
    return jnp.pad(vector, ((0, 0), (0, bond - 1)))


def read_out(front: Any, sites: Any, count: Any, covector: Any = None) -> tuple[Any, Any]:
    """The window summed over every site's classes (read with ``covector`` (m,) in a
    weighted class basis): (x,) and the log of the scale it was divided by
    (contracted from the oldest site, rescaled on the way)."""
    _, jnp, lax = jax_modules()
    capacity, bond = sites.shape[0], sites.shape[1]

    def contract(carry: tuple[Any, Any], inputs: tuple[Any, Any]) -> tuple[Any, None]:
        vector, log_rest = carry
        j, site = inputs
        if covector is None:
            moved = jnp.einsum("lpr,r->l", site, vector)
        else:
            moved = jnp.einsum("lpr,p,r->l", site, covector, vector)
        size = jnp.max(jnp.abs(moved))
        good = (size > 0.0) & (j < count)
        moved = moved / jnp.where(good, size, 1.0).astype(moved.dtype)
        log_rest = log_rest + jnp.where(good, jnp.log(jnp.where(good, size, 1.0)), 0.0)
        return (jnp.where(j < count, moved, vector), log_rest), None

    start = jnp.zeros((bond,), front.dtype).at[0].set(1.0)
    positions = jnp.arange(capacity, dtype=jnp.int32)
    (vector, log_rest), _ = lax.scan(
        contract, (start, jnp.zeros((), sites.real.dtype)), (positions, sites), reverse=True
    )
    return front @ vector, log_rest


def step(
    front: Any,
    sites: Any,
    count: Any,
    log_scale: Any,
    between: Any,
    second: Any,
    constants: dict[str, Any],
    memory: int,
    max_rank: int | None,
    oldest: str,
    svd: Any = None,
) -> tuple[Any, ...]:
    """One zip-up window step on padded arrays (traced by ``jax.jit``).

    Shapes: front (x, D), sites (L, D, m, D), count () int32 (sites in use
    besides the front), log_scale () real, between and second (x, x).
    ``constants``: projector (x, m), first (x, m) (the lag-1 row of x times its
    own factor), carrier (x, c) one-hot row of x, lags (L, c, m) for lags
    2..L+1, out_map (x, x), epsrel (), and for ``memory`` >= 2 leaving (c, m),
    the coupling to the point that leaves the window; for a window in a weighted
    class basis (:func:`~nonmarkov.kernels.window.trace_basis`) basis (m, m) and
    covector (m,), with lags (L, c, m, m) and leaving (c, m, m) matrices per
    row in that basis; for buckets that
    sketch, gaussians (m D, 2 W) real (the sketch's test columns over the padded
    columns (p, k), :func:`~nonmarkov.kernels.truncation.sketch_gaussians`).
    ``memory``: dkmax, 0 for no cut. ``oldest``: ``'trace'`` (TEMPO) or
    ``'finalize'`` (PT-TEMPO).

    Returns front, sites, count, log_scale, the output, the largest rank any
    cut wanted (int32; above D means the step must be redone larger), the
    largest bond of the new window (int32) and the widest sketch a cut wanted
    beyond W (int32; 0 when every sketch fitted). The output is the read-out (x,)
    for ``'trace'``; for ``'finalize'`` (the split-off site (D, m, D), its rank
    (0 when nothing was split off), the log-scale before the step).
    """
    _, jnp, lax = jax_modules()
    dim_x, bond = front.shape
    capacity, dim_m = sites.shape[0], sites.shape[2]
    rows = constants["carrier"].shape[1]
    dtype = front.dtype
    epsrel = constants["epsrel"]
    positions = jnp.arange(capacity, dtype=jnp.int32)
    full = jnp.asarray(memory > 0) & (count + 1 >= memory)
    trace_full = full & (oldest == "trace") & (count >= 1)
    finalize_full = full & (oldest == "finalize")

    lags = constants["lags"]
    if memory >= 2:  # the oldest position of a full window couples to the leaving point
        lags = lags.at[memory - 2].set(constants["leaving"])

    gaussians = constants.get("gaussians")
    basis, covector = constants.get("basis"), constants.get("covector")

    def skip(carry: tuple[Any, ...], site: Any, lag: Any) -> tuple[Any, ...]:
        return carry, jnp.zeros_like(site), jnp.int32(0), jnp.int32(0)

    def trace_site(carry: tuple[Any, ...], site: Any, lag: Any) -> tuple[Any, ...]:
        first = (traced(site, lag, covector), jnp.int32(1), carry[2])
        return first, jnp.zeros_like(site), jnp.int32(0), jnp.int32(0)

    def cut_site(carry: tuple[Any, ...], site: Any, lag: Any) -> tuple[Any, ...]:
        previous, width, growth = carry
        groups = extent(site, 0)
        width = jnp.where(width > 0, width, extent(site, 2))  # 0: the identity carry
        u, s, vh, rank, wider = zip_up_cut(
            couple(previous, site, lag),
            groups,
            dim_m * width,
            growth,
            rows,
            bond,
            epsrel,
            max_rank,
            gaussians,
            svd,
        )
        carry = (u * s[None, :].astype(dtype), rank, jnp.maximum(rank - groups, 0))
        return carry, vh.reshape(bond, dim_m, bond), rank, wider

    def zip_up(
        carry: tuple[Any, ...], inputs: tuple[Any, Any, Any]
    ) -> tuple[tuple[Any, ...], tuple[Any, Any, Any]]:
        j, site, lag = inputs
        branch = jnp.where(j >= count, SKIP, jnp.where((j == count - 1) & trace_full, TRACE, CUT))
        carry, new_site, rank, wider = lax.switch(
            branch, [skip, trace_site, cut_site], carry, site, lag
        )
        return carry, (new_site, rank, wider)

    identity = jnp.repeat(jnp.eye(bond, dtype=dtype), rows, axis=0)  # C[(r, c), k] = delta_rk
    start = (identity, jnp.int32(0), jnp.int32(0))
    (carry, _, _), (tail, zip_ranks, wider) = lax.scan(
        zip_up, start, (positions, sites, lags), reverse=True
    )

    # the new point and the old front: (x, m, D), cut x | (m, k)
    theta = jnp.einsum("ba,ac,ar->bcr", between, constants["projector"], front)
    flat = theta * constants["first"][:, :, None]
    coupled = flat if basis is None else jnp.einsum("qp,xpr->xqr", basis, flat)
    picked = jnp.einsum("rck,xc->rxk", carry.reshape(bond, rows, bond), constants["carrier"])
    joined = jnp.einsum("xpr,rxk->xpk", coupled, picked)
    front_u, s, vh, front_rank = cut(joined.reshape(dim_x, -1), bond, epsrel, max_rank, svd)
    current = (s[:, None].astype(dtype) * vh).reshape(bond, dim_m, bond)  # the old front
    tail_length = count - trace_full.astype(count.dtype)  # tail sites after the old front

    def keep_left(current: Any, right: Any) -> tuple[Any, Any, Any, Any]:
        u, s, vh, rank = cut(current.reshape(bond * dim_m, bond), bond, epsrel, max_rank, svd)
        moved = jnp.einsum("ak,kpr->apr", s[:, None].astype(dtype) * vh, right)
        return moved, u.reshape(bond, dim_m, bond), jnp.zeros_like(right), rank

    def split_off(current: Any, right: Any) -> tuple[Any, Any, Any, Any]:
        u, s, vh, rank = cut(current.reshape(bond * dim_m, bond), bond, epsrel, max_rank, svd)
        final = jnp.einsum("ak,kpr->apr", vh, right)
        kept = (u * s[None, :].astype(dtype)).reshape(bond, dim_m, bond)
        return jnp.zeros_like(current), kept, final, rank

    def last(current: Any, right: Any) -> tuple[Any, Any, Any, Any]:
        return jnp.zeros_like(current), current, jnp.zeros_like(right), jnp.int32(0)

    def after(current: Any, right: Any) -> tuple[Any, Any, Any, Any]:
        return current, jnp.zeros_like(current), jnp.zeros_like(right), jnp.int32(0)

    def left_to_right(
        carry: tuple[Any, Any], inputs: tuple[Any, Any]
    ) -> tuple[tuple[Any, Any], tuple[Any, Any]]:
        current, final = carry
        j, right = inputs
        splits = finalize_full & (j == tail_length - 1)
        branch = jnp.where(
            j < tail_length,
            jnp.where(splits, 1, 0),
            jnp.where((j == tail_length) & ~finalize_full, 2, 3),
        )
        current, new_site, split, rank = lax.switch(
            branch, [keep_left, split_off, last, after], current, right
        )
        return (current, jnp.where(splits, split, final)), (new_site, rank)

    (_, final_site), (new_sites, ranks) = lax.scan(
        left_to_right, (current, jnp.zeros_like(current)), (positions, tail)
    )
    new_count = jnp.where(full, count, count + 1)

    # a window of one point that is traced: the old front leaves at once
    single = full & (oldest == "trace") & (count == 0)
    summed = jnp.pad(flat.sum(axis=(1, 2))[:, None], ((0, 0), (0, bond - 1)))
    front_u = jnp.where(single, summed, front_u)
    new_sites = jnp.where(single, jnp.zeros_like(new_sites), new_sites)
    new_count = jnp.where(single, 0, new_count)

    # the norm sits in the oldest site (the front when there is none)
    holder = jnp.maximum(new_count - 1, 0)
    held = lax.dynamic_index_in_dim(new_sites, holder, 0, keepdims=False)
    norm = jnp.where(new_count > 0, jnp.linalg.norm(held), jnp.linalg.norm(front_u))
    positive = norm > 0.0
    scale = jnp.where(positive, norm, 1.0).astype(dtype)
    new_sites = jnp.where(
        new_count > 0,
        lax.dynamic_update_index_in_dim(new_sites, held / scale, holder, 0),
        new_sites,
    )
    front_u = jnp.where(new_count > 0, front_u, front_u / scale)
    log_before = log_scale
    log_scale = log_scale + jnp.where(positive, jnp.log(jnp.where(positive, norm, 1.0)), 0.0)

    split_rank = ranks[jnp.maximum(tail_length - 1, 0)]
    wanted = jnp.maximum(jnp.maximum(jnp.max(zip_ranks), jnp.max(ranks)), front_rank)
    oldest_right = extent(lax.dynamic_index_in_dim(new_sites, holder, 0, keepdims=False), 2)
    largest = jnp.maximum(jnp.maximum(jnp.max(ranks), front_rank), oldest_right)
    if oldest == "finalize":
        final_rank = jnp.where(finalize_full, split_rank, 0)
        output = (final_site, final_rank, log_before)
        return front_u, new_sites, new_count, log_scale, output, wanted, largest, jnp.max(wider)
    vector, log_rest = read_out(front_u, new_sites, new_count, covector)
    state = vector * jnp.exp(log_scale + log_rest).astype(dtype)
    readout = constants["out_map"] @ (second @ state)
    return front_u, new_sites, new_count, log_scale, readout, wanted, largest, jnp.max(wider)


@functools.cache
def compiled_step(
    memory: int, max_rank: int | None, oldest: str, platform: str, svd: str = "default"
) -> Any:
    """The jitted :func:`step` (one per configuration; XLA caches it per shape)."""
    return compiler.compile_kernel(
        functools.partial(
            step,
            memory=memory,
            max_rank=max_rank,
            oldest=oldest,
            svd=svd_algorithm(svd, platform),
        ),
        platform=platform,
    )
