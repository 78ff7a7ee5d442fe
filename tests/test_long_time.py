"""Tests of the long-time methods: the uniform process tensor and the process
tensor assembled from a repeating block (``pt_repeated_block_compute``).

Physics checks: untruncated, both reproduce sequential PT-TEMPO with the same
memory cut to rounding (spin-boson and independent-boson models) and the exact
independent-boson solution when the cut covers the whole run; truncated, they
agree within a bound set by epsrel; the steady state of a weakly coupled spin
at T > 0 is the system's thermal state up to O(alpha), and long-time dynamics
converge to it; NumPy and JAX agree. Problems are tiny (memory cut of a few
steps) so that the file also runs on the uncompiled JAX backend.
"""

from __future__ import annotations

import numpy as np
import pytest
import scipy.linalg

import nonmarkov as nm
from models import (
    SX,
    SZ,
    assert_coherences_match,
    biased_spin_boson,
    independent_boson_problem,
    pure_state,
    sequential,
)
from nonmarkov import UniformProcessTensor, backends
from nonmarkov.methods.pt_repeated import pt_repeated_block_compute
from nonmarkov.methods.uniform import (
    compute_steady_state,
    compute_uniform_dynamics,
    pt_uniform_compute,
)


def long_time_states(system, bath, rho0, parameters, num_steps, unique=False):
    """(uniform dynamics, dynamics of the assembled PT), both Dynamics objects.

    The assembled PT is ``pt_repeated_block_compute``'s (which falls back
    to sequential PT-TEMPO for num_steps <= 2 dkmax); its states must equal
    those of ``UniformProcessTensor.to_process_tensor``, which is checked here.
    """
    uniform = pt_uniform_compute(bath, parameters, unique=unique, progress_type="silent")
    by_uniform = compute_uniform_dynamics(system, rho0, num_steps, uniform, progress_type="silent")
    pt = pt_repeated_block_compute(
        bath, 0.0, num_steps * parameters.dt, parameters, unique=unique, progress_type="silent"
    )
    by_blocks = nm.compute_dynamics(system, rho0, process_tensor=pt, progress_type="silent")
    assembled = nm.compute_dynamics(
        system, rho0, process_tensor=uniform.to_process_tensor(num_steps), progress_type="silent"
    )
    np.testing.assert_allclose(assembled.states, by_uniform.states, rtol=0, atol=1e-12)
    return by_uniform, by_blocks


# --------------------------------------------------------------------------
# exactness when untruncated
# --------------------------------------------------------------------------


@pytest.mark.parametrize("dkmax, num_steps", [(1, 5), (3, 2), (3, 10)])
def test_untruncated_equals_sequential_pt_tempo(dkmax, num_steps):
    """The repeating tensor and its start block are an exact rewriting of the
    influence functional with a memory cut: with epsrel 1e-13 nothing is
    truncated (bond 3^dkmax at most), so they agree with PT-TEMPO to rounding
    (measured ~1e-14); asserted 1e-10. num_steps < dkmax checks the start block
    alone; num_steps > 2 dkmax the repeating-block PT."""
    system, bath, rho0 = biased_spin_boson()
    parameters = nm.TempoParameters(dt=0.2, epsrel=1e-13, dkmax=dkmax)
    reference = sequential(system, bath, rho0, parameters, num_steps)
    by_uniform, by_blocks = long_time_states(system, bath, rho0, parameters, num_steps)
    assert len(by_uniform) == len(by_blocks) == len(reference) == num_steps + 1
    np.testing.assert_allclose(by_uniform.times, reference.times, atol=1e-12)
    np.testing.assert_allclose(by_blocks.times, reference.times, atol=1e-12)
    closed = nm.compute_dynamics(system, rho0, dt=0.2, num_steps=num_steps, progress_type="silent")
    assert np.max(np.abs(reference.states - closed.states)) > 1e-3  # the bath matters
    np.testing.assert_allclose(by_uniform.states, reference.states, rtol=0, atol=1e-10)
    np.testing.assert_allclose(by_blocks.states, reference.states, rtol=0, atol=1e-10)


def test_independent_boson_exact_and_with_memory_cut():
    """Independent-boson model (ohmic, T = 1). With the cut as long as the run
    (dkmax = N = 3) the influence functional is the full one and the result is
    the exact solution (quadrature and rounding: measured ~1e-10; asserted
    1e-8). With dkmax = 2 < N = 6 it equals PT-TEMPO with the same cut (1e-10)."""
    system, bath, rho0, parameters, end_time, exact, closed = independent_boson_problem("ohmic-T1")
    num_steps = 3
    exact_short, closed_short = exact[: num_steps + 1], closed[: num_steps + 1]
    full = nm.TempoParameters(dt=parameters.dt, epsrel=1e-12, dkmax=num_steps)
    by_uniform, by_blocks = long_time_states(system, bath, rho0, full, num_steps)
    assert_coherences_match(by_uniform.states, exact_short, closed_short, bound=1e-8)
    assert_coherences_match(by_blocks.states, exact_short, closed_short, bound=1e-8)

    num_steps = len(exact) - 1
    cut = nm.TempoParameters(dt=parameters.dt, epsrel=1e-12, dkmax=2)
    reference = sequential(system, bath, rho0, cut, num_steps)
    by_uniform, by_blocks = long_time_states(system, bath, rho0, cut, num_steps)
    assert np.max(np.abs(reference.states - exact)) > 1e-5  # the cut changes the result
    np.testing.assert_allclose(by_uniform.states, reference.states, rtol=0, atol=1e-10)
    np.testing.assert_allclose(by_blocks.states, reference.states, rtol=0, atol=1e-10)


def test_unique_classes_give_the_same_dynamics():
    """unique=True (merged classes) and the full index agree when untruncated."""
    system, bath, rho0 = biased_spin_boson()
    parameters = nm.TempoParameters(dt=0.2, epsrel=1e-13, dkmax=2)
    merged, _ = long_time_states(system, bath, rho0, parameters, 6, unique=True)
    full, _ = long_time_states(system, bath, rho0, parameters, 6, unique=False)
    np.testing.assert_allclose(merged.states, full.states, rtol=0, atol=1e-10)


# --------------------------------------------------------------------------
# truncated: accuracy set by epsrel
# --------------------------------------------------------------------------


def test_truncated_agrees_within_epsrel_bound():
    """epsrel = 1e-4, dkmax = 3, 12 steps: against the untruncated result the
    uniform PT and sequential PT-TEMPO are both off by about epsrel (measured
    1.2e-4 and 1.6e-4; truncation errors add up over the steps); asserted:
    10 epsrel for each and between the two. The truncation must actually act
    (bond below the untruncated 3^3)."""
    system, bath, rho0 = biased_spin_boson()
    epsrel, num_steps = 1e-4, 12
    exact = sequential(
        system, bath, rho0, nm.TempoParameters(dt=0.2, epsrel=1e-13, dkmax=3), num_steps
    ).states
    parameters = nm.TempoParameters(dt=0.2, epsrel=epsrel, dkmax=3)
    reference = sequential(system, bath, rho0, parameters, num_steps).states
    uniform = pt_uniform_compute(bath, parameters, progress_type="silent")
    assert uniform.bond_dimension < 3**3
    states = compute_uniform_dynamics(
        system, rho0, num_steps, uniform, progress_type="silent"
    ).states
    bound = 10 * epsrel
    assert np.max(np.abs(states - exact)) < bound
    assert np.max(np.abs(reference - exact)) < bound
    assert np.max(np.abs(states - reference)) < bound


# --------------------------------------------------------------------------
# steady state
# --------------------------------------------------------------------------


def thermal_state(hamiltonian, temperature):
    rho = scipy.linalg.expm(-hamiltonian / temperature)
    return rho / np.trace(rho)


@pytest.mark.skip_backend(
    "jax", reason="bond ~40 transfer operator; covered by a smaller NumPy/JAX comparison below"
)
def test_steady_state_is_thermal_at_weak_coupling():
    """Spin H = 0.5 sigma_z, transverse coupling 0.5 sigma_x, ohmic alpha, T = 1.
    At weak coupling the steady state is the system's Gibbs state up to
    corrections of first order in alpha (mean-force state; plus the Trotter
    error of dt = 0.25). Measured deviations: 0.019 at alpha = 0.05, 0.012 at
    alpha = 0.025. Asserted: max |rho_ss - rho_th| < alpha, and smaller at
    alpha/2; the excited population is thermal (0.27), far from 1/2. Long-time
    dynamics from the uniform PT (100 time units), divided by their trace
    (which drifts by ~1e-5 with truncation), converge to rho_ss (asserted
    1e-5)."""
    hamiltonian = 0.5 * SZ
    thermal = thermal_state(hamiltonian, 1.0)
    deviations = []
    for alpha in (0.05, 0.025):
        bath = nm.Bath(0.5 * SX, nm.PowerLawSD(alpha, 1.0, 5.0, temperature=1.0))
        parameters = nm.TempoParameters(dt=0.25, epsrel=1e-7, dkmax=8)
        uniform = pt_uniform_compute(bath, parameters, progress_type="silent")
        system = nm.System(hamiltonian)
        steady = compute_steady_state(system, uniform)
        np.testing.assert_allclose(np.trace(steady), 1.0, atol=1e-12)
        np.testing.assert_allclose(steady, steady.conj().T, atol=1e-14)
        assert np.min(np.linalg.eigvalsh(steady)) > 0.0
        deviations.append(np.max(np.abs(steady - thermal)))
        assert deviations[-1] < alpha
        if alpha == 0.05:
            dynamics = compute_uniform_dynamics(
                system, pure_state(1.0, 0.0), 400, uniform, record_all=False, progress_type="silent"
            )
            assert len(dynamics) == 2
            final = dynamics.states[-1]
            assert abs(np.trace(final) - 1.0) < 1e-3
            np.testing.assert_allclose(final / np.trace(final), steady, rtol=0, atol=1e-5)
    assert deviations[1] < deviations[0]
    assert abs(thermal[1, 1].real - 0.5) > 10 * deviations[0]


def test_long_dynamics_converge_to_steady_state_small():
    """Small version for every backend: dynamics of 150 steps from the uniform
    PT approach compute_steady_state's result (measured ~1e-6; asserted 1e-4)."""
    bath = nm.Bath(0.5 * SX, nm.PowerLawSD(0.1, 1.0, 5.0, temperature=1.0))
    system = nm.System(0.5 * SZ)
    parameters = nm.TempoParameters(dt=0.3, epsrel=1e-5, dkmax=3)
    uniform = pt_uniform_compute(bath, parameters, progress_type="silent")
    steady = compute_steady_state(system, uniform)
    dynamics = compute_uniform_dynamics(
        system, pure_state(0.0, 1.0), 150, uniform, record_all=False, progress_type="silent"
    )
    final = dynamics.states[-1]
    np.testing.assert_allclose(final / np.trace(final), steady, rtol=0, atol=1e-4)
    assert np.max(np.abs(dynamics.states[0] - steady)) > 0.1  # it did move


# --------------------------------------------------------------------------
# behaviour
# --------------------------------------------------------------------------


def test_uniform_process_tensor_structure():
    _, bath, _ = biased_spin_boson()
    parameters = nm.TempoParameters(dt=0.2, epsrel=1e-8, dkmax=3)
    uniform = pt_uniform_compute(bath, parameters, progress_type="silent", name="u")
    assert isinstance(uniform, UniformProcessTensor)
    assert uniform.num_start_steps == 3
    assert uniform.dimension == 2 and uniform.dt == pytest.approx(0.2)
    chi = uniform.bond_dimension
    assert uniform.tensor.shape == (chi, chi, 4)
    assert uniform.end_vector.shape == (chi,)
    # the end vector is the fixed point of the trace-weighted transfer matrix
    transfer = uniform.trace_transfer_matrix()
    np.testing.assert_allclose(transfer @ uniform.end_vector, uniform.end_vector, atol=1e-12)
    # every step beyond the start block is the same tensor
    np.testing.assert_array_equal(uniform.get_step_tensor(7)[0], uniform.get_step_tensor(3)[0])
    for num_steps in (1, 2, 3, 4, 9):
        pt = uniform.to_process_tensor(num_steps)
        assert isinstance(pt, nm.SimpleProcessTensor) and len(pt) == num_steps
        bonds = pt.get_bond_dimensions()
        assert bonds[0] == bonds[-1] == 1
    assert "u" in str(uniform)
    # the protocol: any number of steps, caps of its own
    assert uniform.num_steps is None
    with pytest.raises(TypeError, match="no length"):
        len(uniform)
    np.testing.assert_array_equal(uniform.get_cap(50), uniform.end_vector)


def test_a_long_uniform_run_needs_k_plus_one_distinct_steps():
    """The chain engines see the repeating tensor as one array, so the compiled scan's
    table of a 2000-step run holds K + 1 rows (constant memory for any length)."""
    from nonmarkov.engines.eager_chain import EagerChainEngine
    from nonmarkov.engines.jax.scan import distinct_steps

    _, bath, _ = biased_spin_boson()
    uniform = pt_uniform_compute(
        bath, nm.TempoParameters(dt=0.2, epsrel=1e-6, dkmax=3), progress_type="silent"
    )
    num_steps = 2000
    prepared = EagerChainEngine().prepare([uniform], num_steps, record_all=True)[0]
    tensors = [uniform.get_step_tensor(k)[0] for k in range(num_steps)]
    first, rows = distinct_steps(tensors, [prepared.cap(k) for k in range(num_steps)])
    assert first == [0, 1, 2, 3] and rows[:5] == [0, 1, 2, 3, 3] and set(rows[3:]) == {3}


def test_numpy_and_jax_agree():
    """The uniform PT built with the NumPy window loop and with the compiled
    JAX window (then host work) gives the same dynamics and steady state on
    each backend (1e-10)."""
    pytest.importorskip("jax")
    system, bath, rho0 = biased_spin_boson()
    parameters = nm.TempoParameters(dt=0.2, epsrel=1e-8, dkmax=2)
    results = {}
    for name in ("numpy", "jax"):
        with backends.use_backend(name, "double"):
            uniform = pt_uniform_compute(bath, parameters, progress_type="silent")
            dynamics = compute_uniform_dynamics(system, rho0, 6, uniform, progress_type="silent")
            results[name] = (dynamics.states, compute_steady_state(system, uniform))
    np.testing.assert_allclose(results["jax"][0], results["numpy"][0], rtol=0, atol=1e-10)
    np.testing.assert_allclose(results["jax"][1], results["numpy"][1], rtol=0, atol=1e-10)


# --------------------------------------------------------------------------
# bad input
# --------------------------------------------------------------------------


def test_uniform_needs_a_memory_cut():
    _, bath, _ = biased_spin_boson()
    full_memory = nm.TempoParameters(dt=0.2, epsrel=1e-6)
    with pytest.raises(ValueError, match="memory cut"):
        pt_uniform_compute(bath, full_memory)
    with pytest.raises(ValueError, match="memory cut"):
        pt_repeated_block_compute(bath, 0.0, 1.0, full_memory)


def test_bad_types_and_dimensions():
    system, bath, rho0 = biased_spin_boson()
    parameters = nm.TempoParameters(dt=0.2, epsrel=1e-6, dkmax=2)
    with pytest.raises(TypeError, match="bath"):
        pt_uniform_compute(0.5 * SZ, parameters)
    with pytest.raises(TypeError, match="parameters"):
        pt_uniform_compute(bath, None)
    with pytest.raises(ValueError, match="end_time"):
        pt_repeated_block_compute(bath, 1.0, 0.5, parameters)
    uniform = pt_uniform_compute(bath, parameters, progress_type="silent")
    qutrit = nm.System(np.diag([0.0, 1.0, 2.0]))
    with pytest.raises(ValueError, match="dimension"):
        compute_uniform_dynamics(qutrit, np.eye(3) / 3, 2, uniform)
    with pytest.raises(ValueError, match="dimension"):
        compute_steady_state(qutrit, uniform)
    with pytest.raises(TypeError, match="uniform_pt"):
        compute_uniform_dynamics(system, rho0, 2, uniform.to_process_tensor(2))
    with pytest.raises(ValueError, match="initial_state"):
        compute_uniform_dynamics(system, np.eye(3) / 3, 2, uniform)
    with pytest.raises(ValueError, match="num_steps"):
        compute_uniform_dynamics(system, rho0, -1, uniform)
    driven = nm.TimeDependentSystem(lambda t: 0.5 * np.cos(t) * SX)
    with pytest.raises(TypeError, match="time-independent"):
        compute_steady_state(driven, uniform)
    with pytest.raises(ValueError, match="progress_type"):
        pt_uniform_compute(bath, parameters, progress_type="fancy")
    with pytest.raises(ValueError, match="tensor"):
        UniformProcessTensor(2, 0.2, [np.ones((1, 3, 4))], np.ones((3, 2, 4)), np.ones(3))
    with pytest.raises(ValueError, match="start_tensors"):
        UniformProcessTensor(2, 0.2, [np.ones((2, 3, 4))], np.ones((3, 3, 4)), np.ones(3))


def test_pt_tempo_compute_method_repeated_block(tmp_path):
    """pt_tempo_compute(method='repeated_block') gives the repeated-block PT
    (untruncated: the same dynamics as sequential PT-TEMPO to rounding), also
    written to a file; an unknown method is refused before any computation."""
    system, bath, rho0 = biased_spin_boson()
    parameters = nm.TempoParameters(dt=0.1, dkmax=2, epsrel=1e-13)
    reference = sequential(system, bath, rho0, parameters, 7)
    pt = nm.pt_tempo_compute(
        bath, 0.0, 0.7, parameters, method="repeated_block", progress_type="silent"
    )
    assert len(pt) == 7
    by_method = nm.compute_dynamics(system, rho0, process_tensor=pt, progress_type="silent")
    np.testing.assert_allclose(by_method.states, reference.states, rtol=0, atol=1e-10)
    path = tmp_path / "block.hdf5"
    on_file = nm.pt_tempo_compute(
        bath,
        0.0,
        0.7,
        parameters,
        method="repeated_block",
        process_tensor_file=str(path),
        progress_type="silent",
    )
    assert isinstance(on_file, nm.FileProcessTensor)
    from_file = nm.compute_dynamics(system, rho0, process_tensor=on_file, progress_type="silent")
    np.testing.assert_allclose(from_file.states, reference.states, rtol=0, atol=1e-10)
    with pytest.raises(ValueError, match="method"):
        nm.pt_tempo_compute(bath, 0.0, 0.7, parameters, method="divide")


def test_compute_dynamics_and_correlations_take_a_uniform_pt():
    """compute_dynamics(process_tensor=uniform, num_steps=N) equals
    compute_uniform_dynamics (1e-12); next to a finite PT of another bath it
    runs for that PT's length and equals the same run with the uniform PT
    made finite by hand; compute_correlations takes it too. Without
    num_steps or a finite PT it is a clear error."""
    system, bath, rho0 = biased_spin_boson()
    parameters = nm.TempoParameters(dt=0.2, epsrel=1e-8, dkmax=2)
    uniform = pt_uniform_compute(bath, parameters, progress_type="silent")
    reference = compute_uniform_dynamics(system, rho0, 9, uniform, progress_type="silent")
    dynamics = nm.compute_dynamics(
        system, rho0, process_tensor=uniform, num_steps=9, progress_type="silent"
    )
    np.testing.assert_allclose(dynamics.states, reference.states, rtol=0, atol=1e-12)

    other = nm.Bath(0.5 * SX, nm.PowerLawSD(0.05, 1.0, 4.0, temperature=0.5))
    finite = nm.PtTempo(other, 0.0, 6 * 0.2, parameters).get_process_tensor(progress_type="silent")
    mixed = nm.compute_dynamics(
        system, rho0, process_tensor=[uniform, finite], progress_type="silent"
    )
    by_hand = nm.compute_dynamics(
        system, rho0, process_tensor=[uniform.to_process_tensor(6), finite], progress_type="silent"
    )
    assert len(mixed) == 7
    np.testing.assert_allclose(mixed.states, by_hand.states, rtol=0, atol=1e-12)
    assert np.max(np.abs(mixed.states - reference.states[:7])) > 1e-4  # the second bath acts

    _, correlations = nm.compute_correlations(
        system,
        uniform,
        SZ,
        SZ,
        0.0,
        (0.0, 1.0),
        initial_state=rho0,
        num_steps=6,
        progress_type="silent",
    )
    _, by_hand_correlations = nm.compute_correlations(
        system,
        uniform.to_process_tensor(6),
        SZ,
        SZ,
        0.0,
        (0.0, 1.0),
        initial_state=rho0,
        progress_type="silent",
    )
    np.testing.assert_allclose(correlations, by_hand_correlations, rtol=0, atol=1e-12)
    with pytest.raises(ValueError, match="num_steps"):
        nm.compute_dynamics(system, rho0, process_tensor=uniform)
