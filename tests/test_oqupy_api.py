"""The OQuPy 0.5 module paths and the small model-level API pieces.

Module paths (``system_dynamics``, ``bath_correlations``, ``version``), the
two-site superoperators and the ``SIGMA``/``SPIN_DM`` tables, ``Bath.coupling_comm``
and ``coupling_acomm``, ``System.get_unitary_propagators``, the callables of a
``TimeDependentSystem``, ``guess_tempo_parameters(max_samples=...)`` and its
warning, and ``Dynamics.shape``/``expectations``. Expected values are derived
here from first principles (explicit matrix products, eigendecompositions).
"""

from __future__ import annotations

import importlib
import math
import warnings

import numpy as np
import pytest
import scipy.linalg
import scipy.stats

import nonmarkov as nm
from nonmarkov import operators as op

RNG = np.random.default_rng(20250117)


def random_matrix(d: int) -> np.ndarray:
    return RNG.normal(size=(d, d)) + 1j * RNG.normal(size=(d, d))


def random_hermitian(d: int) -> np.ndarray:
    m = random_matrix(d)
    return 0.5 * (m + m.conj().T)


def random_density_matrix(d: int) -> np.ndarray:
    m = random_matrix(d)
    rho = m @ m.conj().T
    return rho / np.trace(rho)


def vec(matrix: np.ndarray) -> np.ndarray:
    """Row-major vec of one site's (d, d) matrix."""
    return np.asarray(matrix).reshape(-1)


def two_site_vec(matrix: np.ndarray, d1: int, d2: int) -> np.ndarray:
    """A two-site operator R (rows (i1, i2), columns (j1, j2)) as a vector over the two
    Liouville spaces, site 1 first: index ((i1 d1 + j1) d2 + i2) d2 + j2."""
    return np.asarray(matrix).reshape(d1, d2, d1, d2).transpose(0, 2, 1, 3).reshape(-1)


def assert_close(a, b, tol=1e-12):
    np.testing.assert_allclose(a, b, rtol=tol, atol=tol)


@pytest.fixture(scope="module")
def correlations():
    return nm.PowerLawSD(0.1, 1.0, 2.0, "exponential", 0.0)


# --------------------------------------------------------------------------
# module paths
# --------------------------------------------------------------------------


def test_new_module_paths_import_and_re_export_the_package_objects():
    system_dynamics = importlib.import_module("nonmarkov.system_dynamics")
    for name in ("compute_dynamics", "compute_correlations", "compute_correlations_nt"):
        assert getattr(system_dynamics, name) is getattr(nm, name), name
    assert system_dynamics.Indices is not None
    bath_correlations = importlib.import_module("nonmarkov.bath_correlations")
    for name in ("BaseCorrelations", "CustomCorrelations", "CustomSD", "PowerLawSD"):
        assert getattr(bath_correlations, name) is getattr(nm.correlations, name), name
    version = importlib.import_module("nonmarkov.version")
    assert version.__version__ == nm.__version__
    assert nm.version is version and nm.system_dynamics is system_dynamics
    assert nm.bath_correlations is bath_correlations
    assert nm.tempo.GUESS_WARNING_MSG == nm.model.parameters.GUESS_WARNING_MSG


def test_a_closed_system_through_the_system_dynamics_path():
    """Rabi oscillation H = (w/2) sigma_x from |up>: <sigma_z>(t) = cos(w t)."""
    omega = 1.3
    system = nm.System(0.5 * omega * op.sigma("x"))
    dynamics = nm.system_dynamics.compute_dynamics(
        system, op.spin_dm("up"), dt=0.05, num_steps=40, progress_type="silent"
    )
    times, z = dynamics.expectations(op.sigma("z"), real=True)
    assert_close(z, np.cos(omega * times), tol=1e-10)
    assert dynamics.shape.tolist() == [2, 2]


# --------------------------------------------------------------------------
# SIGMA and SPIN_DM
# --------------------------------------------------------------------------


def test_sigma_table_holds_the_pauli_algebra():
    assert set(op.SIGMA) == {"id", "x", "y", "z", "+", "-"}
    m = {name: np.array(value, dtype=complex) for name, value in op.SIGMA.items()}
    for name, matrix in m.items():
        assert_close(matrix, op.sigma(name))
    assert_close(m["x"] @ m["y"], 1j * m["z"])
    assert_close(m["y"] @ m["z"], 1j * m["x"])
    for name in "xyz":
        assert_close(m[name] @ m[name], m["id"])
    assert_close(m["+"], 0.5 * (m["x"] + 1j * m["y"]))
    assert_close(m["-"], 0.5 * (m["x"] - 1j * m["y"]))
    # sigma_+ raises: it maps down (index 1) to up (index 0)
    assert_close(m["+"] @ np.array([0, 1]), np.array([1, 0]))


def test_spin_dm_table_holds_the_eigenstates_of_the_pauli_matrices():
    assert set(op.SPIN_DM) == {"up", "down", "z+", "z-", "x+", "x-", "y+", "y-", "mixed"}
    axis = {"up": ("z", 1), "down": ("z", -1), "z+": ("z", 1), "z-": ("z", -1)}
    axis.update({f"{a}{s}": (a, 1 if s == "+" else -1) for a in "xy" for s in "+-"})
    for name, value in op.SPIN_DM.items():
        rho = np.array(value, dtype=complex)
        assert_close(rho, op.spin_dm(name))
        assert_close(rho, rho.conj().T)
        assert np.trace(rho) == pytest.approx(1.0)
        if name == "mixed":
            assert_close(rho, 0.5 * np.eye(2))
            continue
        pauli, sign = axis[name]
        assert_close(rho @ rho, rho)  # pure
        assert_close(op.sigma(pauli) @ rho, sign * rho)  # eigenstate of the axis


# --------------------------------------------------------------------------
# two-site superoperators
# --------------------------------------------------------------------------


@pytest.mark.parametrize(("d1", "d2"), [(2, 2), (2, 3), (3, 2)])
def test_cross_commutators_act_on_two_site_operators(d1, d2):
    a, b = random_matrix(d1), random_matrix(d2)
    r = random_matrix(d1 * d2)
    ab = np.kron(a, b)
    comm = op.cross_commutator(a, b)
    acomm = op.cross_acommutator(a, b)
    assert comm.shape == acomm.shape == (d1**2 * d2**2, d1**2 * d2**2)
    assert_close(comm @ two_site_vec(r, d1, d2), two_site_vec(ab @ r - r @ ab, d1, d2))
    assert_close(acomm @ two_site_vec(r, d1, d2), two_site_vec(ab @ r + r @ ab, d1, d2))


@pytest.mark.parametrize(("d1", "d2"), [(2, 2), (3, 2)])
def test_cross_left_right_super_acts_on_two_site_operators(d1, d2):
    a1, b1, a2, b2 = random_matrix(d1), random_matrix(d1), random_matrix(d2), random_matrix(d2)
    r = random_matrix(d1 * d2)
    superop = op.cross_left_right_super(a1, b1, a2, b2)
    assert superop.shape == (d1**2 * d2**2, d1**2 * d2**2)
    expected = np.kron(a1, a2) @ r @ np.kron(b1, b2)
    assert_close(superop @ two_site_vec(r, d1, d2), two_site_vec(expected, d1, d2))
    # on a product state each site is transformed on its own
    rho1, rho2 = random_density_matrix(d1), random_density_matrix(d2)
    assert_close(
        superop @ np.kron(vec(rho1), vec(rho2)),
        np.kron(vec(a1 @ rho1 @ b1), vec(a2 @ rho2 @ b2)),
    )


def test_cross_commutator_generates_the_coupling_unitary():
    """exp(-i t [A kron B, .]) R = U R U^dag with U = exp(-i t A kron B)."""
    d1, d2, t = 2, 3, 0.7
    a, b = random_hermitian(d1), random_hermitian(d2)
    r = random_density_matrix(d1 * d2)
    u = scipy.linalg.expm(-1j * t * np.kron(a, b))
    propagator = scipy.linalg.expm(-1j * t * op.cross_commutator(a, b))
    assert_close(
        propagator @ two_site_vec(r, d1, d2), two_site_vec(u @ r @ u.conj().T, d1, d2), 1e-10
    )


def test_cross_maps_with_an_identity_reduce_to_one_site_maps():
    d1, d2 = 2, 3
    a = random_matrix(d1)
    identity_2 = np.eye(d2)
    assert_close(op.cross_commutator(a, identity_2), np.kron(op.commutator(a), np.eye(d2**2)))
    assert_close(op.cross_acommutator(a, identity_2), np.kron(op.acommutator(a), np.eye(d2**2)))
    a1, b1 = random_matrix(d1), random_matrix(d1)
    assert_close(
        op.cross_left_right_super(a1, b1, identity_2, identity_2),
        np.kron(op.left_right_super(a1, b1), np.eye(d2**2)),
    )


def test_cross_maps_reject_non_square_operators():
    with pytest.raises(ValueError, match="operator_1"):
        op.cross_commutator(np.ones((2, 3)), np.eye(2))
    with pytest.raises(ValueError, match="operator_2"):
        op.cross_acommutator(np.eye(2), np.ones(3))
    with pytest.raises(ValueError, match="same shape"):
        op.cross_left_right_super(np.eye(2), np.eye(3), np.eye(2), np.eye(2))


# --------------------------------------------------------------------------
# Bath.coupling_comm and coupling_acomm
# --------------------------------------------------------------------------


@pytest.mark.parametrize("d", [2, 3])
def test_coupling_comm_and_acomm_are_superoperator_diagonals(correlations, d):
    """The diagonals of [S, .] and {S, .} in the eigenbasis of S (unitary_transform)."""
    s = random_hermitian(d)
    bath = nm.Bath(s, correlations)
    v = bath.unitary_transform
    diagonal = v.conj().T @ s @ v
    assert_close(diagonal, np.diag(np.diag(diagonal)), 1e-12)
    comm, acomm = bath.coupling_comm, bath.coupling_acomm
    assert comm.shape == acomm.shape == (d * d,)
    assert comm.dtype == acomm.dtype == np.complex128
    assert_close(comm.imag, 0.0)
    # in the eigenbasis the (anti)commutator superoperators are diagonal
    assert_close(op.commutator(diagonal), np.diag(comm), 1e-12)
    assert_close(op.acommutator(diagonal), np.diag(acomm), 1e-12)
    # [S, |v_a><v_b|] = (s_a - s_b) |v_a><v_b|, {S, .} with s_a + s_b; alpha = a d + b
    for a in range(d):
        for b in range(d):
            x = np.outer(v[:, a], v[:, b].conj())
            assert_close(s @ x - x @ s, comm[a * d + b] * x, 1e-12)
            assert_close(s @ x + x @ s, acomm[a * d + b] * x, 1e-12)


def test_coupling_comm_of_a_degenerate_coupling(correlations):
    u = scipy.stats.unitary_group.rvs(3, random_state=4)
    bath = nm.Bath(u @ np.diag([1.0, 0.0, 0.0]) @ u.conj().T, correlations)
    s = bath.coupling_eigenvalues
    comm = bath.coupling_comm.real
    acomm = bath.coupling_acomm.real
    for a in range(3):
        for b in range(3):
            assert comm[a * 3 + b] == s[a] - s[b]  # exact, degenerate entries equal
            assert acomm[a * 3 + b] == s[a] + s[b]
    assert sorted(np.round(comm, 12).tolist()).count(0.0) == 5  # 3 diagonal + 2 degenerate


# --------------------------------------------------------------------------
# System.get_unitary_propagators
# --------------------------------------------------------------------------


def test_unitary_propagators_are_half_steps_of_the_hamiltonian():
    d, dt = 3, 0.3
    h = random_hermitian(d)
    a = random_matrix(d)
    system = nm.System(h, gammas=[0.4], lindblad_operators=[a])
    propagators = system.get_unitary_propagators(dt, 0.0, None, 1e-8)
    energies, vectors = np.linalg.eigh(h)
    exact_half = vectors @ np.diag(np.exp(-0.5j * dt * energies)) @ vectors.conj().T
    for step in (0, 5):
        first, second = propagators(step)
        assert first.shape == second.shape == (d, d)
        assert_close(first, exact_half, 1e-12)
        assert_close(second, exact_half, 1e-12)
        assert_close(first.conj().T @ first, np.eye(d), 1e-12)
    # without Lindblad terms, U rho U^dag is the Liouville half-step propagator
    closed = nm.System(h)
    liouville_first, _ = closed.get_propagators(dt)(0)
    first, _ = closed.get_unitary_propagators(dt)(0)
    rho = random_density_matrix(d)
    assert_close(liouville_first @ vec(rho), vec(first @ rho @ first.conj().T), 1e-12)


def test_unitary_propagators_reject_a_bad_time_step():
    system = nm.System(op.sigma("x"))
    with pytest.raises(ValueError, match="dt"):
        system.get_unitary_propagators(-0.1)


# --------------------------------------------------------------------------
# TimeDependentSystem.gammas and lindblad_operators
# --------------------------------------------------------------------------


def test_time_dependent_gammas_and_lindblad_operators_are_callables_of_time():
    def h(t):
        return math.cos(t) * op.sigma("x") + 0.3 * op.sigma("z")

    def rate(t):
        return 0.2 + 0.1 * math.sin(t)

    def jump(t):
        return math.exp(-t) * op.sigma("-") + 0.2 * t * op.sigma("z")

    system = nm.TimeDependentSystem(h, gammas=[rate], lindblad_operators=[jump])
    gammas, operators = system.gammas, system.lindblad_operators
    assert isinstance(gammas, list) and isinstance(operators, list)
    assert len(gammas) == len(operators) == 1
    assert all(callable(f) for f in gammas + operators)
    for t in (0.0, 0.7, 2.5):
        assert float(gammas[0](t)) == pytest.approx(rate(t))
        assert_close(operators[0](t), jump(t))
    times = np.linspace(0.0, 1.0, 5)
    assert_close(gammas[0](times), [rate(t) for t in times])
    assert operators[0](times).shape == (5, 2, 2)
    # the generator is built from exactly these callables (first principles)
    t = 0.9
    rho = random_density_matrix(2)
    a, g = np.asarray(operators[0](t)), float(gammas[0](t))
    ad = a.conj().T
    generated = -1j * (h(t) @ rho - rho @ h(t)) + g * (
        a @ rho @ ad - 0.5 * (ad @ a @ rho + rho @ ad @ a)
    )
    assert_close(system.liouvillian(t) @ vec(rho), vec(generated), 1e-12)
    # a copy: changing the list does not change the system
    gammas.append(rate)
    assert len(system.gammas) == 1
    assert nm.TimeDependentSystem(h).gammas == []
    assert nm.TimeDependentSystem(h).lindblad_operators == []


# --------------------------------------------------------------------------
# guess_tempo_parameters: the warning and max_samples
# --------------------------------------------------------------------------


def _bath(correlations):
    return nm.Bath(0.5 * op.sigma("z"), correlations)


def _uncoupled_bath(correlations):
    """Zero coupling: the memory cut is one step and the system alone limits dt."""
    return nm.Bath(np.zeros((2, 2)), correlations)


def test_guessing_parameters_warns(correlations):
    with pytest.warns(UserWarning) as record:
        parameters = nm.guess_tempo_parameters(_bath(correlations), 0.0, 2.0)
    assert isinstance(parameters, nm.TempoParameters)
    assert [str(w.message) for w in record] == [nm.tempo.GUESS_WARNING_MSG]


def test_guess_takes_oqupy_positional_order(correlations):
    bath = _bath(correlations)
    system = nm.System(2.0 * op.sigma("x"))
    with pytest.warns(UserWarning):
        positional = nm.guess_tempo_parameters(bath, 0.0, 2.0, system, 1e-2, 100)
    with pytest.warns(UserWarning):
        keywords = nm.guess_tempo_parameters(
            bath=bath, start_time=0.0, end_time=2.0, system=system, tolerance=1e-2, max_samples=100
        )
    assert (positional.dt, positional.epsrel, positional.dkmax) == (
        keywords.dt,
        keywords.epsrel,
        keywords.dkmax,
    )


def _pulsed_system(height: float, center: float, width: float) -> nm.TimeDependentSystem:
    """H(t) = h(t) sigma_x, h = 1 + (height - 1) exp(-((t - center)/width)^2): the generator
    -i[H, .] has spectral norm 2 h(t) (eigenvalues of H are +-h)."""

    def hamiltonian(t):
        return (1.0 + (height - 1.0) * math.exp(-(((t - center) / width) ** 2))) * op.sigma("x")

    return nm.TimeDependentSystem(hamiltonian)


def test_max_samples_resolves_the_largest_rate_of_a_time_dependent_system(correlations):
    """A pulse that the start time does not see limits dt: sqrt(tol) / (2 h_max)."""
    bath = _uncoupled_bath(correlations)
    tolerance, height = 3.9e-3, 50.0
    system = _pulsed_system(height, center=1.3, width=0.2)
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        parameters = nm.guess_tempo_parameters(bath, 0.0, 2.0, system, tolerance)
    assert [str(w.message) for w in record] == [nm.tempo.GUESS_WARNING_MSG]
    exact = math.sqrt(tolerance) / (2.0 * height)
    assert exact <= parameters.dt <= 1.01 * exact
    # too few samples miss the top of the pulse: a warning, and a larger step
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        coarse = nm.guess_tempo_parameters(bath, 0.0, 2.0, system, tolerance, max_samples=5)
    messages = [str(w.message) for w in record]
    assert messages[0] == nm.tempo.GUESS_WARNING_MSG
    assert len(messages) == 2 and "max_samples=5" in messages[1]
    assert all(w.category is UserWarning for w in record)
    assert coarse.dt > 1.5 * parameters.dt
    assert coarse.dt >= exact


def test_max_samples_does_not_change_a_time_independent_guess(correlations):
    bath = _uncoupled_bath(correlations)
    system = nm.System(3.0 * op.sigma("x"))
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        one = nm.guess_tempo_parameters(bath, 0.0, 2.0, system, max_samples=1)
        many = nm.guess_tempo_parameters(bath, 0.0, 2.0, system, max_samples=10**4)
    assert [str(w.message) for w in record] == [nm.tempo.GUESS_WARNING_MSG] * 2
    assert (one.dt, one.epsrel, one.dkmax) == (many.dt, many.epsrel, many.dkmax)
    assert one.dt == pytest.approx(math.sqrt(3.9e-3) / 6.0)  # ||-i[H, .]|| = 2 * 3


def test_max_samples_accepts_whole_numbers_only(correlations):
    bath = _bath(correlations)
    system = _pulsed_system(2.0, 1.0, 0.5)
    with pytest.warns(UserWarning):
        nm.guess_tempo_parameters(bath, 0.0, 2.0, system, max_samples=1e3)
    for bad, error in ((0, ValueError), (2.5, TypeError), ("many", TypeError), (True, TypeError)):
        with pytest.raises(error, match="max_samples"):
            nm.guess_tempo_parameters(bath, 0.0, 2.0, system, max_samples=bad)
    with pytest.raises(TypeError, match="system"):
        nm.guess_tempo_parameters(bath, 0.0, 2.0, op.sigma("x"))


# --------------------------------------------------------------------------
# Dynamics.shape and expectations
# --------------------------------------------------------------------------


def test_an_empty_dynamics_has_no_shape_and_no_expectations():
    dynamics = nm.Dynamics()
    shape = dynamics.shape
    assert isinstance(shape, np.ndarray) and shape.ndim == 0 and shape.item() is None
    assert dynamics.expectations() == (None, None)
    assert dynamics.expectations(op.sigma("z"), real=True) == (None, None)


def test_dynamics_shape_is_the_shape_of_one_state():
    d = 3
    dynamics = nm.Dynamics([0.0, 0.5], [random_density_matrix(d), random_density_matrix(d)])
    shape = dynamics.shape
    assert isinstance(shape, np.ndarray) and shape.dtype.kind == "i"
    assert shape.tolist() == [d, d] == list(dynamics.states.shape[1:])
    shape[0] = 7  # a copy
    assert dynamics.shape.tolist() == [d, d]


def test_expectations_are_traces_with_the_operator():
    d = 3
    states = [random_density_matrix(d) for _ in range(4)]
    times = [0.0, 0.1, 0.2, 0.3]
    dynamics = nm.Dynamics(times, states)
    o = random_matrix(d)  # not Hermitian: complex expectations
    t, values = dynamics.expectations(o)
    assert_close(t, times)
    assert_close(values, [np.trace(o @ rho) for rho in states])
    assert np.iscomplexobj(values)
    _, real_values = dynamics.expectations(o, real=True)
    assert np.isrealobj(real_values)
    assert_close(real_values, values.real)
    _, trace = dynamics.expectations()
    assert_close(trace, np.ones(4))
    with pytest.raises(ValueError, match="operator"):
        dynamics.expectations(np.eye(2))


def test_parameters_bath_and_control_attributes_are_read_only_as_in_oqupy():
    parameters = nm.TempoParameters(dt=0.1, epsrel=1e-6, dkmax=3, add_correlation_time=1.0)
    for name in ("dt", "epsrel", "add_correlation_time", "subdiv_limit", "liouvillian_epsrel"):
        with pytest.raises(AttributeError):
            setattr(parameters, name, 0.5)
    assert (parameters.dt, parameters.epsrel, parameters.add_correlation_time) == (0.1, 1e-6, 1.0)
    bath = nm.Bath(0.5 * np.diag([1.0, -1.0]), nm.PowerLawSD(0.1, 1.0, 5.0))
    with pytest.raises(AttributeError):
        bath.correlations = nm.PowerLawSD(0.2, 1.0, 5.0)
    control = nm.Control(2)
    with pytest.raises(AttributeError):
        control.dimension = 3


def test_unique_must_be_a_boolean():
    bath = nm.Bath(0.5 * np.diag([1.0, -1.0]), nm.PowerLawSD(0.1, 1.0, 5.0))
    system = nm.System(np.zeros((2, 2)))
    parameters = nm.TempoParameters(dt=0.1, epsrel=1e-6, dkmax=3)
    rho0 = np.diag([1.0, 0.0]).astype(complex)
    with pytest.raises(TypeError, match="unique must be True or False"):
        nm.Tempo(system, bath, parameters, rho0, 0.0, unique="bla")
    with pytest.raises(TypeError, match="unique must be True or False"):
        nm.PtTempo(bath, 0.0, 1.0, parameters, unique="yes")


def test_propagators_take_oqupys_argument_names():
    """get_propagators(dt, start_time, subdiv_limit, epsrel) as in OQuPy 0.5."""
    system = nm.TimeDependentSystem(lambda t: np.cos(t) * np.array([[0.0, 1.0], [1.0, 0.0]]))
    by_name = system.get_propagators(dt=0.1, start_time=0.0, subdiv_limit=256, epsrel=1e-12)(3)
    by_position = system.get_propagators(0.1, 0.0, 256, 1e-12)(3)
    np.testing.assert_array_equal(by_name[0], by_position[0])
    unitary = nm.System(0.5 * np.diag([1.0, -1.0])).get_unitary_propagators(
        dt=0.2, start_time=0.0, subdiv_limit=None, epsrel=1e-8
    )(0)[0]
    np.testing.assert_allclose(unitary, np.diag(np.exp([-0.05j, 0.05j])), atol=1e-14)
