"""``guess_tempo_parameters`` meets the tolerance it is given (issue 42).

Each test runs TEMPO through the public API with exactly the guessed parameters
and compares the states with the exact independent-boson solution
(``models.independent_boson_exact``, quadratures independent of the library) or,
for a spin-boson model, with a converged reference run (a time step, memory and
epsrel much finer than the guess). The asserted bound is the tolerance itself:
max over times and matrix elements of |rho_guess(t) - rho_exact(t)| <= tolerance.
Intervals are short (2 time units, 1 for the spin-boson model) so that every
run takes about a second.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import scipy.integrate

import nonmarkov as nm
from models import (
    INDEPENDENT_BOSON_MODELS,
    independent_boson,
    independent_boson_exact,
    spectral_density,
    spin_boson,
)

END_TIME = 2.0
SPIN_BOSON_END_TIME = 1.0


def _guess(bath, end_time, system, tolerance):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # the "starting point" warning
        return nm.guess_tempo_parameters(bath, 0.0, end_time, system, tolerance)


def _run(system, bath, rho0, end_time, parameters):
    dynamics = nm.tempo_compute(
        system, bath, rho0, 0.0, end_time, parameters, progress_type="silent"
    )
    return np.asarray(dynamics.times), np.asarray(dynamics.states)


# --------------------------------------------------------------------------
# independent-boson models: exact
# --------------------------------------------------------------------------

# (model key, changes): several couplings, temperatures and spectral shapes
IB_CASES = {
    "ohmic-T0": ("ohmic-T0", {}),
    "ohmic-T1-strong": ("ohmic-T1", {"alpha": 0.5}),
    "subohmic-T0.5": ("ohmic-T1", {"zeta": 0.5, "temperature": 0.5, "alpha": 0.3}),
    "superohmic-gaussian": ("superohmic-gaussian", {"alpha": 0.5}),
    "three-level": ("three-level", {}),
}


def _independent_boson_error(case: str, tolerance: float) -> float:
    key, changes = IB_CASES[case]
    model = {**INDEPENDENT_BOSON_MODELS[key], **changes}
    system, bath, rho0 = independent_boson(key, **changes)
    parameters = _guess(bath, END_TIME, system, tolerance)
    times, states = _run(system, bath, rho0, END_TIME, parameters)
    wc = model["cutoff"]
    upper = (60.0 if model["cutoff_type"] == "exponential" else 10.0) * wc
    j_function = spectral_density(model["alpha"], model["zeta"], wc, model["cutoff_type"])
    exact = independent_boson_exact(
        rho0, model["energies"], model["couplings"], j_function, model["temperature"], times, upper
    )
    # the bath changes the coherences visibly, so agreement is not trivial
    closed = independent_boson_exact(
        rho0, model["energies"], model["couplings"], lambda w: 0.0, 0.0, times, upper
    )
    assert np.max(np.abs(exact - closed)) > 10 * tolerance
    return float(np.max(np.abs(states - exact)))


# the three-level model (about 6 s a run) is in benchmarks/bench_guess.py
@pytest.mark.parametrize(
    "case, tolerance",
    [
        ("ohmic-T0", 1e-2),
        ("subohmic-T0.5", 1e-2),
        ("superohmic-gaussian", 1e-2),
        ("ohmic-T0", 1e-3),
        ("ohmic-T1-strong", 1e-3),
        ("superohmic-gaussian", 1e-3),
    ],
)
@pytest.mark.slow
def test_guess_meets_tolerance_on_independent_boson_models(case, tolerance):
    assert _independent_boson_error(case, tolerance) <= tolerance


@pytest.mark.slow
def test_guess_meets_a_tight_tolerance_on_an_independent_boson_model():
    """1e-4: the memory cut must hold the whole interval (T = 1 ohmic tail)."""
    assert _independent_boson_error("ohmic-T1-strong", 1e-4) <= 1e-4


# --------------------------------------------------------------------------
# spin-boson model: against a converged reference
# --------------------------------------------------------------------------


@pytest.fixture(scope="module")
def biased_spin_boson_reference():
    """Biased spin-boson model (alpha 0.3, T 0.5, cutoff 5) over [0, 1], the reference run
    with dt 0.02, full memory and epsrel 1e-9 (states (51, 2, 2) at t = k 0.02); halving
    its dt changes it by less than 1e-4."""
    system, bath, rho0 = spin_boson(0.3, 0.5, bias=0.2, cutoff=5.0)
    reference = nm.TempoParameters(dt=0.02, epsrel=1e-9)
    times, states = _run(system, bath, rho0, SPIN_BOSON_END_TIME, reference)
    return system, bath, rho0, times, states


@pytest.mark.parametrize("tolerance", [1e-2, 1e-3])
@pytest.mark.slow
def test_guess_meets_tolerance_on_a_spin_boson_model(biased_spin_boson_reference, tolerance):
    system, bath, rho0, ref_times, ref_states = biased_spin_boson_reference
    parameters = _guess(bath, SPIN_BOSON_END_TIME, system, tolerance)
    times, states = _run(system, bath, rho0, SPIN_BOSON_END_TIME, parameters)
    # compare at the reference's times (cubic interpolation of the guessed run's states
    # would add its own error; the common times are multiples of both steps)
    for t, state in zip(times, states):
        k = int(round(t / 0.02))
        if abs(k * 0.02 - t) < 1e-9:
            assert np.max(np.abs(state - ref_states[k])) <= tolerance, (t, parameters)


# --------------------------------------------------------------------------
# the rule itself
# --------------------------------------------------------------------------


def test_epsrel_tightens_with_the_number_of_truncations():
    """epsrel = (tolerance / 3) / (steps x memory steps): a run twice as long at the same
    dt (set by the system) has twice the steps and no shorter a memory (dkmax <= steps)."""
    system, bath, _ = spin_boson(0.3, 0.5, bias=0.2, cutoff=5.0)
    short = _guess(bath, 4.0, system, 1e-3)
    long = _guess(bath, 8.0, system, 1e-3)
    assert short.dt == long.dt
    steps_short = int(np.ceil(4.0 / short.dt - 1e-9))
    steps_long = int(np.ceil(8.0 / long.dt - 1e-9))
    for parameters, steps in ((short, steps_short), (long, steps_long)):
        assert parameters.dkmax <= steps
        assert parameters.epsrel == pytest.approx(1e-3 / 3 / (steps * parameters.dkmax))
    assert long.epsrel < short.epsrel


@pytest.mark.parametrize("tolerance", [0.0, -1e-3, 1.0, 2.0])
def test_guess_refuses_a_tolerance_outside_zero_to_one(tolerance):
    system, bath, _ = spin_boson()
    with pytest.raises(ValueError, match="tolerance"):
        nm.guess_tempo_parameters(bath, 0.0, 1.0, system, tolerance)


def test_guess_refuses_a_tolerance_that_is_not_a_number():
    system, bath, _ = spin_boson()
    with pytest.raises(TypeError, match="tolerance"):
        nm.guess_tempo_parameters(bath, 0.0, 1.0, system, "1e-3")


# --------------------------------------------------------------------------
# the convention of J: QuTiP's Drude-Lorentz J, converted as CustomSD's docstring says
# --------------------------------------------------------------------------


def test_qutip_drude_lorentz_conversion_keeps_the_reorganisation_energy():
    """CustomSD's worked example: J = J_QuTiP / pi with J_QuTiP = 2 lambda gamma w /
    (gamma^2 + w^2) has int J(w)/w dw = lambda (QuTiP's (1/pi) int J_QuTiP / w), less
    1 - (2/pi) arctan(wc/gamma) for a hard cutoff wc = 50 gamma."""
    lam, gamma, wc = 0.25, 1.0, 50.0
    sd = nm.CustomSD(
        lambda w: 2 * lam * gamma * w / (np.pi * (gamma**2 + w**2)),
        cutoff=wc,
        cutoff_type="hard",
        temperature=1.0,
    )
    reorganisation = scipy.integrate.quad(
        lambda w: sd.spectral_density(w) / w, 0.0, wc, limit=200, epsabs=1e-13
    )[0]
    expected = lam * (2.0 / np.pi) * np.arctan(wc / gamma)
    assert reorganisation == pytest.approx(expected, rel=1e-8)
