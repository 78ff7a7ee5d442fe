"""``ParameterizedSystem``: a system whose Hamiltonian and Lindblad terms depend on
control parameters that take a value per half time step.

The parameters of a run are an array (2N, M): row 2n holds the M parameters of
the first half of step n, row 2n+1 those of its second half. The half-step
propagators are expm(L(p) dt/2), (d^2, d^2), in the row-major convention of
:mod:`nonmarkov.operators`.

The derivative of a half-step propagator with respect to parameter j is the
Fréchet derivative of the exponential, exact, computed with the block-matrix
identity

    expm([[X, E], [0, X]]) = [[expm(X), D expm(X)[E]], [0, expm(X)]],

all M directions in one exponential of size (M + 1) d^2 and all half steps in one
batched call. Its direction E = dL/dp_j dt/2 is exact when the user gives
``propagator_derivatives``; otherwise dL/dp_j is a fourth-order central
difference of the user's functions (exact for any dependence that is a
polynomial of degree <= 4 in each parameter, such as the usual linear controls;
relative error ~1e-12 for smooth ones).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from typing import Any

import numpy as default_np
import scipy.linalg

from .. import validation as check
from ..validation import HERMITICITY_TOLERANCE
from . import guards
from .system import BaseSystem, PropagatorPair, check_lindblad_lists, lindblad_generator

#: Relative step of the central differences of the user's functions.
DIFFERENCE_STEP = 1e-3

PropagatorDerivatives = tuple[list[default_np.ndarray], list[default_np.ndarray]]


def _number_of_parameters(hamiltonian: Callable) -> int:
    """The positional parameters of ``hamiltonian``, else a TypeError that says why."""
    try:
        signature = inspect.signature(hamiltonian)
    except (TypeError, ValueError) as error:
        raise TypeError(
            "the hamiltonian of a ParameterizedSystem must be a Python function of its "
            "parameters, hamiltonian(p_1, ..., p_M) -> (d, d)"
        ) from error
    kinds = [parameter.kind for parameter in signature.parameters.values()]
    if inspect.Parameter.VAR_POSITIONAL in kinds:
        raise TypeError(
            "the hamiltonian of a ParameterizedSystem must name its parameters "
            "(def hamiltonian(x, z): ...), not take *args: their number is read from it"
        )
    positional = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    count = sum(kind in positional for kind in kinds)
    if count == 0:
        raise TypeError("the hamiltonian of a ParameterizedSystem must take >= 1 parameter")
    return count


class ParameterizedSystem(BaseSystem):
    """A system H(p), gamma_k(p), A_k(p) of M real control parameters p.

    Parameters
    ----------
    hamiltonian : callable ``hamiltonian(p_1, ..., p_M)`` -> (d, d) Hermitian
        matrix; M is the number of its positional parameters.
    gammas : optional list of callables ``gamma_k(p_1, ..., p_M)`` -> rate >= 0.
    lindblad_operators : optional list of callables ``A_k(p_1, ..., p_M)`` -> (d, d).
    propagator_derivatives : optional callable ``(dt, p)`` -> list of M (d^2, d^2)
        matrices, the derivatives of the half-step propagator expm(L(p) dt/2) with
        respect to each parameter; when None they are computed (module docstring).
    name, description : optional text.

    The functions are checked at p = (0.5, ..., 0.5) when the system is made,
    and every value they return during a run is checked where it is used.
    """

    def __init__(
        self,
        hamiltonian: Callable[..., Any],
        gammas: Sequence[Callable[..., float]] | None = None,
        lindblad_operators: Sequence[Callable[..., Any]] | None = None,
        propagator_derivatives: Callable[[float, Any], Sequence[Any]] | None = None,
        name: str | None = None,
        description: str | None = None,
    ):
        if not callable(hamiltonian):
            raise TypeError(
                "hamiltonian of a ParameterizedSystem must be a callable "
                "hamiltonian(p_1, ..., p_M) -> (d, d)"
            )
        count = _number_of_parameters(hamiltonian)
        gammas, lindblad_operators = check_lindblad_lists(
            gammas,
            lindblad_operators,
            f"of a ParameterizedSystem must be a callable of the {count} parameters",
        )
        if propagator_derivatives is not None and not callable(propagator_derivatives):
            raise TypeError(
                "propagator_derivatives must be None or a callable (dt, parameters) -> "
                "list of M (d^2, d^2) matrices"
            )
        trial = (0.5,) * count
        label = f"hamiltonian{trial}" if count > 1 else "hamiltonian(0.5)"
        value = guards.call(hamiltonian, label, *trial)
        dimension = check.hermitian_matrix(value, label).shape[0]
        super().__init__(dimension, name, description)
        self._number_of_parameters = count
        self._hamiltonian = hamiltonian
        self._gammas = list(gammas)
        self._lindblad_operators = list(lindblad_operators)
        self._propagator_derivatives = propagator_derivatives
        self.liouvillian(*trial)

    @property
    def number_of_parameters(self) -> int:
        """M, the number of control parameters."""
        return self._number_of_parameters

    @property
    def hamiltonian(self) -> Callable[..., Any]:
        """The Hamiltonian as the user's callable of the parameters."""
        return self._hamiltonian

    @property
    def gammas(self) -> list[Callable[..., float]]:
        """The rates as the user's callables of the parameters."""
        return list(self._gammas)

    @property
    def lindblad_operators(self) -> list[Callable[..., Any]]:
        """The Lindblad operators as the user's callables of the parameters."""
        return list(self._lindblad_operators)

    def liouvillian(self, *parameters: float) -> default_np.ndarray:  # type: ignore[override]
        """L(p), (d^2, d^2), at the M parameters ``parameters``."""
        if len(parameters) != self._number_of_parameters:
            raise TypeError(
                f"liouvillian takes the system's {self._number_of_parameters} parameters; "
                f"got {len(parameters)}"
            )
        return self.liouvillians(default_np.asarray([parameters], dtype=float))[0]

    def liouvillians(self, rows: default_np.ndarray, rates: bool = True) -> default_np.ndarray:
        """L(p_r) for every row of ``rows`` (R, M), (R, d^2, d^2): the user's functions
        called once per row, the superoperators built for all rows at once; every
        value checked (finite, H Hermitian, rates real and, if ``rates``, >= 0), an
        error names the function and its parameters. (``rates=False`` for the shifted
        rows of a finite difference: a rate that vanishes at a parameter, such as
        gamma(p) = c p at p = 0, is negative a small step away; only its slope is used.)"""
        labels = ["(" + ", ".join(repr(float(p)) for p in row) + ")" for row in rows]
        arguments = [tuple(float(p) for p in row) for row in rows]
        h = self._matrices(self._hamiltonian, "hamiltonian", labels, arguments, True)
        terms = []
        for i, (gamma, op) in enumerate(zip(self._gammas, self._lindblad_operators)):
            name = f"gammas[{i}]"
            values = [guards.call(gamma, name + label, *a) for label, a in zip(labels, arguments)]
            rate = guards.real_array(values, name + "{}", labels, non_negative=rates)
            a = self._matrices(op, f"lindblad_operators[{i}]", labels, arguments, False)
            terms.append((rate, a))
        return lindblad_generator(h, terms)

    def _matrices(
        self, function: Callable, name: str, labels: list[str], arguments: list, hermitian: bool
    ) -> default_np.ndarray:
        """``function`` at every argument tuple, (R, d, d), checked; the first bad value
        is reported by :func:`~.guards.matrix` with its parameters."""
        d = self.dimension
        values = [guards.call(function, name + label, *a) for label, a in zip(labels, arguments)]
        try:
            array = default_np.asarray(values, dtype=complex)
        except (TypeError, ValueError):
            array = default_np.zeros(0)
        good = array.shape == (len(values), d, d) and bool(default_np.isfinite(array).all())
        if good and hermitian:
            deviation = default_np.abs(array - default_np.conj(default_np.swapaxes(array, 1, 2)))
            scale = default_np.maximum(1.0, default_np.abs(array).max(axis=(1, 2)))
            good = bool((deviation.max(axis=(1, 2)) <= HERMITICITY_TOLERANCE * scale).all())
        if not good:
            for label, value in zip(labels, values):
                guards.matrix(value, name + label, d, hermitian)
        return array

    def check_parameters(self, parameters: Any, num_steps: int | None = None) -> default_np.ndarray:
        """``parameters`` as a finite real (2N, M) float array, else a clear error.

        Two layouts are accepted: rows of half steps, (2N, M) (one row of M values
        per half step), and one sequence per parameter, (M, 2N) (e.g. the tuple
        ``(xv, yv, zv)`` of M = 3 lists over the 2N half steps), which is transposed.
        The first wins where both fit (a square (M, M) array is read as rows). A 1-D
        array of length 2N is accepted when M = 1; ``num_steps`` (N), if given, must
        match.
        """
        try:
            array = default_np.asarray(parameters)
        except (TypeError, ValueError) as error:
            raise TypeError("parameters must be a real (2N, M) array") from error
        if array.dtype.kind not in "iuf":
            raise TypeError(
                f"parameters must be a real (2N, M) array of numbers; got dtype {array.dtype}"
            )
        array = array.astype(float)
        m = self._number_of_parameters
        if array.ndim == 1 and m == 1:
            array = array.reshape(-1, 1)
        if array.ndim == 2 and array.shape[1] != m and array.shape[0] == m:
            array = array.T  # one sequence per parameter: (M, 2N)
        if array.ndim != 2 or array.shape[1] != m or array.shape[0] % 2 or not array.shape[0]:
            raise ValueError(
                f"parameters must have shape (2N, {m}) ({m} parameter(s) for each half of "
                f"each of the N time steps) or ({m}, 2N) (one sequence of 2N half-step "
                f"values per parameter); got shape {default_np.shape(parameters)}"
            )
        if num_steps is not None and array.shape[0] != 2 * num_steps:
            raise ValueError(
                f"parameters has {array.shape[0]} rows, a run of {num_steps} steps needs "
                f"2 * {num_steps} = {2 * num_steps} (one per half step)"
            )
        if not default_np.all(default_np.isfinite(array)):
            row = int(default_np.flatnonzero(~default_np.isfinite(array).all(axis=1))[0])
            raise ValueError(f"parameters must be finite; row {row} is {array[row].tolist()}")
        return array

    def _exponents(self, dt: float, parameters: default_np.ndarray) -> default_np.ndarray:
        """L(p_r) dt/2 for every row r, (2N, d^2, d^2)."""
        return self.liouvillians(parameters) * (0.5 * dt)

    def _directions(self, dt: float, parameters: default_np.ndarray) -> default_np.ndarray:
        """dL/dp_j dt/2 for every row and parameter, (2N, M, d^2, d^2), by a fourth-order
        central difference of the user's functions (all shifted rows in one call)."""
        rows, m = parameters.shape
        steps = DIFFERENCE_STEP * default_np.maximum(1.0, default_np.abs(parameters))  # (R, M)
        shifts = default_np.array([-2.0, -1.0, 1.0, 2.0])
        moved = default_np.repeat(parameters[:, None, None, :], 4, axis=2)
        moved = default_np.repeat(moved, m, axis=1)  # (R, M, 4, M)
        for j in range(m):
            moved[:, j, :, j] += shifts[None, :] * steps[:, j, None]
        values = self.liouvillians(moved.reshape(-1, m), rates=False).reshape(
            rows, m, 4, *([self.dimension**2] * 2)
        )
        weights = default_np.array([1.0, -8.0, 8.0, -1.0])
        derivative = default_np.einsum("s,rjsab->rjab", weights, values)
        return derivative / (12.0 * steps[:, :, None, None]) * (0.5 * dt)

    def _halves(self, dt: float, parameters: default_np.ndarray) -> default_np.ndarray:
        """Half-step propagators expm(L(p_r) dt/2), (2N, d^2, d^2)."""
        return _finite(scipy.linalg.expm(self._exponents(dt, parameters)), dt)

    def _halves_and_derivatives(
        self, dt: float, parameters: default_np.ndarray
    ) -> tuple[default_np.ndarray, default_np.ndarray]:
        """Half-step propagators (2N, d^2, d^2) and their derivatives (2N, M, d^2, d^2)."""
        given = self._propagator_derivatives
        if given is None:
            return _block_frechet(
                self._exponents(dt, parameters), self._directions(dt, parameters), dt
            )
        derivatives = default_np.stack([self._checked(given, dt, row) for row in parameters])
        return self._halves(dt, parameters), derivatives

    def _checked(self, given: Callable, dt: float, row: default_np.ndarray) -> default_np.ndarray:
        """The user's ``propagator_derivatives(dt, row)``, checked: (M, d^2, d^2)."""
        label = f"propagator_derivatives({dt!r}, {row.tolist()})"
        value = guards.call(given, label, dt, row)
        d2 = self.dimension**2
        m = self._number_of_parameters
        try:
            array = default_np.asarray(value, dtype=complex)
        except (TypeError, ValueError) as error:
            raise ValueError(f"{label} must return {m} ({d2}, {d2}) matrices") from error
        if array.shape != (m, d2, d2):
            raise ValueError(f"{label} returned shape {array.shape}, expected {(m, d2, d2)}")
        if not default_np.all(default_np.isfinite(array)):
            raise ValueError(f"{label} returned NaN or infinite entries")
        return array

    def get_propagators(  # type: ignore[override]
        self, dt: float, parameters: Any
    ) -> Callable[[int], PropagatorPair]:
        """``propagators(step) -> (first_half, second_half)``, expm(L(p) dt/2) at
        rows 2 step and 2 step + 1 of ``parameters`` (2N, M)."""
        dt = check.positive_number(dt, "dt")
        array = self.check_parameters(parameters)
        halves = self._halves(dt, array)

        def propagators(step: int) -> PropagatorPair:
            return halves[2 * step], halves[2 * step + 1]

        return propagators

    def get_propagator_derivatives(
        self, dt: float, parameters: Any
    ) -> Callable[[int], PropagatorDerivatives]:
        """``derivatives(step) -> (first, second)``: lists of M (d^2, d^2) derivatives of
        the step's first and second half-step propagators, one per parameter."""
        dt = check.positive_number(dt, "dt")
        array = self.check_parameters(parameters)
        _, derivatives = self._halves_and_derivatives(dt, array)

        def propagator_derivatives(step: int) -> PropagatorDerivatives:
            return list(derivatives[2 * step]), list(derivatives[2 * step + 1])

        return propagator_derivatives

    def propagators_and_derivatives(
        self, dt: float, parameters: Any
    ) -> tuple[default_np.ndarray, default_np.ndarray]:
        """Every half-step propagator (2N, d^2, d^2) and its derivatives (2N, M, d^2,
        d^2), in one pass: the arrays behind :meth:`get_propagators` and
        :meth:`get_propagator_derivatives`."""
        dt = check.positive_number(dt, "dt")
        array = self.check_parameters(parameters)
        return self._halves_and_derivatives(dt, array)

    def half_step_propagators(self, dt: float, parameters: Any) -> default_np.ndarray:
        """Every half-step propagator expm(L(p_r) dt/2), (2N, d^2, d^2), for the rows
        of ``parameters`` (2N, M)."""
        dt = check.positive_number(dt, "dt")
        return self._halves(dt, self.check_parameters(parameters))

    def halfstep_propagator_derivative(
        self, dt: float
    ) -> Callable[[Any], list[default_np.ndarray]]:
        """A function of one parameter row p (M,) giving the M derivatives (d^2, d^2)
        of expm(L(p) dt/2)."""
        dt = check.positive_number(dt, "dt")

        def derivative(row: Any) -> list[default_np.ndarray]:
            rows = default_np.repeat(default_np.asarray(row, dtype=float).reshape(1, -1), 2, axis=0)
            _, derivatives = self._halves_and_derivatives(dt, self.check_parameters(rows))
            return list(derivatives[0])

        return derivative


def _finite(propagators: default_np.ndarray, dt: float) -> default_np.ndarray:
    """``propagators`` (rows, D, D) if finite, else a ValueError naming the half step."""
    bad = ~default_np.isfinite(propagators).all(axis=tuple(range(1, propagators.ndim)))
    if default_np.any(bad):
        row = int(default_np.flatnonzero(bad)[0])
        raise ValueError(
            f"the half-step propagator of parameter row {row} (dt = {dt:g}) is not finite: "
            "the Liouvillian times dt overflows (parameters far too large for dt)"
        )
    return propagators


def _block_frechet(
    exponents: default_np.ndarray, directions: default_np.ndarray, dt: float
) -> tuple[default_np.ndarray, default_np.ndarray]:
    """expm(X_r) and its Fréchet derivatives in the directions E_rj, exact:
    X (R, D, D), E (R, M, D, D) -> (R, D, D), (R, M, D, D).

    The block matrix with X on the diagonal and E_1..E_M in the first block row
    has, in the first block row of its exponential, expm(X) and the M derivatives
    (the directions do not mix: no block below the first row is off-diagonal).
    """
    rows, m, size, _ = directions.shape
    block = default_np.zeros((rows, (m + 1) * size, (m + 1) * size), dtype=complex)
    for j in range(m + 1):
        block[:, j * size : (j + 1) * size, j * size : (j + 1) * size] = exponents
    for j in range(m):
        block[:, :size, (j + 1) * size : (j + 2) * size] = directions[:, j]
    top = _finite(scipy.linalg.expm(block), dt)[:, :size, :]
    halves = top[:, :, :size]
    derivatives = top[:, :, size:].reshape(rows, size, m, size).transpose(0, 2, 1, 3)
    return default_np.ascontiguousarray(halves), default_np.ascontiguousarray(derivatives)
