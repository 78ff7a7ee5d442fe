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
sites, :mod:`.tebd_program`): one kernel per step of PT-TEBD, one read-back
of its results. A two-site update is that of
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
import math
import time
from collections.abc import Sequence
from typing import Any

import numpy as default_np

from ...backends.numerical_backend import np, numpy_in_this_thread
from ...options import EngineOptions
from ..base import DEVICES, PreparedProcessTensor, TebdCapabilities, TebdSpec
from ..eager_tebd import EagerTebdEngine
from ..shared import GaugedChain
from . import placement, planner
from .tebd_program import (
    GATE,
    LEFT,
    MAP,
    PROCESS,
    READ,
    RIGHT,
    leg_size,
    program_kernel,
    zero_padded,
)

#: the kernels compiled in this process: (program, buckets, max_rank, svd, platform, shapes)
_COMPILED: set[tuple[Any, ...]] = set()


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
    module docstring); the same algorithm as :class:`~nonmarkov.engines.eager_tebd.EagerTebdEngine`
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
            shape = (self._bucket(k), size[1], leg_size(size[2]), self._bucket(k + 1))
            self._sites.append(self._put(zero_padded(site, shape)))
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
            size = max(leg_size(a2), big_a)
            self._tensors.append(
                self._put(zero_padded(tensor, (big_a, size, int(tensor.shape[2]))))
            )
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
        padded = tuple(
            self._put(zero_padded(cap, (pad,))) for cap, pad in zip(caps, self._leg_pads)
        )
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
            kernel = program_kernel(
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
        """Pad every inner bond of the program's start to bucket ``size`` (on the host:
        an eager pad on the device would compile a program per site shape)."""
        extra = size - self.stats.bond
        last = len(self._sites) - 1
        for k, site in enumerate(self._sites):
            left, physical, leg, right = site.shape
            left, right = left + (extra if k > 0 else 0), right + (extra if k < last else 0)
            shape = (left, physical, leg, right)
            self._sites[k] = self._put(zero_padded(site, shape))
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
