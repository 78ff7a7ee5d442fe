"""Tests of TEMPO (``Tempo``, ``tempo_compute``) and ``guess_tempo_parameters``.

Physics checks: the independent-boson model (exact solution in ``models.py``,
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
import scipy.linalg

import nonmarkov as nm
from models import (
    HADAMARD,
    INDEPENDENT_BOSON_MODELS,
    SIGMA_MINUS,
    SX,
    SZ,
    assert_coherences_match,
    degenerate_three_level,
    driven_spin_boson,
    independent_boson_problem,
    lindblad_exact,
    lindblad_problem,
    pure_state,
)
from nonmarkov import backends

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
    with pytest.warns(UserWarning, match="guess_tempo_parameters"):
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


@pytest.mark.slow
def test_guess_parameters_are_sensible_and_memory_cut_follows_correlations():
    """Ohmic, exponential cutoff, T = 0: |C(t)| = 2 alpha wc^2 / (1 + wc^2 t^2) exactly.

    The guessed memory cut holds the dropped correlations within the tolerance
    (issue 42): this slow 1/t^2 tail needs at least half of the time at which |C|
    has decayed to ``tolerance`` * |C(0)| (or half of the interval, if that is
    shorter), and a cut never exceeds the interval (full memory). That the run
    meets the tolerance is asserted in test_guess_parameters.py.
    """
    wc = 4.0
    system = nm.System(0.5 * SX)
    bath = nm.Bath(0.5 * SZ, nm.PowerLawSD(0.2, 1.0, wc))
    guesses = {}
    for tolerance in (1e-2, 1e-3):
        with pytest.warns(UserWarning, match="guess_tempo_parameters"):
            parameters = nm.guess_tempo_parameters(bath, 0.0, 4.0, system, tolerance=tolerance)
        assert isinstance(parameters, nm.TempoParameters)
        assert 0.0 < parameters.dt <= 4.0 / 100.0 + 1e-15
        assert 0.0 < parameters.epsrel < 1.0
        assert parameters.dkmax is not None and parameters.dkmax >= 1
        t_decay = math.sqrt(1.0 / tolerance - 1.0) / wc
        assert min(0.5 * t_decay, 2.0) <= parameters.tcut <= 4.0 + 1e-9, (tolerance, parameters)
        guesses[tolerance] = parameters
    # tighter tolerance: no larger step, smaller epsrel, no shorter memory
    loose, tight = guesses[1e-2], guesses[1e-3]
    assert tight.dt <= loose.dt
    assert tight.epsrel < loose.epsrel
    assert tight.tcut >= loose.tcut


def test_guess_parameters_zero_coupling():
    _, _, system, bath, _ = lindblad_problem()
    for with_system in (None, system):
        with pytest.warns(UserWarning, match="guess_tempo_parameters"):
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


@pytest.mark.parametrize("epsrel", [0.0, -1e-3, 1.5])
def test_parameters_reject_epsrel_outside_unit_interval(epsrel):
    with pytest.raises(ValueError, match="epsrel"):
        nm.TempoParameters(dt=0.1, epsrel=epsrel)


def test_epsrel_one_keeps_one_singular_value_per_bond():
    """epsrel = 1 (allowed, as in OQuPy) cuts every bond to its largest Schmidt value:
    a process tensor of bond 1, whose dynamics still keeps the trace of a state."""
    bath = nm.Bath(0.5 * np.diag([1.0, -1.0]), nm.PowerLawSD(0.1, 1.0, 5.0))
    parameters = nm.TempoParameters(dt=0.1, epsrel=1.0, dkmax=4)
    pt = nm.pt_tempo_compute(bath, 0.0, 1.0, parameters, progress_type="silent")
    assert set(pt.get_bond_dimensions()) == {1}
    system = nm.System(0.5 * np.array([[0.0, 1.0], [1.0, 0.0]]))
    rho0 = np.diag([1.0, 0.0]).astype(complex)
    states = nm.compute_dynamics(system, rho0, process_tensor=pt).states
    assert np.all(np.isfinite(states)) and abs(np.trace(states[-1]) - 1.0) < 0.1


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
        (np.array([[0.5, np.inf], [0.0, 0.5]]), "not finite"),
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
