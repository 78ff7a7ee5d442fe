"""Open-system models: a Hamiltonian plus optional Lindblad terms.

``System`` is time independent, ``TimeDependentSystem`` takes callables of
time; ``TimeDependentSystemWithField`` also depends on a complex field shared
by the systems of a ``MeanFieldSystem``. They give the Liouvillian (d^2, d^2)
in the row-major convention of :mod:`nonmarkov.operators` and the half-step
propagators that the algorithms interleave with the bath influence (symmetric
Trotter splitting).

Generator: L rho = -i [H, rho] + sum_k gamma_k (A_k rho A_k^dag - 1/2 {A_k^dag A_k, rho}).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as default_np
import scipy.integrate
import scipy.linalg

from .. import config
from .. import validation as check
from ..cost import affordable_run
from . import guards
from .api import BaseAPIClass

PropagatorPair = tuple[default_np.ndarray, default_np.ndarray]


class BaseSystem(BaseAPIClass):
    """Common interface of the system classes (dimension, name, propagators).

    ``BaseSystem(dimension, name=None, description=None)``: ``dimension`` is the
    Hilbert-space dimension d (a positive whole number); the subclasses give the
    Liouvillian and the propagators.
    """

    _default_name = "Unnamed System"

    def __init__(
        self, dimension: int, name: str | None = None, description: str | None = None
    ) -> None:
        self._dimension = check.positive_integer(dimension, "dimension")
        # its Liouvillians (d^2, d^2) must fit: the library's one cost rule
        affordable_run(0, self._dimension, 0, type(self).__name__)
        super().__init__(name, description)

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
        epsrel: float = config.DEFAULT_LIOUVILLIAN_EPSREL,
    ) -> Callable[[int], PropagatorPair]:
        """Return ``propagators(step) -> (first_half, second_half)``.

        ``first_half`` propagates from t_n = start_time + step*dt to
        t_n + dt/2, ``second_half`` from t_n + dt/2 to t_n + dt; both are
        (d^2, d^2) NumPy arrays.
        """
        raise NotImplementedError

    def __str__(self) -> str:
        return f"{type(self).__name__} {self.name!r} (dimension {self.dimension})"


def _as_list(value: Any, name: str, what: str) -> list:
    """``value`` (None, a list or a tuple) as a list, else a TypeError that says so."""
    if value is None:
        return []
    if isinstance(value, (str, bytes, default_np.ndarray)) or not isinstance(value, Sequence):
        raise TypeError(f"{name} must be a list of {what}, one per Lindblad term; got {value!r}")
    return list(value)


def check_lindblad_lists(
    gammas: Any, lindblad_operators: Any, callables: str | None = None
) -> tuple[list, list]:
    """``gammas`` (rates, 1/time) and ``lindblad_operators`` ((d, d) matrices), each
    None or a list or tuple, as two lists of the same length; a ``TypeError`` or
    ``ValueError`` that names the argument. ``callables``: the items must be
    callables, of what the text says (``'t of a TimeDependentSystem'``), else a
    ``TypeError``; their values are checked by the caller."""
    gammas = _as_list(gammas, "gammas", "rates")
    lindblad_operators = _as_list(lindblad_operators, "lindblad_operators", "(d, d) matrices")
    if len(gammas) != len(lindblad_operators):
        raise ValueError(
            f"gammas and lindblad_operators must have the same length; got {len(gammas)} "
            f"gammas and {len(lindblad_operators)} lindblad_operators"
        )
    if callables is not None:
        for what, items in (("gammas", gammas), ("lindblad_operators", lindblad_operators)):
            if not all(callable(item) for item in items):
                raise TypeError(f"each of {what} {callables}")
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
        gammas, lindblad_operators = check_lindblad_lists(gammas, lindblad_operators)
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
        return lindblad_generator(
            self._hamiltonian, list(zip(self._gammas, self._lindblad_operators))
        )

    def liouvillian(self, t: float | None = None) -> default_np.ndarray:
        """The Liouvillian, (d^2, d^2); ``t`` is ignored."""
        return self._liouvillian.copy()

    def get_propagators(
        self,
        dt: float,
        start_time: float = 0.0,
        subdiv_limit: int | None = config.DEFAULT_SUBDIV_LIMIT,
        epsrel: float = config.DEFAULT_LIOUVILLIAN_EPSREL,
    ) -> Callable[[int], PropagatorPair]:
        """``propagators(step) -> (first_half, second_half)``, both expm(L dt/2)."""
        dt = check.positive_number(dt, "dt")
        half = _finite_propagator(scipy.linalg.expm(self._liouvillian * (0.5 * dt)), 0.0, dt)

        def propagators(step: int) -> PropagatorPair:
            return half, half

        return propagators

    def get_unitary_propagators(
        self,
        dt: float,
        start_time: float = 0.0,
        subdiv_limit: int | None = config.DEFAULT_SUBDIV_LIMIT,
        epsrel: float = config.DEFAULT_LIOUVILLIAN_EPSREL,
    ) -> Callable[[int], PropagatorPair]:
        """``propagators(step) -> (first_half, second_half)`` in Hilbert space.

        Both halves are U = expm(-i H dt/2), (d, d): the closed-system
        evolution over half a step, without the Lindblad terms. The arguments
        are those of :meth:`get_propagators`; ``start_time``, ``subdiv_limit``
        and ``epsrel`` do not change a time-independent result.
        """
        dt = check.positive_number(dt, "dt")
        half = scipy.linalg.expm(self._hamiltonian * (-0.5j * dt))

        def propagators(step: int) -> PropagatorPair:
            return half, half

        return propagators


def _as_arrays(function: Callable[..., Any], name: str) -> Callable[..., Any]:
    """``function`` with a returned ``qutip.Qobj`` turned into its matrix (for
    ``numpy.vectorize``, which cannot stack Qobj values)."""

    def converted(*arguments: Any) -> Any:
        return check.from_qutip(function(*arguments), name)

    return converted


def _evaluate_checked(
    function: Callable, t: float, name: str, dimension: int | None, hermitian: bool
) -> default_np.ndarray:
    try:
        value = function(t)
    except Exception as error:  # re-raised with context
        raise ValueError(f"{name}(t) failed at t={t}: {error}") from error
    if hermitian:
        return check.hermitian_matrix(value, f"{name}({t})", dimension)
    return check.square_matrix(value, f"{name}({t})", dimension)


def _time_terms(
    gammas: list[Callable], lindblad_operators: list[Callable], dimension: int
) -> tuple[list[Any], list[Any]]:
    """The rates and Lindblad operators as functions of t, checked at t = 0 (rates
    >= 0, operators (d, d)) and vectorised over t (``numpy.vectorize``)."""
    for i, op in enumerate(lindblad_operators):
        _evaluate_checked(op, 0.0, f"lindblad_operators[{i}]", dimension, False)
    for i, gamma in enumerate(gammas):
        check.non_negative_number(gamma(0.0), f"gammas[{i}](0.0)")
    rates = [default_np.vectorize(g, signature="()->()") for g in gammas]
    operators = [
        default_np.vectorize(_as_arrays(op, "lindblad_operators"), signature="()->(n,n)")
        for op in lindblad_operators
    ]
    return rates, operators


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
        gammas, lindblad_operators = check_lindblad_lists(
            gammas, lindblad_operators, "of a TimeDependentSystem must be a callable of t"
        )
        dimension = _evaluate_checked(hamiltonian, 0.0, "hamiltonian", None, True).shape[0]
        self._gammas, self._lindblad_operators = _time_terms(gammas, lindblad_operators, dimension)
        super().__init__(dimension, name, description)
        self._hamiltonian = default_np.vectorize(
            _as_arrays(hamiltonian, "hamiltonian"), signature="()->(n,n)"
        )
        self._raw_hamiltonian = hamiltonian
        self._raw_gammas = gammas
        self._raw_lindblad_operators = lindblad_operators
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

    def liouvillian(self, t: Any = None) -> default_np.ndarray:
        """The Liouvillian at time ``t``, (d^2, d^2); at an array of times, one per
        time, shape t.shape + (d^2, d^2)."""
        if t is None:
            raise TypeError("TimeDependentSystem.liouvillian needs a time t")
        times = default_np.asarray(t, dtype=float)
        if times.ndim == 0:
            return self._scalar_liouvillian(float(times))
        size = self.dimension**2
        generators = [self._scalar_liouvillian(float(time)) for time in times.reshape(-1)]
        return default_np.asarray(generators).reshape(times.shape + (size, size))

    def _scalar_liouvillian(self, t: float) -> default_np.ndarray:
        """L(t) for one float t, calling the user's functions directly."""
        label = f"hamiltonian({t!r})"
        return _fast_liouvillian(
            guards.call(self._raw_hamiltonian, label, t),
            self._raw_gammas,
            self._raw_lindblad_operators,
            t,
            self.dimension,
            label,
        )

    def get_propagators(
        self,
        dt: float,
        start_time: float = 0.0,
        subdiv_limit: int | None = config.DEFAULT_SUBDIV_LIMIT,
        epsrel: float = config.DEFAULT_LIOUVILLIAN_EPSREL,
    ) -> Callable[[int], PropagatorPair]:
        """``propagators(step) -> (first_half, second_half)``.

        Each half-step propagator is expm of the integral of L(t) over the
        half step (``scipy.integrate.quad_vec`` with ``subdiv_limit`` and
        ``epsrel``), or of L at the half step's midpoint times
        dt/2 when ``subdiv_limit`` is None.
        """
        dt = check.positive_number(dt, "dt")
        start_time = check.real_number(start_time, "start_time")

        def propagators(step: int) -> PropagatorPair:
            return _half_steps(self.liouvillian, start_time + step * dt, dt, subdiv_limit, epsrel)

        return propagators


def _fast_liouvillian(
    hamiltonian: Any,
    gammas: Sequence[Callable],
    lindblad_operators: Sequence[Callable],
    t: float,
    d: int,
    label: str,
) -> default_np.ndarray:
    """L at time ``t`` from H(t) (the value, named ``label``) and the user's rate and
    operator functions, each value checked (:mod:`.guards`: finite, H Hermitian,
    rates real and >= 0).

    The quadratures evaluate L dozens of times per half step; this builds the
    same superoperators as ``commutator`` and ``lindblad_dissipator`` without
    their input conversions.
    """
    hamiltonian = guards.matrix(hamiltonian, label, d, hermitian=True)
    terms = []
    for i, (gamma, op) in enumerate(zip(gammas, lindblad_operators)):
        rate_label = f"gammas[{i}]({t!r})"
        rate = guards.real_value(guards.call(gamma, rate_label, t), rate_label, non_negative=True)
        if rate == 0.0:
            continue
        op_label = f"lindblad_operators[{i}]({t!r})"
        a = guards.matrix(guards.call(op, op_label, t), op_label, d, hermitian=False)
        terms.append((rate, a))
    return lindblad_generator(hamiltonian, terms)


def lindblad_generator(
    hamiltonian: default_np.ndarray, terms: Sequence[tuple[Any, default_np.ndarray]]
) -> default_np.ndarray:
    """The Liouvillian -i[H, .] + sum_k gamma_k (A_k . A_k^dag - 1/2 {A_k^dag A_k, .})
    of checked arrays: H (d, d) or a stack (R, d, d), ``terms`` (gamma_k, A_k) pairs
    with gamma_k a number or (R,) and A_k (d, d) or (R, d, d); returns (d^2, d^2) or
    (R, d^2, d^2) (row-major vec). Each Kronecker product is one broadcast product
    (``numpy.kron`` costs ~10x more per call at these sizes, and the quadratures call
    this per node)."""
    identity = default_np.identity(hamiltonian.shape[-1])
    generator = -1j * (
        _kron(hamiltonian, identity) - _kron(identity, default_np.swapaxes(hamiltonian, -1, -2))
    )
    for rate, a in terms:
        ada = default_np.conj(default_np.swapaxes(a, -1, -2)) @ a
        generator = generator + default_np.asarray(rate)[..., None, None] * (
            _kron(a, a.conj())
            - 0.5 * (_kron(ada, identity) + _kron(identity, default_np.swapaxes(ada, -1, -2)))
        )
    return generator


def _kron(a: default_np.ndarray, b: default_np.ndarray) -> default_np.ndarray:
    """kron(a_r, b_r) for matrices (n, n), (m, m) or stacks of them (R, ., .): (n m, n m)
    or (R, n m, n m), one broadcast product."""
    n, m = a.shape[-1], b.shape[-1]
    product = a[..., :, None, :, None] * b[..., None, :, None, :]
    return product.reshape(product.shape[:-4] + (n * m, n * m))


def _half_steps(
    liouvillian: Callable[[float], Any],
    t0: float,
    dt: float,
    subdiv_limit: int | None,
    epsrel: float,
) -> PropagatorPair:
    """The half-step propagators of the step [t0, t0 + dt] of the generator
    ``liouvillian(t)``: over [t0, t0 + dt/2] and [t0 + dt/2, t0 + dt]."""
    first = _half_step(liouvillian, t0, t0 + 0.5 * dt, subdiv_limit, epsrel)
    second = _half_step(liouvillian, t0 + 0.5 * dt, t0 + dt, subdiv_limit, epsrel)
    return first, second


def _half_step(
    liouvillian: Callable[[float], Any],
    t0: float,
    t1: float,
    subdiv_limit: int | None,
    epsrel: float,
) -> default_np.ndarray:
    """expm of the integral of L(t) over [t0, t1] (``quad_vec``), or of L at the
    midpoint times (t1 - t0) when ``subdiv_limit`` is None."""
    if subdiv_limit is None:
        integral = liouvillian(0.5 * (t0 + t1)) * (t1 - t0)
    else:
        integral, _ = scipy.integrate.quad_vec(
            liouvillian, t0, t1, epsrel=epsrel, limit=subdiv_limit
        )
    return _finite_propagator(scipy.linalg.expm(integral), t0, 2.0 * (t1 - t0))


def _finite_propagator(propagator: default_np.ndarray, t0: float, dt: float) -> default_np.ndarray:
    """``propagator`` (a half step from ``t0``) if finite, else a ValueError that says why."""
    if not default_np.all(default_np.isfinite(propagator)):
        raise ValueError(
            f"the system's half-step propagator from t = {t0:g} (dt = {dt:g}) is not finite: "
            "the Liouvillian times dt overflows (rates or energies far too large for dt)"
        )
    return propagator


class TimeDependentSystemWithField(BaseSystem):
    """A system whose Hamiltonian depends on time and on a complex field a(t).

    One member of a :class:`MeanFieldSystem`; its Liouvillian is that of
    :class:`TimeDependentSystem` with H(t, a(t)) (the Lindblad terms depend on
    time only). Within a time step [t_k, t_k + dt] the field is taken linear,
    a(t) = a_k + a'_k (t - t_k), from its value and derivative at the step's
    start.

    Parameters
    ----------
    hamiltonian : callable (t, field) -> (d, d) Hermitian matrix.
    gammas : sequence of callables t -> rate >= 0 (optional).
    lindblad_operators : sequence of callables t -> (d, d) matrix.
    name, description : optional text.

    The callables are checked at t = 0 (the Hamiltonian at the fields 0 and
    1 + 1j) when the system is made.
    """

    def __init__(
        self,
        hamiltonian: Callable[[float, complex], Any],
        gammas: Sequence[Callable[[float], float]] | None = None,
        lindblad_operators: Sequence[Callable[[float], Any]] | None = None,
        name: str | None = None,
        description: str | None = None,
    ):
        if not callable(hamiltonian):
            raise TypeError(
                "hamiltonian of a TimeDependentSystemWithField must be a callable "
                "(t, field) -> (d, d)"
            )
        gammas, lindblad_operators = check_lindblad_lists(
            gammas,
            lindblad_operators,
            "of a TimeDependentSystemWithField must be a callable of t",
        )
        dimension = None
        for field in (0.0, 1.0 + 1.0j):
            value = _evaluate_checked(
                lambda t, field=field: hamiltonian(t, field), 0.0, "hamiltonian", dimension, True
            )
            dimension = value.shape[0]
        if dimension is None:  # for the type checker: the loop ran
            raise ValueError("hamiltonian gave no matrix")
        self._gammas, self._lindblad_operators = _time_terms(gammas, lindblad_operators, dimension)
        super().__init__(dimension, name, description)
        self._raw_hamiltonian = hamiltonian
        self._hamiltonian = default_np.vectorize(
            _as_arrays(hamiltonian, "hamiltonian"), signature="(),()->(n,n)"
        )
        self._raw_gammas = gammas
        self._raw_lindblad_operators = lindblad_operators

    def hamiltonian(self, t: Any, field: Any) -> default_np.ndarray:
        """H(t, field), (d, d) (vectorised over t and field)."""
        return default_np.asarray(self._hamiltonian(t, field), dtype=default_np.complex128)

    @property
    def gammas(self) -> list[Callable[[Any], default_np.ndarray]]:
        """The rates as callables of time (vectorised over t)."""
        return list(self._gammas)

    @property
    def lindblad_operators(self) -> list[Callable[[Any], default_np.ndarray]]:
        """The Lindblad operators as callables of time (vectorised over t)."""
        return list(self._lindblad_operators)

    def liouvillian(  # type: ignore[override]
        self, t0: float, t: float, field: complex, field_derivative: complex
    ) -> default_np.ndarray:
        """L at time ``t`` >= ``t0`` with the field linear from its value ``field``
        and derivative ``field_derivative`` at ``t0``; (d^2, d^2)."""
        value = complex(field) + complex(field_derivative) * (float(t) - float(t0))
        label = f"hamiltonian({float(t)!r}, {value})"
        return _fast_liouvillian(
            guards.call(self._raw_hamiltonian, label, float(t), value),
            self._raw_gammas,
            self._raw_lindblad_operators,
            float(t),
            self.dimension,
            label,
        )

    def get_propagators(  # type: ignore[override]
        self,
        dt: float,
        start_time: float = 0.0,
        subdiv_limit: int | None = config.DEFAULT_SUBDIV_LIMIT,
        epsrel: float = config.DEFAULT_LIOUVILLIAN_EPSREL,
    ) -> Callable[[int, complex, complex], PropagatorPair]:
        """``propagators(step, field, field_derivative) -> (first_half, second_half)``:
        the half-step propagators (d^2, d^2) of step k with the field linear from
        ``field`` and ``field_derivative`` at t_k (as for
        :meth:`TimeDependentSystem.get_propagators`)."""
        dt = check.positive_number(dt, "dt")
        start_time = check.real_number(start_time, "start_time")

        def propagators(step: int, field: complex, field_derivative: complex) -> PropagatorPair:
            t0 = start_time + step * dt

            def liouvillian(t: float) -> default_np.ndarray:
                return self.liouvillian(t0, t, field, field_derivative)

            return _half_steps(liouvillian, t0, dt, subdiv_limit, epsrel)

        return propagators


class MeanFieldSystem:
    """Systems that share one complex field a(t) with da/dt = field_eom(t, states, a).

    Parameters
    ----------
    system_list : one or more :class:`TimeDependentSystemWithField` (dimensions
        may differ).
    field_eom : callable (t, [rho_1, ..., rho_n], field) -> complex, the
        derivative of the field; rho_i (d_i, d_i).
    name, description : optional text.

    ``field_eom`` is checked at t = 0 with maximally mixed states and the field
    0: it must return a finite complex scalar.
    """

    def __init__(
        self,
        system_list: Sequence[TimeDependentSystemWithField],
        field_eom: Callable[[float, list[default_np.ndarray], complex], complex],
        name: str | None = None,
        description: str | None = None,
    ):
        if isinstance(system_list, TimeDependentSystemWithField) or not isinstance(
            system_list, Sequence
        ):
            raise TypeError("system_list must be a list of TimeDependentSystemWithField")
        systems = list(system_list)
        if not systems:
            raise ValueError("system_list must hold at least one system")
        for i, system in enumerate(systems):
            if not isinstance(system, TimeDependentSystemWithField):
                raise TypeError(
                    f"system_list[{i}] must be a TimeDependentSystemWithField; "
                    f"got {type(system).__name__}"
                )
        if not callable(field_eom):
            raise TypeError("field_eom must be a callable (t, states, field) -> complex")
        self._system_list = systems
        self._field_eom = field_eom
        self.name = "Unnamed MeanFieldSystem" if name is None else str(name)
        self.description = "" if description is None else str(description)
        mixed = [default_np.identity(s.dimension, dtype=complex) / s.dimension for s in systems]
        self.field_derivative(0.0, mixed, 0.0j)

    @property
    def system_list(self) -> list[TimeDependentSystemWithField]:
        """The systems that share the field."""
        return list(self._system_list)

    @property
    def field_eom(self) -> Callable[[float, list[default_np.ndarray], complex], complex]:
        """The field's equation of motion, (t, states, field) -> da/dt."""
        return self._field_eom

    def field_derivative(self, t: float, states: Sequence[Any], field: complex) -> complex:
        """da/dt from ``field_eom``, checked to be a finite complex scalar."""
        copies = [default_np.array(state, dtype=complex) for state in states]  # ours stay ours
        try:
            value = self._field_eom(t, copies, field)
        except Exception as error:  # re-raised with context
            raise ValueError(f"field_eom failed at t={t}: {error}") from error
        array = default_np.asarray(value)
        if array.shape != () or array.dtype.kind not in "iufc":
            raise ValueError(
                f"field_eom must return a complex scalar; at t={t} it returned {value!r}"
            )
        result = complex(array)
        if not (math.isfinite(result.real) and math.isfinite(result.imag)):
            raise ValueError(f"field_eom returned a non-finite value at t={t}: {result}")
        return result
