"""Tests of PT-TEMPO (``PtTempo``, ``pt_tempo_compute``) with ``compute_dynamics``.

Physics checks: the independent-boson model (exact), agreement with TEMPO on
the driven spin-boson model (full memory and a memory cut), degenerate
couplings (``unique``), a non-diagonal coupling against the rotated problem,
several baths (two process tensors), NumPy vs JAX. The exact solution and
the models are those of ``test_tempo.py``, from ``models.py``.
"""

from __future__ import annotations

import numpy as np
import pytest

import nonmarkov as nm
from models import (
    HADAMARD,
    INDEPENDENT_BOSON_MODELS,
    SX,
    SZ,
    assert_coherences_match,
    degenerate_three_level,
    driven_spin_boson,
    independent_boson_exact,
    independent_boson_problem,
    pure_state,
    spectral_density,
)
from nonmarkov import backends


def pt_dynamics(system, bath, rho0, parameters, end_time, unique=False):
    """Dynamics from a freshly computed process tensor of ``bath``."""
    pt = nm.PtTempo(bath, 0.0, end_time, parameters, unique=unique).get_process_tensor(
        progress_type="silent"
    )
    return nm.compute_dynamics(system, rho0, process_tensor=pt, progress_type="silent")


# --------------------------------------------------------------------------
# independent-boson model
# --------------------------------------------------------------------------


@pytest.mark.parametrize("key", list(INDEPENDENT_BOSON_MODELS))
def test_pt_tempo_independent_boson_exact(key):
    system, bath, rho0, parameters, end_time, exact, closed = independent_boson_problem(key)
    dynamics = pt_dynamics(system, bath, rho0, parameters, end_time)
    assert len(dynamics) == len(exact)
    np.testing.assert_allclose(dynamics.times, parameters.dt * np.arange(len(exact)), atol=1e-12)
    # full memory, epsrel = 1e-10, no Trotter error: exact up to truncation and
    # quadrature (measured <~ 4e-10); asserted bound 1e-8.
    assert_coherences_match(dynamics.states, exact, closed, bound=1e-8)


def test_two_baths_with_commuting_couplings_exact():
    """Two independent baths with diagonal couplings: the exponents of the exact
    solution add up. One PT per bath, combined in compute_dynamics."""
    energies = [0.3, -0.3]
    s1, s2 = [0.5, -0.5], [1.0, 0.0]
    ohmic = (0.1, 1.0, 4.0, "exponential")
    superohmic = (0.2, 3.0, 3.0, "gaussian")
    bath_1 = nm.Bath(np.diag(s1), nm.PowerLawSD(*ohmic[:3], cutoff_type=ohmic[3]))
    bath_2 = nm.Bath(np.diag(s2), nm.PowerLawSD(*superohmic[:3], cutoff_type=superohmic[3]))
    system = nm.System(np.diag(energies))
    rho0 = pure_state(0.8, 0.6 * np.exp(0.4j))
    parameters = nm.TempoParameters(dt=0.2, epsrel=1e-10)
    pts = [
        nm.PtTempo(bath, 0.0, 1.2, parameters).get_process_tensor(progress_type="silent")
        for bath in (bath_1, bath_2)
    ]
    dynamics = nm.compute_dynamics(system, rho0, process_tensor=pts, progress_type="silent")
    times = dynamics.times
    part_1 = independent_boson_exact(
        rho0, energies, s1, spectral_density(*ohmic), 0.0, times, 240.0
    )
    part_2 = independent_boson_exact(
        np.ones((2, 2)), [0.0, 0.0], s2, spectral_density(*superohmic), 0.0, times, 30.0
    )
    exact = part_1 * part_2
    closed = independent_boson_exact(rho0, energies, s1, lambda w: 0.0, 0.0, times, 1.0)
    # the second bath alone changes the coherence visibly
    assert np.max(np.abs(exact - part_1)) > 1e-2
    assert_coherences_match(dynamics.states, exact, closed, bound=1e-8)


# --------------------------------------------------------------------------
# agreement with TEMPO
# --------------------------------------------------------------------------


@pytest.mark.parametrize("dkmax, steps", [(None, 6), (5, 15)], ids=["full-memory", "dkmax5"])
def test_pt_tempo_agrees_with_tempo_driven_spin_boson(dkmax, steps):
    system, bath, rho0 = driven_spin_boson(alpha=0.2)
    parameters = nm.TempoParameters(dt=0.2, epsrel=1e-10, dkmax=dkmax)
    end_time = 0.2 * steps
    tempo = nm.Tempo(system, bath, parameters, rho0, 0.0).compute(end_time, progress_type="silent")
    pt = pt_dynamics(system, bath, rho0, parameters, end_time)
    assert len(tempo) == len(pt) == steps + 1
    np.testing.assert_allclose(pt.times, tempo.times, atol=1e-12)
    # the bath matters (compare with the closed system)
    closed = nm.compute_dynamics(system, rho0, dt=0.2, num_steps=steps, progress_type="silent")
    assert np.max(np.abs(tempo.states - closed.states)) > 1e-2
    # the same discretised influence functional: equal up to truncation (epsrel 1e-10)
    np.testing.assert_allclose(pt.states, tempo.states, rtol=0, atol=1e-8)


def test_pt_tempo_unique_agrees_with_full_index():
    system, bath, rho0 = degenerate_three_level()
    parameters = nm.TempoParameters(dt=0.2, epsrel=1e-10)
    full = pt_dynamics(system, bath, rho0, parameters, 0.8, unique=False)
    merged = pt_dynamics(system, bath, rho0, parameters, 0.8, unique=True)
    assert len(full) == len(merged) == 5
    closed = nm.compute_dynamics(system, rho0, dt=0.2, num_steps=4, progress_type="silent")
    assert np.max(np.abs(full.states - closed.states)) > 1e-2
    np.testing.assert_allclose(merged.states, full.states, rtol=0, atol=1e-8)


def test_pt_tempo_non_diagonal_coupling_equals_rotated_problem():
    correlations = nm.PowerLawSD(0.2, 1.0, 4.0, temperature=0.3)
    parameters = nm.TempoParameters(dt=0.2, epsrel=1e-10)
    rho_a = pure_state(1.0, 0.4 * np.exp(0.7j))
    rho_b = HADAMARD @ rho_a @ HADAMARD
    dyn_a = pt_dynamics(
        nm.System(0.5 * SZ), nm.Bath(0.5 * SX, correlations), rho_a, parameters, 1.0
    )
    dyn_b = pt_dynamics(
        nm.System(0.5 * SX), nm.Bath(0.5 * SZ, correlations), rho_b, parameters, 1.0
    )
    rotated = np.einsum("ij,njk,kl->nil", HADAMARD, dyn_a.states, HADAMARD)
    np.testing.assert_allclose(rotated, dyn_b.states, rtol=0, atol=1e-8)
    closed = nm.compute_dynamics(
        nm.System(0.5 * SX), rho_b, dt=0.2, num_steps=5, progress_type="silent"
    )
    assert np.max(np.abs(dyn_b.states - closed.states)) > 1e-2


def test_two_half_couplings_equal_one_full_coupling():
    """Two baths at alpha/2 (same S) have the influence of one bath at alpha."""
    system = nm.System(0.5 * SX)
    rho0 = pure_state(1.0, 0.0)
    parameters = nm.TempoParameters(dt=0.2, epsrel=1e-10)
    half = nm.PtTempo(
        nm.Bath(0.5 * SZ, nm.PowerLawSD(0.1, 1.0, 4.0)), 0.0, 1.2, parameters
    ).get_process_tensor(progress_type="silent")
    full = nm.PtTempo(
        nm.Bath(0.5 * SZ, nm.PowerLawSD(0.2, 1.0, 4.0)), 0.0, 1.2, parameters
    ).get_process_tensor(progress_type="silent")
    two = nm.compute_dynamics(system, rho0, process_tensor=[half, half], progress_type="silent")
    one = nm.compute_dynamics(system, rho0, process_tensor=full, progress_type="silent")
    single_half = nm.compute_dynamics(system, rho0, process_tensor=half, progress_type="silent")
    assert len(two) == len(one) == 7
    assert np.max(np.abs(single_half.states - one.states)) > 1e-3  # alpha matters
    np.testing.assert_allclose(two.states, one.states, rtol=0, atol=1e-8)


# --------------------------------------------------------------------------
# behaviour
# --------------------------------------------------------------------------


def test_pt_tempo_compute_one_call_and_properties():
    _, bath, _ = driven_spin_boson()
    parameters = nm.TempoParameters(dt=0.2, epsrel=1e-8, dkmax=3)
    pt_tempo = nm.PtTempo(bath, 0.0, 1.0, parameters)
    assert pt_tempo.num_steps == 5
    pt = pt_tempo.get_process_tensor(progress_type="silent")
    assert pt_tempo.get_process_tensor() is pt  # computed once
    assert isinstance(pt, nm.SimpleProcessTensor)
    assert len(pt) == 5
    assert pt.dt == pytest.approx(0.2)
    assert pt.dimension == 2
    bonds = pt.get_bond_dimensions()
    assert bonds[0] == bonds[-1] == 1 and len(bonds) == 6
    assert pt_tempo.max_bond_dimension >= int(bonds.max())
    one_call = nm.pt_tempo_compute(bath, 0.0, 1.0, parameters, progress_type="silent")
    assert len(one_call) == len(pt)
    for step in range(len(pt)):
        np.testing.assert_array_equal(
            one_call.get_step_tensor(step)[0], pt.get_step_tensor(step)[0]
        )


@pytest.mark.slow
def test_pt_tempo_numpy_and_jax_agree():
    pytest.importorskip("jax")
    system, bath, rho0 = driven_spin_boson()
    parameters = nm.TempoParameters(dt=0.2, epsrel=1e-10, dkmax=3)
    results = {}
    for name in ("numpy", "jax"):
        with backends.use_backend(name, "double"):
            pt = nm.PtTempo(bath, 0.0, 1.0, parameters).get_process_tensor(progress_type="silent")
            results[name] = nm.compute_dynamics(
                system, rho0, process_tensor=pt, progress_type="silent"
            ).states
    np.testing.assert_allclose(results["jax"], results["numpy"], rtol=0, atol=1e-10)


# --------------------------------------------------------------------------
# bad input
# --------------------------------------------------------------------------


def test_pt_tempo_rejects_end_time_before_start_time():
    _, bath, _ = driven_spin_boson()
    parameters = nm.TempoParameters(dt=0.1, epsrel=1e-6)
    with pytest.raises(ValueError, match="end_time"):
        nm.PtTempo(bath, 1.0, 0.5, parameters)
    with pytest.raises(ValueError, match="end_time"):
        nm.PtTempo(bath, 1.0, 1.0, parameters)
    with pytest.raises(ValueError, match="end_time"):
        nm.pt_tempo_compute(bath, 1.0, 0.5, parameters, progress_type="silent")


def test_pt_tempo_rejects_wrong_types_and_progress_type():
    _, bath, _ = driven_spin_boson()
    parameters = nm.TempoParameters(dt=0.1, epsrel=1e-6)
    with pytest.raises(TypeError, match="bath"):
        nm.PtTempo(0.5 * SZ, 0.0, 1.0, parameters)
    with pytest.raises(TypeError, match="parameters"):
        nm.PtTempo(bath, 0.0, 1.0, None)
    pt_tempo = nm.PtTempo(bath, 0.0, 0.3, parameters)
    with pytest.raises(ValueError, match="progress_type"):
        pt_tempo.compute(progress_type="fancy")
