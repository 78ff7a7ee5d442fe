"""Open-system models: a Hamiltonian plus optional Lindblad terms.

``System`` is time independent, ``TimeDependentSystem`` takes callables of
time. Both give the Liouvillian (d^2, d^2) in the row-major convention of
:mod:`nonmarkov.operators` and the half-step propagators that the algorithms
interleave with the bath influence (symmetric Trotter splitting).

Generator: L rho = -i [H, rho] + sum_k gamma_k (A_k rho A_k^dag - 1/2 {A_k^dag A_k, rho}).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as default_np
import scipy.integrate
import scipy.linalg

from .. import config
from .. import validation as check
from .operators import commutator, lindblad_dissipator

PropagatorPair = tuple[default_np.ndarray, default_np.ndarray]


class BaseSystem:
    """Common interface of the system classes (dimension, name, propagators)."""

    def __init__(self, dimension: int, name: str | None, description: str | None):
        self._dimension = dimension
        self.name = "Unnamed System" if name is None else str(name)
        self.description = "" if description is None else str(description)

    @property
    def dimension(self) -> int:
        """Hilbert-space dimension d."""
        return self._dimension

    def liouvillian(self, t: float | None = None) -> default_np.ndarray:
        """The Liouvillian at time ``t``, shape (d^2, d^2)."""
        raise NotImplementedError

    def get_propagators(
        self,
        dt: float,
        start_time: float = 0.0,
        subdiv_limit: int | None = config.DEFAULT_SUBDIV_LIMIT,
        liouvillian_epsrel: float = config.DEFAULT_LIOUVILLIAN_EPSREL,
    ) -> Callable[[int], PropagatorPair]:
        """Return ``propagators(step) -> (first_half, second_half)``.

        ``first_half`` propagates from t_n = start_time + step*dt to
        t_n + dt/2, ``second_half`` from t_n + dt/2 to t_n + dt; both are
        (d^2, d^2) NumPy arrays.
        """
        raise NotImplementedError

    def __str__(self) -> str:
        return f"{type(self).__name__} {self.name!r} (dimension {self.dimension})"


def _check_lindblad_lists(gammas, lindblad_operators) -> tuple[list, list]:
    gammas = [] if gammas is None else list(gammas)
    lindblad_operators = [] if lindblad_operators is None else list(lindblad_operators)
    if len(gammas) != len(lindblad_operators):
        raise ValueError(
            f"gammas and lindblad_operators must have the same length; got {len(gammas)} "
            f"gammas and {len(lindblad_operators)} lindblad_operators"
        )
    return gammas, lindblad_operators


class System(BaseSystem):
    """Time-independent system.

    Parameters
    ----------
    hamiltonian : (d, d) Hermitian matrix, in units where hbar = 1.
    gammas : sequence of rates gamma_k >= 0 (optional).
    lindblad_operators : sequence of (d, d) matrices A_k, one per rate.
    name, description : optional text.
    """

    def __init__(
        self,
        hamiltonian: Any,
        gammas: Sequence[float] | None = None,
        lindblad_operators: Sequence[Any] | None = None,
        name: str | None = None,
        description: str | None = None,
    ):
        self._hamiltonian = check.hermitian_matrix(hamiltonian, "hamiltonian")
        dimension = self._hamiltonian.shape[0]
        gammas, lindblad_operators = _check_lindblad_lists(gammas, lindblad_operators)
        self._gammas = [
            check.non_negative_number(gamma, f"gammas[{i}]") for i, gamma in enumerate(gammas)
        ]
        self._lindblad_operators = [
            check.square_matrix(op, f"lindblad_operators[{i}]", dimension)
            for i, op in enumerate(lindblad_operators)
        ]
        super().__init__(dimension, name, description)
        self._liouvillian = self._build_liouvillian()

    @property
    def hamiltonian(self) -> default_np.ndarray:
        """The Hamiltonian, (d, d)."""
        return self._hamiltonian.copy()

    @property
    def gammas(self) -> list[float]:
        """The Lindblad rates."""
        return list(self._gammas)

    @property
    def lindblad_operators(self) -> list[default_np.ndarray]:
        """The Lindblad operators, each (d, d)."""
        return [op.copy() for op in self._lindblad_operators]

    def _build_liouvillian(self) -> default_np.ndarray:
        generator = -1j * commutator(self._hamiltonian)
        for gamma, op in zip(self._gammas, self._lindblad_operators):
            generator = generator + gamma * lindblad_dissipator(op)
        return generator

    def liouvillian(self, t: float | None = None) -> default_np.ndarray:
        """The Liouvillian, (d^2, d^2); ``t`` is ignored."""
        return self._liouvillian.copy()

    def get_propagators(
        self,
        dt: float,
        start_time: float = 0.0,
        subdiv_limit: int | None = config.DEFAULT_SUBDIV_LIMIT,
        liouvillian_epsrel: float = config.DEFAULT_LIOUVILLIAN_EPSREL,
    ) -> Callable[[int], PropagatorPair]:
        """``propagators(step) -> (first_half, second_half)``, both expm(L dt/2)."""
        dt = check.positive_number(dt, "dt")
        half = scipy.linalg.expm(self._liouvillian * (0.5 * dt))

        def propagators(step: int) -> PropagatorPair:
            return half, half

        return propagators

    def get_unitary_propagators(
        self,
        dt: float,
        start_time: float = 0.0,
        subdiv_limit: int | None = config.DEFAULT_SUBDIV_LIMIT,
        liouvillian_epsrel: float = config.DEFAULT_LIOUVILLIAN_EPSREL,
    ) -> Callable[[int], PropagatorPair]:
        """``propagators(step) -> (first_half, second_half)`` in Hilbert space.

        Both halves are U = expm(-i H dt/2), (d, d): the closed-system
        evolution over half a step, without the Lindblad terms. The arguments
        are those of :meth:`get_propagators`; ``start_time``, ``subdiv_limit``
        and ``liouvillian_epsrel`` do not change a time-independent result.
        """
        dt = check.positive_number(dt, "dt")
        half = scipy.linalg.expm(self._hamiltonian * (-0.5j * dt))

        def propagators(step: int) -> PropagatorPair:
            return half, half

        return propagators


def _evaluate_checked(
    function: Callable, t: float, name: str, dimension: int | None, hermitian: bool
) -> default_np.ndarray:
    try:
        value = function(t)
    except Exception as error:  # noqa: BLE001 - re-raised with context
        raise ValueError(f"{name}(t) failed at t={t}: {error}") from error
    if hermitian:
        return check.hermitian_matrix(value, f"{name}({t})", dimension)
    return check.square_matrix(value, f"{name}({t})", dimension)


class TimeDependentSystem(BaseSystem):
    """System with a time-dependent Hamiltonian and Lindblad terms.

    Parameters
    ----------
    hamiltonian : callable t -> (d, d) Hermitian matrix.
    gammas : sequence of callables t -> rate >= 0 (optional).
    lindblad_operators : sequence of callables t -> (d, d) matrix.
    name, description : optional text.

    The callables are checked at t = 0 when the system is made. They are
    evaluated through ``numpy.vectorize`` with declared signatures, so they
    may be written for scalar times.
    """

    def __init__(
        self,
        hamiltonian: Callable[[float], Any],
        gammas: Sequence[Callable[[float], float]] | None = None,
        lindblad_operators: Sequence[Callable[[float], Any]] | None = None,
        name: str | None = None,
        description: str | None = None,
    ):
        if not callable(hamiltonian):
            raise TypeError("hamiltonian of a TimeDependentSystem must be a callable t -> (d, d)")
        gammas, lindblad_operators = _check_lindblad_lists(gammas, lindblad_operators)
        for i, item in enumerate(list(gammas) + list(lindblad_operators)):
            if not callable(item):
                what = "gammas" if i < len(gammas) else "lindblad_operators"
                raise TypeError(f"each of {what} of a TimeDependentSystem must be a callable of t")
        dimension = _evaluate_checked(hamiltonian, 0.0, "hamiltonian", None, True).shape[0]
        for i, op in enumerate(lindblad_operators):
            _evaluate_checked(op, 0.0, f"lindblad_operators[{i}]", dimension, False)
        for i, gamma in enumerate(gammas):
            check.non_negative_number(gamma(0.0), f"gammas[{i}](0.0)")
        super().__init__(dimension, name, description)
        self._hamiltonian = default_np.vectorize(hamiltonian, signature="()->(n,n)")
        self._gammas = [default_np.vectorize(g, signature="()->()") for g in gammas]
        self._lindblad_operators = [
            default_np.vectorize(op, signature="()->(n,n)") for op in lindblad_operators
        ]
        self._raw_hamiltonian = hamiltonian
        self._raw_gammas = list(gammas)
        self._raw_lindblad_operators = list(lindblad_operators)
        self._identity = default_np.identity(dimension)

    def hamiltonian(self, t: float) -> default_np.ndarray:
        """The Hamiltonian at time ``t``, (d, d)."""
        return default_np.asarray(self._hamiltonian(t), dtype=default_np.complex128)

    @property
    def gammas(self) -> list[Callable[[Any], default_np.ndarray]]:
        """The rates as callables of time, one per Lindblad operator.

        Each is the user's function vectorised over t: a float t gives a 0-d
        array, an array of times an array of rates of the same shape.
        """
        return list(self._gammas)

    @property
    def lindblad_operators(self) -> list[Callable[[Any], default_np.ndarray]]:
        """The Lindblad operators as callables of time.

        Each is the user's function vectorised over t: a float t gives a
        (d, d) array, an array of N times an (N, d, d) array.
        """
        return list(self._lindblad_operators)

    def liouvillian(self, t: float | None = None) -> default_np.ndarray:
        """The Liouvillian at time ``t``, (d^2, d^2)."""
        if t is None:
            raise TypeError("TimeDependentSystem.liouvillian needs a time t")
        if default_np.ndim(t) != 0:
            hamiltonian = self.hamiltonian(t)
            if hamiltonian.shape != (self.dimension, self.dimension):
                raise ValueError(
                    f"hamiltonian({t}) returned shape {hamiltonian.shape}, "
                    f"expected {(self.dimension, self.dimension)}"
                )
            generator = -1j * commutator(hamiltonian)
            for gamma, op in zip(self._gammas, self._lindblad_operators):
                rate = float(gamma(t))
                if rate < 0:
                    raise ValueError(f"a Lindblad rate is negative at t={t}: {rate}")
                generator = generator + rate * lindblad_dissipator(op(t))
            return generator
        return self._scalar_liouvillian(float(t))

    def _scalar_liouvillian(self, t: float) -> default_np.ndarray:
        """L(t) for one float t, calling the user's functions directly.

        The quadratures evaluate L dozens of times per half step; this path
        builds the same superoperators as ``commutator`` and
        ``lindblad_dissipator`` without their per-call checks.
        """
        d = self.dimension
        identity = self._identity
        hamiltonian = default_np.asarray(self._raw_hamiltonian(t), dtype=complex)
        if hamiltonian.shape != (d, d):
            raise ValueError(
                f"hamiltonian({t}) returned shape {hamiltonian.shape}, expected {(d, d)}"
            )
        generator = -1j * (
            default_np.kron(hamiltonian, identity) - default_np.kron(identity, hamiltonian.T)
        )
        for gamma, op in zip(self._raw_gammas, self._raw_lindblad_operators):
            rate = float(gamma(t))
            if rate < 0:
                raise ValueError(f"a Lindblad rate is negative at t={t}: {rate}")
            if rate == 0.0:
                continue
            a = default_np.asarray(op(t), dtype=complex)
            if a.shape != (d, d):
                raise ValueError(
                    f"a Lindblad operator at t={t} has shape {a.shape}, expected {(d, d)}"
                )
            ada = a.conj().T @ a
            generator = generator + rate * (
                default_np.kron(a, a.conj())
                - 0.5 * (default_np.kron(ada, identity) + default_np.kron(identity, ada.T))
            )
        return generator

    def _half_step(
        self, t0: float, t1: float, subdiv_limit: int | None, epsrel: float
    ) -> default_np.ndarray:
        if subdiv_limit is None:
            integral = self.liouvillian(0.5 * (t0 + t1)) * (t1 - t0)
        else:
            integral, _ = scipy.integrate.quad_vec(
                self.liouvillian, t0, t1, epsrel=epsrel, limit=subdiv_limit
            )
        return scipy.linalg.expm(integral)

    def get_propagators(
        self,
        dt: float,
        start_time: float = 0.0,
        subdiv_limit: int | None = config.DEFAULT_SUBDIV_LIMIT,
        liouvillian_epsrel: float = config.DEFAULT_LIOUVILLIAN_EPSREL,
    ) -> Callable[[int], PropagatorPair]:
        """``propagators(step) -> (first_half, second_half)``.

        Each half-step propagator is expm of the integral of L(t) over the
        half step (``scipy.integrate.quad_vec`` with ``subdiv_limit`` and
        ``liouvillian_epsrel``), or of L at the half step's midpoint times
        dt/2 when ``subdiv_limit`` is None.
        """
        dt = check.positive_number(dt, "dt")
        start_time = check.real_number(start_time, "start_time")

        def propagators(step: int) -> PropagatorPair:
            t0 = start_time + step * dt
            first = self._half_step(t0, t0 + 0.5 * dt, subdiv_limit, liouvillian_epsrel)
            second = self._half_step(t0 + 0.5 * dt, t0 + dt, subdiv_limit, liouvillian_epsrel)
            return first, second

        return propagators
