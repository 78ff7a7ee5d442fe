"""Site-by-site compiled window step for large bond dimensions (JAX backend).

The whole-step kernel of :mod:`nonmarkov.engines.jax.window` pads every site of
the window to one bond bucket. When the bonds are large and vary along the
window (small next to the newest point, where the bond left of position j
is at most x m^j, large further on), that padding multiplies the work:
a QR and an SVD cost ~D^3 per site, and a single bucket for a window whose bonds
rise along it does up to twice the work of following the profile.

Here every site keeps its own padded shape (b_j, m, b_{j+1}), the bucket of
each bond is planned on the host from the ranks of the last step, and one
step is a sequence of small compiled kernels, one per site and sweep
(:func:`sitewise_step`): the same algebra as the whole-step kernel (couple
and QR left to right, SVD cut right to left with the device rank rule,
exact zero padding), dispatched asynchronously. The kept ranks stay on the
device until the end of a chunk of steps; a rank above its planned bucket
makes the chunk run again with a larger plan. Each kernel compiles once per
shape (a fraction of a second); the dispatch costs ~2 n calls per step, which
is negligible next to the factorisations at the bond dimensions where this
mode is used (:data:`SITEWISE_BOND`).

Everything here is array algebra; requires JAX.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from typing import Any

import numpy as default_np

from ...kernels.truncation import rank_rule
from .compiler import check_ahead, compile_ahead, compile_kernel
from .padding import _padded_qr, _svd, _used_columns, bond_bucket
from .placement import device_of, sharding

#: From this bond bucket on, :class:`nonmarkov.engines.jax.window.CompiledWindow` runs its
#: steps site by site: a step then costs far more than two kernel dispatches per
#: site, and following the bond profile saves up to half of the factorisation work.
SITEWISE_BOND = 64
#: Most stretches of one bucket along the window (each boundary between two buckets
#: and each bucket is a kernel to compile; a rising bond dimension recompiles the
#: stretches it changes).
SEGMENTS = 4
#: A plan is kept (with raised stretches) while it costs less than this times the
#: cheapest fresh plan.
REPLAN_COST = 1.1


def plan_buckets(
    profile: Sequence[int],
    length: int,
    margin: int = 0,
    previous: Sequence[int] | None = None,
    segments: int = SEGMENTS,
) -> list[int]:
    """Buckets of the bonds 0..length-1 of the next steps from the last kept ranks.

    ``profile[k]`` is the kept rank of bond k (bond 0 joins the front and site
    0). Bond k needs the largest of its neighbours' ranks (a window that is
    still filling moves its bonds by one position per step) plus ``margin``
    (the expected rise over the coming steps); bonds beyond the profile take
    its last value. The window is split into at most ``segments`` stretches of
    one bucket each, at the least total cost sum_k b_k^3.

    Every new pair of neighbouring buckets is a kernel to compile, so a
    ``previous`` plan is kept, with only the stretches that are now too small
    raised, unless it costs :data:`REPLAN_COST` times the fresh plan or more.
    """
    ranks = [max(int(r), 1) for r in profile] or [1]
    last = len(ranks) - 1
    needs = [
        max(ranks[min(max(i, 0), last)] for i in (k - 1, k, k + 1)) + margin for k in range(length)
    ]
    fresh = _cheapest_stretches([bond_bucket(need) for need in needs], segments)
    if not previous:
        return fresh
    kept = list(previous[:length]) + [previous[-1]] * (length - len(previous))
    begin = 0
    while begin < length:  # raise each stretch of the previous plan to what it needs
        end = begin
        while end < length and kept[end] == kept[begin]:
            end += 1
        top = bond_bucket(max(needs[begin:end]))
        if top > kept[begin]:
            kept[begin:end] = [top] * (end - begin)
        begin = end
    if _cost(kept) < REPLAN_COST * _cost(fresh):
        return kept
    return fresh


def _cost(plan: Sequence[int]) -> float:
    return sum(float(bucket) ** 3 for bucket in plan)


def _cheapest_stretches(needs: Sequence[int], segments: int) -> list[int]:
    """Buckets >= ``needs`` that take at most ``segments`` distinct stretches, at the
    least sum of cubes (dynamic programming over the runs of equal need)."""
    runs: list[list[int]] = []  # [bucket, number of bonds]
    for need in needs:
        if runs and runs[-1][0] == need:
            runs[-1][1] += 1
        else:
            runs.append([need, 1])
    count = len(runs)
    best = {(0, 0): (0.0, -1)}  # (runs covered, stretches used) -> (cost, previous end)
    for used in range(1, segments + 1):
        for end in range(1, count + 1):
            options = []
            top = bonds = 0
            for begin in range(end - 1, -1, -1):
                top, bonds = max(top, runs[begin][0]), bonds + runs[begin][1]
                if (begin, used - 1) in best:
                    options.append((best[begin, used - 1][0] + bonds * float(top) ** 3, begin))
            if options:
                best[end, used] = min(options)
    used = min(
        (u for u in range(1, segments + 1) if (count, u) in best), key=lambda u: best[count, u][0]
    )
    plan: list[int] = []
    end = count
    while end > 0:
        begin = best[end, used][1]
        top = max(run[0] for run in runs[begin:end])
        plan[:0] = [top] * sum(run[1] for run in runs[begin:end])
        end, used = begin, used - 1
    return plan


def _jnp() -> Any:
    import jax.numpy as jnp

    return jnp


def _signature(name: str, static: dict[str, Any], args: Sequence[Any]) -> tuple[Any, ...]:
    shapes = tuple(
        None
        if arg is None
        else (tuple(arg.shape), str(arg.dtype), bool(getattr(arg, "weak_type", False)))
        for arg in args
    )
    # a kernel compiled for one device refuses arguments on another
    return name, tuple(sorted(static.items())), shapes, device_of(args)


#: Compiled kernels (futures) by name, static parameters and argument shapes, shared
#: by the steps and by the compilations ahead in the background thread.
_executables: dict[tuple[Any, ...], Future] = {}
_executables_lock = threading.Lock()


def _executable(name: str, static: dict[str, Any], args: Sequence[Any]) -> Any:
    """The compiled kernel for these arguments (concrete or abstract); compiled here
    unless it is ready or being compiled (then waited for)."""
    key = _signature(name, static, args)
    with _executables_lock:
        existing = _executables.get(key)
        owner = existing is None
        future: Future = Future() if existing is None else existing
        if owner:
            _executables[key] = future
    if owner:
        try:
            future.set_result(_kernel(name, _platform(args), **static).lower(*args).compile())
        except BaseException as error:
            with _executables_lock:
                del _executables[key]
            future.set_exception(error)
            raise
    return future.result()


def run_kernel(name: str, static: dict[str, Any], *args: Any) -> Any:
    """Run site kernel ``name`` with its ``static`` parameters on device arrays."""
    return _executable(name, static, args)(*args)


def prepare_kernel(name: str, static: dict[str, Any], *args: Any) -> Any:
    """Compile site kernel ``name`` for abstract ``args``; return its abstract results."""
    import jax

    check_ahead()
    _executable(name, static, args)
    results = jax.eval_shape(_kernel(name, _platform(args), **static), *args)
    device = device_of(args)
    if device is None:
        return results
    # on the device of the arguments (eval_shape drops it), as the kernel's results are
    return jax.tree_util.tree_map(
        lambda a: jax.ShapeDtypeStruct(
            a.shape, a.dtype, weak_type=a.weak_type, sharding=sharding(device)
        ),
        results,
    )


def _abstract(tree: Any) -> Any:
    """Device arrays -> ``jax.ShapeDtypeStruct`` on the same device (same pytree)."""
    import jax

    return jax.tree_util.tree_map(
        lambda a: jax.ShapeDtypeStruct(
            a.shape, a.dtype, weak_type=a.weak_type, sharding=getattr(a, "sharding", None)
        ),
        tree,
    )


def _platform(args: Sequence[Any]) -> str | None:
    """The platform of the device of ``args`` (None: JAX's default)."""
    device = device_of(args)
    return None if device is None else str(device.platform)


@functools.cache
def _kernel(name: str, platform: str | None = None, **static: Any) -> Any:
    # LLVM at level 0: the kernels are a factorisation and a few products, whose speed
    # does not depend on it, and they compile ~3x faster (there are many of them)
    return compile_kernel(
        functools.partial(_KERNELS[name], **static), optimization_level=0, platform=platform
    )


def _open_front(
    front: Any, between: Any, projector: Any, first: Any, carrier: Any
) -> tuple[Any, Any]:
    """Couple the new point to the front (x, b) and open the carrier bond.

    Returns the new front's orthonormal factor (x, k) and the tensor (k, m b r)
    of the old front seen from it, padded with zeros to k >= b r / m rows: the
    bonds of the chain are then b r wide from the first site on, so that the
    kernels of a site depend on its buckets only (not also on how far it is
    from the front).
    """
    jnp = _jnp()
    dim_x, bond = front.shape
    dim_m, num_rows = first.shape[1], carrier.shape[1]
    theta = jnp.einsum("ba,ac,ar->bcr", between, projector, front)
    coupled = (theta * first[:, :, None])[:, :, :, None] * carrier[:, None, None, :]
    q, r = jnp.linalg.qr(coupled.reshape(dim_x, -1))
    rows = max(r.shape[0], -(-bond * num_rows // dim_m))
    return (
        jnp.pad(q, ((0, 0), (0, rows - q.shape[1]))),
        jnp.pad(r, ((0, rows - r.shape[0]), (0, 0))),
    )


def _couple(tensor: Any, site: Any, lag: Any) -> tuple[Any, Any]:
    """QR of the tensor at one window position and the coupling of the next site.

    tensor (rows, m b r) (columns: class, right bond b, carrier r), site
    (b, m, b'), lag (r, m). Returns the orthonormal chain site (rows, m, k)
    and the tensor (k, m b' r) of the next position, k = min(rows m, b r).
    """
    jnp = _jnp()
    rows = tensor.shape[0]
    bond, dim_m, bond_out = site.shape
    num_rows = lag.shape[0]
    q, r = _padded_qr(tensor.reshape(rows * dim_m, bond * num_rows))
    size = r.shape[0]
    by_row = jnp.moveaxis(r.reshape(size, bond, num_rows), 2, 0)  # (r, k, b)
    site_by_row = (site[None] * lag[:, None, :, None]).reshape(num_rows, bond, -1)
    product = jnp.matmul(by_row, site_by_row).reshape(num_rows, size, dim_m, bond_out)
    return q.reshape(rows, dim_m, size), jnp.moveaxis(product, 0, 3).reshape(size, -1)


def _close(tensor: Any, dim_m: int, num_rows: int) -> Any:
    """The oldest position's tensor (k, m b r) with the carrier closed: (k, m, b)."""
    return tensor.reshape(tensor.shape[0], dim_m, -1, num_rows).sum(axis=3)


def _trace(previous: Any, tensor: Any, dim_m: int, num_rows: int) -> Any:
    """Trace out the oldest point into the site before it: (rows, m, 1)."""
    jnp = _jnp()
    vector = _close(tensor, dim_m, num_rows).sum(axis=(1, 2))
    return jnp.einsum("lpr,r->lp", previous, vector)[:, :, None]


def _finalize(
    previous: Any,
    tensor: Any,
    epsrel: Any,
    dim_m: int,
    num_rows: int,
    bucket: int,
    max_rank: int | None,
    svd_algorithm: Any,
) -> tuple[Any, Any, Any]:
    """Split off the oldest point (PT-TEMPO): last = (u s) vh, u s merged into ``previous``.

    Returns the merged site (rows, m, bucket), the finalised site vh padded to
    (bucket, m, b) and its kept rank (int32; a rank above ``bucket`` means the
    plan was too small).
    """
    jnp = _jnp()
    last = _close(tensor, dim_m, num_rows)
    weighted, final_site, rank = _split(last, epsrel, bucket, max_rank, svd_algorithm)
    return jnp.einsum("lpr,rk->lpk", previous, weighted), final_site, rank


def _split(
    site: Any, epsrel: Any, bucket: int, max_rank: int | None, svd_algorithm: Any
) -> tuple[Any, Any, Any]:
    """site (rows, m, b) = (u s) vh cut at its kept rank (device rule), padded to
    ``bucket`` values: returns u s (rows, bucket), vh as a site (bucket, m, b) with
    the padding columns exactly zero, and the kept rank (int32)."""
    jnp = _jnp()
    rows, dim_m, bond = site.shape
    matrix = site.reshape(rows, dim_m * bond)
    us, s, vh = _pad_spectrum(*_svd(matrix, svd_algorithm), bucket)
    rank = rank_rule(s, epsrel, max_rank, _jnp())
    kept = (jnp.arange(bucket) < rank).astype(s.dtype)
    new_site = (vh[:bucket] * kept[:, None].astype(vh.dtype)).reshape(bucket, dim_m, bond)
    new_site = new_site * _used_columns(matrix, bond)[None, None, :]
    return us[:, :bucket] * kept.astype(us.dtype)[None, :], new_site, rank


def _pad_spectrum(weighted: Any, s: Any, vh: Any, bucket: int) -> tuple[Any, Any, Any]:
    """Pad a thin SVD (u s, s, vh) with zero singular triplets up to ``bucket`` values."""
    jnp = _jnp()
    missing = bucket - s.shape[0]
    if missing <= 0:
        return weighted, s, vh
    return (
        jnp.pad(weighted, ((0, 0), (0, missing))),
        jnp.pad(s, (0, missing)),
        jnp.pad(vh, ((0, missing), (0, 0))),
    )


def _cut(
    site: Any,
    right: Any,
    epsrel: Any,
    vector: Any,
    log_rest: Any,
    bucket: int,
    max_rank: int | None,
    svd_algorithm: Any,
    identity: bool,
    contract: bool,
) -> tuple[Any, ...]:
    """Cut the bond left of one site at its Schmidt values (right-to-left sweep).

    site (rows, m, c) of the left-orthonormal chain, right (c, b) the carry from
    the site after it (ignored when ``identity``: the last site). Returns the
    carry (rows, bucket), the new site (bucket, m, b), its kept rank (int32)
    and, with ``contract`` (TEMPO read-out), the vector (bucket,) of the sites
    from here to the end with all classes summed and its log-scale (from
    ``vector`` and ``log_rest`` of the sites after it; started at the last).
    """
    jnp = _jnp()
    if not identity:
        site = jnp.einsum("lpc,cb->lpb", site, right)
    carry, new_site, rank = _split(site, epsrel, bucket, max_rank, svd_algorithm)
    bond = site.shape[2]
    if not contract:
        return carry, new_site, rank
    if identity:  # the oldest site: the contraction starts here
        vector = jnp.ones((bond,), new_site.dtype)
        log_rest = jnp.zeros((), epsrel.dtype)
    moved = jnp.einsum("lpr,r->l", new_site, vector)
    size = jnp.max(jnp.abs(moved))
    good = size > 0.0
    moved = moved / jnp.where(good, size, 1.0).astype(moved.dtype)
    log_rest = log_rest + jnp.where(good, jnp.log(jnp.where(good, size, 1.0)), 0.0)
    return carry, new_site, rank, moved, log_rest


def _finish(front_q: Any, right: Any, log_scale: Any) -> tuple[Any, Any]:
    """New front (x, b) = front_q @ right, normalised; the log-scale after it."""
    jnp = _jnp()
    front = front_q @ right
    norm = jnp.linalg.norm(front)
    positive = norm > 0.0
    front = front / jnp.where(positive, norm, 1.0).astype(front.dtype)
    return front, log_scale + jnp.where(positive, jnp.log(jnp.where(positive, norm, 1.0)), 0.0)


def _readout(
    front: Any, vector: Any, log_scale: Any, log_rest: Any, second: Any, out_map: Any
) -> Any:
    """TEMPO read-out (x,) of the new window."""
    jnp = _jnp()
    state = (front @ vector) * jnp.exp(log_scale + log_rest).astype(front.dtype)
    return out_map @ (second @ state)


_KERNELS: dict[str, Callable[..., Any]] = {
    "open": _open_front,
    "couple": _couple,
    "keep": _close,
    "trace": _trace,
    "finalize": _finalize,
    "cut": _cut,
    "finish": _finish,
    "readout": _readout,
}


def sitewise_step(
    front: Any,
    sites: Sequence[Any],
    log_scale: Any,
    between: Any,
    second: Any,
    constants: dict[str, Any],
    lags: Sequence[Any],
    plan: Sequence[int],
    memory: int,
    max_rank: int | None,
    oldest: str,
    svd_algorithm: Any = None,
    call: Callable[..., Any] | None = None,
) -> tuple[Any, list[Any], Any, Any, list[Any]]:
    """One window step, site by site; all arrays stay on the device.

    front (x, b_0), sites[j] (b_j, m, b_{j+1}) for the n sites besides the
    front, log_scale (), between and second (x, x), ``constants`` as for
    :func:`nonmarkov.engines.jax.window._step`, ``lags[j]`` (r, m) the lag rows of
    window position j (lag j + 2). ``plan[k]`` is the bucket of bond k of the
    new window (and, for ``'finalize'``, ``plan[n]`` that of the bond to the
    finalised site). ``oldest``: ``'trace'`` or ``'finalize'``; the oldest
    point is kept while the window holds fewer than ``memory`` points
    (``memory`` 0: always kept).

    Returns the new front, sites and log-scale, the step's output (TEMPO: the
    read-out (x,); PT-TEMPO: (finalised site (plan[n], m, b_n) or None, its
    rank or None, log-scale before the step)) and the kept rank of every
    bond (device int32 scalars).

    ``call(name, static, *args)`` runs one kernel (default :func:`run_kernel`);
    :func:`prepare_kernel` instead compiles it for abstract arguments
    (``jax.ShapeDtypeStruct``) and returns the shapes of its results.
    """
    call = run_kernel if call is None else call
    dim_m = constants["projector"].shape[1]
    num_rows = constants["carrier"].shape[1]
    n = len(sites)
    statics = {"max_rank": max_rank, "svd_algorithm": svd_algorithm}
    front_q, tensor = call(
        "open", {}, front, between, constants["projector"], constants["first"], constants["carrier"]
    )
    chain = []
    for j in range(n):
        q, tensor = call("couple", {}, tensor, sites[j], lags[j])
        chain.append(q)
    full = memory > 0 and n + 1 >= memory
    final_site = final_rank = None
    if not full:
        chain.append(call("keep", {"dim_m": dim_m, "num_rows": num_rows}, tensor))
    elif oldest == "trace":
        chain[-1] = call("trace", {"dim_m": dim_m, "num_rows": num_rows}, chain[-1], tensor)
    else:
        chain[-1], final_site, final_rank = call(
            "finalize",
            {"dim_m": dim_m, "num_rows": num_rows, "bucket": plan[n], **statics},
            chain[-1],
            tensor,
            constants["epsrel"],
        )
    contract = oldest == "trace"
    right = vector = log_rest = None
    new_sites: list[Any] = [None] * len(chain)
    ranks: list[Any] = [None] * len(chain)
    for j in reversed(range(len(chain))):
        outputs = call(
            "cut",
            {"bucket": plan[j], "identity": right is None, "contract": contract, **statics},
            chain[j],
            right,
            constants["epsrel"],
            vector,
            log_rest,
        )
        right, new_sites[j], ranks[j] = outputs[:3]
        if contract:
            vector, log_rest = outputs[3:]
    log_before = log_scale
    front, log_scale = call("finish", {}, front_q, right, log_scale)
    if contract:
        output = call(
            "readout", {}, front, vector, log_scale, log_rest, second, constants["out_map"]
        )
    else:
        output = (final_site, final_rank, log_before)
    return front, new_sites, log_scale, output, ranks


def _fit(array: Any, shape: Sequence[int]) -> Any:
    """Host array cut or zero-padded to ``shape`` (the cut part must be zero)."""
    fitted = default_np.zeros(tuple(shape), array.dtype)
    common = tuple(slice(0, min(a, b)) for a, b in zip(array.shape, shape))
    fitted[common] = array[common]
    return fitted


def _extent(array: Any, axis: int) -> int:
    """1 + the last index along ``axis`` with a nonzero entry (at least 1)."""
    other = tuple(i for i in range(array.ndim) if i != axis)
    used = default_np.flatnonzero(default_np.any(array != 0.0, axis=other))
    return int(used[-1]) + 1 if used.size else 1


def _merged_profile(
    profile: Sequence[int], ranks: Sequence[Sequence[int]], finals: Sequence[int], length: int
) -> list[int]:
    """Largest rank of every bond over ``profile`` and the steps' kept ranks (and the
    ranks of their finalised bonds, which follow the last site), ``length`` bonds."""
    merged = list(profile[:length]) + [profile[-1]] * (length - len(profile))
    for step, final in zip(ranks, finals):
        for k, rank in enumerate(step):
            merged[k] = max(merged[k], rank)
        merged[len(step)] = max(merged[len(step)], final)
    return merged


class SitewiseWindow:
    """The memory window with one padded shape per site, advanced site by site.

    Made from the padded window of the whole-step kernel
    (:meth:`from_padded`); :meth:`run_chunk` runs a chunk of steps with one
    bucket plan and redoes it with a larger plan when a kept rank outgrows it.

    Parameters
    ----------
    front : (x, b_0) host array; sites : host arrays (b_j, m, b_{j+1}).
    log_scale : device scalar. profile : kept rank of every bond (host ints,
    bond k left of site k, the last one to the right of the oldest site).
    constants : device arrays as for :func:`nonmarkov.engines.jax.window._step`.
    memory, max_rank, oldest, svd_algorithm : as for the whole-step kernel.
    device : the JAX device the window lives on (:mod:`.placement`; None: JAX's
    default); ``constants`` and ``log_scale`` must be there too.
    """

    def __init__(
        self,
        front: Any,
        sites: Sequence[Any],
        log_scale: Any,
        profile: Sequence[int],
        constants: dict[str, Any],
        memory: int,
        max_rank: int | None,
        oldest: str,
        svd_algorithm: Any = None,
        device: Any = None,
    ):
        import jax

        self._jax = jax
        self._device = device
        self._constants = constants
        self._memory = memory
        self._max_rank = max_rank
        self._oldest = oldest
        self._svd = svd_algorithm
        self.profile = [max(int(rank), 1) for rank in profile]
        plan = plan_buckets(self.profile, len(sites) + 1)
        self._plan = plan
        self._front = jax.device_put(_fit(front, (front.shape[0], plan[0])), device)
        shapes = [
            (
                plan[j],
                site.shape[1],
                plan[j + 1] if j + 1 < len(sites) else max(self.profile[-1], 1),
            )
            for j, site in enumerate(sites)
        ]
        self._sites = [
            jax.device_put(_fit(site, shape), device) for site, shape in zip(sites, shapes)
        ]
        self._log_scale = log_scale
        #: chunks redone because a kept rank outgrew its planned bucket
        self.redos = 0
        #: the background compilation for the last chunk (a Future), or None
        self.ahead: Future | None = None

    @classmethod
    def from_padded(
        cls,
        front: Any,
        sites: Any,
        log_scale: Any,
        right_end: int,
        constants: dict[str, Any],
        memory: int,
        max_rank: int | None,
        oldest: str,
        svd_algorithm: Any = None,
        device: Any = None,
    ) -> SitewiseWindow:
        """From the whole-step kernel's window: front (x, D) and the n sites in use
        (n, D, m, D) as host arrays, their padding exactly zero; ``right_end`` the
        bond to the right of the oldest site (to the last finalised site, or 1)."""
        bonds = [_extent(front, 1)]
        for j, site in enumerate(sites):
            bonds[j] = max(bonds[j], _extent(site, 0))
            bonds.append(_extent(site, 2))
        bonds[-1] = max(bonds[-1], int(right_end))
        trimmed = [site[: bonds[j], :, : bonds[j + 1]] for j, site in enumerate(sites)]
        return cls(
            front[:, : bonds[0]],
            trimmed,
            log_scale,
            bonds,
            constants,
            memory,
            max_rank,
            oldest,
            svd_algorithm,
            device,
        )

    def move_to(self, device: Any) -> None:
        """Move the window's arrays to ``device`` (one transfer; the constants are the
        caller's, moved by it)."""
        self._device = device
        self._front, self._sites, self._log_scale = self._jax.device_put(
            (self._front, self._sites, self._log_scale), device
        )

    @property
    def largest_bucket(self) -> int:
        """Largest padded bond of the window."""
        return max([self._front.shape[1]] + [site.shape[2] for site in self._sites])

    @property
    def count(self) -> int:
        """Sites in the window besides the front."""
        return len(self._sites)

    def run_chunk(
        self,
        propagators: Sequence[tuple[Any, Any]],
        lags: Sequence[Any],
        margin: int,
        leaving: Sequence[Any] | None = None,
    ) -> tuple[list[Any], list[list[int]]]:
        """Run one step per (between, second) pair of device (x, x) arrays.

        ``lags[j]`` (r, m) device lag rows of window position j, for every
        position the window reaches in the chunk; ``leaving[i]`` (r, m) or None,
        the coupling at lag ``memory`` in step i (to the point that leaves the
        window; None: ``lags[memory - 2]``). The bonds are planned from
        the last kept ranks plus ``margin``. Returns the per-step outputs on
        the host (TEMPO: read-out (x,); PT-TEMPO: (finalised site or None, its
        rank or 0, log-scale before the step))
        and the kept ranks of every bond per step.
        """
        start = (self._front, self._sites, self._log_scale)
        profile, length = self.profile, self.count + len(propagators) + 1
        plan = plan_buckets(profile, length, margin, self._plan)
        self.ahead = self._compile_ahead(start, propagators, lags, plan, profile, margin)
        while True:
            front, sites, log_scale = start
            outputs, ranks = [], []
            for i, (between, second) in enumerate(propagators):
                step_lags = lags
                if leaving is not None and leaving[i] is not None and self._memory >= 2:
                    step_lags = list(lags)
                    step_lags[self._memory - 2] = leaving[i]
                front, sites, log_scale, output, step_ranks = sitewise_step(
                    front,
                    sites,
                    log_scale,
                    between,
                    second,
                    self._constants,
                    step_lags,
                    plan,
                    self._memory,
                    self._max_rank,
                    self._oldest,
                    self._svd,
                )
                outputs.append(output)
                ranks.append(step_ranks)
            outputs, ranks = self._jax.device_get((outputs, ranks))
            ranks = [[int(rank) for rank in step] for step in ranks]
            finals = [
                int(output[1]) if self._oldest == "finalize" and output[1] is not None else 0
                for output in outputs
            ]
            wanted = _merged_profile(profile, ranks, finals, len(plan))
            if all(want <= planned for want, planned in zip(wanted, plan)):
                break
            # a kept rank outgrew its bucket: run the chunk again with the larger ranks
            self.redos += 1
            profile = wanted
            plan = plan_buckets(profile, length, margin, plan)
        self._front, self._sites, self._log_scale = front, sites, log_scale
        self._plan = plan
        right_end = (
            finals[-1]
            if outputs[-1][1] is not None and self._oldest == "finalize"
            else self.profile[-1]
        )
        self.profile = ranks[-1] + [max(right_end, 1)]
        return outputs, ranks

    def _compile_ahead(
        self,
        start: tuple[Any, Any, Any],
        propagators: Sequence[tuple[Any, Any]],
        lags: Sequence[Any],
        plan: Sequence[int],
        profile: Sequence[int],
        margin: int,
    ) -> Future:
        """Compile in the background the kernels of this chunk and of the first two
        steps of the next one, whose plan is guessed from the ranks risen by
        ``margin`` (a wrong guess only costs the other core some time)."""
        steps = len(propagators)
        abstract = _abstract((start, propagators[0], self._constants, lags[0]))
        memory, max_rank, oldest, svd = self._memory, self._max_rank, self._oldest, self._svd

        def job() -> None:
            (front, sites, log_scale), (between, second), constants, lag = abstract
            lag_list = [lag] * (len(sites) + 2 * steps + 4)
            state = (front, sites, log_scale)
            upcoming = plan_buckets(
                [rank + margin for rank in profile], len(sites) + 2 * steps + 3, margin, plan
            )
            # a step's kernels depend on its input shapes and plan: from the third step
            # of a plan on they repeat
            for step_plan in [plan] * min(steps, 2) + [upcoming] * 2:
                state = sitewise_step(
                    *state,
                    between,
                    second,
                    constants,
                    lag_list,
                    step_plan,
                    memory,
                    max_rank,
                    oldest,
                    svd,
                    call=prepare_kernel,
                )[:3]

        return compile_ahead(job)

    def host_window(self) -> tuple[list[default_np.ndarray], float]:
        """The window on the host, newest first: front (1, x, k), sites (k, m, k'),
        trimmed to the kept ranks; and the log-scale of the front."""
        front, sites, log_scale = self._jax.device_get((self._front, self._sites, self._log_scale))
        bonds = self.profile
        window = [default_np.asarray(front)[None, :, : bonds[0]]]
        for j, site in enumerate(sites):
            window.append(default_np.asarray(site)[: bonds[j], :, : bonds[j + 1]])
        return window, float(log_scale)
