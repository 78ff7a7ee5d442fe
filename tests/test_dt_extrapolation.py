"""Extrapolation in dt of dynamics computed from process tensors.

A process tensor is built once per step length (dt, dt/2, dt/4) and reused for
the dynamics of two systems; Richardson extrapolation of each system's
dynamics (``nonmarkov.methods.extrapolation.richardson``) must see the
splitting's order and remove it. The model: an independent-boson spin (S =
sz/2, ohmic bath at T = 1) with a time-dependent splitting E(t), exact with
the system phase exp(-i int (E_0 - E_1) dt'); the Liouvillian sampled at the
midpoints of the half steps (``subdiv_limit=None``) has an error of second
order in dt. Runs on the session backend (``--backend numpy|jax``).

The splitting's error is even in dt here, so a second (Romberg) stage over
three levels (``next_order=4``) cancels the dt^4 term as well.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

import nonmarkov as nm
from models import independent_boson, independent_boson_exact, spectral_density
from nonmarkov.methods.extrapolation import NEXT_ORDER, SPLITTING_ORDER, richardson

END_TIME = 1.6
COARSE_DT = 0.2
#: (offset, amplitude, frequency) of E(t) = offset + amplitude sin(frequency t)
SPLITTINGS = ((0.3, 0.8, 2.0), (-0.2, 0.5, 3.0))


def _system(offset, amplitude, frequency):
    def hamiltonian(t):
        energy = offset + amplitude * math.sin(frequency * t)
        return np.diag([energy, -energy]).astype(complex)

    return nm.TimeDependentSystem(hamiltonian)


def _exact(rho0, times, offset, amplitude, frequency):
    j_function = spectral_density(0.2, 1.0, 4.0, "exponential")
    states = independent_boson_exact(rho0, (0.0, 0.0), (0.5, -0.5), j_function, 1.0, times, 240.0)
    phase = 2.0 * (offset * times + amplitude * (1.0 - np.cos(frequency * times)) / frequency)
    states[:, 0, 1] *= np.exp(-1j * phase)
    states[:, 1, 0] *= np.exp(1j * phase)
    return states


@pytest.fixture(scope="module")
def levels():
    """For each system: the dynamics from the process tensors at dt = 0.4, 0.2, 0.1,
    0.05 (one PT per dt, shared by both systems) and the exact states on the grid of
    dt = 0.2 (the tests of one stage take the three finest levels)."""
    _, bath, rho0 = independent_boson("ohmic-T1")
    tensors = [
        nm.pt_tempo_compute(
            bath,
            0.0,
            END_TIME,
            nm.TempoParameters(dt=dt, epsrel=1e-10),
            progress_type="silent",
        )
        for dt in (2 * COARSE_DT, COARSE_DT, COARSE_DT / 2, COARSE_DT / 4)
    ]
    times = COARSE_DT * np.arange(int(round(END_TIME / COARSE_DT)) + 1)
    result = []
    for splitting in SPLITTINGS:
        dynamics = [
            nm.compute_dynamics(
                _system(*splitting),
                rho0,
                process_tensor=pt,
                subdiv_limit=None,
                progress_type="silent",
            )
            for pt in tensors
        ]
        result.append((dynamics, _exact(rho0, times, *splitting)))
    return result


@pytest.fixture(scope="module")
def fine_levels(levels):
    """The levels dt = 0.2, 0.1, 0.05 of each system."""
    return [(dynamics[1:], exact) for dynamics, exact in levels]


def test_process_tensor_dynamics_fall_at_the_splitting_order(fine_levels):
    for dynamics, exact in fine_levels:
        errors = []
        for k, result in enumerate(dynamics):
            states = np.asarray(result.states)[:: 2**k]
            errors.append(np.max(np.abs(states - exact)))
        orders = np.log2(np.asarray(errors[:-1]) / np.asarray(errors[1:]))
        assert np.all(np.abs(orders - SPLITTING_ORDER) < 0.15), orders


def test_extrapolating_process_tensor_dynamics_removes_the_leading_error(fine_levels):
    for dynamics, exact in fine_levels:
        extrapolation = richardson(dynamics)
        assert extrapolation.order_check == "passed"
        assert abs(extrapolation.observed_order - SPLITTING_ORDER) < 0.15
        finest = np.max(np.abs(np.asarray(extrapolation.finest) - exact))
        error = np.max(np.abs(np.asarray(extrapolation.values) - exact))
        # the dt^2 term is gone: the rest is the next order (and the exact integrals)
        assert error < finest / 50
        # the estimate is of the size of the true error of the extrapolated states (on
        # the second system it is 1.2x below it: the next order is not small there)
        assert error <= 2.0 * extrapolation.max_error


def test_second_stage_removes_the_next_even_order(levels):
    """Three levels at dt = 0.4, 0.2, 0.1: one stage leaves the dt^4 term (falling
    16-fold per halving: the error of the extrapolation from 0.2, 0.1 against that
    from 0.4, 0.2), the second stage removes it (the result at least 20x closer to
    the exact states than one stage), and its error estimate bounds the error."""
    times = 2 * COARSE_DT * np.arange(int(round(END_TIME / (2 * COARSE_DT))) + 1)
    for dynamics, exact in levels:
        coarse = exact[::2]
        one = [
            np.max(np.abs(np.asarray(richardson(pair, times=times).values) - coarse))
            for pair in (dynamics[0:2], dynamics[1:3])
        ]
        assert abs(math.log2(one[0] / one[1]) - NEXT_ORDER) < 0.5, one
        single = richardson(dynamics[:3])
        twice = richardson(dynamics[:3], next_order=NEXT_ORDER)
        assert twice.order_check == "passed" and twice.next_order == NEXT_ORDER
        single_error = np.max(np.abs(np.asarray(single.values) - coarse))
        error = np.max(np.abs(np.asarray(twice.values) - coarse))
        assert error < single_error / 20, (error, single_error)
        assert error <= twice.max_error


def test_second_stage_of_a_polynomial_error_is_exact():
    """f(h) = f0 + a h^2 + b h^4 on three levels: two stages give f0 to rounding;
    a next order not above the first is refused."""
    times = np.linspace(0.0, 1.0, 5)
    exact = np.cos(times)

    def level(h):
        fine = np.arange(0.0, 1.0 + h / 2, h)
        return fine, np.cos(fine) + 0.3 * h**2 * np.sin(fine) - 0.2 * h**4 * fine

    results = [level(0.25 / 2**k) for k in range(3)]
    twice = richardson(results, times=times, next_order=4.0, order_tolerance=0.5)
    assert np.max(np.abs(twice.values - exact)) < 1e-13
    with pytest.raises(ValueError, match="next_order"):
        richardson(results, times=times, next_order=2.0)
