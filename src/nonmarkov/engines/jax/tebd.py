"""The TEBD engine on JAX: a step's operations as one compiled program on padded sites.

Each site tensor S[l, p, a, r] is held padded with exact zeros: every inner
bond to one bond bucket D (:func:`~.planner.bond_bucket`, the window engine's
buckets), each augmented leg to its own bucket (1 for a site without a bath;
grown when a process tensor's bond needs more, never shrunk). The true bonds
are int32 arrays traced through the kernels, so the padding changes nothing:
every factorisation masks its factors to the true sizes and the kept rank,
and the result equals the unpadded one (the host engine's, to rounding).

The engine queues the operations of the method (the QR moves and two-site
updates of each layer of gates, with the gauge bookkeeping of
:class:`~nonmarkov.engines.shared.GaugedChain`; site maps; process-tensor
steps) and runs them as one compiled program when a result is needed
(:meth:`JaxTebdEngine.read_out`, which the program ends with; the bonds; the
sites): one kernel per step of PT-TEBD, one read-back of its results. A
two-site update (:func:`_two_site`) is that of
:func:`nonmarkov.kernels.tebd.two_site_update`: the splits of bathed sites,
the gate, the SVD of the pair, each truncated by
:func:`~nonmarkov.kernels.truncation.rank_rule` traced (:func:`.cuts.cut`),
with ``max_rank``; the ranks stay on the device. The part of a split site that
meets the gate is cut to the split bucket S (a bond bucket too), so that the
pair's SVD is (S p, p S) at most, not (L A p, p A R). The read-back gives the
largest ranks the program wanted: above D (or S), the program is run again
from its start with the bucket that holds it (a redo; the operations are pure
functions of their inputs). Kernels are cached per
program, bucket and shape; :class:`TebdRunStats` counts them.

Requires JAX.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import time
from collections.abc import Sequence
from typing import Any

import numpy as default_np

from ...backends.numerical_backend import np, numpy_in_this_thread
from ...kernels.tebd import environments, group_vector
from ...options import EngineOptions
from ..base import DEVICES, PreparedProcessTensor, TebdCapabilities, TebdSpec
from ..eager import EagerTebdEngine
from ..shared import GaugedChain
from . import placement, planner
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


def _program(
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
def _kernel(
    program: tuple[tuple[Any, ...], ...],
    width: int,
    split: int,
    max_rank: int | None,
    svd: str,
    platform: str,
) -> Any:
    """The compiled :func:`_program` (cached per backend process; XLA caches per shape)."""
    return compile_kernel(
        functools.partial(
            _program,
            program=program,
            width=width,
            split=split,
            max_rank=max_rank,
            svd=svd_algorithm(svd, platform),
        ),
        platform=platform,
    )


#: the kernels compiled in this process: (program, buckets, max_rank, svd, platform, shapes)
_COMPILED: set[tuple[Any, ...]] = set()


def _leg_size(size: int) -> int:
    """The padded size of an augmented leg: 1 stays 1 (a site without a bath)."""
    return 1 if size == 1 else planner.bond_bucket(size)


def _pad(array: Any, shape: tuple[int, ...]) -> default_np.ndarray:
    """A host copy of ``array`` padded with zeros to ``shape``."""
    array = default_np.asarray(np.to_host(array))
    out = default_np.zeros(shape, dtype=np.dtype_complex)
    out[tuple(slice(0, n) for n in array.shape)] = array
    return out


@dataclasses.dataclass
class TebdRunStats:
    """What a compiled TEBD engine did: programs run (each one read-back of its
    results), redone programs (a rank outgrew its bucket), the buckets now (of the
    bonds, and of the part of a split site that meets the gate), kernels compiled
    (programs and shapes not yet in the process) and the seconds of the calls that
    compiled them (compilation and run)."""

    programs: int = 0
    redos: int = 0
    bond: int = 0
    split: int = 0
    kernels_compiled: int = 0
    compile_seconds: float = 0.0


class JaxTebdEngine(GaugedChain):
    """The TEBD engine on JAX (see :class:`~nonmarkov.engines.base.TebdEngine` and the
    module docstring); the same algorithm as :class:`~nonmarkov.engines.eager.EagerTebdEngine`
    (gauge centre, sweep directions, cuts), on padded arrays in compiled programs.

    ``decisions``: (entry, where, why) of the engine's choices (the bucket's growth
    among them); ``stats``: :class:`TebdRunStats`.
    """

    capabilities = TebdCapabilities(max_rank=True, devices=DEVICES)

    def __init__(
        self, spec: TebdSpec, options: EngineOptions | None = None, reason: str = "compiled"
    ):
        import jax

        self._jax = jax
        options = options if options is not None else EngineOptions()
        self._svd = options.svd
        self._epsrel = float(spec.epsrel)
        self._max_rank = None if spec.max_rank is None else int(spec.max_rank)
        if self._max_rank is not None and self._max_rank < 1:
            raise ValueError(f"max_rank must be a positive integer or None, got {spec.max_rank}")
        sizes = [tuple(int(n) for n in site.shape) for site in spec.sites]
        for k in range(len(sizes) - 1):
            if sizes[k][3] != sizes[k + 1][0]:
                raise ValueError("inconsistent bonds in the initial MPS")
        self._placement = placement.place(options.device, _work(sizes))
        #: true bonds (n + 1, the outer ones 1) and legs (n) after the last program
        self._bonds = [1] + [size[3] for size in sizes[:-1]] + [1]
        self._legs = [size[2] for size in sizes]
        self.stats = TebdRunStats(
            bond=planner.bond_bucket(max(self._bonds)), split=planner.bond_bucket(1)
        )
        self.decisions: list[tuple[str, str, str]] = [("tebd", planner.COMPILED, reason)]
        self._sites: list[Any] = []
        for k, (site, size) in enumerate(zip(spec.sites, sizes)):
            shape = (self._bucket(k), size[1], _leg_size(size[2]), self._bucket(k + 1))
            self._sites.append(self._put(_pad(site, shape)))
        self._log_scale = 0.0
        self._centre = 0
        self._canonical = False
        self._copies: dict[int, tuple[Any, Any]] = {}
        self._traces: dict[int, Any] = {}
        self._clear()

    def _bucket(self, bond: int) -> int:
        """The padded size of bond ``bond`` (0: left of the first site)."""
        return 1 if bond in (0, len(self._bonds) - 1) else self.stats.bond

    def _put(self, array: Any) -> Any:
        return self._jax.device_put(array, self._placement.device)

    def _device(self, array: Any) -> Any:
        """A device copy of a host array that comes back as the same object (gates,
        controls, transforms), made once; device arrays pass through."""
        if not isinstance(array, default_np.ndarray):
            return array
        entry = self._copies.get(id(array))
        if entry is None or entry[0] is not array:
            dtype = default_np.int32 if array.dtype.kind in "iu" else np.dtype_complex
            entry = self._copies[id(array)] = (array, self._put(array.astype(dtype)))
        return entry[1]

    def _clear(self) -> None:
        """Start an empty program from the current sites."""
        self._program: list[tuple[Any, ...]] = []
        self._matrices: list[Any] = []
        self._tensors: list[Any] = []
        self._classes: list[Any] = []
        self._sizes: list[int] = []
        self._start_legs = list(self._legs)
        #: the padded size of each augmented leg once the program has run
        self._leg_pads = [int(site.shape[2]) for site in self._sites]

    def _matrix(self, array: Any) -> int:
        """The index of ``array``'s device copy among the program's matrices."""
        device = self._device(array)
        for index, matrix in enumerate(self._matrices):
            if matrix is device:
                return index
        self._matrices.append(device)
        return len(self._matrices) - 1

    # -------------------------------------------------------------- the gauge

    def _move_right(self, k: int) -> None:
        self._program.append((RIGHT, k))

    def _move_left(self, k: int) -> None:
        self._program.append((LEFT, k))

    def _two_site(self, site: int, gate: Any, centre_right: bool) -> None:
        split_l, split_r = self._legs[site] > 1, self._legs[site + 1] > 1
        self._program.append((GATE, site, centre_right, self._matrix(gate), split_l, split_r))
        self._centre = site + 1 if centre_right else site

    # -------------------------------------------------------------- operations

    def apply_site_maps(self, maps: Sequence[tuple[int, Any]]) -> None:
        """See :meth:`~nonmarkov.engines.base.TebdEngine.apply_site_maps`."""
        for site, superoperator in maps:
            self._program.append((MAP, site, self._matrix(superoperator)))
            self._canonical = False

    def apply_process_steps(self, steps: Sequence[tuple[int, PreparedProcessTensor, int]]) -> None:
        """See :meth:`~nonmarkov.engines.base.TebdEngine.apply_process_steps`."""
        for site, pt, step in steps:
            tensor = pt.tensor(step)
            a, a2 = int(tensor.shape[0]), int(tensor.shape[1])
            if a != self._legs[site]:
                raise ValueError(f"site {site}: the process tensor's bond {a} does not fit")
            big_a = self._leg_pads[site]
            # the leg's bucket never shrinks (a finite PT's bonds fall at its end)
            size = max(_leg_size(a2), big_a)
            self._tensors.append(self._put(_pad(tensor, (big_a, size, int(tensor.shape[2])))))
            self._classes.append(self._device(default_np.asarray(pt.classes)))
            self._sizes.append(a2)
            first, last = self._matrix(pt.transform_in), self._matrix(pt.transform_out)
            self._program.append(
                (
                    PROCESS,
                    site,
                    first,
                    len(self._tensors) - 1,
                    len(self._classes) - 1,
                    last,
                    len(self._sizes) - 1,
                )
            )
            self._legs[site], self._leg_pads[site] = a2, size
            self._canonical = False

    def _run(
        self, caps: Sequence[Any] = (), groups: tuple[tuple[int, ...], ...] | None = None
    ) -> Any:
        """Run the queued program (and a read-out with ``caps`` and ``groups``); returns
        the read-out on the host, or None."""
        program = tuple(self._program)
        if groups is not None:
            program = (*program, (READ, groups))
        if not program:
            return None
        padded = tuple(self._put(_pad(cap, (pad,))) for cap, pad in zip(caps, self._leg_pads))
        int32 = default_np.int32
        constants = (
            tuple(self._matrices),
            tuple(self._tensors),
            tuple(self._classes),
            default_np.asarray(self._sizes, dtype=int32),
            padded,
            self._epsrel,
        )
        bonds = default_np.asarray(self._bonds, dtype=int32)
        legs = default_np.asarray(self._start_legs, dtype=int32)
        while True:
            width, split = self.stats.bond, self.stats.split
            sites = tuple(self._sites)
            key = (
                program,
                width,
                split,
                self._max_rank,
                self._svd,
                self._placement.platform,
                tuple(site.shape for site in sites),
                tuple(tensor.shape for tensor in self._tensors),
            )
            kernel = _kernel(
                program, width, split, self._max_rank, self._svd, self._placement.platform
            )
            start = time.perf_counter()
            out_sites, out_bonds, log_norm, wanted, split_wanted, read = kernel(
                sites, bonds, legs, *constants
            )
            new_bonds, log_norm, wanted, split_wanted, read = self._jax.device_get(
                (out_bonds, log_norm, wanted, split_wanted, read)
            )
            self.stats.programs += 1
            if key not in _COMPILED:
                _COMPILED.add(key)
                self.stats.kernels_compiled += 1
                self.stats.compile_seconds += time.perf_counter() - start
            if int(wanted) <= width and int(split_wanted) <= split:
                break
            self.stats.redos += 1
            if int(split_wanted) > split:
                self.stats.split = planner.bond_bucket(int(split_wanted))
                reason = f"a split of rank {split_wanted} outgrew bucket {split}"
                self.decisions.append(("split", planner.COMPILED, reason))
            if int(wanted) > width:
                self._grow(planner.bond_bucket(int(wanted)), int(wanted))
        self._sites = list(out_sites)
        self._bonds = [int(n) for n in new_bonds]
        self._log_scale += float(log_norm)
        self._clear()
        return read

    def _grow(self, size: int, wanted: int) -> None:
        """Pad every inner bond of the program's start to bucket ``size``."""
        _, jnp, _ = jax_modules()
        extra = size - self.stats.bond
        last = len(self._sites) - 1
        for k, site in enumerate(self._sites):
            self._sites[k] = jnp.pad(
                site,
                ((0, extra if k > 0 else 0), (0, 0), (0, 0), (0, extra if k < last else 0)),
            )
        reason = f"rank {wanted} outgrew bucket {self.stats.bond}: bucket {size}"
        self.decisions.append(("bond", planner.COMPILED, reason))
        self.stats.bond = size

    def read_out(
        self, caps: Sequence[Any], groups: Sequence[tuple[int, ...]]
    ) -> tuple[complex, list[default_np.ndarray]]:
        """See :meth:`~nonmarkov.engines.base.TebdEngine.read_out` (runs the queued
        operations and the read-out as one program)."""
        total, vectors = self._run(caps, tuple(tuple(int(k) for k in g) for g in groups))
        scale = math.exp(self._log_scale)
        return complex(total) * scale, [default_np.asarray(v) * scale for v in vectors]

    def bond_dimensions(self) -> list[int]:
        """See :meth:`~nonmarkov.engines.base.TebdEngine.bond_dimensions`."""
        self._run()
        return self._bonds[1:-1]

    def host_sites(self) -> list[default_np.ndarray]:
        """See :meth:`~nonmarkov.engines.base.TebdEngine.host_sites`."""
        self._run()
        sites = []
        for k, site in enumerate(self._sites):
            lb, a, r = self._bonds[k], self._legs[k], self._bonds[k + 1]
            sites.append(default_np.asarray(np.to_host(site))[:lb, :, :a, :r])
        sites[0] = sites[0] * math.exp(self._log_scale)
        return sites


def _work(sizes: Sequence[tuple[int, ...]]) -> float:
    """The largest :func:`~.placement.chain_work` of a site of ``sizes`` (l, p, a, r)."""
    return max(
        (placement.chain_work(1, [size[0], size[3]], size[1] ** 2) for size in sizes),
        default=0.0,
    )


class HostTebdOnJax:
    """The host TEBD engine (NumPy kernels) in a JAX session: every call runs under
    :func:`~nonmarkov.backends.numerical_backend.numpy_in_this_thread` (see
    :class:`~nonmarkov.engines.base.TebdEngine`); ``decisions`` says why."""

    capabilities = TebdCapabilities(max_rank=True)

    def __init__(self, spec: TebdSpec, options: EngineOptions, reason: str):
        with numpy_in_this_thread():
            self._engine = EagerTebdEngine(spec, options)
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
    else the host engine's NumPy kernels (on a CPU the host engine is the faster one
    on OQuPy's 7-site chains: docs/pt_tebd.md)."""
    if options.compiled == "on":
        return JaxTebdEngine(spec, options, "compiled='on'")
    if options.compiled == "auto":
        sizes = [tuple(int(n) for n in site.shape) for site in spec.sites]
        if placement.place(options.device, _work(sizes)).where == placement.ACCELERATOR:
            return JaxTebdEngine(spec, options, "compiled='auto', on an accelerator")
    return HostTebdOnJax(spec, options, f"compiled={options.compiled!r}, on the host CPU")
