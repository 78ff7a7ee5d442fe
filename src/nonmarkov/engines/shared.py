"""Implementation the engines share (not part of the contract of :mod:`.base`).

- :class:`LastArguments`: compute once while the inputs are the same arrays
  (propagators, their products, device copies);
- :class:`GaugedChain`: the gauge-centre algorithm of both TEBD engines, on
  their own QR moves and two-site updates.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as default_np

from ..backends.numerical_backend import np
from ..kernels.tebd import environments, group_vector


class LastArguments:
    """``function(*arrays)``, computed again only when called with other array objects.

    A time-independent system returns the same propagator arrays at every
    step; what is derived from them (products, basis changes, device copies)
    is then computed once. Compares by identity, so it is cheap and exact.
    """

    def __init__(self, function: Callable[..., Any]):
        self._function = function
        self._arguments: tuple[Any, ...] | None = None
        self._value: Any = None

    def __call__(self, *arguments: Any) -> Any:
        previous = self._arguments
        if (
            previous is None
            or len(previous) != len(arguments)
            or any(a is not b for a, b in zip(arguments, previous))
        ):
            self._arguments = arguments
            self._value = self._function(*arguments)
        return self._value


class GaugedChain:
    """The gauge-centre bookkeeping both TEBD engines share (the same algorithm on
    their own kernels): the sites left of ``_centre`` are left isometries, those
    right of it right isometries; a layer of gates sweeps from the centre's nearer
    end, after one QR sweep if a site map or process-tensor step broke the gauge.

    Subclasses hold ``_sites``, ``_log_scale`` and a ``_traces`` cache, and give the
    two QR moves of the centre, the two-site update (which leaves the centre on its
    right or left site) and ``_device`` (a host array on the engine's backend).
    """

    _sites: list[Any]
    _centre: int = 0
    _canonical: bool = False
    _log_scale: float = 0.0
    _traces: dict[int, Any]

    def _move_right(self, k: int) -> None:
        """Move the centre from site ``k`` to ``k`` + 1 (QR of site ``k``)."""
        raise NotImplementedError

    def _move_left(self, k: int) -> None:
        """Move the centre from site ``k`` to ``k`` - 1 (QR of site ``k``)."""
        raise NotImplementedError

    def _two_site(self, site: int, gate: Any, centre_right: bool) -> None:
        raise NotImplementedError

    def _device(self, array: Any) -> Any:
        raise NotImplementedError

    def _move_centre(self, target: int) -> None:
        while self._centre < target:
            self._move_right(self._centre)
            self._centre += 1
        while self._centre > target:
            self._move_left(self._centre)
            self._centre -= 1

    def _canonicalise(self) -> None:
        """One QR sweep over the whole chain, towards the end nearer to the centre."""
        n = len(self._sites)
        if self._centre >= n / 2:
            self._centre = 0
            self._move_centre(n - 1)
        else:
            self._centre = n - 1
            self._move_centre(0)
        self._canonical = True

    def apply_gates(self, gates: Sequence[tuple[int, Any]]) -> None:
        """See :meth:`~nonmarkov.engines.base.TebdEngine.apply_gates`."""
        if not gates:
            return
        if not self._canonical:
            self._canonicalise()
        ascending = self._centre <= (len(self._sites) - 1) / 2
        for site, gate in sorted(gates, key=lambda entry: entry[0], reverse=not ascending):
            self._move_centre(site if ascending else site + 1)
            self._two_site(site, self._device(gate), ascending)

    def _trace_vector(self, d2: int) -> Any:
        """vec(1) of a site of Liouville dimension ``d2``, on the engine's backend."""
        if d2 not in self._traces:
            d = math.isqrt(d2)
            self._traces[d2] = self._device(default_np.identity(d).reshape(-1))
        return self._traces[d2]

    def _read_capped(
        self, capped: list[Any], groups: Sequence[tuple[int, ...]]
    ) -> tuple[complex, list[default_np.ndarray]]:
        """:meth:`~nonmarkov.engines.base.TebdEngine.read_out` from the capped sites."""
        transfers = [
            np.tensordot(site, self._trace_vector(site.shape[1]), axes=([1], [0]))
            for site in capped
        ]
        left, right = environments(transfers)
        scale = math.exp(self._log_scale)
        total = complex(np.to_host(left[-1])[0]) * scale
        vectors = []
        for group in groups:
            vector = group_vector(capped, transfers, left[group[0]], right[group[-1] + 1], group)
            vectors.append(default_np.asarray(np.to_host(vector)) * scale)
        return total, vectors
