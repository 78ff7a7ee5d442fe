"""The TEBD engine on JAX: compiled two-site updates on padded site tensors.

Each site tensor S[l, p, a, r] is held padded with exact zeros to bucket sizes
(powers of two, :func:`_bucket`), with its true sizes kept on the host: each
bond and augmented leg to its own bucket, grown when a cut needs more and
never shrunk; XLA then compiles a kernel once per combination of buckets, not
per bond dimension. Every factorisation masks its
factors to the true sizes and to the kept rank, so the padding stays exactly
zero and the result equals the unpadded one (the NumPy engine's, to rounding):

- a two-site update (:func:`_two_site`) is one compiled kernel: the splits of
  :mod:`nonmarkov.kernels.tebd` (SVDs truncated with the traced
  :func:`~nonmarkov.kernels.truncation.rank_rule`), the gate, the SVD of the
  pair, truncated to a rank read back on the host (one integer per gate) that
  picks the bucket of the new bond (the kernel is run again with a larger
  bucket in the rare case it overflows);
- gauge moves (QR) and process-tensor steps are compiled kernels too;
- read-outs use the array kernels of :mod:`nonmarkov.kernels.tebd` on the
  padded arrays (padding contributes exact zeros).

Requires JAX.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as default_np

from ...backends.numerical_backend import np, numpy_in_this_thread
from ...kernels.tebd import capped_sites
from ...kernels.truncation import rank_rule
from ...options import EngineOptions
from ..base import DEVICES, PreparedProcessTensor, TebdCapabilities, TebdSpec
from ..host import HostTebdEngine
from ..shared import GaugedChain
from . import placement, planner
from .compiler import compile_kernel


def _jnp() -> Any:
    import jax.numpy as jnp

    return jnp


def _keep(size: int, used: Any, dtype: Any) -> Any:
    jnp = _jnp()
    return (jnp.arange(size) < used).astype(dtype)


def _truncated(matrix: Any, epsrel: Any, width: int) -> tuple[Any, Any, Any, Any]:
    """SVD of ``matrix`` truncated with ``rank_rule``: u (m, w), s (w,), vh (w, n) with
    w = ``width`` columns (zero beyond the kept rank), and the rank."""
    jnp = _jnp()
    u, s, vh = jnp.linalg.svd(matrix, full_matrices=False)
    rank = rank_rule(s, epsrel, xp=jnp)
    size = s.shape[0]
    if size < width:
        u = jnp.pad(u, ((0, 0), (0, width - size)))
        vh = jnp.pad(vh, ((0, width - size), (0, 0)))
        s = jnp.pad(s, (0, width - size))
    else:
        u, s, vh = u[:, :width], s[:width], vh[:width]
    keep = _keep(width, rank, s.dtype)
    s = s * keep
    return u * keep.astype(u.dtype)[None, :], s, vh * keep.astype(vh.dtype)[:, None], rank


def _two_site(
    left: Any,
    right: Any,
    gate: Any,
    epsrel: Any,
    true: Any,
    centre_right: Any,
    width: int,
    split_left: bool,
    split_right: bool,
) -> tuple[Any, Any, Any, Any]:
    """The update of :func:`nonmarkov.kernels.tebd.two_site_update` on padded sites.

    ``left`` (L, p, A, M), ``right`` (M, q, A', R), ``true`` the int32 true sizes
    (l, a, a', r); the new bond gets ``width`` columns; ``split_left``/``split_right``:
    whether the site has an augmented leg (true a > 1). Returns the new sites,
    the log of the norm divided out, and the kept rank.
    """
    jnp = _jnp()
    big_l, p, big_a, big_m = left.shape
    _, q, big_a2, big_r = right.shape
    dtype = left.dtype
    # split the left site over (l, a) | (p, m) where that makes it smaller
    matrix = jnp.transpose(left, (0, 2, 1, 3)).reshape(big_l * big_a, p * big_m)
    if split_left:
        u, s, vh, _ = _truncated(matrix, epsrel, min(big_l * big_a, p * big_m))
        q_l = u.reshape(big_l, big_a, -1)
        r_l = (s.astype(dtype)[:, None] * vh).reshape(-1, p, big_m)
    else:
        q_l, r_l = None, matrix.reshape(big_l * big_a, p, big_m)
    matrix = right.reshape(big_m * q, big_a2 * big_r)
    if split_right:
        u, s, vh, _ = _truncated(matrix, epsrel, min(big_m * q, big_a2 * big_r))
        r_r = (u * s.astype(dtype)[None, :]).reshape(big_m, q, -1)
        q_r = vh.reshape(-1, big_a2, big_r)
    else:
        r_r, q_r = matrix.reshape(big_m, q, big_a2 * big_r), None
    k, j = r_l.shape[0], r_r.shape[2]
    theta = jnp.einsum("kpm,mqj->kpqj", r_l, r_r).reshape(k, p * q, j)
    theta = jnp.einsum("xy,kyj->kxj", gate, theta).reshape(k * p, q * j)
    u, s, vh, rank = _truncated(theta, epsrel, width)
    norm = jnp.sqrt(jnp.sum(s * s))
    s = (s / norm).astype(dtype)
    # the singular values go right (centre_right, a traced bool) or left
    weight_l = jnp.where(centre_right, jnp.ones_like(s), s)
    weight_r = jnp.where(centre_right, s, jnp.ones_like(s))
    part_l = (u * weight_l[None, :]).reshape(k, p, width)
    part_r = (weight_r[:, None] * vh).reshape(width, q, j)
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
    return new_left, new_right, jnp.log(norm), rank


def _masked_qr(matrix: Any, row_keep: Any, columns: Any) -> tuple[Any, Any]:
    """QR of a (rows, cols) padded matrix with Q (rows, cols) and R (cols, cols),
    Q masked to the used rows and both to the first ``columns`` columns."""
    jnp = _jnp()
    rows, cols = matrix.shape
    if rows < cols:
        matrix = jnp.pad(matrix, ((0, cols - rows), (0, 0)))
    q, upper = jnp.linalg.qr(matrix)
    q = q[:rows]
    keep = _keep(cols, columns, matrix.dtype)
    return q * row_keep[:, None] * keep[None, :], upper * keep[:, None]


def _right_move(site: Any, following: Any, true: Any) -> tuple[Any, Any]:
    """Gauge centre from ``site`` (L, p, A, R) to ``following``; ``true`` (l, a, r)."""
    jnp = _jnp()
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
    jnp = _jnp()
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
    jnp = _jnp()
    site = jnp.einsum("xp,lpar->lxar", transform_in, site)
    site = jnp.einsum("lpar,abp->lpbr", site, tensor[:, :, classes])
    return jnp.einsum("yx,lxar->lyar", transform_out, site)


def _site_map(site: Any, superoperator: Any) -> Any:
    return _jnp().einsum("xp,lpar->lxar", superoperator, site)


@functools.cache
def _kernel(name: str, *static: Any) -> Any:
    """The compiled kernel ``name``; ``static``: (width, split_left, split_right) of
    ``'two_site'``. Cached per backend process; XLA caches per input shape."""
    if name == "two_site":
        width, split_l, split_r = static
        return compile_kernel(
            functools.partial(_two_site, width=width, split_left=split_l, split_right=split_r)
        )
    functions: dict[str, Callable[..., Any]] = {
        "right_move": _right_move,
        "left_move": _left_move,
        "process_step": _process_step,
        "site_map": _site_map,
    }
    return compile_kernel(functions[name])


_bucket = planner.chain_bucket


def _leg_size(size: int) -> int:
    """The padded size of an augmented leg: 1 stays 1 (a site without a bath)."""
    return 1 if size == 1 else _bucket(size)


def _pad(array: Any, shape: tuple[int, ...]) -> default_np.ndarray:
    """A host copy of ``array`` padded with zeros to ``shape``."""
    array = default_np.asarray(np.to_host(array))
    out = default_np.zeros(shape, dtype=np.dtype_complex)
    out[tuple(slice(0, n) for n in array.shape)] = array
    return out


class JaxTebdEngine(GaugedChain):
    """The TEBD engine on JAX (see :class:`~nonmarkov.engines.base.TebdEngine` and the
    module docstring); the same algorithm as :class:`~nonmarkov.engines.host.HostTebdEngine`
    (gauge centre, sweep directions), on padded arrays and compiled kernels."""

    capabilities = TebdCapabilities(max_rank=False, devices=DEVICES)

    def __init__(self, spec: TebdSpec, options: EngineOptions | None = None):
        import jax

        self._jax = jax
        self._epsrel = float(spec.epsrel)
        if spec.max_rank is not None:
            raise ValueError("the JAX TEBD engine has no max_rank; use the NumPy backend")
        self._true: list[list[int]] = []  # per site [l, a, r]
        self._sites: list[Any] = []
        #: the padded size of each bond (its bucket; grows, never shrinks), outer ones 1
        self._bonds = [1] + [_bucket(int(site.shape[3])) for site in spec.sites[:-1]] + [1]
        for k, site in enumerate(spec.sites):
            lb, p, a, r = (int(n) for n in site.shape)
            self._true.append([lb, a, r])
            shape = (self._bonds[k], p, _leg_size(a), self._bonds[k + 1])
            self._sites.append(jax.device_put(_pad(site, shape)))
        # the outer bonds stay 1; inner bonds of neighbours agree
        for k in range(len(self._sites) - 1):
            if self._sites[k].shape[3] != self._sites[k + 1].shape[0]:
                raise ValueError("inconsistent bonds in the initial MPS")
        self._log_scale = 0.0
        self._centre = 0
        self._canonical = False
        self._copies: dict[int, tuple[Any, Any]] = {}
        self._traces: dict[int, Any] = {}

    def _device(self, array: Any) -> Any:
        """A device copy of a host array that comes back as the same object (gates,
        controls, transforms), made once; device arrays pass through."""
        if not isinstance(array, default_np.ndarray):
            return array
        entry = self._copies.get(id(array))
        if entry is None or entry[0] is not array:
            device = self._jax.device_put(default_np.asarray(array, dtype=np.dtype_complex))
            entry = self._copies[id(array)] = (array, device)
        return entry[1]

    # -------------------------------------------------------------- the gauge

    def _true_of(self, k: int) -> Any:
        return default_np.asarray(self._true[k], dtype=default_np.int32)

    def _move_right(self, k: int) -> None:
        sites = self._sites
        sites[k], sites[k + 1] = _kernel("right_move")(sites[k], sites[k + 1], self._true_of(k))

    def _move_left(self, k: int) -> None:
        sites = self._sites
        sites[k - 1], sites[k] = _kernel("left_move")(sites[k - 1], sites[k], self._true_of(k))

    def _two_site(self, site: int, gate: Any, centre_right: bool) -> None:
        left, right = self._sites[site], self._sites[site + 1]
        lb, a, _ = self._true[site]
        _, a2, r = self._true[site + 1]
        true = default_np.asarray([lb, a, a2, r], dtype=default_np.int32)
        while True:
            width = self._bonds[site + 1]
            kernel = _kernel("two_site", width, a > 1, a2 > 1)
            new_left, new_right, log_norm, rank = kernel(
                left, right, gate, self._epsrel, true, centre_right
            )
            rank = int(rank)
            if rank <= width:
                break
            self._grow(site, _bucket(rank))
            left, right = self._sites[site], self._sites[site + 1]
        self._sites[site], self._sites[site + 1] = new_left, new_right
        self._true[site][2] = rank
        self._true[site + 1][0] = rank
        self._log_scale += float(log_norm)
        self._centre = site + 1 if centre_right else site

    def _grow(self, site: int, size: int) -> None:
        """Pad the bond between ``site`` and ``site`` + 1 to ``size`` (a larger bucket)."""
        jnp = _jnp()
        extra = size - self._bonds[site + 1]
        self._sites[site] = jnp.pad(self._sites[site], ((0, 0), (0, 0), (0, 0), (0, extra)))
        self._sites[site + 1] = jnp.pad(self._sites[site + 1], ((0, extra), (0, 0), (0, 0), (0, 0)))
        self._bonds[site + 1] = size

    # -------------------------------------------------------------- operations

    def apply_site_maps(self, maps: Sequence[tuple[int, Any]]) -> None:
        """See :meth:`~nonmarkov.engines.base.TebdEngine.apply_site_maps`."""
        for site, superoperator in maps:
            self._sites[site] = _kernel("site_map")(self._sites[site], self._device(superoperator))
            self._canonical = False

    def apply_process_steps(self, steps: Sequence[tuple[int, PreparedProcessTensor, int]]) -> None:
        """See :meth:`~nonmarkov.engines.base.TebdEngine.apply_process_steps`."""
        for site, pt, step in steps:
            tensor = pt.tensor(step)
            a, a2 = int(tensor.shape[0]), int(tensor.shape[1])
            if a != self._true[site][1]:
                raise ValueError(f"site {site}: the process tensor's bond {a} does not fit")
            big_a = self._sites[site].shape[2]
            # the leg's bucket never shrinks (a finite PT's bonds fall at its end)
            size = max(_leg_size(a2), big_a)
            padded = self._jax.device_put(_pad(tensor, (big_a, size, tensor.shape[2])))
            self._sites[site] = _kernel("process_step")(
                self._sites[site],
                self._device(pt.transform_in),
                padded,
                pt.classes,
                self._device(pt.transform_out),
            )
            self._true[site][1] = a2
            self._canonical = False

    def read_out(
        self, caps: Sequence[Any], groups: Sequence[tuple[int, ...]]
    ) -> tuple[complex, list[default_np.ndarray]]:
        """See :meth:`~nonmarkov.engines.base.TebdEngine.read_out`."""
        padded = [
            self._jax.device_put(_pad(cap, (site.shape[2],)))
            for cap, site in zip(caps, self._sites)
        ]
        return self._read_capped(capped_sites(self._sites, padded), groups)

    def bond_dimensions(self) -> list[int]:
        """See :meth:`~nonmarkov.engines.base.TebdEngine.bond_dimensions`."""
        return [true[2] for true in self._true[:-1]]

    def host_sites(self) -> list[default_np.ndarray]:
        """See :meth:`~nonmarkov.engines.base.TebdEngine.host_sites`."""
        sites = []
        for site, (lb, a, r) in zip(self._sites, self._true):
            sites.append(default_np.asarray(np.to_host(site))[:lb, :, :a, :r])
        sites[0] = sites[0] * math.exp(self._log_scale)
        return sites


class HostTebdOnJax:
    """The host TEBD engine (NumPy kernels) in a JAX session: every call runs under
    :func:`~nonmarkov.backends.numerical_backend.numpy_in_this_thread` (see
    :class:`~nonmarkov.engines.base.TebdEngine`); ``decisions`` says why."""

    capabilities = TebdCapabilities(max_rank=True)

    def __init__(self, spec: TebdSpec, options: EngineOptions, reason: str):
        with numpy_in_this_thread():
            self._engine = HostTebdEngine(spec, options)
        #: (entry, 'host', why)
        self.decisions = [("tebd", planner.HOST, reason)]

    def apply_gates(self, gates: Sequence[tuple[int, Any]]) -> None:
        with numpy_in_this_thread():
            self._engine.apply_gates(gates)

    def apply_site_maps(self, maps: Sequence[tuple[int, Any]]) -> None:
        with numpy_in_this_thread():
            self._engine.apply_site_maps(maps)

    def apply_process_steps(self, steps: Sequence[tuple[int, PreparedProcessTensor, int]]) -> None:
        with numpy_in_this_thread():
            self._engine.apply_process_steps(steps)

    def read_out(
        self, caps: Sequence[Any], groups: Sequence[tuple[int, ...]]
    ) -> tuple[complex, list[default_np.ndarray]]:
        with numpy_in_this_thread():
            return self._engine.read_out(caps, groups)

    def bond_dimensions(self) -> list[int]:
        with numpy_in_this_thread():
            return self._engine.bond_dimensions()

    def host_sites(self) -> list[default_np.ndarray]:
        with numpy_in_this_thread():
            return self._engine.host_sites()


def jax_tebd_engine(spec: TebdSpec, options: EngineOptions) -> Any:
    """The TEBD engine of a JAX session: the compiled one (:class:`JaxTebdEngine`) where
    ``compiled='on'``, or where ``'auto'`` and the chain is placed on an accelerator;
    else the host engine's NumPy kernels (on a CPU the compiled two-site updates, one
    host read-back of the rank per gate, were measured 5-30x slower than NumPy on
    OQuPy's 7-site chains)."""
    if options.compiled == "on":
        return JaxTebdEngine(spec, options)
    if options.compiled == "auto" and spec.max_rank is None:
        work = max(
            (
                placement.chain_work(
                    1, [int(site.shape[0]), int(site.shape[3])], int(site.shape[1]) ** 2
                )
                for site in spec.sites
            ),
            default=0.0,
        )
        if placement.place(options.device, work).where == placement.ACCELERATOR:
            return JaxTebdEngine(spec, options)
    return HostTebdOnJax(spec, options, f"compiled={options.compiled!r}, on the host CPU")
