"""The eager TEBD engine: PT-TEBD's chain of sites updated with the kernels of
:mod:`nonmarkov.kernels.tebd` on the backend proxy, one operation at a time. The TEBD
engine of the NumPy backend, and of the JAX backend on a CPU.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as default_np

from ..backends.host import to_backend
from ..backends.numerical_backend import np
from ..kernels.tebd import (
    apply_process_step,
    apply_site_map,
    capped_sites,
    orthonormalise_left,
    orthonormalise_right,
    two_site_update,
)
from ..options import EngineOptions
from .base import (
    PreparedProcessTensor,
    TebdCapabilities,
    TebdSpec,
)
from .shared import GaugedChain


class DeviceCopies:
    """Backend copies of host arrays that come back as the same objects (gates,
    controls): each is moved once. Arrays already on the backend pass through."""

    def __init__(self) -> None:
        self._copies: dict[int, tuple[Any, Any]] = {}

    def __call__(self, array: Any) -> Any:
        if not isinstance(array, default_np.ndarray):
            return array
        entry = self._copies.get(id(array))
        if entry is None or entry[0] is not array:
            entry = self._copies[id(array)] = (array, to_backend(array))
        return entry[1]


class EagerTebdEngine(GaugedChain):
    """A chain MPS with augmented legs on the kernels of :mod:`nonmarkov.kernels.tebd`
    (see :class:`~nonmarkov.engines.base.TebdEngine`).

    The engine keeps a gauge centre: the sites left of it are isometries over
    (l, p, a), those right of it over (p, a, r), so that each two-site cut is
    truncated where it is optimal in the 2-norm. A layer of gates sweeps from
    the centre's nearer end; a site map or a process-tensor step breaks the
    gauge, which the next layer restores with one QR sweep. The state's scale
    is kept apart as a log (the singular values of each cut are normalised).
    """

    capabilities = TebdCapabilities(max_rank=True)

    def __init__(self, spec: TebdSpec, options: EngineOptions | None = None):
        self._sites = [to_backend(site) for site in spec.sites]
        self._epsrel = float(spec.epsrel)
        self._max_rank = spec.max_rank
        self._log_scale = 0.0
        self._centre = 0
        self._canonical = False
        self._copies = DeviceCopies()
        self._traces: dict[int, Any] = {}

    # -------------------------------------------------------------- the gauge

    def _move_right(self, k: int) -> None:
        sites = self._sites
        sites[k], sites[k + 1] = orthonormalise_right(sites[k], sites[k + 1])

    def _move_left(self, k: int) -> None:
        sites = self._sites
        sites[k - 1], sites[k] = orthonormalise_left(sites[k - 1], sites[k])

    def _device(self, array: Any) -> Any:
        return self._copies(array)

    def _two_site(self, site: int, gate: Any, centre_right: bool) -> None:
        left, right, log_norm = two_site_update(
            self._sites[site],
            self._sites[site + 1],
            gate,
            self._epsrel,
            centre_right,
            self._max_rank,
        )
        self._sites[site], self._sites[site + 1] = left, right
        self._log_scale += log_norm
        self._centre = site + 1 if centre_right else site

    # -------------------------------------------------------------- operations

    def apply_site_maps(self, maps: Sequence[tuple[int, Any]]) -> None:
        """See :meth:`~nonmarkov.engines.base.TebdEngine.apply_site_maps`."""
        for site, superoperator in maps:
            self._sites[site] = apply_site_map(self._sites[site], self._copies(superoperator))
            self._canonical = False

    def apply_process_steps(self, steps: Sequence[tuple[int, PreparedProcessTensor, int]]) -> None:
        """See :meth:`~nonmarkov.engines.base.TebdEngine.apply_process_steps`."""
        for site, pt, step in steps:
            self._sites[site] = apply_process_step(
                self._sites[site], pt.transform_in, pt.tensor(step), pt.classes, pt.transform_out
            )
            self._canonical = False

    def read_out(
        self, caps: Sequence[Any], groups: Sequence[tuple[int, ...]]
    ) -> tuple[complex, list[default_np.ndarray]]:
        """See :meth:`~nonmarkov.engines.base.TebdEngine.read_out`."""
        return self._read_capped(capped_sites(self._sites, [to_backend(c) for c in caps]), groups)

    def bond_dimensions(self) -> list[int]:
        """See :meth:`~nonmarkov.engines.base.TebdEngine.bond_dimensions`."""
        return [int(site.shape[3]) for site in self._sites[:-1]]

    def host_sites(self) -> list[default_np.ndarray]:
        """See :meth:`~nonmarkov.engines.base.TebdEngine.host_sites`."""
        sites = [default_np.asarray(np.to_host(site)) for site in self._sites]
        sites[0] = sites[0] * math.exp(self._log_scale)
        return sites
