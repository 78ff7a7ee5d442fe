"""The eager window engine: the window's steps one at a time with the kernels of
:mod:`nonmarkov.kernels.window` on the backend proxy. It is the window engine of the
NumPy backend and the host steps of the JAX window engine (under
:func:`~nonmarkov.backends.numerical_backend.numpy_in_this_thread`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as default_np

from ..backends.host import to_backend
from ..backends.numerical_backend import np, numpy_in_this_thread
from ..kernels.truncation import truncated_svd
from ..kernels.window import (
    NORM_SITE,
    advance_window,
    matrix_lags,
    normalise,
    trace_basis,
    trace_vectors,
)
from ..options import EngineOptions, resolve
from .base import (
    WindowCapabilities,
    WindowSpec,
)
from .shared import LastArguments


def host_sweep(options: EngineOptions | None) -> str:
    """The window sweep of the eager engine (:mod:`nonmarkov.kernels.window`) for ``options``."""
    choice = resolve(options).window_sweep
    return "zip_up" if choice == "auto" else choice


class EagerWindowEngine:
    """A memory window advanced with the kernels of :mod:`nonmarkov.kernels.window`
    on the active backend (see :class:`~nonmarkov.engines.base.WindowEngine`)."""

    capabilities = WindowCapabilities(tail=True, trace_weight=True)
    steps_per_call = 1

    def __init__(self, spec: WindowSpec, options: EngineOptions | None = None):
        self._spec = spec
        self._projector = to_backend(spec.projector)
        self._first = to_backend(spec.first)
        self._carrier = np.asarray(default_np.asarray(spec.carrier, dtype=int))
        self._num_rows = spec.num_rows
        self._out_map = spec.out_map
        self._lags: list[Any] = []  # lag rows of window positions 1, 2, ... on the backend
        self._window = [to_backend(spec.front).reshape(1, -1, 1)]
        self._log_scale = float(spec.log_scale)
        self._memory = 0 if spec.memory is None else int(spec.memory)
        self._between = LastArguments(to_backend)
        self._leaving = LastArguments(lambda rows: to_backend(self._lags_in_basis(rows)))
        #: window steps run so far (after the first point)
        self.steps = 0
        m = self._projector.shape[1]
        self._pt_between = default_np.ones((m, m))
        self._sweep = host_sweep(options)
        #: the tail modes' (couple (r, D, D), merge (m, D, D)) on the backend, or None
        self._tail = (
            None if spec.tail is None else (to_backend(spec.tail[0]), to_backend(spec.tail[1]))
        )
        #: the sites' class basis (A, 1^T A^-1) and A^-1 on the backend, or None (flat)
        self._class_basis: tuple[Any, Any] | None = None
        self._from_basis: Any = None
        #: the same basis and its inverse on the host
        self._host_basis: tuple[Any, Any] | None = None
        if spec.trace_weight != 1.0:
            basis, inverse = self._host_basis = trace_basis(m, spec.trace_weight)
            self._class_basis = (to_backend(basis), to_backend(inverse.sum(axis=0)))
            self._from_basis = to_backend(inverse)

    @property
    def memory(self) -> int:
        """Points kept in the window, 0 for no memory cut."""
        return self._memory

    @property
    def log_scale(self) -> float:
        """Log of the factor the front was divided by."""
        return self._log_scale

    def _site_lags(self, count: int) -> list[Any]:
        while len(self._lags) < count:
            rows = self._spec.lag_rows(len(self._lags) + 2)
            self._lags.append(to_backend(self._lags_in_basis(rows)))
        return self._lags[:count]

    def _lags_in_basis(self, rows: Any) -> Any:
        """Host lag rows (r, m) as the window's sites see them: as they are in the flat
        class basis, else the matrices of :func:`~nonmarkov.kernels.window.matrix_lags`."""
        if self._host_basis is None:
            return rows
        return matrix_lags(rows, *self._host_basis)

    def _has_tail_site(self, window: Sequence[Any]) -> bool:
        """Whether the last site of ``window`` holds the tail modes (spec.tail): from
        the step the window first filled, it holds one site more than the memory."""
        return self._tail is not None and len(window) > self._memory

    def _step(self, between: Any) -> Any:
        """One step of the window; returns the finalised site or None."""
        window = self._window
        tail_site = self._has_tail_site(window)
        n = len(window) - tail_site
        full = self._memory and n >= self._memory
        oldest = ("trace" if self._spec.oldest == "trace" else "finalize") if full else "keep"
        theta = np.einsum("ba,ac,ar->bcr", self._between(between), self._projector, window[0][0])
        self.steps += 1
        site_lags = self._site_lags(n - 1)
        leaving = self._spec.leaving(self.steps)
        if leaving is not None:
            site_lags = site_lags[:-1] + [self._leaving(leaving)]
        if self._tail is not None:
            oldest = "keep"
            if tail_site:
                site_lags = site_lags + [self._tail[0]]
        window, done = advance_window(
            window,
            theta,
            self._first,
            self._carrier,
            self._num_rows,
            site_lags,
            self._spec.epsrel,
            oldest,
            self._spec.max_rank,
            self._sweep,
            self._class_basis,
        )
        if self._tail is not None and full:
            window = self._into_tail(window, tail_site, self._tail[1])
            if self._spec.oldest == "finalize":
                window, done = self._split_from_tail(window)
        holder = NORM_SITE[self._sweep]
        window[holder], log_norm = normalise(window[holder])
        self._window = window
        self._log_scale += log_norm
        return done

    def _into_tail(self, window: list[Any], tail_site: bool, merge: Any) -> list[Any]:
        """Merge the point that leaves the window (its oldest regular site) into the
        tail site (the vacuum, the first time): tail[l, q, r] = sum leaving[l, c, k]
        modes[k, n, r] merge[c, q, n]."""
        modes = window.pop() if tail_site else None
        leaving = window.pop()
        if self._from_basis is not None:  # the point's classes as the merge reads them
            leaving = np.einsum("pq,lqk->lpk", self._from_basis, leaving)
        if modes is None:  # the vacuum on the leaving site's right bond
            bond, states = leaving.shape[2], merge.shape[1]
            vacuum = np.eye(states, dtype=merge.dtype)[0]
            modes = np.eye(bond, dtype=merge.dtype)[:, None, :] * vacuum[None, :, None]
        # finalize: the point's index stays open, (l, q, c, r)
        subscripts = "lqcr" if self._spec.oldest == "finalize" else "lqr"
        return window + [np.einsum(f"lck,knr,cqn->{subscripts}", leaving, modes, merge)]

    def _split_from_tail(self, window: list[Any]) -> tuple[list[Any], Any]:
        """Split the merged last site (l, q, c, r) into the tail modes' site (l, q, k),
        which keeps the norm, and the finished point (k, c, r), right-orthonormal, by a
        truncated SVD with ``epsrel``."""
        merged = window.pop()
        chi_l, states, classes, chi_r = merged.shape
        u, s, vh = truncated_svd(
            merged.reshape(chi_l * states, classes * chi_r), self._spec.epsrel, self._spec.max_rank
        )
        window.append((u * s[None, :]).reshape(chi_l, states, -1))
        return window, vh.reshape(-1, classes, chi_r)

    def _largest_bond(self) -> int:
        return max(site.shape[2] for site in self._window)

    def advance(
        self, propagators: Sequence[tuple[Any, Any]]
    ) -> tuple[default_np.ndarray, list[int]]:
        """See :meth:`~nonmarkov.engines.base.WindowEngine.advance`."""
        readouts, ranks = [], []
        for between, second in propagators:
            self._step(between)
            window = self._window
            vacuum = 0 if self._has_tail_site(window) else None
            covector = None if self._class_basis is None else self._class_basis[1]
            vector, log_rest = (
                trace_vectors(window[1:], vacuum, covector) if len(window) > 1 else (None, 0.0)
            )
            state = window[0][0] if vector is None else window[0][0] @ vector
            state = np.to_host(state).reshape(-1) * math.exp(self._log_scale + log_rest)
            readouts.append(self._out_map @ (second @ state))
            ranks.append(self._largest_bond())
        dim_x = self._projector.shape[0]
        stacked = default_np.asarray(readouts) if readouts else default_np.zeros((0, dim_x))
        return stacked, ranks

    def advance_finalize(self, num_steps: int) -> tuple[list[tuple[Any, float]], list[int]]:
        """See :meth:`~nonmarkov.engines.base.WindowEngine.advance_finalize`."""
        finalised, ranks = [], []
        for _ in range(num_steps):
            log_before = self._log_scale
            done = self._step(self._pt_between)
            finalised.append(
                (None if done is None else default_np.asarray(np.to_host(done)), log_before)
            )
            ranks.append(self._largest_bond())
        return finalised, ranks

    def expect_steps(self, num_steps: int) -> None:
        """See :meth:`~nonmarkov.engines.base.WindowEngine.expect_steps` (nothing to plan)."""

    def host_window(self) -> tuple[list[default_np.ndarray], float]:
        """See :meth:`~nonmarkov.engines.base.WindowEngine.host_window`."""
        return [default_np.asarray(np.to_host(site)) for site in self._window], self._log_scale

    @property
    def window(self) -> list[Any]:
        """The window on the active backend, newest first."""
        return list(self._window)

    def load_window(self, window: Sequence[Any], log_scale: float, steps: int = 0) -> None:
        """Continue from ``window`` (newest first: front (1, x, k), sites (k, m, k'),
        host arrays, e.g. from :meth:`host_window`) whose front has log-scale
        ``log_scale``, after ``steps`` window steps (which point leaves next)."""
        self.steps = int(steps)
        self._window = [to_backend(site) for site in window]
        self._log_scale = float(log_scale)


class HostWindowEngine(EagerWindowEngine):
    """The eager window engine on NumPy whatever the active backend: the engine of a
    window that the compiled JAX engine does not run (exponential tail modes)."""

    def __init__(self, spec: WindowSpec, options: EngineOptions | None = None):
        with numpy_in_this_thread():
            super().__init__(spec, options)

    def advance(
        self, propagators: Sequence[tuple[Any, Any]]
    ) -> tuple[default_np.ndarray, list[int]]:
        """See :meth:`~nonmarkov.engines.base.WindowEngine.advance`."""
        with numpy_in_this_thread():
            return super().advance(propagators)

    def advance_finalize(self, num_steps: int) -> tuple[list[tuple[Any, float]], list[int]]:
        """See :meth:`~nonmarkov.engines.base.WindowEngine.advance_finalize`."""
        with numpy_in_this_thread():
            return super().advance_finalize(num_steps)

    def host_window(self) -> tuple[list[default_np.ndarray], float]:
        """See :meth:`~nonmarkov.engines.base.WindowEngine.host_window`."""
        with numpy_in_this_thread():
            return super().host_window()

    def load_window(self, window: Sequence[Any], log_scale: float, steps: int = 0) -> None:
        """See :meth:`EagerWindowEngine.load_window`."""
        with numpy_in_this_thread():
            super().load_window(window, log_scale, steps)
