"""Tests of ``compute_dynamics``, ``Control``, ``Dynamics`` and the process-tensor classes.

Lindblad-only dynamics (zero-coupling bath or no process tensor) against the
exact exponential decay; controls against a manual propagation with expm of
a Liouvillian built here; control identities with a real bath; the results
object (expectations, file round trips); process-tensor accessors; bad input.
"""

from __future__ import annotations

import numpy as np
import pytest
import scipy.linalg

import nonmarkov as nm
from models import (
    SX,
    SZ,
    driven_spin_boson,
    lindblad_exact,
    lindblad_problem,
    liouvillian,
    pure_state,
)


def rotation(angle, axis):
    """exp(-i angle axis / 2)."""
    return scipy.linalg.expm(-0.5j * angle * axis)


@pytest.fixture(scope="module")
def bath_pt():
    """A small process tensor of a real bath (driven spin-boson), 5 steps of 0.2."""
    _, bath, _ = driven_spin_boson(alpha=0.2)
    parameters = nm.TempoParameters(dt=0.2, epsrel=1e-9, dkmax=3)
    return nm.PtTempo(bath, 0.0, 1.0, parameters).get_process_tensor(progress_type="silent")


# --------------------------------------------------------------------------
# Lindblad-only dynamics
# --------------------------------------------------------------------------


def test_pt_tempo_zero_coupling_gives_lindblad_decay():
    omega, gamma, system, bath, rho0 = lindblad_problem()
    parameters = nm.TempoParameters(dt=0.1, epsrel=1e-10, dkmax=3)
    pt = nm.PtTempo(bath, 0.0, 1.0, parameters).get_process_tensor(progress_type="silent")
    dynamics = nm.compute_dynamics(system, rho0, process_tensor=pt, progress_type="silent")
    assert len(dynamics) == 11
    excited, coherence = lindblad_exact(omega, gamma, rho0, dynamics.times)
    np.testing.assert_allclose(dynamics.states[:, 0, 0], excited, atol=1e-12)
    np.testing.assert_allclose(dynamics.states[:, 0, 1], coherence, atol=1e-12)
    np.testing.assert_allclose(dynamics.states[:, 1, 1], 1.0 - excited, atol=1e-12)


def test_compute_dynamics_without_process_tensor():
    omega, gamma, system, _, rho0 = lindblad_problem()
    dynamics = nm.compute_dynamics(
        system, rho0, dt=0.1, num_steps=10, start_time=0.5, progress_type="silent"
    )
    np.testing.assert_allclose(dynamics.times, 0.5 + 0.1 * np.arange(11), atol=1e-12)
    excited, coherence = lindblad_exact(omega, gamma, rho0, dynamics.times - 0.5)
    np.testing.assert_allclose(dynamics.states[:, 0, 0], excited, atol=1e-12)
    np.testing.assert_allclose(dynamics.states[:, 0, 1], coherence, atol=1e-12)
    with pytest.raises(ValueError, match="num_steps"):
        nm.compute_dynamics(system, rho0, dt=0.1, progress_type="silent")
    with pytest.raises(ValueError, match="dt"):
        nm.compute_dynamics(system, rho0, num_steps=3, progress_type="silent")


def test_record_all_false_keeps_initial_and_final():
    _, _, system, _, rho0 = lindblad_problem()
    every = nm.compute_dynamics(system, rho0, dt=0.1, num_steps=6, progress_type="silent")
    last = nm.compute_dynamics(
        system, rho0, dt=0.1, num_steps=6, record_all=False, progress_type="silent"
    )
    np.testing.assert_allclose(last.times, [0.0, 0.6], atol=1e-12)
    np.testing.assert_allclose(last.states[-1], every.states[-1], atol=1e-14)


def test_trivial_process_tensor_equals_no_process_tensor(bath_pt):
    system, _, rho0 = driven_spin_boson()
    reference = nm.compute_dynamics(system, rho0, dt=0.2, num_steps=5, progress_type="silent")
    trivial = nm.compute_dynamics(
        system,
        rho0,
        dt=0.2,
        num_steps=5,
        process_tensor=nm.TrivialProcessTensor(2),
        progress_type="silent",
    )
    np.testing.assert_allclose(trivial.states, reference.states, atol=1e-14)
    with_bath = nm.compute_dynamics(system, rho0, process_tensor=bath_pt, progress_type="silent")
    with_both = nm.compute_dynamics(
        system, rho0, process_tensor=[bath_pt, nm.TrivialProcessTensor(2)], progress_type="silent"
    )
    np.testing.assert_allclose(with_both.states, with_bath.states, atol=1e-14)
    assert np.max(np.abs(with_bath.states - reference.states)) > 1e-2


def test_shorter_num_steps_is_prefix_of_full(bath_pt):
    """Reading out before the PT's end (future cap) gives the same states."""
    system, _, rho0 = driven_spin_boson()
    full = nm.compute_dynamics(system, rho0, process_tensor=bath_pt, progress_type="silent")
    part = nm.compute_dynamics(
        system, rho0, process_tensor=bath_pt, num_steps=3, progress_type="silent"
    )
    assert len(full) == 6 and len(part) == 4
    np.testing.assert_allclose(part.states, full.states[:4], atol=1e-7)


# --------------------------------------------------------------------------
# controls
# --------------------------------------------------------------------------


@pytest.mark.parametrize("post", [False, True], ids=["pre", "post"])
@pytest.mark.parametrize("use_time", [False, True], ids=["step", "time"])
def test_control_equals_manual_propagation(post, use_time):
    omega, gamma, system, bath, rho0 = lindblad_problem()
    dt, num_steps, k = 0.2, 5, 2
    unitary = rotation(0.9, SX) @ rotation(0.4, SZ)
    superop = np.kron(unitary, unitary.conj())  # vec(U rho U^dag), row-major
    control = nm.Control(2)
    control.add_single(k * dt if use_time else k, superop, post=post)
    # zero-coupling bath through a process tensor, and no bath at all
    pt = nm.PtTempo(
        bath, 0.0, dt * num_steps, nm.TempoParameters(dt=dt, epsrel=1e-10, dkmax=2)
    ).get_process_tensor(progress_type="silent")
    with_pt = nm.compute_dynamics(
        system, rho0, process_tensor=pt, control=control, progress_type="silent"
    )
    no_pt = nm.compute_dynamics(
        system, rho0, dt=dt, num_steps=num_steps, control=control, progress_type="silent"
    )
    # manual: rho_{j+1} = expm(L dt) rho_j, with U . U^dag at t_k before rho(t_k) is
    # recorded (pre) or after it, before the step to t_{k+1} (post)
    step = scipy.linalg.expm(
        liouvillian(0.5 * omega * SZ, gamma, np.array([[0.0, 0.0], [1.0, 0.0]], dtype=complex)) * dt
    )
    rho = rho0.copy()
    expected = []
    for j in range(num_steps + 1):
        if j == k and not post:
            rho = unitary @ rho @ unitary.conj().T
        expected.append(rho)
        if j == k and post:
            rho = unitary @ rho @ unitary.conj().T
        rho = (step @ rho.reshape(-1)).reshape(2, 2)
    expected = np.array(expected)
    np.testing.assert_allclose(no_pt.states, expected, atol=1e-12)
    np.testing.assert_allclose(with_pt.states, expected, atol=1e-12)
    # and the control did something
    plain = nm.compute_dynamics(system, rho0, dt=dt, num_steps=num_steps, progress_type="silent")
    assert np.max(np.abs(plain.states - expected)) > 1e-2


def test_identity_control_changes_nothing(bath_pt):
    system, _, rho0 = driven_spin_boson()
    control = nm.Control(2)
    control.add_single(1, np.eye(4))
    control.add_single(3, np.eye(4), post=True)
    plain = nm.compute_dynamics(system, rho0, process_tensor=bath_pt, progress_type="silent")
    controlled = nm.compute_dynamics(
        system, rho0, process_tensor=bath_pt, control=control, progress_type="silent"
    )
    np.testing.assert_allclose(controlled.states, plain.states, rtol=0, atol=1e-13)


def test_pre_and_post_control_at_k_differ_only_at_t_k(bath_pt):
    system, _, rho0 = driven_spin_boson()
    k = 2
    unitary = rotation(1.1, SX)
    superop = np.kron(unitary, unitary.conj())
    pre, post = nm.Control(2), nm.Control(2)
    pre.add_single(k, superop)
    post.add_single(k, superop, post=True)
    dyn_pre = nm.compute_dynamics(
        system, rho0, process_tensor=bath_pt, control=pre, progress_type="silent"
    )
    dyn_post = nm.compute_dynamics(
        system, rho0, process_tensor=bath_pt, control=post, progress_type="silent"
    )
    others = [j for j in range(len(dyn_pre)) if j != k]
    np.testing.assert_allclose(dyn_pre.states[others], dyn_post.states[others], rtol=0, atol=1e-12)
    # at t_k the pre variant records the state after the control, the post variant before it
    np.testing.assert_allclose(
        dyn_pre.states[k], unitary @ dyn_post.states[k] @ unitary.conj().T, atol=1e-7
    )
    plain = nm.compute_dynamics(system, rho0, process_tensor=bath_pt, progress_type="silent")
    np.testing.assert_allclose(dyn_post.states[: k + 1], plain.states[: k + 1], atol=1e-13)
    assert np.max(np.abs(dyn_post.states[k + 1 :] - plain.states[k + 1 :])) > 1e-2


def test_control_rejects_bad_input():
    control = nm.Control(2)
    with pytest.raises(ValueError, match="control_operation"):
        control.add_single(0, np.eye(2))
    with pytest.raises(TypeError, match="time"):
        control.add_single("soon", np.eye(4))
    system, _, rho0 = driven_spin_boson()
    with pytest.raises(ValueError, match="control"):
        nm.compute_dynamics(
            system, rho0, dt=0.1, num_steps=2, control=nm.Control(3), progress_type="silent"
        )
    with pytest.raises(TypeError, match="control"):
        nm.compute_dynamics(
            system, rho0, dt=0.1, num_steps=2, control=np.eye(4), progress_type="silent"
        )


# --------------------------------------------------------------------------
# compute_dynamics: bad input
# --------------------------------------------------------------------------


def test_compute_dynamics_rejects_process_tensor_that_does_not_fit(bath_pt):
    system, _, rho0 = driven_spin_boson()
    with pytest.raises(ValueError, match="dt"):
        nm.compute_dynamics(system, rho0, dt=0.1, process_tensor=bath_pt, progress_type="silent")
    with pytest.raises(ValueError, match="num_steps"):
        nm.compute_dynamics(
            system, rho0, num_steps=len(bath_pt) + 1, process_tensor=bath_pt, progress_type="silent"
        )
    three_level = nm.System(np.diag([0.0, 1.0, 2.0]))
    with pytest.raises(ValueError, match="dimension"):
        nm.compute_dynamics(
            three_level, np.eye(3) / 3.0, process_tensor=bath_pt, progress_type="silent"
        )
    with pytest.raises(TypeError, match="process_tensor"):
        nm.compute_dynamics(system, rho0, process_tensor=[bath_pt, "pt"], progress_type="silent")


@pytest.mark.parametrize(
    "state",
    [
        np.eye(3) / 3.0,
        np.ones((2, 3)) / 2.0,
        np.array([[0.5, np.nan], [0.0, 0.5]]),
    ],
    ids=["wrong-shape", "not-square", "nan"],
)
def test_compute_dynamics_rejects_bad_initial_state(state):
    # any finite (d, d) operator is accepted (the map is linear: tests/test_oqupy_api.py)
    system, _, _ = driven_spin_boson()
    with pytest.raises(ValueError, match="initial_state"):
        nm.compute_dynamics(system, state, dt=0.1, num_steps=2, progress_type="silent")


def test_compute_dynamics_rejects_missing_state_and_progress_type():
    system, _, rho0 = driven_spin_boson()
    with pytest.raises(ValueError, match="initial_state"):
        nm.compute_dynamics(system, dt=0.1, num_steps=2, progress_type="silent")
    with pytest.raises(ValueError, match="progress_type"):
        nm.compute_dynamics(system, rho0, dt=0.1, num_steps=2, progress_type="fancy")
    with pytest.raises(ValueError, match="dt"):
        nm.compute_dynamics(system, rho0, dt=-0.1, num_steps=2, progress_type="silent")
    with pytest.raises(TypeError, match="system"):
        nm.compute_dynamics(0.5 * SX, rho0, dt=0.1, num_steps=2, progress_type="silent")


# --------------------------------------------------------------------------
# Dynamics results
# --------------------------------------------------------------------------


def example_dynamics():
    times = [0.0, 0.1, 0.2]
    states = [pure_state(1.0, 0.0), pure_state(1.0, 1.0), np.eye(2) / 2.0]
    return nm.Dynamics(times, states, name="example", description="three states")


def test_dynamics_expectations():
    dynamics = example_dynamics()
    times, trace = dynamics.expectations()
    np.testing.assert_allclose(times, [0.0, 0.1, 0.2])
    np.testing.assert_allclose(trace, [1.0, 1.0, 1.0], atol=1e-15)
    _, z = dynamics.expectations(SZ, real=True)
    np.testing.assert_allclose(z, [1.0, 0.0, 0.0], atol=1e-15)
    assert np.isrealobj(z)
    _, x = dynamics.expectations(SX)
    np.testing.assert_allclose(x, [0.0, 1.0, 0.0], atol=1e-15)
    # a non-Hermitian operator: Tr(sigma_+ rho) = rho_10
    sigma_plus = np.array([[0.0, 1.0], [0.0, 0.0]])
    _, plus = dynamics.expectations(sigma_plus)
    np.testing.assert_allclose(plus, dynamics.states[:, 1, 0], atol=1e-15)
    assert dynamics.shape.tolist() == [2, 2]  # the shape of one state
    assert dynamics.states.shape == (3, 2, 2)
    with pytest.raises(ValueError, match="operator"):
        dynamics.expectations(np.eye(3))


def test_dynamics_rejects_inconsistent_input():
    with pytest.raises(ValueError, match="same length"):
        nm.Dynamics([0.0, 0.1], [np.eye(2) / 2.0])
    dynamics = example_dynamics()
    with pytest.raises(ValueError, match="shape"):
        dynamics.add(0.3, np.eye(3) / 3.0)


@pytest.mark.parametrize("extension", [".npz", ".h5"])
def test_dynamics_export_import_round_trip(tmp_path, extension):
    if extension == ".h5":
        pytest.importorskip("h5py")
    dynamics = example_dynamics()
    filename = tmp_path / f"dynamics{extension}"
    dynamics.export(str(filename))
    loaded = nm.import_dynamics(str(filename))
    assert isinstance(loaded, nm.Dynamics)
    np.testing.assert_array_equal(loaded.times, dynamics.times)
    np.testing.assert_array_equal(loaded.states, dynamics.states)
    assert loaded.name == "example"
    assert loaded.description == "three states"
    with pytest.raises(FileExistsError):
        dynamics.export(str(filename))
    dynamics.export(str(filename), overwrite=True)
    assert sorted(p.name for p in tmp_path.iterdir()) == [filename.name]  # no temporaries


def test_dynamics_export_rejects_unknown_extension(tmp_path):
    with pytest.raises(ValueError, match="file type"):
        example_dynamics().export(str(tmp_path / "dynamics.txt"))
    with pytest.raises(ValueError, match="file type"):
        nm.import_dynamics(str(tmp_path / "dynamics.txt"))


# --------------------------------------------------------------------------
# process-tensor objects
# --------------------------------------------------------------------------


def test_simple_process_tensor_accessors(bath_pt):
    assert len(bath_pt) == 5
    assert bath_pt.dt == pytest.approx(0.2)
    assert bath_pt.dimension == bath_pt.hilbert_space_dimension == 2
    bonds = bath_pt.get_bond_dimensions()
    assert bonds.shape == (6,)
    assert bonds[0] == 1 and bonds[-1] == 1
    for step in range(len(bath_pt)):
        tensor, classes = bath_pt.get_step_tensor(step)
        assert tensor.shape[:2] == (bonds[step], bonds[step + 1])
        mpo = bath_pt.get_mpo_tensor(step, transformed=False)
        assert mpo.shape == (bonds[step], bonds[step + 1], 4, 4)
        diagonal = np.einsum("abii->abi", mpo)
        np.testing.assert_array_equal(diagonal, tensor[:, :, classes])
        off_diagonal = mpo.copy()
        off_diagonal[:, :, np.arange(4), np.arange(4)] = 0.0
        assert not np.any(off_diagonal)
    transform_in, transform_out = bath_pt.transform_in, bath_pt.transform_out
    np.testing.assert_allclose(transform_out @ transform_in, np.eye(4), atol=1e-12)
    with pytest.raises(IndexError):
        bath_pt.get_step_tensor(len(bath_pt))


def test_simple_process_tensor_set_and_validation():
    pt = nm.SimpleProcessTensor(2, 0.1)
    assert len(pt) == 0
    pt.set(0, np.ones((1, 2, 4)))
    pt.set(1, np.ones((2, 1, 4)))
    assert len(pt) == 2
    np.testing.assert_array_equal(pt.get_bond_dimensions(), [1, 2, 1])
    with pytest.raises(ValueError, match="shape"):
        pt.set(2, np.ones((1, 1, 3)))
    with pytest.raises(ValueError, match="beyond"):
        pt.set(5, np.ones((1, 1, 4)))
    with pytest.raises(ValueError, match="dt"):
        nm.SimpleProcessTensor(2, 0.0)


def test_trivial_process_tensor_properties():
    trivial = nm.TrivialProcessTensor(3)
    assert len(trivial) == 0
    assert trivial.dt is None
    assert trivial.dimension == 3
    assert trivial.get_bond_dimensions().size == 0
    np.testing.assert_array_equal(trivial.transform_in, np.eye(9))
