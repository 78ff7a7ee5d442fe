"""Property-based tests of the constructors (hypothesis): for any input, a model object is
either made and consistent, or refused with a TypeError/ValueError; never another
exception, never an object that holds NaN or violates its invariants.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import nonmarkov as nm

# derandomized: the same examples on every run (CI must not find new ones by chance)
SETTINGS = settings(
    max_examples=60, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow]
)
ANYTHING = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-10, 10),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=3),
    st.lists(st.floats(-2, 2), max_size=3),
)
NUMBERS = st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.integers(-5, 5))


def refused_or(check, make):
    """``make()`` is either refused with TypeError/ValueError or passes ``check``."""
    try:
        made = make()
    except (TypeError, ValueError):
        return
    check(made)


@SETTINGS
@given(dt=NUMBERS, epsrel=NUMBERS, tcut=st.one_of(st.none(), NUMBERS))
def test_tempo_parameters(dt, epsrel, tcut):
    def check(parameters):
        assert parameters.dt > 0 and math.isfinite(parameters.dt)
        assert 1e-15 <= parameters.epsrel <= 1.0
        assert parameters.dkmax is None or parameters.dkmax >= 1

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # tcut < dt / 2 warns by design
        refused_or(check, lambda: nm.TempoParameters(dt=dt, epsrel=epsrel, tcut=tcut))


matrices = st.integers(1, 3).flatmap(
    lambda d: st.lists(
        st.one_of(
            st.complex_numbers(max_magnitude=1e3),
            st.sampled_from([complex(math.nan, 0.0), complex(0.0, math.inf)]),
        ),
        min_size=d * d,
        max_size=d * d,
    ).map(lambda entries: np.array(entries).reshape(d, d))
)


@SETTINGS
@given(hamiltonian=st.one_of(matrices, ANYTHING), gamma=st.one_of(ANYTHING, NUMBERS))
def test_system(hamiltonian, gamma):
    def check(system):
        h = system.hamiltonian
        assert np.all(np.isfinite(h))
        np.testing.assert_allclose(h, h.conj().T, atol=1e-9 * max(1.0, np.abs(h).max()))
        assert all(rate >= 0 and math.isfinite(rate) for rate in system.gammas)

    def make():
        d = np.shape(hamiltonian)[0] if np.ndim(hamiltonian) == 2 else 2
        return nm.System(hamiltonian, gammas=[gamma], lindblad_operators=[np.eye(d)])

    refused_or(check, make)


@SETTINGS
@given(coupling=st.one_of(matrices, ANYTHING))
def test_bath(coupling):
    def check(bath):
        s = bath.coupling_operator
        v = bath.unitary_transform
        np.testing.assert_allclose(
            v @ np.diag(bath.coupling_eigenvalues) @ v.conj().T, s, atol=1e-9 * max(1, abs(s).max())
        )

    refused_or(check, lambda: nm.Bath(coupling, nm.PowerLawSD(0.1, 1, 1.0)))


@SETTINGS
@given(alpha=NUMBERS, zeta=NUMBERS, cutoff=NUMBERS, temperature=NUMBERS)
def test_power_law_spectral_density(alpha, zeta, cutoff, temperature):
    def check(correlations):
        frequencies = np.array([0.1, 1.0, 3.0]) * correlations.cutoff
        try:
            values = correlations.spectral_density(frequencies)
        except ValueError as error:  # J itself overflows (zeta in the hundreds): named
            assert "j_function" in str(error)
            return
        assert np.all(np.isfinite(values)) and np.all(values >= 0)

    refused_or(check, lambda: nm.PowerLawSD(alpha, zeta, cutoff, temperature=temperature))


@SETTINGS
@given(state=st.one_of(matrices, ANYTHING))
def test_initial_operators_are_validated(state):
    # any finite square operator is propagated (the map is linear); the first state is it
    def check(dynamics):
        rho = dynamics.states[0]
        assert rho.ndim == 2 and rho.shape[0] == rho.shape[1]
        assert np.all(np.isfinite(dynamics.states))
        np.testing.assert_allclose(rho, np.asarray(state, dtype=complex))

    def make():
        d = np.shape(state)[0] if np.ndim(state) == 2 else 2
        return nm.compute_dynamics(
            nm.System(np.eye(d)), state, dt=0.1, num_steps=1, progress_type="silent"
        )

    refused_or(check, make)
