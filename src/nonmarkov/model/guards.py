"""Guards around the user's callables: every value they return is checked where it is used.

A correlation function, spectral density, time-dependent Hamiltonian, rate or
Lindblad operator is evaluated many times inside quadratures and propagators. A
value that is not finite, complex where a real one is required, negative where
a rate or spectral density must not be, or an exception raised inside the
callable becomes a ``ValueError`` that names the function and the argument
(tau, w or t) where it happened. No NaN ever reaches a quadrature (QUADPACK can
crash the interpreter on NaN integrands).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as default_np

from ..validation import HERMITICITY_TOLERANCE, from_qutip


def call(function: Callable[..., Any], label: str, *arguments: Any) -> Any:
    """``function(*arguments)``; an exception inside becomes a ValueError naming ``label``."""
    try:
        return function(*arguments)
    except Exception as error:  # re-raised with the place it happened
        raise ValueError(f"{label} raised {type(error).__name__}: {error}") from error


def complex_value(value: Any, label: str) -> complex:
    """A finite complex number, else a ValueError naming ``label``."""
    try:
        number = complex(value)
    except (TypeError, ValueError) as error:
        raise ValueError(f"{label} must return a number; got {value!r}") from error
    if not (math.isfinite(number.real) and math.isfinite(number.imag)):
        raise ValueError(f"{label} returned {number}, which is not finite")
    return number


def real_value(value: Any, label: str, non_negative: bool = False) -> float:
    """A finite real number (>= 0 if ``non_negative``), else a ValueError naming ``label``."""
    number = complex_value(value, label)
    if number.imag != 0.0:
        raise ValueError(f"{label} must be real; got {number}")
    if non_negative and number.real < 0.0:
        raise ValueError(f"{label} must be >= 0; got {number.real}")
    return number.real


def real_array(values: Any, label: str, arguments: Any, non_negative: bool = False):
    """``values`` as a finite real (>= 0) float array; a ValueError names the first bad
    argument of ``arguments`` (broadcast with ``values``) otherwise. ``label`` has one
    ``{}`` for the argument."""
    try:
        array = default_np.asarray(values, dtype=complex)
    except (TypeError, ValueError) as error:
        raise ValueError(f"{label.format('...')} must return numbers; got {values!r}") from error
    bad = ~default_np.isfinite(array) | (array.imag != 0.0)
    if non_negative:
        bad = bad | (array.real < 0.0)
    if default_np.any(bad):
        flags, where = default_np.broadcast_arrays(bad, default_np.asarray(arguments))
        values_b = default_np.broadcast_to(array, flags.shape)
        index = int(default_np.flatnonzero(flags.reshape(-1))[0])
        value = values_b.reshape(-1)[index]
        value = value.real if value.imag == 0.0 else value
        need = "real, finite and >= 0" if non_negative else "real and finite"
        raise ValueError(f"{label.format(where.reshape(-1)[index])} = {value} must be {need}")
    return array.real


def matrix(value: Any, label: str, dimension: int, hermitian: bool) -> default_np.ndarray:
    """A finite complex (d, d) array (Hermitian if asked), else a ValueError naming ``label``.

    ``value`` may be a ``qutip.Qobj`` operator (:func:`nonmarkov.validation.from_qutip`).
    """
    value = from_qutip(value, label)
    try:
        array = default_np.asarray(value, dtype=complex)
    except (TypeError, ValueError) as error:
        raise ValueError(f"{label} must return a ({dimension}, {dimension}) matrix") from error
    if array.shape != (dimension, dimension):
        raise ValueError(f"{label} returned shape {array.shape}, expected {(dimension, dimension)}")
    largest = float(default_np.abs(array).max())
    if not largest < math.inf:  # NaN compares False too
        raise ValueError(f"{label} returned NaN or infinite entries")
    if hermitian:
        deviation = float(default_np.abs(array - array.conj().T).max())
        if deviation > HERMITICITY_TOLERANCE * max(1.0, largest):
            raise ValueError(f"{label} is not Hermitian: max |H - H^dagger| = {deviation:.3g}")
    return array
