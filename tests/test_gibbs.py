"""Tests of Gibbs TEMPO (``GibbsTempo``, ``gibbs_tempo_compute``, ``GibbsParameters``):
the mean-force Gibbs state Tr_B exp(-beta H) / Z, through the public API.

References, computed here independently of the library:

- [H_S, S] = 0: every path is constant, so the state is exactly
  diag(exp(-beta (E_n - lambda s_n^2))) / Z with lambda = int J(w) / w dw (= 2 alpha wc
  for the Ohmic PowerLawSD), for any n_steps (the discretised couplings tile the
  imaginary-time triangle exactly); and log(Z / Z_B) is the log of that Z;
- weak coupling: exp(-beta H_S) / Z, approached linearly in alpha;
- a rotation W of H_S and S together rotates the state: W rho W^dagger;
- [H_S, S] != 0: the symmetric splitting is of second order in 1/n_steps;
- real time: the steady state of the same Hamiltonian from a uniform process tensor
  (``compute_steady_state``), an independent method with its own discretisation.

NumPy against JAX: on JAX the run is repeated under ``use_backend("numpy")``.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import scipy.linalg

import nonmarkov as nm
from models import SX, SZ
from nonmarkov import backends

SILENT = {"progress_type": "silent"}
CUTOFF = 5.0


def ohmic_bath(coupling_operator, alpha, temperature, cutoff=CUTOFF):
    return nm.Bath(coupling_operator, nm.PowerLawSD(alpha, 1.0, cutoff, temperature=temperature))


def commuting_reference(energies, couplings, alpha, temperature, cutoff=CUTOFF):
    """The exact mean-force state and log(Z / Z_B) of diagonal H_S and S."""
    reorganisation = 2.0 * alpha * cutoff
    exponents = -(np.asarray(energies) - reorganisation * np.asarray(couplings) ** 2) / temperature
    weights = np.exp(exponents)
    return np.diag(weights / weights.sum()), float(np.log(weights.sum()))


def random_unitary(d, seed):
    rng = np.random.default_rng(seed)
    q, r = np.linalg.qr(rng.normal(size=(d, d)) + 1j * rng.normal(size=(d, d)))
    return q * (np.diag(r) / np.abs(np.diag(r)))


def spin_boson(n_steps, epsrel=1e-11, alpha=0.2, temperature=0.5):
    """A biased spin-boson model whose H_S does not commute with S."""
    system = nm.System(0.5 * SX + 0.2 * SZ)
    bath = ohmic_bath(0.5 * SZ, alpha, temperature)
    gibbs = nm.GibbsTempo(system, bath, nm.GibbsParameters(n_steps, epsrel))
    gibbs.compute(**SILENT)
    return gibbs


@pytest.mark.parametrize("n_steps", [2, 7, 24])
def test_commuting_model_is_exact_for_any_number_of_steps(n_steps, tol):
    energies, couplings = np.array([0.5, -0.5]), np.array([1.0, 0.0])
    system = nm.System(np.diag(energies))
    bath = ohmic_bath(np.diag(couplings), alpha=0.3, temperature=2.1)
    gibbs = nm.GibbsTempo(system, bath, nm.GibbsParameters(n_steps, 1e-12))
    gibbs.compute(**SILENT)
    state, log_z = commuting_reference(energies, couplings, 0.3, 2.1)
    tol.assert_close(gibbs.get_state(), state, kind="physics")
    assert gibbs.log_partition_function == pytest.approx(log_z, rel=1e-8)


def test_commuting_spin_one_with_degenerate_coupling(tol):
    energies = np.array([1.0, 0.0, -1.0])
    couplings = np.array([1.0, 1.0, -0.5])
    state, log_z = commuting_reference(energies, couplings, 0.1, 0.8)
    gibbs = nm.GibbsTempo(
        nm.System(np.diag(energies)),
        ohmic_bath(np.diag(couplings), alpha=0.1, temperature=0.8),
        nm.GibbsParameters(10, 1e-12),
    )
    gibbs.compute(**SILENT)
    tol.assert_close(gibbs.get_state(), state, kind="physics")
    assert gibbs.log_partition_function == pytest.approx(log_z, rel=1e-8)


def test_weak_coupling_tends_to_the_system_gibbs_state():
    temperature = 0.5
    hamiltonian = 0.5 * SX + 0.2 * SZ
    bare = scipy.linalg.expm(-hamiltonian / temperature)
    bare /= np.trace(bare)
    errors = []
    for alpha in (1e-3, 1e-4):
        system = nm.System(hamiltonian)
        bath = ohmic_bath(0.5 * SZ, alpha, temperature)
        state = nm.gibbs_tempo_compute(system, bath, nm.GibbsParameters(8, 1e-12), **SILENT)
        errors.append(np.abs(state - bare).max())
    assert errors[0] < 0.05
    assert errors[0] / errors[1] == pytest.approx(10.0, rel=0.05)  # linear in alpha


@pytest.mark.parametrize(
    "coupling", [np.diag([1.0, 0.0, -1.0]), np.diag([0.5, 0.5, -1.0])], ids=["plain", "degenerate"]
)
def test_rotating_system_and_coupling_together_rotates_the_state(coupling, tol):
    hamiltonian = np.array([[0.3, 0.4, 0.0], [0.4, 0.0, 0.2j], [0.0, -0.2j, -0.5]])
    w = random_unitary(3, seed=7)
    parameters = nm.GibbsParameters(8, 1e-12)
    plain = nm.gibbs_tempo_compute(
        nm.System(hamiltonian), ohmic_bath(coupling, 0.15, 0.7), parameters, **SILENT
    )
    rotated = nm.gibbs_tempo_compute(
        nm.System(w @ hamiltonian @ w.conj().T),
        ohmic_bath(w @ coupling @ w.conj().T, 0.15, 0.7),
        parameters,
        **SILENT,
    )
    tol.assert_close(rotated, w @ plain @ w.conj().T, kind="agree")


def test_second_order_in_the_imaginary_time_step():
    states = {n: spin_boson(n).get_state() for n in (6, 12, 24)}
    coarse = np.abs(states[6] - states[12]).max()
    fine = np.abs(states[12] - states[24]).max()
    assert coarse / fine == pytest.approx(4.0, rel=0.15)


def test_state_is_a_density_matrix_and_matches_its_dynamics():
    gibbs = spin_boson(10)
    dynamics = gibbs.get_dynamics()
    assert len(dynamics.times) == 11
    assert dynamics.times[-1] == pytest.approx(1.0 / gibbs.temperature)
    state = gibbs.get_state()
    np.testing.assert_allclose(state, dynamics.states[-1], atol=1e-14)
    assert np.trace(state) == pytest.approx(1.0)
    np.testing.assert_allclose(state, state.conj().T, atol=1e-15)
    assert np.linalg.eigvalsh(state).min() > 0.0
    assert gibbs.compute(**SILENT) is dynamics  # done: a second call adds nothing
    assert len(dynamics.times) == 11


@pytest.mark.slow
def test_agrees_with_the_steady_state_of_the_real_time_dynamics():
    """Independent methods: imaginary-time TEMPO against the relaxed state of a
    uniform process tensor (real time, dt 0.1, memory cut 2 with the rest lumped).
    A Gaussian cutoff, so that the real-time memory is short; measured: 4.3e-4 apart,
    1.1e-3 at dt 0.2 (the real-time discretisation error dominates)."""
    system = nm.System(0.5 * SX + 0.2 * SZ)
    bath = nm.Bath(0.5 * SZ, nm.PowerLawSD(0.1, 1.0, CUTOFF, "gaussian", temperature=0.5))
    gibbs = nm.gibbs_tempo_compute(system, bath, nm.GibbsParameters(40, 1e-11), **SILENT)
    parameters = nm.TempoParameters(dt=0.1, tcut=2.0, epsrel=1e-6, add_correlation_time=math.inf)
    steady = nm.compute_steady_state(system, nm.pt_uniform_compute(bath, parameters, **SILENT))
    np.testing.assert_allclose(steady, gibbs, atol=1e-3)


@pytest.mark.skip_backend("numpy", "compares the JAX engine with NumPy")
def test_jax_agrees_with_numpy(tol):
    session = spin_boson(12, epsrel=1e-10)
    with backends.use_backend("numpy"):
        reference = spin_boson(12, epsrel=1e-10)
    tol.assert_close(session.get_state(), reference.get_state(), kind="agree")
    assert session.log_partition_function == pytest.approx(
        reference.log_partition_function, rel=1e-10
    )


def test_oqupy_names_and_module_path():
    assert nm.tempo.GibbsTempo is nm.GibbsTempo
    assert nm.tempo.GibbsParameters is nm.GibbsParameters
    assert nm.tempo.gibbs_tempo_compute is nm.gibbs_tempo_compute
    assert nm.GibbsParameters(5, 1e-6).time_step_length(2.0) == pytest.approx(0.1)


# -- bad input: a clear error before any work ------------------------------------------


def test_bad_parameters():
    with pytest.raises(ValueError, match="n_steps"):
        nm.GibbsParameters(1, 1e-6)
    with pytest.raises(TypeError, match="n_steps"):
        nm.GibbsParameters(10.0, 1e-6)
    with pytest.raises(TypeError, match="n_steps"):
        nm.GibbsParameters(True, 1e-6)
    with pytest.raises(ValueError, match="epsrel"):
        nm.GibbsParameters(10, 0.0)
    with pytest.raises(ValueError, match="temperature"):
        nm.GibbsParameters(10, 1e-6).time_step_length(0.0)


def test_bad_models():
    parameters = nm.GibbsParameters(4, 1e-8)
    bath = ohmic_bath(0.5 * SZ, 0.1, 1.0)
    system = nm.System(0.5 * SX)
    with pytest.raises(ValueError, match="temperature > 0"):
        nm.GibbsTempo(system, ohmic_bath(0.5 * SZ, 0.1, 0.0), parameters)
    with pytest.raises(ValueError, match="Lindblad"):
        nm.GibbsTempo(nm.System(0.5 * SX, gammas=[0.1], lindblad_operators=[SZ]), bath, parameters)
    with pytest.raises(TypeError, match="time-independent System"):
        nm.GibbsTempo(nm.TimeDependentSystem(lambda t: 0.5 * SX), bath, parameters)
    with pytest.raises(TypeError, match="spectral density"):
        nm.GibbsTempo(system, nm.Bath(0.5 * SZ, nm.CustomCorrelations(lambda t: 0j)), parameters)
    with pytest.raises(ValueError, match="dimension"):
        nm.GibbsTempo(nm.System(np.eye(3)), bath, parameters)
    with pytest.raises(TypeError, match="GibbsParameters"):
        nm.GibbsTempo(system, bath, nm.TempoParameters(dt=0.1, epsrel=1e-6))
    gibbs = nm.GibbsTempo(system, bath, parameters)
    with pytest.raises(ValueError, match="compute"):
        gibbs.get_state()
    with pytest.raises(ValueError, match="compute"):
        assert gibbs.log_partition_function
