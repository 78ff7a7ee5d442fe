"""Tests of TEMPO (``Tempo``, ``tempo_compute``) and ``guess_tempo_parameters``.

Physics checks: the independent-boson model (exact solution computed here
with ``scipy.integrate.quad``, independently of the library), Lindblad-only
dynamics with a zero-coupling bath, degenerate couplings (``unique``), a
non-diagonal coupling operator against the rotated problem, NumPy vs JAX.
Problems are kept small (a handful of steps) so that the file runs quickly on
the not yet compiled JAX backend too.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import scipy.integrate
import scipy.linalg

import nonmarkov as nm
from nonmarkov import backends

SX = np.array([[0.0, 1.0], [1.0, 0.0]], dtype=complex)
SY = np.array([[0.0, -1.0j], [1.0j, 0.0]], dtype=complex)
SZ = np.array([[1.0, 0.0], [0.0, -1.0]], dtype=complex)
SIGMA_MINUS = np.array([[0.0, 0.0], [1.0, 0.0]], dtype=complex)  # |0> (sz=+1) -> |1>
HADAMARD = np.array([[1.0, 1.0], [1.0, -1.0]], dtype=complex) / math.sqrt(2.0)


# --------------------------------------------------------------------------
# helpers (independent of the library)
# --------------------------------------------------------------------------


def pure_state(*amplitudes: complex) -> np.ndarray:
    """|psi><psi| of the normalised vector ``amplitudes``."""
    psi = np.asarray(amplitudes, dtype=complex)
    psi = psi / np.linalg.norm(psi)
    return np.outer(psi, psi.conj())


def spectral_density(alpha: float, zeta: float, wc: float, cutoff_type: str):
    """J(w) = 2 alpha w^zeta wc^(1-zeta) X(w), written out here."""
    if cutoff_type == "exponential":
        return lambda w: 2.0 * alpha * w**zeta * wc ** (1.0 - zeta) * math.exp(-w / wc)
    if cutoff_type == "gaussian":
        return lambda w: 2.0 * alpha * w**zeta * wc ** (1.0 - zeta) * math.exp(-((w / wc) ** 2))
    raise ValueError(cutoff_type)


def g_and_p(j_function, temperature: float, t: float, upper: float) -> tuple[float, float]:
    """G(t) = int J coth(w/2T) (1 - cos wt)/w^2 dw, P(t) = int J (wt - sin wt)/w^2 dw."""
    if t == 0.0:
        return 0.0, 0.0

    def coth(w):
        return 1.0 / math.tanh(w / (2.0 * temperature)) if temperature > 0 else 1.0

    def g_integrand(w):
        return j_function(w) * coth(w) * 2.0 * math.sin(0.5 * w * t) ** 2 / w**2

    def p_integrand(w):
        x = w * t
        small = x**3 / 6.0 - x**5 / 120.0
        return j_function(w) * (small if x < 1e-3 else x - math.sin(x)) / w**2

    kwargs = {"limit": 500, "epsabs": 1e-14, "epsrel": 1e-12}
    g = scipy.integrate.quad(g_integrand, 0.0, upper, **kwargs)[0]
    p = scipy.integrate.quad(p_integrand, 0.0, upper, **kwargs)[0]
    return g, p


def independent_boson_exact(rho0, energies, couplings, j_function, temperature, times, upper):
    """rho_nm(t) = rho_nm(0) e^{-i(E_n-E_m)t} e^{-(s_n-s_m)^2 G(t) + i(s_n^2-s_m^2) P(t)}."""
    energies = np.asarray(energies, dtype=float)
    s = np.asarray(couplings, dtype=float)
    de = np.subtract.outer(energies, energies)
    ds2 = np.subtract.outer(s, s) ** 2
    dsq = np.subtract.outer(s**2, s**2)
    states = []
    for t in times:
        g, p = g_and_p(j_function, temperature, float(t), upper)
        states.append(rho0 * np.exp(-1j * de * t) * np.exp(-ds2 * g + 1j * dsq * p))
    return np.array(states)


# independent-boson models: (alpha, zeta, wc, cutoff_type, T, E_n, s_n, dt, steps)
INDEPENDENT_BOSON_MODELS = {
    "ohmic-T0": (0.2, 1.0, 4.0, "exponential", 0.0, [0.3, -0.3], [0.5, -0.5], 0.2, 6),
    "ohmic-T1": (0.2, 1.0, 4.0, "exponential", 1.0, [0.3, -0.3], [0.5, -0.5], 0.2, 6),
    "superohmic-gaussian": (0.2, 3.0, 3.0, "gaussian", 0.5, [0.3, -0.3], [0.5, -0.5], 0.2, 6),
    "three-level": (0.1, 1.0, 4.0, "exponential", 0.0, [0.4, 0.0, -0.7], [1.0, 0.0, -0.5], 0.2, 4),
}


def independent_boson_problem(key: str):
    """(system, bath, rho0, parameters, end_time, exact states at t_k, closed-system states)."""
    alpha, zeta, wc, cutoff_type, temperature, energies, s, dt, steps = INDEPENDENT_BOSON_MODELS[
        key
    ]
    correlations = nm.PowerLawSD(alpha, zeta, wc, cutoff_type=cutoff_type, temperature=temperature)
    system = nm.System(np.diag(energies).astype(complex))
    bath = nm.Bath(np.diag(s).astype(complex), correlations)
    rho0 = (
        pure_state(1.0, 0.8 * np.exp(0.3j), 0.6 * np.exp(-1.1j))
        if len(s) == 3
        else pure_state(0.8, 0.6 * np.exp(0.4j))
    )
    parameters = nm.TempoParameters(dt=dt, epsrel=1e-10)  # full memory
    times = dt * np.arange(steps + 1)
    upper = (60.0 if cutoff_type == "exponential" else 10.0) * wc
    exact = independent_boson_exact(
        rho0, energies, s, spectral_density(alpha, zeta, wc, cutoff_type), temperature, times, upper
    )
    closed = independent_boson_exact(rho0, energies, s, lambda w: 0.0, temperature, times, upper)
    return system, bath, rho0, parameters, steps * dt, exact, closed


def assert_coherences_match(states, exact, closed, bound):
    """Modulus and phase of every off-diagonal element agree with ``exact``."""
    d = exact.shape[1]
    off = ~np.eye(d, dtype=bool)
    numeric, expected = states[:, off], exact[:, off]
    # the bath changes the coherences visibly, so agreement is not trivial
    assert np.max(np.abs(expected - closed[:, off])) > 1e-2
    np.testing.assert_allclose(np.abs(numeric), np.abs(expected), rtol=0, atol=bound)
    phase_error = np.angle(numeric[1:] / expected[1:])
    np.testing.assert_allclose(phase_error * np.abs(expected[1:]), 0.0, atol=bound)
    np.testing.assert_allclose(states, exact, rtol=0, atol=bound)


# --------------------------------------------------------------------------
# independent-boson model
# --------------------------------------------------------------------------


@pytest.mark.parametrize("key", list(INDEPENDENT_BOSON_MODELS))
def test_tempo_independent_boson_exact(key):
    system, bath, rho0, parameters, end_time, exact, closed = independent_boson_problem(key)
    tempo = nm.Tempo(system, bath, parameters, rho0, 0.0)
    dynamics = tempo.compute(end_time, progress_type="silent")
    np.testing.assert_allclose(dynamics.times, parameters.dt * np.arange(len(exact)), atol=1e-12)
    # full memory, epsrel = 1e-10 and [H_S, S] = 0 (no Trotter error): TEMPO is exact up
    # to truncation and quadrature errors (measured ~1e-14); asserted bound 1e-8.
    assert_coherences_match(dynamics.states, exact, closed, bound=1e-8)


# --------------------------------------------------------------------------
# Lindblad-only system with a zero-coupling bath
# --------------------------------------------------------------------------


def lindblad_problem():
    omega, gamma = 1.3, 0.7
    system = nm.System(0.5 * omega * SZ, gammas=[gamma], lindblad_operators=[SIGMA_MINUS])
    bath = nm.Bath(0.5 * SZ, nm.PowerLawSD(0.0, 1.0, 4.0))
    rho0 = pure_state(0.8, 0.6 * np.exp(0.5j))
    return omega, gamma, system, bath, rho0


def lindblad_exact(omega, gamma, rho0, times):
    """Excited population e^{-gamma t}, coherence e^{-gamma t/2 - i omega t}."""
    excited = rho0[0, 0] * np.exp(-gamma * times)
    coherence = rho0[0, 1] * np.exp(-0.5 * gamma * times - 1j * omega * times)
    return excited, coherence


def test_tempo_lindblad_zero_coupling_is_exact():
    omega, gamma, system, bath, rho0 = lindblad_problem()
    parameters = nm.TempoParameters(dt=0.1, epsrel=1e-10, dkmax=3)
    dynamics = nm.Tempo(system, bath, parameters, rho0, 0.0).compute(1.0, progress_type="silent")
    excited, coherence = lindblad_exact(omega, gamma, rho0, dynamics.times)
    assert len(dynamics) == 11
    np.testing.assert_allclose(dynamics.states[:, 0, 0], excited, atol=1e-12)
    np.testing.assert_allclose(dynamics.states[:, 0, 1], coherence, atol=1e-12)
    np.testing.assert_allclose(np.trace(dynamics.states, axis1=1, axis2=2), 1.0, atol=1e-12)


# --------------------------------------------------------------------------
# degenerate coupling (unique) and a non-diagonal coupling operator
# --------------------------------------------------------------------------


def degenerate_three_level():
    """S = R diag(1, 0, 0) R^T (degenerate, non-diagonal), H not commuting with S."""
    angle_1, angle_2 = 0.4, 0.9
    r1 = np.array(
        [
            [math.cos(angle_1), -math.sin(angle_1), 0.0],
            [math.sin(angle_1), math.cos(angle_1), 0.0],
            [0.0, 0.0, 1.0],
        ]
    )
    r2 = np.array(
        [
            [1.0, 0.0, 0.0],
            [0.0, math.cos(angle_2), -math.sin(angle_2)],
            [0.0, math.sin(angle_2), math.cos(angle_2)],
        ]
    )
    rotation = r1 @ r2
    coupling = rotation @ np.diag([1.0, 0.0, 0.0]) @ rotation.T
    hamiltonian = np.array([[0.5, 0.3, 0.0], [0.3, 0.0, 0.2j], [0.0, -0.2j, -0.4]])
    system = nm.System(hamiltonian)
    bath = nm.Bath(coupling, nm.PowerLawSD(0.2, 1.0, 3.0, temperature=0.5))
    rho0 = pure_state(1.0, 0.5j, 0.3)
    return system, bath, rho0


def test_tempo_unique_agrees_with_full_index():
    system, bath, rho0 = degenerate_three_level()
    parameters = nm.TempoParameters(dt=0.2, epsrel=1e-10)
    full = nm.Tempo(system, bath, parameters, rho0, 0.0, unique=False).compute(
        0.8, progress_type="silent"
    )
    merged = nm.Tempo(system, bath, parameters, rho0, 0.0, unique=True).compute(
        0.8, progress_type="silent"
    )
    assert len(full) == len(merged) == 5
    # the bath matters here (compare with the closed system)
    closed = nm.compute_dynamics(system, rho0, dt=0.2, num_steps=4, progress_type="silent")
    assert np.max(np.abs(full.states - closed.states)) > 1e-2
    # same influence functional, only a smaller index: equal to a few epsrel
    np.testing.assert_allclose(merged.states, full.states, rtol=0, atol=1e-8)


def test_tempo_non_diagonal_coupling_equals_rotated_problem():
    correlations = nm.PowerLawSD(0.2, 1.0, 4.0, temperature=0.3)
    parameters = nm.TempoParameters(dt=0.2, epsrel=1e-10)
    rho_a = pure_state(1.0, 0.4 * np.exp(0.7j))
    rho_b = HADAMARD @ rho_a @ HADAMARD
    # problem A: H = 0.5 sz, S = 0.5 sx ; problem B = Hadamard A Hadamard
    dyn_a = nm.Tempo(
        nm.System(0.5 * SZ), nm.Bath(0.5 * SX, correlations), parameters, rho_a, 0.0
    ).compute(1.0, progress_type="silent")
    dyn_b = nm.Tempo(
        nm.System(0.5 * SX), nm.Bath(0.5 * SZ, correlations), parameters, rho_b, 0.0
    ).compute(1.0, progress_type="silent")
    rotated = np.einsum("ij,njk,kl->nil", HADAMARD, dyn_a.states, HADAMARD)
    np.testing.assert_allclose(rotated, dyn_b.states, rtol=0, atol=1e-8)
    # the dynamics is non-trivial: the coupled spin dephases in the S eigenbasis
    closed = nm.compute_dynamics(
        nm.System(0.5 * SX), rho_b, dt=0.2, num_steps=5, progress_type="silent"
    )
    assert np.max(np.abs(dyn_b.states - closed.states)) > 1e-2


# --------------------------------------------------------------------------
# behaviour: continuation, get_dynamics, one-call form
# --------------------------------------------------------------------------


def driven_spin_boson(alpha=0.2, temperature=0.0):
    system = nm.System(0.5 * SX)
    bath = nm.Bath(0.5 * SZ, nm.PowerLawSD(alpha, 1.0, 4.0, temperature=temperature))
    rho0 = pure_state(1.0, 0.0)
    return system, bath, rho0


def test_tempo_compute_continues_exactly():
    system, bath, rho0 = driven_spin_boson()
    parameters = nm.TempoParameters(dt=0.2, epsrel=1e-8, dkmax=3)
    direct = nm.Tempo(system, bath, parameters, rho0, 0.0).compute(1.4, progress_type="silent")
    tempo = nm.Tempo(system, bath, parameters, rho0, 0.0)
    first = tempo.compute(0.6, progress_type="silent")
    assert len(first) == 4
    second = tempo.compute(1.4, progress_type="silent")
    assert len(second) == len(direct) == 8
    np.testing.assert_allclose(second.times, direct.times, rtol=0, atol=1e-12)
    np.testing.assert_array_equal(second.states, direct.states)
    dynamics = tempo.get_dynamics()
    np.testing.assert_array_equal(dynamics.states, direct.states)
    # computing again to the same end time adds nothing
    assert len(tempo.compute(1.4, progress_type="silent")) == 8
    assert tempo.max_bond_dimension >= 1
    # the state is physical: trace one, Hermitian
    np.testing.assert_allclose(np.trace(direct.states, axis1=1, axis2=2), 1.0, atol=1e-10)
    np.testing.assert_allclose(
        direct.states, np.conj(np.transpose(direct.states, (0, 2, 1))), atol=1e-10
    )


def test_tempo_compute_one_call_equals_class():
    system, bath, rho0 = driven_spin_boson()
    parameters = nm.TempoParameters(dt=0.2, epsrel=1e-9, dkmax=4)
    by_class = nm.Tempo(system, bath, parameters, rho0, 0.0).compute(1.0, progress_type="silent")
    one_call = nm.tempo_compute(
        system, bath, rho0, 0.0, 1.0, parameters=parameters, progress_type="silent"
    )
    np.testing.assert_array_equal(one_call.states, by_class.states)
    np.testing.assert_allclose(one_call.times, by_class.times, atol=1e-12)


def test_tempo_compute_guessed_parameters_zero_coupling():
    omega, gamma, system, bath, rho0 = lindblad_problem()
    dynamics = nm.tempo_compute(
        system, bath, rho0, 0.0, 0.5, tolerance=1e-2, progress_type="silent"
    )
    assert dynamics.times[-1] == pytest.approx(0.5)
    excited, coherence = lindblad_exact(omega, gamma, rho0, dynamics.times)
    np.testing.assert_allclose(dynamics.states[:, 0, 0], excited, atol=1e-10)
    np.testing.assert_allclose(dynamics.states[:, 0, 1], coherence, atol=1e-10)


# --------------------------------------------------------------------------
# guess_tempo_parameters
# --------------------------------------------------------------------------


def test_guess_parameters_are_sensible_and_memory_cut_follows_correlations():
    """Ohmic, exponential cutoff, T = 0: |C(t)| = 2 alpha wc^2 / (1 + wc^2 t^2) exactly.

    The guessed memory cut must lie within a factor of a few of the time at
    which |C| has decayed to ``tolerance`` * |C(0)|.
    """
    wc = 4.0
    system = nm.System(0.5 * SX)
    bath = nm.Bath(0.5 * SZ, nm.PowerLawSD(0.2, 1.0, wc))
    guesses = {}
    for tolerance in (1e-2, 1e-3):
        parameters = nm.guess_tempo_parameters(bath, 0.0, 4.0, system, tolerance=tolerance)
        assert isinstance(parameters, nm.TempoParameters)
        assert 0.0 < parameters.dt <= 4.0 / 100.0 + 1e-15
        assert 0.0 < parameters.epsrel < 1.0
        assert parameters.dkmax is not None and parameters.dkmax >= 1
        t_decay = math.sqrt(1.0 / tolerance - 1.0) / wc
        assert 0.5 * t_decay <= parameters.tcut <= 4.0 * t_decay, (tolerance, parameters)
        guesses[tolerance] = parameters
    # tighter tolerance: no larger step, smaller epsrel, no shorter memory
    loose, tight = guesses[1e-2], guesses[1e-3]
    assert tight.dt <= loose.dt
    assert tight.epsrel < loose.epsrel
    assert tight.tcut >= loose.tcut


def test_guess_parameters_zero_coupling():
    _, _, system, bath, _ = lindblad_problem()
    for with_system in (None, system):
        parameters = nm.guess_tempo_parameters(bath, 0.0, 2.0, with_system)
        assert parameters.dt > 0.0
        assert 0.0 < parameters.epsrel < 1.0
        assert parameters.dkmax == 1


# --------------------------------------------------------------------------
# NumPy and JAX agree
# --------------------------------------------------------------------------


def test_tempo_numpy_and_jax_agree():
    pytest.importorskip("jax")
    system, bath, rho0 = driven_spin_boson()
    parameters = nm.TempoParameters(dt=0.2, epsrel=1e-10, dkmax=3)
    results = {}
    for name in ("numpy", "jax"):
        with backends.use_backend(name, "double"):
            results[name] = (
                nm.Tempo(system, bath, parameters, rho0, 0.0)
                .compute(1.0, progress_type="silent")
                .states
            )
    np.testing.assert_allclose(results["jax"], results["numpy"], rtol=0, atol=1e-10)


# --------------------------------------------------------------------------
# bad input
# --------------------------------------------------------------------------


@pytest.mark.parametrize("dt", [0.0, -0.1])
def test_parameters_reject_non_positive_dt(dt):
    with pytest.raises(ValueError, match="dt"):
        nm.TempoParameters(dt=dt, epsrel=1e-6)


@pytest.mark.parametrize("epsrel", [0.0, 1.0, -1e-3, 1.5])
def test_parameters_reject_epsrel_outside_unit_interval(epsrel):
    with pytest.raises(ValueError, match="epsrel"):
        nm.TempoParameters(dt=0.1, epsrel=epsrel)


def test_parameters_reject_tcut_and_dkmax_together():
    with pytest.raises(ValueError, match="tcut"):
        nm.TempoParameters(dt=0.1, epsrel=1e-6, tcut=1.0, dkmax=10)


def test_parameters_memory_cut():
    assert nm.TempoParameters(dt=0.1, epsrel=1e-6, tcut=1.0).dkmax == 10
    assert nm.TempoParameters(dt=0.1, epsrel=1e-6, dkmax=7).tcut == pytest.approx(0.7)
    full = nm.TempoParameters(dt=0.1, epsrel=1e-6)
    assert full.dkmax is None and full.tcut is None
    with pytest.raises((ValueError, TypeError), match="dkmax"):
        nm.TempoParameters(dt=0.1, epsrel=1e-6, dkmax=0)


def test_tempo_rejects_end_time_before_start_time():
    system, bath, rho0 = driven_spin_boson()
    parameters = nm.TempoParameters(dt=0.1, epsrel=1e-6)
    tempo = nm.Tempo(system, bath, parameters, rho0, 1.0)
    with pytest.raises(ValueError, match="end_time"):
        tempo.compute(0.5, progress_type="silent")
    assert len(tempo.get_dynamics()) == 1  # nothing computed
    with pytest.raises(ValueError, match="end_time"):
        nm.tempo_compute(
            system, bath, rho0, 1.0, 0.5, parameters=parameters, progress_type="silent"
        )


@pytest.mark.parametrize(
    "state, what",
    [
        (np.eye(3) / 3.0, "wrong shape"),
        (np.ones((2, 3)) / 2.0, "not square"),
        (np.diag([0.7, 0.7]), "trace"),
        (np.array([[0.5, 0.5], [0.1, 0.5]]), "non-Hermitian"),
        (np.diag([1.5, -0.5]), "not positive"),
    ],
)
def test_tempo_rejects_bad_initial_state(state, what):
    system, bath, _ = driven_spin_boson()
    parameters = nm.TempoParameters(dt=0.1, epsrel=1e-6)
    with pytest.raises(ValueError, match="initial_state"):
        nm.Tempo(system, bath, parameters, state, 0.0)


def test_tempo_rejects_dimension_mismatch():
    system = nm.System(np.diag([0.0, 1.0, 2.0]))
    bath = nm.Bath(0.5 * SZ, nm.PowerLawSD(0.1, 1.0, 4.0))
    parameters = nm.TempoParameters(dt=0.1, epsrel=1e-6)
    with pytest.raises(ValueError, match="bath"):
        nm.Tempo(system, bath, parameters, np.eye(3) / 3.0, 0.0)


def test_tempo_rejects_wrong_types():
    system, bath, rho0 = driven_spin_boson()
    parameters = nm.TempoParameters(dt=0.1, epsrel=1e-6)
    with pytest.raises(TypeError, match="parameters"):
        nm.Tempo(system, bath, {"dt": 0.1}, rho0, 0.0)
    with pytest.raises(TypeError, match="bath"):
        nm.Tempo(system, 0.5 * SZ, parameters, rho0, 0.0)
    with pytest.raises(TypeError, match="system"):
        nm.Tempo(0.5 * SX, bath, parameters, rho0, 0.0)


def test_tempo_rejects_unknown_progress_type():
    system, bath, rho0 = driven_spin_boson()
    parameters = nm.TempoParameters(dt=0.1, epsrel=1e-6)
    tempo = nm.Tempo(system, bath, parameters, rho0, 0.0)
    with pytest.raises(ValueError, match="progress_type"):
        tempo.compute(0.3, progress_type="fancy")
    assert len(tempo.get_dynamics()) == 1  # nothing computed


def test_tempo_lindblad_matches_expm_reference():
    """Zero coupling: TEMPO equals expm of a Liouvillian built here (row-major)."""
    omega, gamma, system, bath, rho0 = lindblad_problem()
    h = 0.5 * omega * SZ
    a = SIGMA_MINUS
    eye = np.eye(2)
    ada = a.conj().T @ a
    liouvillian = -1j * (np.kron(h, eye) - np.kron(eye, h.T)) + gamma * (
        np.kron(a, a.conj()) - 0.5 * np.kron(ada, eye) - 0.5 * np.kron(eye, ada.T)
    )
    parameters = nm.TempoParameters(dt=0.25, epsrel=1e-10, dkmax=2)
    dynamics = nm.Tempo(system, bath, parameters, rho0, 0.0).compute(1.0, progress_type="silent")
    for t, rho in zip(dynamics.times, dynamics.states):
        expected = (scipy.linalg.expm(liouvillian * t) @ rho0.reshape(-1)).reshape(2, 2)
        np.testing.assert_allclose(rho, expected, atol=1e-12)
