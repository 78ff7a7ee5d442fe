"""Richardson extrapolation in dt (``nonmarkov.methods.extrapolation``).

The model: an independent-boson spin (S = sz/2, ohmic bath at T = 1) whose
splitting E(t) = 0.3 + 0.8 sin(2t) changes in time. [H_S(t), S] = 0, so the
exact state is the independent-boson one with the system phase
exp(-i int (E_0 - E_1) dt'); the time-dependent Liouvillian sampled at the
midpoints of the half steps (``subdiv_limit=None``) gives TEMPO an error of
second order in dt, which the extrapolation must remove.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

import nonmarkov as nm
from models import independent_boson, independent_boson_exact, spectral_density
from nonmarkov.methods.extrapolation import (
    SPLITTING_ORDER,
    OrderCheckError,
    observed_order,
    richardson,
)

END_TIME = 1.6
COARSE_DT = 0.2
AMPLITUDE, FREQUENCY = 0.8, 2.0


def _splitting(t):
    return 0.3 + AMPLITUDE * math.sin(FREQUENCY * t)


def _model():
    system = nm.TimeDependentSystem(
        lambda t: np.diag([_splitting(t), -_splitting(t)]).astype(complex)
    )
    _, bath, rho0 = independent_boson("ohmic-T1")
    return system, bath, rho0


def _exact(rho0, times):
    j_function = spectral_density(0.2, 1.0, 4.0, "exponential")
    states = independent_boson_exact(rho0, (0.0, 0.0), (0.5, -0.5), j_function, 1.0, times, 240.0)
    # the phase of E_0 - E_1 = 2 E(t), integrated
    phase = 2.0 * (0.3 * times + AMPLITUDE * (1.0 - np.cos(FREQUENCY * times)) / FREQUENCY)
    states[:, 0, 1] *= np.exp(-1j * phase)
    states[:, 1, 0] *= np.exp(1j * phase)
    return states


@pytest.fixture(scope="module")
def levels():
    """TEMPO at dt = 0.2, 0.1, 0.05 (full memory, epsrel 1e-10) and the exact states on
    the coarse grid."""
    system, bath, rho0 = _model()
    results = []
    for dt in (COARSE_DT, COARSE_DT / 2, COARSE_DT / 4):
        parameters = nm.TempoParameters(dt=dt, epsrel=1e-10, subdiv_limit=None)
        results.append(
            nm.tempo_compute(system, bath, rho0, 0.0, END_TIME, parameters, progress_type="silent")
        )
    times = COARSE_DT * np.arange(int(round(END_TIME / COARSE_DT)) + 1)
    return results, _exact(rho0, times)


def _on_coarse(dynamics, dt):
    return dynamics.states[:: int(round(COARSE_DT / dt))]


def test_error_falls_at_the_claimed_order(levels):
    results, exact = levels
    errors = [
        np.max(np.abs(_on_coarse(d, COARSE_DT / 2**k) - exact)) for k, d in enumerate(results)
    ]
    assert errors[0] > 1e-4  # a visible dt error
    for coarse, fine in zip(errors, errors[1:]):
        assert math.log2(coarse / fine) == pytest.approx(SPLITTING_ORDER, abs=0.1)


def test_three_levels_extrapolate_after_the_order_check(levels):
    results, exact = levels
    extrapolation = richardson(results)
    assert extrapolation.order_check == "passed"
    assert extrapolation.extrapolated
    assert extrapolation.observed_order == pytest.approx(2.0, abs=0.1)
    np.testing.assert_allclose(extrapolation.times, COARSE_DT * np.arange(len(exact)))
    finest_error = np.max(np.abs(extrapolation.finest - exact))
    extrapolated_error = np.max(np.abs(extrapolation.values - exact))
    # two orders of magnitude better than the finest level, and the estimates bound the errors
    assert extrapolated_error < 1e-2 * finest_error
    assert extrapolated_error <= extrapolation.max_error
    true_finest = np.max(np.abs(extrapolation.finest - exact).reshape(len(exact), -1), axis=1)
    assert np.max(extrapolation.finest_error) == pytest.approx(np.max(true_finest), rel=0.05)
    report = extrapolation.report()
    assert report["order_check"] == "passed" and report["dts"][0] == pytest.approx(COARSE_DT)
    dynamics = extrapolation.to_dynamics()
    assert isinstance(dynamics, nm.Dynamics) and len(dynamics) == len(exact)
    assert dynamics.metadata["extrapolation"]["order_check"] == "passed"


def test_two_levels_extrapolate_unchecked(levels):
    results, exact = levels
    extrapolation = richardson(results[1:], times=COARSE_DT * np.arange(len(exact)))
    assert extrapolation.order_check == "unchecked"
    assert extrapolation.observed_order is None
    error = np.max(np.abs(extrapolation.values - exact))
    assert error < 1e-2 * np.max(np.abs(extrapolation.finest - exact))
    assert error <= extrapolation.max_error


def test_plain_arrays_and_an_observable(levels):
    results, exact = levels
    pairs = [d.expectations(0.5 * np.array([[0, 1], [1, 0]]), real=True) for d in results]
    extrapolation = richardson(pairs)
    assert extrapolation.order_check == "passed"
    sx_exact = np.real(exact[:, 0, 1] + exact[:, 1, 0]) * 0.5
    assert np.max(np.abs(extrapolation.values - sx_exact)) < 1e-6


def test_the_check_refuses_a_wrong_order(levels):
    results, _ = levels
    with pytest.raises(OrderCheckError, match="observed order in dt is 2") as info:
        richardson(results, order=4.0)
    assert info.value.extrapolation.order_check == "failed"
    assert not info.value.extrapolation.extrapolated
    kept = richardson(results, order=1.0, on_failed_check="finest")
    assert kept.order_check == "failed" and not kept.extrapolated
    np.testing.assert_array_equal(kept.values, kept.finest)


def test_agreeing_levels_are_converged():
    times = np.linspace(0.0, 1.0, 5)
    values = np.cos(times)
    fine_times = np.linspace(0.0, 1.0, 9)
    finer_times = np.linspace(0.0, 1.0, 17)
    extrapolation = richardson(
        [(times, values), (fine_times, np.cos(fine_times)), (finer_times, np.cos(finer_times))]
    )
    assert extrapolation.order_check == "converged"
    assert observed_order(values, values, values) is None


def test_bad_input():
    times = np.linspace(0.0, 1.0, 5)
    with pytest.raises(ValueError, match="two or three results"):
        richardson([(times, times)])
    with pytest.raises(TypeError, match="Dynamics or a"):
        richardson([times, times])
    with pytest.raises(ValueError, match="does not contain every common time"):
        richardson([(times, times), (np.linspace(0.05, 1.05, 9), np.zeros(9))])
    with pytest.raises(ValueError, match="coarsest first"):
        richardson([(np.linspace(0.0, 1.0, 9), np.zeros(9)), (times, times)])
    with pytest.raises(ValueError, match="on_failed_check"):
        richardson([(times, times), (times, times)], on_failed_check="ignore")
