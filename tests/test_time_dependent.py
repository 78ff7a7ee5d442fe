"""Tests of ``TimeDependentSystem`` in ``Tempo``, ``compute_dynamics`` and the correlations.

Reference solutions are written here: a fine ODE solution (``solve_ivp``,
rtol 1e-10) of the driven spin, closed forms where they exist.

Half-step propagators are expm of the integral of L(t) over the half step
(``quad_vec``, ``subdiv_limit`` set) or expm of L at its midpoint times dt/2
(``subdiv_limit=None``). Both are exact when the L(t) at different times
commute (the first up to quadrature, the second only if L is linear in t);
otherwise both have a local error O(dt^3) per half step (the commutator term
of the Magnus series, and for the midpoint also the midpoint-rule error of
the integral), i.e. a global error O(dt^2). The bounds below are the leading
terms of those errors, evaluated for each problem.
"""

from __future__ import annotations

import inspect
import math

import numpy as np
import pytest
import scipy.integrate
import scipy.linalg

import nonmarkov as nm
from models import SIGMA_MINUS, SX, SY, SZ, pure_state
from nonmarkov.methods.system_correlations import compute_correlations

SILENT = {"progress_type": "silent"}
RHO0 = pure_state(0.8, 0.6 * np.exp(0.4j))
START, DURATION = 0.3, 2.0


def zero_coupling_bath():
    return nm.Bath(0.5 * SX + 0.3 * SZ, nm.PowerLawSD(0.0, 1.0, 4.0))


def von_neumann_solution(hamiltonian, rho0, times):
    """rho(t) at ``times`` (from times[0]) by solve_ivp, rtol 1e-10, atol 1e-12."""

    def rhs(t, y):
        rho = y.reshape(2, 2)
        h = hamiltonian(t)
        return (-1j * (h @ rho - rho @ h)).reshape(-1)

    solution = scipy.integrate.solve_ivp(
        rhs,
        (times[0], times[-1]),
        rho0.reshape(-1),
        t_eval=times,
        method="DOP853",
        rtol=1e-10,
        atol=1e-12,
    )
    assert solution.success
    return solution.y.T.reshape(-1, 2, 2)


def all_routes(
    system, dt, num_steps, subdiv_limit, liouvillian_epsrel=2**-26, routes=("pt", "tempo")
):
    """States from compute_dynamics without a PT, checked against the other ``routes``:
    compute_dynamics with a zero-coupling PT ("pt") and Tempo with that bath ("tempo")."""
    kwargs = {"subdiv_limit": subdiv_limit, "liouvillian_epsrel": liouvillian_epsrel}
    no_pt = nm.compute_dynamics(
        system, RHO0, dt=dt, num_steps=num_steps, start_time=START, **kwargs, **SILENT
    )
    grid = START + dt * np.arange(num_steps + 1)
    np.testing.assert_allclose(no_pt.times, grid, atol=1e-12)
    parameters = nm.TempoParameters(dt=dt, epsrel=1e-10, dkmax=2, **kwargs)
    end = START + num_steps * dt
    others = []
    if "pt" in routes:
        pt = nm.PtTempo(zero_coupling_bath(), START, end, parameters).get_process_tensor(**SILENT)
        others.append(
            nm.compute_dynamics(
                system, RHO0, process_tensor=pt, start_time=START, **kwargs, **SILENT
            )
        )
    if "tempo" in routes:
        others.append(
            nm.Tempo(system, zero_coupling_bath(), parameters, RHO0, START).compute(end, **SILENT)
        )
    for dynamics in others:  # the same propagators on every route
        np.testing.assert_allclose(dynamics.times, grid, atol=1e-12)
        np.testing.assert_allclose(dynamics.states, no_pt.states, rtol=0, atol=1e-12)
    return no_pt.states


# --------------------------------------------------------------------------
# a drive whose Hamiltonians commute at all times: H(t) = f(t) H0
# --------------------------------------------------------------------------

H0 = 0.5 * SX + 0.25 * SZ
NU = 2.0


def envelope(t):
    return 1.0 + 0.6 * math.sin(NU * t)


def test_commuting_drive_quad_vec_exact_midpoint_second_order():
    """quad_vec: expm of the exact integral is the exact propagator (bound 1e-8, ODE and
    quadrature accuracy). Midpoint: the midpoint rule misses h^3 f''/24 of the integral per
    half step h, so |error| <= 2 ||H0|| T dt^2 max|f''| / 48 (global, second order)."""
    system = nm.TimeDependentSystem(lambda t: envelope(t) * H0)
    dt, num_steps = 0.2, 10
    times = START + dt * np.arange(num_steps + 1)
    exact = von_neumann_solution(lambda t: envelope(t) * H0, RHO0, times)
    quad = all_routes(
        system, dt, num_steps, subdiv_limit=256, liouvillian_epsrel=1e-12, routes=("pt",)
    )
    np.testing.assert_allclose(quad, exact, rtol=0, atol=1e-8)
    midpoint = all_routes(system, dt, num_steps, subdiv_limit=None, routes=())
    norm_h0 = np.linalg.norm(H0, 2)
    bound = 2.0 * norm_h0 * DURATION * dt**2 * (0.6 * NU**2) / 48.0
    error = np.max(np.abs(midpoint - exact))
    assert error <= bound, (error, bound)
    assert error > 1e-6  # the midpoint route does differ (and is only second order)


# --------------------------------------------------------------------------
# Rabi drive: H(t) at different times do not commute
# --------------------------------------------------------------------------

DELTA, OMEGA, NU_DRIVE = 1.0, 0.8, 1.3


def rabi_hamiltonian(t):
    return 0.5 * DELTA * SZ + OMEGA * math.cos(NU_DRIVE * t) * SX


@pytest.mark.parametrize("subdiv_limit", [256, None], ids=["quad_vec", "midpoint"])
def test_rabi_drive_converges_at_second_order(subdiv_limit):
    """Both propagators are second order here. Leading error per half step h:
    ||Omega_2|| = h^3 ||[H', H]|| / 12 (Magnus), plus h^3 ||H''|| / 24 for the midpoint
    rule; a state error of at most twice that per half step, over 2T/dt half steps:
    T dt^2 (max||[H', H]|| / 24 + max||H''|| / 48)."""
    system = nm.TimeDependentSystem(rabi_hamiltonian)
    commutator_norm = OMEGA * NU_DRIVE * DELTA  # ||[H', H]|| <= Omega nu Delta
    second_derivative = OMEGA * NU_DRIVE**2
    errors = []
    for dt in (0.2, 0.1):
        num_steps = int(round(DURATION / dt))
        times = START + dt * np.arange(num_steps + 1)
        exact = von_neumann_solution(rabi_hamiltonian, RHO0, times)
        states = all_routes(system, dt, num_steps, subdiv_limit, routes=())
        error = np.max(np.abs(states - exact))
        bound = DURATION * dt**2 * commutator_norm / 24.0
        if subdiv_limit is None:
            bound += DURATION * dt**2 * second_derivative / 48.0
        assert error <= bound, (dt, error, bound)
        errors.append(error)
    assert 3.5 <= errors[0] / errors[1] <= 4.5, errors  # second order in dt


# --------------------------------------------------------------------------
# time-dependent Lindblad rate
# --------------------------------------------------------------------------

GAMMA0, NU_RATE, SPLITTING = 0.8, 2.5, 1.1


def rate(t):
    return GAMMA0 * (1.0 + 0.5 * math.sin(NU_RATE * t))


def integrated_rate(t):
    """int_START^t gamma(s) ds."""
    return GAMMA0 * (
        (t - START) - 0.5 / NU_RATE * (math.cos(NU_RATE * t) - math.cos(NU_RATE * START))
    )


def test_time_dependent_lindblad_rate_decay():
    """L(t) = -i[H, .] + gamma(t) D[sigma_-] commute at all times (D[sigma_-] is invariant
    under the rotation by sigma_z), so the exact populations and coherences are
    rho_00(t) = rho_00 e^{-Gamma}, rho_01(t) = rho_01 e^{-Gamma/2 - i w (t - t0)},
    Gamma = int gamma. quad_vec: exact up to quadrature (bound 1e-9). Midpoint: the
    midpoint rule misses h^3 gamma''/24 of Gamma per half step; bound
    T dt^2 max|gamma''| / 48."""
    system = nm.TimeDependentSystem(
        lambda t: 0.5 * SPLITTING * SZ, gammas=[rate], lindblad_operators=[lambda t: SIGMA_MINUS]
    )
    dt, num_steps = 0.2, 10
    times = START + dt * np.arange(num_steps + 1)
    gamma_integral = np.array([integrated_rate(t) for t in times])
    excited = RHO0[0, 0] * np.exp(-gamma_integral)
    coherence = RHO0[0, 1] * np.exp(-0.5 * gamma_integral - 1j * SPLITTING * (times - START))
    quad = all_routes(
        system, dt, num_steps, subdiv_limit=256, liouvillian_epsrel=1e-12, routes=("tempo",)
    )
    np.testing.assert_allclose(quad[:, 0, 0], excited, rtol=0, atol=1e-9)
    np.testing.assert_allclose(quad[:, 0, 1], coherence, rtol=0, atol=1e-9)
    np.testing.assert_allclose(np.trace(quad, axis1=1, axis2=2), 1.0, atol=1e-12)
    midpoint = all_routes(system, dt, num_steps, subdiv_limit=None, routes=())
    bound = DURATION * dt**2 * GAMMA0 * 0.5 * NU_RATE**2 / 48.0
    error = max(
        np.max(np.abs(midpoint[:, 0, 0] - excited)), np.max(np.abs(midpoint[:, 0, 1] - coherence))
    )
    assert 1e-6 < error <= bound, (error, bound)


# --------------------------------------------------------------------------
# argument names, a real bath, correlations
# --------------------------------------------------------------------------


def test_time_dependent_system_accepts_oqupy_argument_names():
    names = list(inspect.signature(nm.TimeDependentSystem).parameters)
    assert names == ["hamiltonian", "gammas", "lindblad_operators", "name", "description"]
    by_keyword = nm.TimeDependentSystem(
        hamiltonian=lambda t: 0.5 * SPLITTING * SZ,
        gammas=[rate],
        lindblad_operators=[lambda t: SIGMA_MINUS],
        name="decay",
        description="time-dependent rate",
    )
    assert by_keyword.name == "decay" and by_keyword.description == "time-dependent rate"
    assert by_keyword.dimension == 2
    np.testing.assert_allclose(by_keyword.hamiltonian(0.7), 0.5 * SPLITTING * SZ)
    positional = nm.TimeDependentSystem(
        lambda t: 0.5 * SPLITTING * SZ, [rate], [lambda t: SIGMA_MINUS]
    )
    for t in (0.0, 0.45, 1.3):
        np.testing.assert_allclose(by_keyword.liouvillian(t), positional.liouvillian(t), atol=1e-15)
    with pytest.raises(TypeError, match="gammas"):
        nm.TimeDependentSystem(
            hamiltonian=lambda t: SZ, gammas=[0.5], lindblad_operators=[lambda t: SIGMA_MINUS]
        )
    with pytest.raises(TypeError, match="hamiltonian"):
        nm.TimeDependentSystem(hamiltonian=SZ)
    with pytest.raises(ValueError, match="same length"):
        nm.TimeDependentSystem(hamiltonian=lambda t: SZ, gammas=[rate])


def driven_bath_problem():
    system = nm.TimeDependentSystem(lambda t: 0.5 * SZ + 0.7 * math.cos(1.5 * t) * SX)
    bath = nm.Bath(0.5 * SZ, nm.PowerLawSD(0.2, 1.0, 4.0, temperature=0.5))
    parameters = nm.TempoParameters(dt=0.2, epsrel=1e-10, dkmax=3)
    return system, bath, parameters


def test_time_dependent_system_with_bath_tempo_equals_process_tensor():
    """Tempo and PT-TEMPO + compute_dynamics use the same splitting and influence: equal up
    to truncation (epsrel 1e-10), also for a start time other than 0."""
    system, bath, parameters = driven_bath_problem()
    end = START + 0.8
    tempo = nm.Tempo(system, bath, parameters, RHO0, START).compute(end, **SILENT)
    pt = nm.PtTempo(bath, START, end, parameters).get_process_tensor(**SILENT)
    dynamics = nm.compute_dynamics(system, RHO0, process_tensor=pt, start_time=START, **SILENT)
    np.testing.assert_allclose(dynamics.times, tempo.times, atol=1e-12)
    np.testing.assert_allclose(dynamics.states, tempo.states, rtol=0, atol=1e-8)
    # the drive and the bath both matter
    closed = nm.compute_dynamics(system, RHO0, dt=0.2, num_steps=4, start_time=START, **SILENT)
    assert np.max(np.abs(closed.states - tempo.states)) > 1e-2
    static = nm.compute_dynamics(
        nm.System(0.5 * SZ + 0.7 * SX), RHO0, process_tensor=pt, start_time=START, **SILENT
    )
    assert np.max(np.abs(static.states - tempo.states)) > 1e-2


def test_correlations_of_commuting_drive_are_exact():
    """H(t) = f(t) H0: U(t', t) = exp(-i H0 int_t^t' f), so <B(t_b) A(t_a)> is a matrix
    product; quad_vec propagators reproduce it to quadrature accuracy."""
    system = nm.TimeDependentSystem(lambda t: envelope(t) * H0)

    def phase(t):  # int_START^t f
        return (t - START) - 0.6 / NU * (math.cos(NU * t) - math.cos(NU * START))

    def heisenberg(operator, t):
        unitary = scipy.linalg.expm(-1j * H0 * phase(t))
        return unitary.conj().T @ operator @ unitary

    a_op, b_op = SZ + 0.3 * SY, SX
    times, values = compute_correlations(
        system,
        None,
        a_op,
        b_op,
        slice(None),
        slice(None),
        time_order="full",
        initial_state=RHO0,
        start_time=START,
        dt=0.25,
        num_steps=4,
        liouvillian_epsrel=1e-12,
        **SILENT,
    )
    exact = np.array(
        [
            [np.trace(heisenberg(b_op, tb) @ heisenberg(a_op, ta) @ RHO0) for tb in times[1]]
            for ta in times[0]
        ]
    )
    np.testing.assert_allclose(values, exact, rtol=0, atol=1e-9)


def test_the_liouvillian_at_an_array_of_times_is_one_per_time():
    """L(t) of a TimeDependentSystem at an array of times: the generator at each time,
    stacked in the array's shape; for H(t) = cos(t) sx, a time-dependent rate of sigma-,
    the generator at t is that of the System frozen at t."""
    system = nm.TimeDependentSystem(
        lambda t: math.cos(t) * SX + 0.3 * SZ,
        gammas=[lambda t: 0.1 + 0.05 * t],
        lindblad_operators=[lambda t: SIGMA_MINUS],
    )
    times = np.array([[0.1, 0.5, 1.2]])
    generators = system.liouvillian(times)
    assert generators.shape == (1, 3, 4, 4)
    for time, generator in zip(times[0], generators[0]):
        frozen = nm.System(math.cos(time) * SX + 0.3 * SZ, [0.1 + 0.05 * time], [SIGMA_MINUS])
        np.testing.assert_allclose(generator, frozen.liouvillian(), atol=1e-14, rtol=0)
