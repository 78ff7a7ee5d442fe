"""System and TimeDependentSystem: Liouvillians and propagators against exact dynamics."""

from __future__ import annotations

import numpy
import pytest
import scipy.integrate
import scipy.linalg

import nonmarkov
from nonmarkov import operators as op

RNG = numpy.random.default_rng(7)


def random_hermitian(d: int) -> numpy.ndarray:
    m = RNG.normal(size=(d, d)) + 1j * RNG.normal(size=(d, d))
    return 0.5 * (m + m.conj().T)


def random_density_matrix(d: int) -> numpy.ndarray:
    m = RNG.normal(size=(d, d)) + 1j * RNG.normal(size=(d, d))
    rho = m @ m.conj().T
    return rho / numpy.trace(rho)


def evolve(liouvillian: numpy.ndarray, rho: numpy.ndarray, t: float) -> numpy.ndarray:
    d = rho.shape[0]
    return (scipy.linalg.expm(liouvillian * t) @ rho.reshape(-1)).reshape(d, d)


def assert_close(a, b, tol=1e-10):
    numpy.testing.assert_allclose(a, b, rtol=tol, atol=tol)


# --- time-independent systems ------------------------------------------------------------


@pytest.mark.parametrize("d", [2, 3])
def test_closed_system_liouvillian_generates_unitary_evolution(d):
    h = random_hermitian(d)
    rho = random_density_matrix(d)
    system = nonmarkov.System(h)
    assert system.dimension == d
    for t in (0.3, 1.7):
        u = scipy.linalg.expm(-1j * h * t)
        assert_close(evolve(system.liouvillian(), rho, t), u @ rho @ u.conj().T)


def test_amplitude_damping_gives_exponential_decay():
    omega, gamma = 1.3, 0.4
    system = nonmarkov.System(
        0.5 * omega * op.sigma("z"), gammas=[gamma], lindblad_operators=[op.sigma("-")]
    )
    rho0 = op.spin_dm("x+")  # population 1/2 in 'up', coherence 1/2
    for t in (0.0, 0.5, 2.0, 7.5):
        rho = evolve(system.liouvillian(), rho0, t)
        assert rho[0, 0].real == pytest.approx(0.5 * numpy.exp(-gamma * t), abs=1e-12)
        # H = (omega/2) sigma_z: rho_01 rotates as exp(-i omega t), decays at gamma/2
        expected_coherence = 0.5 * numpy.exp(-0.5 * gamma * t) * numpy.exp(-1j * omega * t)
        assert rho[0, 1] == pytest.approx(expected_coherence, abs=1e-12)
        assert numpy.trace(rho) == pytest.approx(1.0, abs=1e-12)
    # the excited state relaxes to the ground state
    rho = evolve(system.liouvillian(), op.spin_dm("up"), 200.0)
    assert_close(rho, op.spin_dm("down"))


def test_dephasing_rate_adds_to_the_coherence_decay():
    gamma_down, gamma_phi = 0.3, 0.8
    system = nonmarkov.System(
        numpy.zeros((2, 2)),
        gammas=[gamma_down, gamma_phi],
        lindblad_operators=[op.sigma("-"), op.sigma("z")],
    )
    t = 1.1
    rho = evolve(system.liouvillian(), op.spin_dm("x+"), t)
    # sigma_z dephasing with rate gamma_phi damps coherences at 2 gamma_phi
    assert abs(rho[0, 1]) == pytest.approx(
        0.5 * numpy.exp(-(0.5 * gamma_down + 2 * gamma_phi) * t), rel=1e-12
    )


def test_half_step_propagators_compose_to_one_step():
    h = random_hermitian(3)
    lindblad = RNG.normal(size=(3, 3)) + 1j * RNG.normal(size=(3, 3))
    system = nonmarkov.System(h, gammas=[0.2], lindblad_operators=[lindblad])
    dt = 0.37
    propagators = system.get_propagators(dt)
    for step in (0, 5):
        first, second = propagators(step)
        assert first.shape == second.shape == (9, 9)
        assert_close(second @ first, scipy.linalg.expm(system.liouvillian() * dt))


def test_system_properties_are_copies():
    system = nonmarkov.System(op.sigma("x"), [0.1], [op.sigma("-")], name="qubit")
    h = system.hamiltonian
    h[0, 0] = 99.0
    assert system.hamiltonian[0, 0] == 0
    assert system.gammas == [0.1]
    assert system.name == "qubit"
    assert "qubit" in str(system)


# --- time-dependent systems ----------------------------------------------------------------


def test_time_dependent_system_with_constant_hamiltonian_equals_system():
    h = random_hermitian(2)
    static = nonmarkov.System(h, gammas=[0.3], lindblad_operators=[op.sigma("-")])
    dynamic = nonmarkov.TimeDependentSystem(
        lambda t: h, gammas=[lambda t: 0.3], lindblad_operators=[lambda t: op.sigma("-")]
    )
    assert dynamic.dimension == 2
    assert_close(dynamic.liouvillian(0.8), static.liouvillian())
    dt = 0.2
    for subdiv_limit in (None, 256):
        first, second = dynamic.get_propagators(dt, start_time=1.0, subdiv_limit=subdiv_limit)(3)
        s_first, s_second = static.get_propagators(dt)(3)
        assert_close(first, s_first)
        assert_close(second, s_second)


def driven_hamiltonian(t: float) -> numpy.ndarray:
    """Two-level system with a detuned, chirped drive: [H(t), H(t')] != 0."""
    return 0.5 * 1.0 * op.sigma("z") + 2.0 * numpy.cos(3.0 * t + 0.4 * t**2) * op.sigma("x")


def exact_propagator(hamiltonian, t0: float, t1: float) -> numpy.ndarray:
    """Superoperator of the time-ordered closed evolution from t0 to t1 (solve_ivp)."""

    def rhs(t, y):
        u = y.reshape(2, 2)
        return (-1j * hamiltonian(t) @ u).reshape(-1)

    solution = scipy.integrate.solve_ivp(
        rhs,
        (t0, t1),
        numpy.eye(2, dtype=complex).reshape(-1),
        method="DOP853",
        rtol=1e-13,
        atol=1e-13,
    )
    u = solution.y[:, -1].reshape(2, 2)
    return op.unitary_super(u)


@pytest.mark.parametrize("subdiv_limit", [None, 256], ids=["midpoint", "quad_vec"])
def test_time_dependent_propagators_converge_to_the_exact_step(subdiv_limit):
    system = nonmarkov.TimeDependentSystem(driven_hamiltonian)
    start, step = 0.3, 2
    errors = []
    for dt in (0.04, 0.02):
        first, second = system.get_propagators(dt, start_time=start, subdiv_limit=subdiv_limit)(
            step
        )
        t0 = start + step * dt
        exact_first = exact_propagator(driven_hamiltonian, t0, t0 + 0.5 * dt)
        exact_full = exact_propagator(driven_hamiltonian, t0, t0 + dt)
        assert numpy.abs(first - exact_first).max() < 3e-5
        errors.append(numpy.abs(second @ first - exact_full).max())
    assert errors[0] < 5e-5
    # both quadratures are second order: the local error falls like dt^3
    assert errors[0] / errors[1] > 6.0


def test_quad_vec_propagator_is_exact_for_commuting_hamiltonians():
    # H(t) = f(t) sigma_x commutes with itself at all times, so the step is
    # exactly expm(-i sigma_x int f); the midpoint rule is not.
    def f(t):
        return 1.0 + numpy.sin(5.0 * t)

    system = nonmarkov.TimeDependentSystem(lambda t: f(t) * op.sigma("x"))
    dt, start = 0.3, 0.1
    phase, _ = scipy.integrate.quad(f, start, start + 0.5 * dt)
    exact = op.unitary_super(scipy.linalg.expm(-1j * phase * op.sigma("x")))
    first, _ = system.get_propagators(dt, start_time=start)(0)
    assert_close(first, exact)
    midpoint_first, _ = system.get_propagators(dt, start_time=start, subdiv_limit=None)(0)
    assert numpy.abs(midpoint_first - exact).max() > 1e-5


def test_time_dependent_lindblad_rate_is_integrated():
    # pure decay with a rate gamma(t) = 2 t: population up = exp(-int gamma) = exp(-t^2)
    system = nonmarkov.TimeDependentSystem(
        lambda t: numpy.zeros((2, 2)),
        gammas=[lambda t: 2.0 * t],
        lindblad_operators=[lambda t: op.sigma("-")],
    )
    dt = 0.5
    propagators = system.get_propagators(dt)
    vector = op.spin_dm("up").reshape(-1)
    for step in range(4):
        first, second = propagators(step)
        vector = second @ first @ vector
    assert vector[0].real == pytest.approx(numpy.exp(-((4 * dt) ** 2)), rel=1e-10)


# --- bad input -------------------------------------------------------------------------------


def test_non_square_hamiltonian():
    with pytest.raises(ValueError, match="hamiltonian must be a non-empty square matrix"):
        nonmarkov.System(numpy.ones((2, 3)))


def test_non_hermitian_hamiltonian():
    with pytest.raises(ValueError, match="hamiltonian must be Hermitian"):
        nonmarkov.System(op.sigma("+"))


def test_hamiltonian_of_wrong_type():
    with pytest.raises(TypeError, match="hamiltonian must be a square matrix of numbers"):
        nonmarkov.System([["a", "b"], ["c", "d"]])
    with pytest.raises(TypeError, match="hamiltonian must be a matrix, not a callable"):
        nonmarkov.System(lambda t: op.sigma("z"))


def test_gammas_and_lindblad_operators_of_different_lengths():
    with pytest.raises(ValueError, match="gammas and lindblad_operators must have the same"):
        nonmarkov.System(op.sigma("z"), gammas=[0.1, 0.2], lindblad_operators=[op.sigma("-")])
    with pytest.raises(ValueError, match="gammas and lindblad_operators must have the same"):
        nonmarkov.TimeDependentSystem(lambda t: op.sigma("z"), gammas=[lambda t: 0.1])


def test_negative_gamma():
    with pytest.raises(ValueError, match=r"gammas\[1\] must be >= 0"):
        nonmarkov.System(
            op.sigma("z"), gammas=[0.1, -0.2], lindblad_operators=[op.sigma("-"), op.sigma("z")]
        )
    with pytest.raises(ValueError, match=r"gammas\[0\]\(0.0\) must be >= 0"):
        nonmarkov.TimeDependentSystem(
            lambda t: op.sigma("z"),
            gammas=[lambda t: -1.0],
            lindblad_operators=[lambda t: op.sigma("-")],
        )


def test_lindblad_operator_of_mismatched_dimension():
    with pytest.raises(ValueError, match=r"lindblad_operators\[0\] has dimension 3"):
        nonmarkov.System(op.sigma("z"), gammas=[0.1], lindblad_operators=[numpy.eye(3)])
    with pytest.raises(ValueError, match=r"lindblad_operators\[0\]\(0.0\) has dimension 3"):
        nonmarkov.TimeDependentSystem(
            lambda t: op.sigma("z"),
            gammas=[lambda t: 0.1],
            lindblad_operators=[lambda t: numpy.eye(3)],
        )


def test_callable_hamiltonian_returning_the_wrong_shape():
    with pytest.raises(ValueError, match=r"hamiltonian\(0.0\) must be a non-empty square"):
        nonmarkov.TimeDependentSystem(lambda t: numpy.ones((2, 3)))
    with pytest.raises(ValueError, match=r"hamiltonian\(0.0\) must be Hermitian"):
        nonmarkov.TimeDependentSystem(lambda t: op.sigma("+"))
    # a Hamiltonian whose dimension changes after t = 0
    system = nonmarkov.TimeDependentSystem(lambda t: op.sigma("z") if t < 0.5 else numpy.eye(3))
    with pytest.raises(ValueError, match=r"hamiltonian\(1.0\) returned shape \(3, 3\)"):
        system.liouvillian(1.0)


def test_time_dependent_system_needs_callables():
    with pytest.raises(TypeError, match="hamiltonian of a TimeDependentSystem must be a callable"):
        nonmarkov.TimeDependentSystem(op.sigma("z"))
    with pytest.raises(TypeError, match="each of gammas"):
        nonmarkov.TimeDependentSystem(
            lambda t: op.sigma("z"), gammas=[0.1], lindblad_operators=[lambda t: op.sigma("-")]
        )


def test_bad_time_step():
    system = nonmarkov.System(op.sigma("z"))
    with pytest.raises(ValueError, match="dt must be > 0"):
        system.get_propagators(0.0)
    with pytest.raises(TypeError, match="dt must be a real number"):
        system.get_propagators("0.1")
