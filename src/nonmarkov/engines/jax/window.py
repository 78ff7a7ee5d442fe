"""Compiled (``jax.jit``) window step of TEMPO for the JAX backend.

The same step as :func:`nonmarkov.kernels.window.advance_window` with
``oldest='keep'``/``'trace'`` (couple a new point to the memory window,
orthonormalise left to right with QR, cut every bond right to left at its
Schmidt values with the ``epsrel`` and multiplet rules of
:func:`nonmarkov.kernels.truncation.kept_rank`), written with static shapes so
that XLA compiles it once per shape:

- the window is stored padded: the front ``F[x, D]`` and the older sites
  ``S[L, D, m, D]`` (capacity L sites, bond dimension D); only the first
  ``n`` sites are in use (``n`` is a device scalar). Both sweeps are
  ``lax.scan`` over the L sites; a site beyond ``n`` skips its work
  (``lax.switch``), so a growing window compiles nothing new;
- D is taken from a list of bucket sizes (:data:`BOND_BUCKETS`); the kept
  rank is decided on the device and singular values beyond it are set to
  zero, so a padded bond carries exact zeros and the result does not depend
  on D. The zeros are kept exact (no rounding noise from the SVD on padding
  columns, QR with the zero columns filled): noise there would be multiplied
  into subnormal numbers, which make LAPACK on a CPU up to 100x slower;
- the step returns the read-out vector and the largest wanted rank as device
  arrays. :class:`CompiledWindow` runs steps in chunks and fetches both once
  per chunk; if a wanted rank exceeded D it redoes the chunk from its start
  with a larger bucket. Chunks are short while the bond dimension is rising
  (one step after a new largest rank, doubling while it holds, up to
  ``chunk`` and to the chunk length :class:`~nonmarkov.engines.jax.scheduling.Schedule`
  allows), so a redo costs
  one step, and the bucket grows one step ahead of a steady rise; once the
  ranks hold below a bucket grown with headroom (or they fell), the bucket
  shrinks to fit them when that saves more than a compilation;
- the bonds of a window vary along it (small at the ends, largest inside), and
  a site's QR and SVD cost ~D^3: where that work is large (on a CPU,
  see :func:`site_levels`), the kernel also holds a few smaller sizes (levels)
  and works on each site at the smallest one that holds its bonds, chosen on
  the device from the used extent of the padded arrays (``lax.switch``), so
  that a site costs ~its own size^3 and nothing is planned on the host;
- from bucket :data:`~nonmarkov.engines.jax.sitewise.SITEWISE_BOND` on, where a step
  costs more than a kernel dispatch per site, the window is handed to
  :class:`~nonmarkov.engines.jax.sitewise.SitewiseWindow`, which gives every site
  its own padded shape (the bonds of a window vary along it, and one bucket
  for all sites would multiply the work); ``NONMARKOV_JAX_SITEWISE`` says
  on which devices.

The optional ``max_rank`` caps every bond like ``max_rank`` of
:func:`nonmarkov.kernels.window.advance_window`.

With ``oldest='finalize'`` (PT-TEMPO) the point whose memory has ended is
split off instead of traced: the oldest tensor is cut with an SVD (device
rank rule), ``u s`` is merged into the site before it and ``vh`` is returned
padded to (D, m, D) with its rank and the log-scale before the step; the host
collects them per chunk (one fetch) and trims the padding. The read-out
contraction is skipped in this mode.

Everything here is array algebra; the physics (propagators, influence
factors) comes in as arrays. Requires JAX.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from typing import Any

import numpy as default_np

from ...kernels.truncation import rank_rule
from ...options import EngineOptions
from ..base import LastArguments, WindowSpec
from . import compiler, placement, sitewise
from .padding import (
    _extent,
    _pad_to,
    _padded_qr,
    _svd,
    _svd_algorithm,
    _used_columns,
    bond_bucket,
)
from .scheduling import Schedule

#: When a bond outgrows its bucket a second time (the bond dimension is still rising),
#: the new bucket holds this much more than it wanted (fewer compilations) while the
#: bucket is below :data:`CHEAP_BOND`. The first growth takes the smallest bucket that
#: holds the wanted rank.
GROWTH_HEADROOM = 1.2
#: A rise of the largest rank by at most this fraction per step, two chunks in a row,
#: is steady: the bucket then grows one step ahead of it.
STEADY_RISE = 0.25
#: Up to this bucket a step costs less than a compilation (~1 s), so growth takes
#: headroom; above it a step costs more (~D^3) and growth takes the smallest bucket.
CHEAP_BOND = 64
#: A bucket is shrunk to the one that holds the ranks of the last chunks when that cuts
#: the work per step (~D^3) to at most this fraction ...
SHRINK_WORK = 0.7
#: (and saves more than a compilation costs: :meth:`Schedule.shrink_pays`).

#: Smaller sizes a site of a whole-step kernel may work at (see :func:`site_levels`);
#: each adds to the compile time of the kernel (benchmarks/README.md) ...
SITE_LEVELS = 4
#: ... when the work of a site, m (D r)^3, is at least this (below it, the steps cost
#: less than the compilation of the levels).
SITE_LEVEL_WORK = 1_000_000


def _jax() -> tuple[Any, Any, Any]:
    import jax
    import jax.numpy as jnp
    from jax import lax

    return jax, jnp, lax


def _ceil_div(value: Any, divisor: int) -> Any:
    return (value + divisor - 1) // divisor


def _level(need: Any, sizes: Sequence[int]) -> Any:
    """Index of the smallest of the ascending ``sizes`` that is >= ``need`` (int32)."""
    _, jnp, _ = _jax()
    return jnp.sum(jnp.asarray(sizes[:-1], dtype=jnp.int32) < need).astype(jnp.int32)


def _step(
    front: Any,
    sites: Any,
    count: Any,
    log_scale: Any,
    between: Any,
    second: Any,
    constants: dict[str, Any],
    memory: int,
    max_rank: int | None,
    oldest: str = "trace",
    svd_algorithm: Any = None,
    levels: tuple[int, ...] = (),
) -> tuple[Any, ...]:
    """One TEMPO (or PT-TEMPO) window step on padded arrays (traced by ``jax.jit``).

    Shapes: front (x, D), sites (L, D, m, D), count () int (sites in use
    besides the front), log_scale () float, between and second (x, x).
    ``constants``: projector (x, m), first (x, m) = lag-1 row of x times its
    own factor, carrier (x, r) one-hot row of x, lags (L, r, m) for lags
    2..L+1, out_map (x, x), epsrel (), and for ``memory`` >= 2 leaving (r, m),
    the coupling at lag ``memory`` (to the point that leaves the window).
    ``memory``: dkmax, 0 for no cut.

    The sweeps are scans over all L sites; sites beyond ``count`` skip their
    work and pass the carry through (``lax.switch``). ``levels``: sizes d < D
    at which a site may be worked on, on the leading (d, m, d) block of the
    padded arrays (its bonds r d wide in the chain), when its bonds and the
    ranks around it fit: the left-to-right pass counts the used rows of the
    carried tensor and reads the extent of each site's bonds, the cut the rank
    just kept to its right. Padding is exact zeros, so the result is that of
    size D up to rounding.

    ``oldest``: ``'trace'`` (TEMPO: the oldest point is traced out once the
    window is full) or ``'finalize'`` (PT-TEMPO: it is split off).

    Returns front, sites, count, log_scale, the per-step output and the
    largest wanted rank (int32). The output is the read-out vector (x,) for
    ``'trace'``; for ``'finalize'`` it is (site (D, m, D), its rank (int32,
    0 when nothing was finalised), log_scale before the step, the kept rank
    of the bond left of each site (L,)).
    """
    _, jnp, lax = _jax()
    dim_x, bond = front.shape
    capacity, dim_m = sites.shape[0], sites.shape[2]
    num_rows = constants["carrier"].shape[1]
    wide = bond * num_rows  # bond dimension of the orthonormalised chain
    dtype = front.dtype
    epsrel = constants["epsrel"]
    positions = jnp.arange(capacity, dtype=jnp.int32)
    sizes = kernel_sizes(bond, levels)
    levelled = len(sizes) > 1

    # couple the new point to the front and open the carrier bond (x, m, D, r)
    theta = jnp.einsum("ba,ac,ar->bcr", between, constants["projector"], front)
    coupled = (theta * constants["first"][:, :, None])[:, :, :, None] * constants["carrier"][
        :, None, None, :
    ]
    q, r = jnp.linalg.qr(coupled.reshape(dim_x, -1))
    front_q = jnp.pad(q, ((0, 0), (0, wide - q.shape[1])))
    tensor = jnp.pad(r, ((0, wide - r.shape[0]), (0, 0)))  # (wide, m * D * r)

    def couple_at(size: int, tensor: Any, site: Any, lag: Any) -> tuple[Any, Any]:
        # on the leading size x size block of every bond (the rest is exact zeros)
        rows = size * num_rows
        block = tensor.reshape(wide, dim_m, bond, num_rows)[:rows, :, :size]
        q, r = _padded_qr(block.reshape(rows * dim_m, rows))
        by_row = jnp.moveaxis(r.reshape(rows, size, num_rows), 2, 0)  # (r, k, d)
        site_by_row = (site[None, :size, :, :size] * lag[:, None, :, None]).reshape(
            num_rows, size, -1
        )
        product = jnp.matmul(by_row, site_by_row).reshape(num_rows, rows, dim_m, size)
        tensor = _pad_to(jnp.moveaxis(product, 0, 3), (wide, dim_m, bond, num_rows))
        return tensor.reshape(wide, dim_m * wide), _pad_to(
            q.reshape(rows, dim_m, rows), (wide, dim_m, wide)
        )

    def pass_through(tensor: Any, site: Any, lag: Any) -> tuple[Any, Any]:
        return tensor, jnp.zeros((wide, dim_m, wide), dtype)

    couples = [pass_through] + [functools.partial(couple_at, size) for size in sizes]

    def left_to_right(
        carry: tuple[Any, Any, Any], inputs: tuple[Any, Any, Any]
    ) -> tuple[tuple[Any, Any, Any], tuple[Any, Any]]:
        # rows: used rows of tensor, before: used bond of the site before (columns / r)
        tensor, rows, before = carry
        j, site, lag = inputs
        if not levelled:  # one size: none of the bookkeeping below
            tensor, q = lax.switch((j < count).astype(jnp.int32), couples, tensor, site, lag)
            return (tensor, rows, before), (q, rows)
        right = _extent(site, 2)
        need = jnp.maximum(
            jnp.maximum(_ceil_div(rows, num_rows), before), jnp.maximum(_extent(site, 0), right)
        )
        branch = jnp.where(j < count, 1 + _level(need, sizes), 0)
        tensor, q = lax.switch(branch, couples, tensor, site, lag)
        # the chain site q is (rows, m, used columns of R); its need for the cut below
        columns = jnp.minimum(rows * dim_m, before * num_rows)
        cut_need = jnp.maximum(_ceil_div(rows, num_rows), _ceil_div(columns, num_rows))
        return (tensor, columns, right), (q, cut_need)

    start = (
        tensor,
        jnp.int32(min(dim_x, dim_m * bond * num_rows)),
        _extent(front, 1) if levelled else jnp.int32(bond),
    )
    lags = constants["lags"]
    if memory >= 2:  # position memory - 2 is only reached by the leaving point
        lags = lags.at[memory - 2].set(constants["leaving"])
    (tensor, _, _), (chain, cut_needs) = lax.scan(left_to_right, start, (positions, sites, lags))
    last = tensor.reshape(wide, dim_m, bond, num_rows).sum(axis=3)  # carrier closed
    last = jnp.pad(last, ((0, 0), (0, 0), (0, wide - bond)))

    # the oldest point: kept as the last site, or traced (finalised) into the site before it
    # (index <= L - 1: the host grows L before the window would outgrow it)
    trace = jnp.asarray(memory > 0) & (count + 1 >= memory)
    index = jnp.where(trace, jnp.maximum(count - 1, 0), count)
    previous = lax.dynamic_index_in_dim(chain, index, 0, keepdims=False)
    if oldest == "finalize":
        # split off the oldest point: last = (u s) vh, u s stays in the window
        us, s, vh = _svd(last[:, :, :bond].reshape(wide, dim_m * bond), svd_algorithm)
        final_rank = rank_rule(s, epsrel, max_rank, jnp)
        kept = (jnp.arange(bond) < final_rank).astype(s.dtype)
        final_site = (vh[:bond] * kept[:, None].astype(dtype)).reshape(bond, dim_m, bond)
        final_site = final_site * _used_columns(last[:, :, :bond], bond)[None, None, :]
        weighted = jnp.pad(
            us[:, :bond] * kept.astype(dtype)[None, :], ((0, 0), (0, wide - bond))
        )  # (wide, wide)
        merged = jnp.einsum("lpr,rk->lpk", previous, weighted)
        front_merged = front_q @ weighted
        final_rank = jnp.where(trace, final_rank, 0)
        final_site = jnp.where(trace, final_site, jnp.zeros_like(final_site))
    else:
        vector = last.sum(axis=(1, 2))
        merged = jnp.pad(
            jnp.einsum("lpr,r->lp", previous, vector)[:, :, None], ((0, 0), (0, 0), (0, wide - 1))
        )
        front_merged = jnp.pad((front_q @ vector)[:, None], ((0, 0), (0, wide - 1)))
    site = jnp.where(trace, jnp.where(count > 0, merged, previous), last)
    chain = lax.dynamic_update_index_in_dim(chain, site, index, 0)
    front_q = jnp.where(trace & (count == 0), front_merged, front_q)
    count = jnp.where(trace, count, count + 1)

    def cut_at(size: int, right: Any, site: Any) -> tuple[Any, Any, Any]:
        # on the leading block: site (d r, m, d r), right (d r, d); the kept rank may
        # exceed d (up to D), so up to D singular vectors are kept
        rows = size * num_rows
        matrix = (site[:rows, :, :rows].reshape(rows * dim_m, rows) @ right[:rows, :size]).reshape(
            rows, dim_m * size
        )
        us, s, vh = _svd(matrix, svd_algorithm)
        rank = rank_rule(s, epsrel, max_rank, jnp)
        keep = min(bond, s.shape[0])
        kept = (jnp.arange(keep) < rank).astype(s.dtype)
        new_site = (vh[:keep] * kept[:, None].astype(dtype)).reshape(keep, dim_m, size)
        new_site = new_site * _used_columns(matrix, size)[None, None, :]
        weighted = us[:, :keep] * kept.astype(dtype)[None, :]
        return (_pad_to(weighted, (wide, bond)), _pad_to(new_site, (bond, dim_m, bond)), rank)

    def skip(right: Any, site: Any) -> tuple[Any, Any, Any]:
        return right, jnp.zeros((bond, dim_m, bond), dtype), jnp.int32(0)

    cuts = [skip] + [functools.partial(cut_at, size) for size in sizes]

    def right_to_left(
        carry: tuple[Any, Any], inputs: tuple[Any, Any, Any]
    ) -> tuple[tuple[Any, Any], tuple[Any, Any]]:
        # used: used columns of right (the rank kept at the bond to the right)
        right, used = carry
        j, site, cut_need = inputs
        level = _level(jnp.maximum(cut_need, used), sizes) if levelled else 0
        branch = jnp.where(j < count, 1 + level, 0)
        right, new_site, rank = lax.switch(branch, cuts, right, site)
        return (right, jnp.where(j < count, rank, used)), (new_site, rank)

    # the oldest chain site's used columns (the rest of the identity meets zeros)
    oldest_used = jnp.int32(bond)
    if levelled:
        oldest_used = jnp.maximum(
            jnp.minimum(
                _extent(
                    lax.dynamic_index_in_dim(chain, jnp.maximum(count - 1, 0), 0, keepdims=False), 2
                ),
                bond,
            ),
            1,
        )
    (right, _), (new_sites, ranks) = lax.scan(
        right_to_left,
        (jnp.eye(wide, bond, dtype=dtype), oldest_used),
        (positions, chain, cut_needs),
        reverse=True,
    )
    wanted = jnp.maximum(jnp.max(ranks), 1)
    front = front_q @ right

    norm = jnp.linalg.norm(front)
    positive = norm > 0.0
    front = front / jnp.where(positive, norm, 1.0).astype(dtype)
    log_before = log_scale
    log_scale = log_scale + jnp.where(positive, jnp.log(jnp.where(positive, norm, 1.0)), 0.0)
    if oldest == "finalize":
        wanted = jnp.maximum(wanted, final_rank)
        outputs = (final_site, final_rank, log_before, ranks)
        return front, new_sites, count, log_scale, outputs, wanted

    def contract(carry: tuple[Any, Any], inputs: tuple[Any, Any]) -> tuple[Any, None]:
        j, site = inputs
        vector, log_rest = carry
        moved = jnp.einsum("lpr,r->l", site, vector)
        size = jnp.max(jnp.abs(moved))
        good = (size > 0.0) & (j < count)
        moved = moved / jnp.where(good, size, 1.0).astype(dtype)
        log_rest = log_rest + jnp.where(good, jnp.log(jnp.where(good, size, 1.0)), 0.0)
        return (jnp.where(j < count, moved, vector), log_rest), None

    start = jnp.zeros((bond,), dtype).at[0].set(1.0)
    (vector, log_rest), _ = lax.scan(
        contract, (start, jnp.zeros_like(log_scale)), (positions, new_sites), reverse=True
    )
    state = (front @ vector) * jnp.exp(log_scale + log_rest).astype(dtype)
    readout = constants["out_map"] @ (second @ state)
    return front, new_sites, count, log_scale, readout, wanted


def site_levels(
    bond: int, num_rows: int, dim_m: int, platform: str, choice: str = "auto"
) -> tuple[int, ...]:
    """Smaller bond sizes at which a site of the whole-step kernel of bucket ``bond`` may
    be worked on (see :func:`_step`): the :data:`SITE_LEVELS` largest sizes of the form
    2^k (1 + i/8) below ``bond`` and not below half of it, when the work of a site
    (~m (D r)^3 for a carrier of r rows) is at least :data:`SITE_LEVEL_WORK` and
    ``choice`` (the ``site_levels`` option) allows them on ``platform`` (``auto``: on a
    CPU; GPUs not measured yet); else none."""
    allowed = choice == "on" or (choice == "auto" and platform == "cpu")
    if not allowed or dim_m * (bond * num_rows) ** 3 < SITE_LEVEL_WORK:
        return ()
    grid = sorted({2**k + i * 2 ** (k - 3) for k in range(3, 14) for i in range(8)})
    below = [size for size in grid if 2 * size >= bond and size < bond]
    return tuple(below[-SITE_LEVELS:])


def kernel_sizes(bond: int, levels: Sequence[int]) -> tuple[int, ...]:
    """Ascending sizes a site of a kernel of bucket ``bond`` with ``levels`` works at."""
    return tuple(size for size in sorted(levels) if size < bond) + (bond,)


@functools.cache
def _compiled_step(
    memory: int,
    max_rank: int | None,
    backend: str,
    oldest: str = "trace",
    svd: str = "default",
    levels: tuple[int, ...] = (),
) -> Any:
    return compiler.compile_kernel(
        functools.partial(
            _step,
            memory=memory,
            max_rank=max_rank,
            oldest=oldest,
            svd_algorithm=_svd_algorithm(svd, backend),
            levels=levels,
        ),
        platform=backend,
    )


class CompiledWindow:
    """A TEMPO memory window on the JAX device, advanced by a compiled step.

    Parameters
    ----------
    spec : the window (:class:`~nonmarkov.engines.base.WindowSpec`): the first
        point, couplings, ``epsrel``, memory and the handling of the oldest point
        (``'trace'``: run with :meth:`advance`; ``'finalize'``: with
        :meth:`advance_finalize`).
    options : the engine options (first bucket, chunk length, SVD algorithm,
        site by site, site levels, device, deterministic scheduling).
    dtype : complex dtype of the window.

    The window lives on the device that :func:`~.placement.place` chooses for its
    bucket (``device`` option); a bucket growth that crosses to the accelerator
    moves every array of the window there once (:attr:`device_moves`).
    """

    #: where the window is (:meth:`_decide`); None until the first decision
    _placement: placement.Placement | None = None

    def __init__(self, spec: WindowSpec, options: EngineOptions, dtype: Any):
        oldest, front, projector, first, carrier = (
            spec.oldest,
            spec.front,
            spec.projector,
            spec.first,
            spec.carrier,
        )
        lag_rows, out_map, epsrel, memory = spec.lag_rows, spec.out_map, spec.epsrel, spec.memory
        self._options = options
        self._schedule = Schedule(options.deterministic)
        self._oldest = oldest
        #: right bond of the oldest window site (left bond of the last finalised site)
        self._final_bond = 1
        self._bond_ranks: list[int] = []
        jax, _, _ = _jax()
        self._jax = jax
        self._dtype = default_np.dtype(dtype)
        self._float = default_np.finfo(self._dtype).dtype
        projector = default_np.asarray(projector)
        self._dim_x, self._dim_m = projector.shape
        carrier = default_np.asarray(carrier, dtype=int)
        self._num_rows = int(carrier.max()) + 1
        self._lag_rows = lag_rows
        self._memory = 0 if memory is None else int(memory)
        self._chunk = options.chunk
        initial_bond = options.initial_bond
        self._max_rank = None if spec.max_rank is None else int(spec.max_rank)
        self._min_bond = math.ceil(self._dim_x / self._num_rows)
        bond = bond_bucket(initial_bond, self._min_bond)
        self._placement = self._decide(bond)
        #: moves of the window from the host CPU to the accelerator (at most one a run)
        self.device_moves = 0
        put = self._put
        self._constants = {
            "projector": put(projector),
            "first": put(first),
            "carrier": put(default_np.eye(self._num_rows)[carrier]),
            "out_map": put(out_map),
            "epsrel": put(epsrel, self._float),
        }
        self._host_lags = default_np.zeros((0, self._num_rows, self._dim_m), dtype=self._dtype)
        self._leaving = spec.leaving
        if self._memory >= 2:
            self._constants["leaving"] = put(lag_rows(self._memory))
        #: device copies of the lumped couplings, moved only when they change
        self._device_leaving = LastArguments(self._put)
        #: window steps run so far (after the first point)
        self._steps = 0
        capacity = max(self._memory - 1, 1) if self._memory else 1
        host_front = default_np.zeros((self._dim_x, bond), dtype=self._dtype)
        host_front[:, 0] = default_np.asarray(front)
        self._front = put(host_front)
        self._sites = put(default_np.zeros((capacity, bond, self._dim_m, bond), self._dtype))
        self._count = 0  # sites besides the front (known on the host without a sync)
        self._count_device = put(default_np.asarray(0, dtype=default_np.int32))
        self._log_scale = put(spec.log_scale, self._float)
        self._set_lags(capacity)
        #: device copies of the step's propagators, moved only when they change
        self._device_propagators = LastArguments(
            lambda between, second: (self._put(between), self._put(second))
        )
        self.max_rank_seen = 1
        self._grown = False  # whether the bucket has grown before (see GROWTH_HEADROOM)
        self._stride = 1  # steps in the next chunk (adaptive, at most self._chunk)
        self._growth = 0  # rise of the largest rank per step in the last chunk
        self._steps_left = 0  # steps of the current advance call not yet run
        #: chunks since the largest rank last rose, and the largest rank in them
        self._held = 0
        self._held_largest = 0
        #: chunks run, chunks redone because a bond outgrew the bucket, and buckets
        #: shrunk to fit the ranks (see :meth:`_shrink`)
        self.chunks = 0
        self.redos = 0
        self.shrinks = 0
        #: number of device-to-host fetches so far (one per chunk, plus one per redo)
        self.fetches = 0
        #: the window once it runs site by site (from bucket SITEWISE_BOND on), else None
        self._sitewise: Any = None
        self._site_lags: list[Any] = []
        #: kernels of buckets being compiled ahead (see :meth:`_compile_growth_ahead`)
        self._ahead: dict[int, Any] = {}

    @property
    def bond(self) -> int:
        """Current bond bucket D (site by site: the largest bucket of a bond)."""
        if self._sitewise is not None:
            return self._sitewise.largest_bucket
        return int(self._sites.shape[1])

    @property
    def device(self) -> Any:
        """The JAX device the window is on (see :mod:`.placement`)."""
        return self._device_now().device

    def _device_now(self) -> placement.Placement:
        if self._placement is None:  # set by __init__ and by every restore
            raise RuntimeError("the compiled window has not been placed on a device yet")
        return self._placement

    def _decide(self, bond: int) -> placement.Placement:
        """The placement of the window at bucket ``bond`` (:func:`~.placement.place`);
        once on the accelerator it stays there."""
        if self._placement is not None and self._placement.where == placement.ACCELERATOR:
            return self._placement
        return placement.place(
            self._options.device, placement.window_work(bond, self._num_rows, self._dim_m)
        )

    def _follow(self, bond: int, window: bool = True) -> None:
        """Move to the device of bucket ``bond`` if that is another one: the constants,
        count and log-scale, and with ``window`` the front and sites (once a run)."""
        target = self._decide(bond)
        if target.device == self.device:
            self._placement = target
            return
        jax, device = self._jax, target.device
        self._placement = target
        # in place: the site-by-site window holds the same dict
        self._constants.update(jax.device_put(dict(self._constants), device))
        self._count_device, self._log_scale = jax.device_put(
            (self._count_device, self._log_scale), device
        )
        if window:
            self._front, self._sites = jax.device_put((self._front, self._sites), device)
        self._device_leaving = LastArguments(self._put)
        self._device_propagators = LastArguments(
            lambda between, second: (self._put(between), self._put(second))
        )
        self._site_lags = []
        if self._sitewise is not None:
            self._sitewise.move_to(device)
        self.device_moves += 1

    @property
    def sitewise(self) -> bool:
        """Whether the steps run site by site (:mod:`nonmarkov.engines.jax.sitewise`)."""
        return self._sitewise is not None

    @property
    def schedule(self) -> Schedule:
        """The window's time measurements and the choices made from them."""
        return self._schedule

    @property
    def num_classes(self) -> int:
        """m, the number of classes of a point."""
        return self._dim_m

    @property
    def memory(self) -> int:
        """Points kept in the window (dkmax), 0 for no memory cut."""
        return self._memory

    @property
    def capacity(self) -> int:
        """Current site capacity L."""
        return int(self._sites.shape[0])

    def _put(self, array: Any, dtype: Any = None) -> Any:
        array = default_np.asarray(array)
        if dtype is None:
            dtype = self._dtype if array.dtype.kind in "fc" else array.dtype
        return self._jax.device_put(array.astype(dtype), self.device)

    def _set_lags(self, capacity: int) -> None:
        """Lag rows (capacity, r, m) for lags 2..capacity+1 on the device."""
        self._extend_host_lags(capacity)
        self._constants["lags"] = self._put(self._host_lags[:capacity])

    def _extend_host_lags(self, capacity: int) -> None:
        """Lag rows on the host for at least window positions 0..capacity-1."""
        have = self._host_lags.shape[0]
        if have < capacity:
            extra = [default_np.asarray(self._lag_rows(lag + 2)) for lag in range(have, capacity)]
            self._host_lags = default_np.concatenate(
                [self._host_lags, default_np.asarray(extra, dtype=self._dtype)]
            )

    def _resize(self, bond: int, capacity: int) -> None:
        if bond == self.bond and capacity == self.capacity:
            return
        # on the host: a growth is rare, and a jitted resize would cost one more
        # compilation per new shape (the arrays are small next to a chunk of steps)
        front, sites = self._jax.device_get((self._front, self._sites))
        self._follow(bond, window=False)  # the window is put there below
        keep_bond, keep_capacity = min(bond, self.bond), min(capacity, self.capacity)
        new_front = default_np.zeros((front.shape[0], bond), self._dtype)
        new_front[:, :keep_bond] = front[:, :keep_bond]
        new_sites = default_np.zeros((capacity, bond, self._dim_m, bond), self._dtype)
        new_sites[:keep_capacity, :keep_bond, :, :keep_bond] = sites[
            :keep_capacity, :keep_bond, :, :keep_bond
        ]
        self._front, self._sites = self._put(new_front), self._put(new_sites)
        if capacity != self._constants["lags"].shape[0]:
            self._set_lags(capacity)

    def compile_step_ahead(self, bond: int) -> Any:
        """Compile the step kernel for bucket ``bond`` (and the current capacity) in
        the background compiler thread (:func:`nonmarkov.engines.jax.compiler.compile_ahead`);
        returns its ``concurrent.futures.Future``. The steps then find it compiled."""
        jax = self._jax
        step = self._step_kernel(bond)
        # for the device the steps of that bucket will run on
        on_device = placement.sharding(self._decide(bond).device)

        def like(shape: tuple[int, ...], dtype: Any) -> Any:
            return jax.ShapeDtypeStruct(shape, dtype, sharding=on_device)

        matrix = like((self._dim_x, self._dim_x), self._dtype)
        args = (
            like((self._dim_x, bond), self._dtype),
            like((self.capacity, bond, self._dim_m, bond), self._dtype),
            like((), self._count_device.dtype),
            like((), self._log_scale.dtype),
            matrix,
            matrix,
            jax.tree_util.tree_map(lambda a: like(a.shape, a.dtype), self._constants),
        )

        def job() -> None:
            compiler.check_ahead()
            step.lower(*args).compile()

        return compiler.compile_ahead(job)

    def _levels(self, bond: int) -> tuple[int, ...]:
        """:func:`site_levels` of bucket ``bond`` for this window on this device."""
        return site_levels(
            bond,
            self._num_rows,
            self._dim_m,
            self._decide(bond).platform,
            self._options.site_levels,
        )

    def _step_kernel(self, bond: int) -> Any:
        """The compiled step for bucket ``bond`` (with its site levels)."""
        return _compiled_step(
            self._memory,
            self._max_rank,
            self._decide(bond).platform,
            self._oldest,
            self._options.svd,
            self._levels(bond),
        )

    def _site_size(self, bond: int) -> int:
        """Size at which the kernel of bucket ``bond`` works on a site that holds the
        largest rank of the last chunks (see :func:`site_levels`)."""
        sizes = kernel_sizes(bond, self._levels(bond))
        return next(size for size in sizes if size >= self._held_largest)

    def load_host_window(
        self, window: Sequence[Any], log_scale: float, bond: int = 1, steps: int = 0
    ) -> None:
        """Continue from a window that was advanced on the host for ``steps`` steps
        (see :mod:`nonmarkov.engines.jax.engine`).

        ``window``: newest first, the front (1, x, k) normalised, then the sites
        (k, m, k') of :mod:`nonmarkov.kernels.window` (at most the capacity); its
        front's log-scale ``log_scale``. Padded to the smallest bucket that
        holds every bond and ``bond``; moved to the device in one transfer.
        """
        self._steps = int(steps)
        sites = [default_np.asarray(site) for site in window]
        count = len(sites) - 1
        if count > self.capacity:
            raise ValueError(
                f"the host window has {count} sites besides the front; "
                f"the device window holds {self.capacity}"
            )
        largest = max(site.shape[2] for site in sites)
        size = bond_bucket(max(largest, bond), self._min_bond)
        self._follow(size, window=False)  # the window is put there below
        front = default_np.zeros((self._dim_x, size), self._dtype)
        front[:, : sites[0].shape[2]] = sites[0][0]
        padded = default_np.zeros((self.capacity, size, self._dim_m, size), self._dtype)
        for j, site in enumerate(sites[1:]):
            padded[j, : site.shape[0], :, : site.shape[2]] = site
        self._front, self._sites = self._put(front), self._put(padded)
        self._count = count
        self._count_device = self._put(default_np.asarray(count, default_np.int32))
        self._log_scale = self._put(log_scale, self._float)
        self._bond_ranks = [site.shape[2] for site in sites[:-1]]
        self._final_bond = sites[-1].shape[2]
        self.max_rank_seen = max(self.max_rank_seen, largest)

    def _next_count(self, count: int) -> int:
        if self._memory and count + 1 >= self._memory:
            return count
        return count + 1

    def advance(
        self, propagators: Sequence[tuple[Any, Any]]
    ) -> tuple[default_np.ndarray, list[int]]:
        """Run one step per (between, second) pair of host (x, x) arrays.

        Returns the read-out vectors (steps, x) on the host and the largest
        kept rank of each step. Fetches once per chunk of steps.
        """
        if self._oldest != "trace":
            raise ValueError("advance needs oldest='trace'; use advance_finalize")
        readouts: list[default_np.ndarray] = []
        ranks: list[int] = []
        begin = 0
        while begin < len(propagators):
            size = min(self._stride, len(propagators) - begin)
            self._steps_left = len(propagators) - begin
            chunk_readouts, chunk_ranks = self._run_chunk(propagators[begin : begin + size])
            readouts.append(default_np.asarray(chunk_readouts))
            ranks.extend(chunk_ranks)
            begin += size
        if not readouts:
            return default_np.zeros((0, self._dim_x), self._dtype), ranks
        return default_np.concatenate(readouts), ranks

    def advance_finalize(
        self, num_steps: int, between: Any, second: Any
    ) -> tuple[list[tuple[Any, float]], list[int]]:
        """Run ``num_steps`` steps with fixed (x, x) ``between`` and ``second`` (PT-TEMPO).

        Returns, per step, (finalised site M[l, c, r] as a trimmed host array
        (k, m, k') or None, log_scale before the step), and the largest kept
        rank of each step. Fetches once per chunk of steps.
        """
        if self._oldest != "finalize":
            raise ValueError("advance_finalize needs oldest='finalize'")
        finalised: list[tuple[Any, float]] = []
        ranks: list[int] = []
        begin = 0
        while begin < num_steps:
            size = min(self._stride, num_steps - begin)
            self._steps_left = num_steps - begin
            begin += size
            count = self._count
            outputs, chunk_ranks = self._run_chunk([(between, second)] * size)
            sites, final_ranks, logs, bond_ranks = outputs
            self._bond_ranks = [int(rank) for rank in bond_ranks[-1]]
            for site, rank, log_before in zip(sites, final_ranks, logs):
                done = None
                if self._memory and count + 1 >= self._memory:
                    rank = int(rank)
                    done = default_np.asarray(site[:rank, :, : self._final_bond])
                    self._final_bond = rank
                count = self._next_count(count)
                finalised.append((done, float(log_before)))
            ranks.extend(chunk_ranks)
        return finalised, ranks

    def host_window(self) -> tuple[list[default_np.ndarray], float]:
        """The window on the host, newest site first: front (1, x, k), then sites (k, m, k').

        The padding is trimmed to the kept ranks of the last step; the oldest
        site keeps the bond to the last finalised site. Returns the sites and
        the log-scale of the front.
        """
        if self._oldest != "finalize":
            raise ValueError("host_window needs oldest='finalize'")
        if self._sitewise is not None:
            return self._sitewise.host_window()
        front, sites, log_scale = self._jax.device_get(
            (self._front, self._sites[: self._count], self._log_scale)
        )
        window = [default_np.asarray(front)[None]] + [default_np.asarray(s) for s in sites]
        bonds = [max(rank, 1) for rank in self._bond_ranks[: self._count]] + [self._final_bond]
        lefts = [1] + bonds[:-1]
        trimmed = [site[:left, :, :right] for site, left, right in zip(window, lefts, bonds)]
        return trimmed, float(log_scale)

    def grown_bond(self, wanted: int) -> int:
        """Bucket after a bond wanted ``wanted`` > D: the smallest that holds it the first
        time, with :data:`GROWTH_HEADROOM` after that (the bond is still rising) while
        steps are cheap (below :data:`CHEAP_BOND`)."""
        bond = self._growth_bucket(wanted)
        self._grown = True
        return bond

    def _growth_bucket(self, wanted: int) -> int:
        """:meth:`grown_bond` without recording the growth."""
        cheap = bond_bucket(wanted, self._min_bond) <= CHEAP_BOND
        headroom = GROWTH_HEADROOM if self._grown and cheap else 1.0
        return bond_bucket(math.ceil(headroom * wanted), self._min_bond)

    def _plan_next_chunk(self, largest: int, steps: int) -> None:
        """Chunk length and bucket for the next chunk after one of ``steps`` steps whose
        largest wanted rank was ``largest``.

        A new largest rank means the bond dimension is rising: the next chunk is one
        step long, so a redo costs one step. While the largest rank holds, the chunk
        length doubles up to ``chunk``. A steady rise (a new largest rank in two chunks
        in a row, by at most :data:`STEADY_RISE` of the rank per step, as in a PT whose
        memory window is full) grows the bucket before it would overflow in the next
        step; a jump (a window filling up) may stop at any rank, and a bucket grown
        ahead of it for nothing would cost every later step.
        """
        rising = largest > self.max_rank_seen
        growth = math.ceil((largest - self.max_rank_seen) / steps) if rising else 0
        steady = rising and self._growth > 0 and growth <= STEADY_RISE * self.max_rank_seen
        self._growth = growth
        self._stride = 1 if rising else min(2 * self._stride, self._chunk)
        if self._sitewise is None:
            self._stride = self._schedule.cap_chunk(self._stride)
        self.max_rank_seen = max(self.max_rank_seen, largest)
        self._held, self._held_largest = (
            (0, 0) if rising else (self._held + 1, max(self._held_largest, largest))
        )
        expected = self.max_rank_seen + growth
        if steady and expected > self.bond and self._sitewise is None:
            self._resize(self.grown_bond(expected), self.capacity)
        elif self._held >= 2 and self._sitewise is None:
            self._shrink(self._steps_left - steps)
        if steady and self._sitewise is None:
            self._compile_growth_ahead(self._growth_bucket(expected + growth))

    def _compile_growth_ahead(self, bond: int) -> None:
        """While the bonds rise steadily, compile the kernel of the bucket that the
        coming growth will take in the background (:meth:`compile_step_ahead`), so
        that the steps do not wait for it."""
        if bond > self.bond and bond not in self._ahead and not self._sitewise_at(bond):
            self._ahead[bond] = self.compile_step_ahead(bond)

    def _await_ahead(self, bond: int) -> None:
        """Before the first step in bucket ``bond``: drop its compilation ahead if it has
        not started, else wait for it (the step then finds the kernel compiled)."""
        future = self._ahead.pop(bond, None)
        if future is not None and not future.cancel():
            future.exception()  # waits; a failed job leaves the compilation to the step

    def _shrink(self, steps_left: int) -> None:
        """Re-pad to the smallest bucket that holds the ranks of the chunks since the
        largest rank last rose, if that saves more than a compilation would cost over
        ``steps_left`` steps (see :data:`SHRINK_WORK`, :meth:`Schedule.shrink_pays`).

        A bucket grown with headroom while the bond rose or left behind by ranks
        that fell would otherwise cost ~D^3 on every later step.
        """
        target = bond_bucket(self._held_largest, self._min_bond)
        # the largest sites work at the smallest kernel size that holds them (site levels)
        work = (self._site_size(target) / self._site_size(self.bond)) ** 3
        if (
            target < self.bond
            and work <= SHRINK_WORK
            and self._schedule.shrink_pays(steps_left, work)
        ):
            self._resize(target, self.capacity)
            self.shrinks += 1

    def _run_chunk(self, propagators: Sequence[tuple[Any, Any]]) -> tuple[Any, list[int]]:
        """Run a chunk of steps; returns the per-step outputs (host, stacked) and ranks."""
        if self._sitewise is None and self._sitewise_due():
            self._switch_to_sitewise()
        if self._sitewise is not None:
            return self._run_chunk_sitewise(propagators)
        start = (self._front, self._sites, self._count, self._count_device, self._log_scale)
        while True:
            # (again after a redo: a growth may have moved the window to another device)
            step_constants = [
                self._step_constants(self._steps + i + 1) for i in range(len(propagators))
            ]
            final_count = start[2]
            for _ in propagators:
                final_count = self._next_count(final_count)
            if not self._memory and final_count > self.capacity:
                self._resize(self.bond, bond_bucket(final_count))
            self._await_ahead(self.bond)
            step = self._step_kernel(self.bond)
            front, sites, count, log_scale = (
                self._front,
                self._sites,
                self._count_device,
                self._log_scale,
            )
            outputs: list[tuple[Any, Any]] = []
            for (between, second), constants in zip(propagators, step_constants):
                between, second = self._device_propagators(between, second)
                front, sites, count, log_scale, readout, wanted = step(
                    front, sites, count, log_scale, between, second, constants
                )
                if not outputs:  # the first call compiles (if needed), then runs async
                    self._schedule.chunk_dispatched()
                outputs.append((readout, wanted))
            readouts, wanted = self._jax.device_get(
                ([item[0] for item in outputs], [item[1] for item in outputs])
            )
            self._schedule.chunk_done(len(propagators))
            if self._oldest == "finalize":  # (site, rank, log) per step -> three lists
                readouts = tuple(list(part) for part in zip(*readouts))
            self.fetches += 1
            wanted = [int(value) for value in wanted]
            largest = max(wanted, default=1)
            if largest <= self.bond:
                break
            # a bond wanted more than the bucket holds: redo the chunk with a larger one
            self.redos += 1
            self._front, self._sites, _, self._count_device, self._log_scale = start
            self._resize(self.grown_bond(largest), self.capacity)
            if self._sitewise_due():
                self._switch_to_sitewise()
                return self._run_chunk_sitewise(propagators)
            start = (self._front, self._sites, start[2], self._count_device, self._log_scale)
        self._front, self._sites, self._count_device, self._log_scale = (
            front,
            sites,
            count,
            log_scale,
        )
        self._count = final_count
        self._steps += len(propagators)
        self.chunks += 1
        self._plan_next_chunk(largest, len(propagators))
        return readouts, wanted

    def _leaving_rows(self, step: int) -> Any:
        """The device rows of the lumped coupling to the point that leaves the window in
        window step ``step``, or None (no lumping at that step)."""
        rows = None if self._leaving is None else self._leaving(step)
        return None if rows is None else self._device_leaving(rows)

    def _step_constants(self, step: int) -> dict[str, Any]:
        """The constants of window step ``step`` (see :meth:`_leaving_rows`)."""
        rows = self._leaving_rows(step)
        return self._constants if rows is None else {**self._constants, "leaving": rows}

    def _sitewise_due(self) -> bool:
        """Whether the steps should now run site by site: from bucket
        :data:`~nonmarkov.engines.jax.sitewise.SITEWISE_BOND` on, once the window holds two sites,
        if ``NONMARKOV_JAX_SITEWISE`` allows it on this device."""
        return self._sitewise_at(self.bond) and self._count >= 2

    def _sitewise_at(self, bond: int) -> bool:
        """Whether bucket ``bond`` runs site by site (see :meth:`_sitewise_due`)."""
        choice = self._options.sitewise
        allowed = choice == "on" or (choice == "auto" and self._decide(bond).platform == "cpu")
        return allowed and bond >= sitewise.SITEWISE_BOND

    def _switch_to_sitewise(self) -> None:
        """Hand the window to :class:`~nonmarkov.engines.jax.sitewise.SitewiseWindow` (once per run:
        one fetch of the window, cut to the used part of every bond)."""
        for future in self._ahead.values():  # whole-step kernels no longer wanted
            future.cancel()
        self._ahead.clear()
        front, sites = self._jax.device_get((self._front, self._sites[: self._count]))
        right_end = self._final_bond if self._oldest == "finalize" else 1
        self._sitewise = sitewise.SitewiseWindow.from_padded(
            default_np.asarray(front),
            default_np.asarray(sites),
            self._log_scale,
            right_end,
            self._constants,
            self._memory,
            self._max_rank,
            self._oldest,
            _svd_algorithm(self._options.svd, self._device_now().platform),
            self.device,
        )
        self.fetches += 1

    def _run_chunk_sitewise(self, propagators: Sequence[tuple[Any, Any]]) -> tuple[Any, list[int]]:
        """:meth:`_run_chunk` with the site-by-site window."""
        engine = self._sitewise
        self._follow(engine.largest_bucket, window=False)  # moves the site-by-site window too
        reach = engine.count + len(propagators)
        self._extend_host_lags(reach)
        while len(self._site_lags) < reach:
            self._site_lags.append(self._put(self._host_lags[len(self._site_lags)]))
        redos = engine.redos
        outputs, ranks = engine.run_chunk(
            [self._device_propagators(between, second) for between, second in propagators],
            self._site_lags,
            self._growth * len(propagators),
            [self._leaving_rows(self._steps + i + 1) for i in range(len(propagators))],
        )
        self._steps += len(propagators)
        self.redos += engine.redos - redos
        self.fetches += 1 + engine.redos - redos
        wanted = [max(step) for step in ranks]
        if self._oldest == "finalize":
            finals = [0 if output[1] is None else int(output[1]) for output in outputs]
            wanted = [max(rank, final) for rank, final in zip(wanted, finals)]
            outputs = (
                [output[0] for output in outputs],
                finals,
                [output[2] for output in outputs],
                ranks,
            )
        self._count = engine.count
        self.chunks += 1
        self._plan_next_chunk(max(wanted), len(propagators))
        return outputs, wanted
