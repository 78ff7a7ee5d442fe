"""Tests of mean-field TEMPO: ``MeanFieldTempo``, ``compute_dynamics_with_field`` and
``MeanFieldDynamics``, through the public API.

Models (``models.py``): :class:`~models.LaserSpin`, a pumped, decaying two-level emitter
with H(t, a) = 0.5 omega(t) sz + g (a s+ + a^* s-) (omega and the pump rate depend
on time), :class:`~models.ThreeLevelEmitter`, a three-level emitter driven on 2 -> 0,
and the lossy cavity field da/dt = -(i wc + kappa) a - i sum_j g_j Tr[O_j rho_j]
(:func:`~models.cavity_eom`). The spin's bath couples through 0.5 sx, the three-level
system's through S = diag(1, 1, -1) (degenerate, so that ``unique`` merges indices).

References, all computed here independently of the library:

- without a bath, the mean-field ODE (each system's Liouville equation with its
  Lindblad terms and the field equation, here with an explicitly time-dependent
  cavity drive) by ``solve_ivp`` (rtol 1e-11, :func:`~models.mean_field_ode`); the
  library's scheme (module docstring of ``nonmarkov.methods.mean_field``) is of
  second order, so the errors on the grid fall by ~4 when dt is halved;
- a field that does not enter the Hamiltonians: each system is then an ordinary
  open system, so ``nm.Tempo`` / ``nm.compute_dynamics`` of a ``TimeDependentSystem``
  with the same H give the same states to rounding; the field of a linear eom
  da/dt = r a (z = r dt) follows the recurrence a_{k+1} = (1 + z + z^2/2) a_k of Heun
  (of any two-stage second-order scheme) exactly, and the exact a0 e^{z k} to within
  k |a0| |e^z - (1 + z + z^2/2)| (valid as |1 + z + z^2/2| <= 1 and |e^z| <= 1);
- symmetry (N identical systems are one system with the field term times N; two
  independent baths of half the spectral density are one bath), causality (a control
  at t_k changes nothing before t_k, and the other system only after t_k), and the
  two routes (TEMPO, process tensors) against each other to the truncation tolerance.

NumPy against JAX: the test runs on the session backend and, on JAX, repeats the run
under ``use_backend("numpy")`` (conftest restores the session backend afterwards).
"""

from __future__ import annotations

import math
import os

import numpy as np
import pytest
import scipy.linalg

import nonmarkov as nm
from models import (
    SIGMA_MINUS,
    SX,
    SY,
    SZ,
    LaserSpin,
    ThreeLevelEmitter,
    cavity_eom,
    mean_field_ode,
    pure_state,
)
from nonmarkov import backends

SILENT = {"progress_type": "silent"}
DT = 0.1
STEPS = 10
END = DT * STEPS
FIELD0 = 0.3 + 0.1j
SPIN_RHO0 = pure_state(0.6, 0.8j)
THREE_RHO0 = pure_state(1.0, 0.5j, 0.3)
DEGENERATE = np.diag([1.0, 1.0, -1.0]).astype(complex)  # coupling with a degenerate eigenvalue


def spin_bath(alpha=0.1):
    return nm.Bath(0.5 * SX, nm.PowerLawSD(alpha, 1.0, 4.0, temperature=0.5))


def three_level_bath(alpha=0.05):
    return nm.Bath(DEGENERATE, nm.PowerLawSD(alpha, 1.0, 3.0, temperature=0.2))


def zero_coupling_bath():
    return nm.Bath(0.5 * SX + 0.3 * SZ, nm.PowerLawSD(0.0, 1.0, 4.0))


def parameters(dt=DT, subdiv_limit=None):
    """Short memory, tight truncation; midpoint Liouvillians unless ``subdiv_limit``."""
    return nm.TempoParameters(dt=dt, epsrel=1e-7, dkmax=3, subdiv_limit=subdiv_limit)


def emitters():
    return LaserSpin(), ThreeLevelEmitter()


def two_emitter_system(frequency=0.8):
    spin, three = emitters()
    return nm.MeanFieldSystem(
        [spin.system(), three.system()], cavity_eom([spin, three], frequency=frequency)
    )


def states_of(dynamics):
    """The states of each system, a list of arrays (N, d_j, d_j)."""
    return [system.states for system in dynamics.system_dynamics]


def without_bath(system, field=FIELD0, **options):
    """``compute_dynamics_with_field`` of a one-spin ``system`` without process tensors,
    STEPS steps of DT from SPIN_RHO0."""
    return nm.compute_dynamics_with_field(
        system,
        field,
        dt=DT,
        num_steps=STEPS,
        initial_state_list=[SPIN_RHO0],
        **options,
        **SILENT,
    )


def max_difference(first, second):
    """Largest |difference| over the fields and all states of two MeanFieldDynamics."""
    np.testing.assert_allclose(first.times, second.times, rtol=0, atol=1e-12)
    values = [np.max(np.abs(first.fields - second.fields))]
    values += [np.max(np.abs(a - b)) for a, b in zip(states_of(first), states_of(second))]
    return max(values)


def unitary_super(unitary):
    """vec(U rho U^dag) = (U kron conj(U)) vec(rho), row-major."""
    return np.kron(unitary, unitary.conj())


@pytest.fixture(scope="module")
def process_tensors():
    """{unique: [spin PT, three-level PT]} over [0, END] with :func:`parameters`."""
    return {
        unique: [
            nm.pt_tempo_compute(bath, 0.0, END, parameters(), unique=unique, **SILENT)
            for bath in (spin_bath(), three_level_bath())
        ]
        for unique in (False, True)
    }


@pytest.fixture(scope="module")
def tempo_run():
    """MeanFieldTempo of the two emitters with their baths, over [0, END]."""
    tempo = nm.MeanFieldTempo(
        two_emitter_system(),
        [spin_bath(), three_level_bath()],
        parameters(),
        [SPIN_RHO0, THREE_RHO0],
        FIELD0,
        name="two emitters",
        description="a spin and a three-level emitter in one cavity",
    )
    return tempo.compute(END, **SILENT)


# --------------------------------------------------------------------------
# zero bath coupling: the mean-field ODE, second order in dt
# --------------------------------------------------------------------------

DICKE_N = 3.0  # the field term of N = 3 identical spins, written as one spin


def cavity_drive(t):
    """A coherent drive of the cavity with explicit time dependence."""
    return 0.2 * math.cos(1.2 * t)


ODE_START, ODE_DURATION = 0.2, 2.0


def dicke_ode_errors(route, dt, subdiv_limit):
    """Largest errors of the field and of the states on the grid, against solve_ivp."""
    spin = LaserSpin()
    system = nm.MeanFieldSystem(
        [spin.system()], cavity_eom([spin], factor=DICKE_N, drive=cavity_drive)
    )
    num_steps = int(round(ODE_DURATION / dt))
    end = ODE_START + num_steps * dt
    common = {"initial_state_list": [SPIN_RHO0], "start_time": ODE_START}
    if route == "tempo":
        tempo = nm.MeanFieldTempo(
            system,
            [zero_coupling_bath()],
            nm.TempoParameters(dt=dt, epsrel=1e-10, dkmax=2, subdiv_limit=subdiv_limit),
            initial_field=FIELD0,
            **common,
        )
        dynamics = tempo.compute(end, **SILENT)
    elif route == "process_tensor":
        pt = nm.pt_tempo_compute(
            zero_coupling_bath(),
            ODE_START,
            end,
            nm.TempoParameters(dt=dt, epsrel=1e-10, dkmax=2),
            **SILENT,
        )
        dynamics = nm.compute_dynamics_with_field(
            system, FIELD0, [pt], subdiv_limit=subdiv_limit, **common, **SILENT
        )
    else:
        dynamics = nm.compute_dynamics_with_field(
            system,
            FIELD0,
            dt=dt,
            num_steps=num_steps,
            subdiv_limit=subdiv_limit,
            **common,
            **SILENT,
        )
    times = ODE_START + dt * np.arange(num_steps + 1)
    np.testing.assert_allclose(dynamics.times, times, rtol=0, atol=1e-12)
    (states,), fields = mean_field_ode(
        [spin.liouvillian],
        cavity_eom([spin], factor=DICKE_N, drive=cavity_drive),
        [SPIN_RHO0],
        FIELD0,
        times,
    )
    field_error = np.max(np.abs(dynamics.fields - fields))
    state_error = np.max(np.abs(dynamics.system_dynamics[0].states - states))
    return field_error, state_error


@pytest.mark.parametrize(
    "route, subdiv_limit, steps",
    [
        ("tempo", None, (0.1, 0.05, 0.025)),
        ("process_tensor", None, (0.1, 0.05, 0.025)),
        ("no_bath", None, (0.1, 0.05, 0.025)),
        ("tempo", 256, (0.1, 0.05)),  # Liouvillians integrated by quad_vec
    ],
)
def test_zero_coupling_is_the_mean_field_ode_to_second_order(route, subdiv_limit, steps):
    errors = np.array([dicke_ode_errors(route, dt, subdiv_limit) for dt in steps])
    ratios = errors[:-1] / errors[1:]
    assert np.all((ratios > 3.0) & (ratios < 5.5)), (errors, ratios)
    # the leading term C dt^2 with a moderate C (fields ~0.3, rates ~1 over a time 2)
    assert np.all(errors[0] < 0.3 * steps[0] ** 2), errors


def test_the_field_acts_on_the_systems():
    """Without the coupling g the emitter and the field evolve apart: the ODE test above
    is not trivially satisfied by a scheme that ignores the field."""
    spin, free = LaserSpin(), LaserSpin(coupling=0.0)
    results = []
    for emitter in (spin, free):
        system = nm.MeanFieldSystem([emitter.system()], cavity_eom([emitter], factor=DICKE_N))
        results.append(without_bath(system, subdiv_limit=None))
    assert max_difference(*results) > 1e-2


# --------------------------------------------------------------------------
# a field that does not enter the Hamiltonians: plain TEMPO and compute_dynamics
# --------------------------------------------------------------------------

LINEAR_RATE = -(0.8j + 0.2)  # da/dt = LINEAR_RATE a


def field_free_problem():
    """The two emitters with g = 0 in H (the field is absent from them) and the linear eom."""
    spin, three = LaserSpin(coupling=0.0), ThreeLevelEmitter(coupling=0.0)
    system = nm.MeanFieldSystem(
        [spin.system(), three.system()], lambda t, states, field: LINEAR_RATE * field
    )
    return system, [spin.field_free_system(), three.field_free_system()]


def assert_linear_field(dynamics):
    """Heun's recurrence exactly, and the exact exponential within Heun's bound."""
    z = LINEAR_RATE * DT
    heun = 1.0 + z + 0.5 * z**2
    assert abs(heun) <= 1.0
    k = np.arange(len(dynamics))
    np.testing.assert_allclose(dynamics.fields, FIELD0 * heun**k, rtol=1e-12, atol=1e-15)
    exact = FIELD0 * np.exp(LINEAR_RATE * dynamics.times)
    bound = k * abs(FIELD0) * abs(np.exp(z) - heun)
    assert np.all(np.abs(dynamics.fields - exact) <= bound * (1.0 + 1e-8) + 1e-15)
    assert bound[-1] < 1e-3 * abs(FIELD0)


def test_field_free_hamiltonian_tempo_is_plain_tempo():
    system, plain_systems = field_free_problem()
    baths = [spin_bath(), three_level_bath()]
    initial = [SPIN_RHO0, THREE_RHO0]
    dynamics = nm.MeanFieldTempo(system, baths, parameters(), initial, FIELD0).compute(
        END, **SILENT
    )
    assert len(dynamics) == STEPS + 1
    for plain, bath, rho0, mean_field in zip(
        plain_systems, baths, initial, dynamics.system_dynamics
    ):
        reference = nm.Tempo(plain, bath, parameters(), rho0, 0.0).compute(END, **SILENT)
        np.testing.assert_allclose(mean_field.times, reference.times, rtol=0, atol=1e-12)
        np.testing.assert_allclose(mean_field.states, reference.states, rtol=0, atol=1e-12)
    assert_linear_field(dynamics)


def test_field_free_hamiltonian_with_process_tensors_is_compute_dynamics(process_tensors):
    system, plain_systems = field_free_problem()
    pts = process_tensors[False]
    initial = [SPIN_RHO0, THREE_RHO0]
    dynamics = nm.compute_dynamics_with_field(
        system,
        FIELD0,
        process_tensor_list=pts,
        initial_state_list=initial,
        subdiv_limit=None,
        **SILENT,
    )
    assert len(dynamics) == STEPS + 1
    for plain, pt, rho0, mean_field in zip(plain_systems, pts, initial, dynamics.system_dynamics):
        reference = nm.compute_dynamics(plain, rho0, process_tensor=pt, subdiv_limit=None, **SILENT)
        np.testing.assert_allclose(mean_field.times, reference.times, rtol=0, atol=1e-12)
        np.testing.assert_allclose(mean_field.states, reference.states, rtol=0, atol=1e-12)
    assert_linear_field(dynamics)


# --------------------------------------------------------------------------
# N identical systems = one system with the field term times N
# --------------------------------------------------------------------------

COPIES = 3


@pytest.mark.parametrize("route", ["tempo", "process_tensor"])
def test_identical_systems_are_one_rescaled_system(route, process_tensors):
    spin = LaserSpin()
    many = nm.MeanFieldSystem([spin.system() for _ in range(COPIES)], cavity_eom([spin] * COPIES))
    one = nm.MeanFieldSystem([spin.system()], cavity_eom([spin], factor=COPIES))
    results = []
    for system, count in ((many, COPIES), (one, 1)):
        initial = [SPIN_RHO0] * count
        if route == "tempo":
            tempo = nm.MeanFieldTempo(
                system, [spin_bath() for _ in range(count)], parameters(), initial, FIELD0
            )
            results.append(tempo.compute(END, **SILENT))
        else:
            pt = process_tensors[False][0]
            results.append(
                nm.compute_dynamics_with_field(
                    system,
                    FIELD0,
                    [pt] * count,
                    initial_state_list=initial,
                    subdiv_limit=None,
                    **SILENT,
                )
            )
    dynamics, single = results
    assert len(dynamics.system_dynamics) == COPIES
    reference = single.system_dynamics[0].states
    for member in dynamics.system_dynamics:
        np.testing.assert_allclose(member.states, reference, rtol=0, atol=1e-12)
    np.testing.assert_allclose(dynamics.fields, single.fields, rtol=0, atol=1e-12)
    # the field changes visibly (the copies are coupled to it)
    assert np.max(np.abs(single.fields - FIELD0 * np.exp(-(0.8j + 0.2) * single.times))) > 1e-2


# --------------------------------------------------------------------------
# TEMPO against process tensors; unique against the full index
# --------------------------------------------------------------------------

TRUNCATION = 1e-5  # epsrel 1e-7 over 10 steps


@pytest.mark.parametrize("unique", [False, True])
def test_tempo_and_process_tensors_agree(unique, process_tensors):
    """One pair of process tensors serves two field equations (cavity frequencies)."""
    pts = process_tensors[unique]
    initial = [SPIN_RHO0, THREE_RHO0]
    by_frequency = []
    for frequency in (0.8, 1.3):
        system = two_emitter_system(frequency)
        tempo = nm.MeanFieldTempo(
            system,
            [spin_bath(), three_level_bath()],
            parameters(),
            initial,
            FIELD0,
            unique=unique,
        ).compute(END, **SILENT)
        with_pts = nm.compute_dynamics_with_field(
            system, FIELD0, pts, initial_state_list=initial, subdiv_limit=None, **SILENT
        )
        assert len(tempo) == len(with_pts) == STEPS + 1
        assert max_difference(tempo, with_pts) < TRUNCATION
        without_bath = nm.compute_dynamics_with_field(
            system,
            FIELD0,
            dt=DT,
            num_steps=STEPS,
            initial_state_list=initial,
            subdiv_limit=None,
            **SILENT,
        )
        for j in range(2):  # each bath changes its system visibly
            change = states_of(with_pts)[j] - states_of(without_bath)[j]
            assert np.max(np.abs(change)) > 1e-3
        by_frequency.append(with_pts)
    assert max_difference(*by_frequency) > 1e-2  # the two field equations differ


def test_unique_agrees_with_full_index(process_tensors, tempo_run):
    system = two_emitter_system()
    initial = [SPIN_RHO0, THREE_RHO0]
    unique = nm.MeanFieldTempo(
        system, [spin_bath(), three_level_bath()], parameters(), initial, FIELD0, unique=True
    ).compute(END, **SILENT)
    assert max_difference(unique, tempo_run) < TRUNCATION
    with_pts = [
        nm.compute_dynamics_with_field(
            system,
            FIELD0,
            process_tensors[flag],
            initial_state_list=initial,
            subdiv_limit=None,
            **SILENT,
        )
        for flag in (False, True)
    ]
    assert max_difference(*with_pts) < TRUNCATION


# --------------------------------------------------------------------------
# systems of different dimensions, controls per system
# --------------------------------------------------------------------------

KICK_STEP = 4
SPIN_KICK = unitary_super(scipy.linalg.expm(-0.45j * SY))  # rotation by 0.9 about y
POST_STEP = 6
THREE_KICK = unitary_super(
    scipy.linalg.expm(-0.6j * (np.eye(3, k=2) + np.eye(3, k=-2)))  # mixes levels 0 and 2
)


def test_controls_act_on_their_system_and_reach_the_other_through_the_field(process_tensors):
    system = two_emitter_system()
    pts = process_tensors[False]
    initial = [SPIN_RHO0, THREE_RHO0]

    def run(control_list):
        return nm.compute_dynamics_with_field(
            system,
            FIELD0,
            pts,
            initial_state_list=initial,
            control_list=control_list,
            subdiv_limit=None,
            **SILENT,
        )

    plain = run(None)
    spin_control = nm.Control(2)
    spin_control.add_single(KICK_STEP, SPIN_KICK)
    kicked = run([spin_control, None])
    (spin, three), (spin_k, three_k) = states_of(plain), states_of(kicked)
    k = KICK_STEP
    # nothing changes before t_k; at t_k only the kicked spin's recorded state
    np.testing.assert_allclose(spin_k[:k], spin[:k], rtol=0, atol=1e-13)
    np.testing.assert_allclose(three_k[: k + 1], three[: k + 1], rtol=0, atol=1e-13)
    np.testing.assert_allclose(kicked.fields[:k], plain.fields[:k], rtol=0, atol=1e-13)
    np.testing.assert_allclose(
        spin_k[k].reshape(-1), SPIN_KICK @ spin[k].reshape(-1), rtol=0, atol=1e-12
    )
    assert np.max(np.abs(spin_k[k] - spin[k])) > 0.1
    # afterwards the field carries the kick to the three-level system
    assert np.all(np.abs(kicked.fields[k + 1 :] - plain.fields[k + 1 :]) > 1e-4)
    assert np.all(np.max(np.abs(three_k[k + 1 :] - three[k + 1 :]), axis=(1, 2)) > 1e-6)
    assert np.max(np.abs(three_k[-1] - three[-1])) > 1e-4

    # a post-control on the three-level system: after its state at t_6 is recorded
    three_control = nm.Control(3)
    three_control.add_single(POST_STEP, THREE_KICK, post=True)
    both = run([spin_control, three_control])
    spin_b, three_b = states_of(both)
    p = POST_STEP
    np.testing.assert_allclose(three_b[: p + 1], three_k[: p + 1], rtol=0, atol=1e-13)
    np.testing.assert_allclose(spin_b[: p + 1], spin_k[: p + 1], rtol=0, atol=1e-13)
    assert np.max(np.abs(three_b[p + 1] - three_k[p + 1])) > 0.1
    assert np.max(np.abs(spin_b[-1] - spin_k[-1])) > 1e-5
    for states in (spin_b, three_b):  # still density matrices of their own dimension
        np.testing.assert_allclose(np.trace(states, axis1=1, axis2=2), 1.0, atol=1e-6)


def test_control_of_the_wrong_dimension_is_refused(process_tensors):
    wrong = nm.Control(3)
    with pytest.raises(ValueError, match=r"control_list\[0\] has dimension 3"):
        nm.compute_dynamics_with_field(
            two_emitter_system(),
            FIELD0,
            process_tensors[False],
            initial_state_list=[SPIN_RHO0, THREE_RHO0],
            control_list=[wrong, None],
            **SILENT,
        )


def test_several_baths_on_one_system(process_tensors):
    """Two independent baths with the same coupling and half the spectral density each
    act as one bath with all of it (the influence exponents add), to the truncation."""
    half_pts = [
        nm.pt_tempo_compute(spin_bath(alpha=0.05), 0.0, END, parameters(), **SILENT)
        for _ in range(2)
    ]
    spin_pt, three_pt = process_tensors[False]
    system = two_emitter_system()
    kwargs = {"initial_state_list": [SPIN_RHO0, THREE_RHO0], "subdiv_limit": None, **SILENT}
    one = nm.compute_dynamics_with_field(system, FIELD0, [spin_pt, three_pt], **kwargs)
    split = nm.compute_dynamics_with_field(
        system, FIELD0, [half_pts, [three_pt, nm.TrivialProcessTensor(3)]], **kwargs
    )
    assert max_difference(one, split) < TRUNCATION
    only_half = nm.compute_dynamics_with_field(system, FIELD0, [half_pts[0], three_pt], **kwargs)
    assert max_difference(one, only_half) > 1e-3


# --------------------------------------------------------------------------
# record_all, continuation
# --------------------------------------------------------------------------


def test_record_all_false_keeps_first_and_last(process_tensors):
    system = two_emitter_system()
    kwargs = {
        "initial_state_list": [SPIN_RHO0, THREE_RHO0],
        "subdiv_limit": None,
        **SILENT,
    }
    full = nm.compute_dynamics_with_field(system, FIELD0, process_tensors[False], **kwargs)
    ends = nm.compute_dynamics_with_field(
        system, FIELD0, process_tensors[False], record_all=False, **kwargs
    )
    assert len(ends) == 2
    np.testing.assert_allclose(ends.times, [0.0, END], rtol=0, atol=1e-12)
    np.testing.assert_allclose(ends.fields, full.fields[[0, -1]], rtol=0, atol=1e-14)
    for short, long in zip(states_of(ends), states_of(full)):
        np.testing.assert_allclose(short, long[[0, -1]], rtol=0, atol=1e-14)


def test_mean_field_tempo_continues(tempo_run):
    tempo = nm.MeanFieldTempo(
        two_emitter_system(),
        [spin_bath(), three_level_bath()],
        parameters(),
        [SPIN_RHO0, THREE_RHO0],
        FIELD0,
    )
    half = tempo.compute(END / 2, **SILENT)
    assert len(half) == STEPS // 2 + 1
    whole = tempo.compute(END, **SILENT)
    assert len(whole) == STEPS + 1
    assert tempo.get_dynamics() is whole
    assert max_difference(whole, tempo_run) < 1e-12
    assert tempo.max_bond_dimension > 1


# --------------------------------------------------------------------------
# MeanFieldDynamics
# --------------------------------------------------------------------------


def small_dynamics():
    times = [0.0, 0.1, 0.2]
    spin_states = [pure_state(1.0, 0.2 * k) for k in range(3)]
    three_states = [pure_state(1.0, 0.1j * k, 0.3) for k in range(3)]
    fields = [0.1, 0.2 + 0.1j, -0.3j]
    dynamics = nm.MeanFieldDynamics(
        times, [list(pair) for pair in zip(spin_states, three_states)], fields, name="small"
    )
    return dynamics, times, spin_states, three_states, fields


def test_mean_field_dynamics_holds_times_fields_and_systems():
    dynamics, times, spin_states, three_states, fields = small_dynamics()
    assert len(dynamics) == 3
    np.testing.assert_array_equal(dynamics.times, times)
    assert dynamics.fields.dtype == complex
    np.testing.assert_array_equal(dynamics.fields, fields)
    field_times, field_values = dynamics.field_expectations()
    np.testing.assert_array_equal(field_times, times)
    np.testing.assert_array_equal(field_values, fields)
    spin, three = dynamics.system_dynamics
    assert isinstance(spin, nm.Dynamics)
    np.testing.assert_array_equal(spin.times, times)
    np.testing.assert_array_equal(spin.states, spin_states)
    np.testing.assert_array_equal(three.states, three_states)
    _, sz = spin.expectations(SZ, real=True)
    np.testing.assert_allclose(sz, [np.trace(SZ @ rho).real for rho in spin_states])
    dynamics.add(0.3, [spin_states[0], three_states[0]], 1.0)
    assert len(dynamics) == 4 and len(dynamics.system_dynamics[1]) == 4


def test_empty_mean_field_dynamics():
    empty = nm.MeanFieldDynamics()
    assert len(empty) == 0
    assert empty.field_expectations() == (None, None)
    assert empty.system_dynamics == []
    assert empty.times.shape == (0,) and empty.fields.shape == (0,)


def test_mean_field_dynamics_bad_input():
    dynamics, _, spin_states, three_states, _ = small_dynamics()
    with pytest.raises(ValueError, match="same length"):
        nm.MeanFieldDynamics([0.0, 0.1], [[spin_states[0]]], [0.1, 0.2])
    with pytest.raises(ValueError, match="same length"):
        nm.MeanFieldDynamics([0.0], [[spin_states[0]]], [0.1, 0.2])
    with pytest.raises(ValueError, match="2 systems"):
        dynamics.add(0.3, [spin_states[0]], 0.1)
    with pytest.raises(ValueError, match="not finite"):
        dynamics.add(0.3, [spin_states[0], three_states[0]], complex(np.nan, 0.0))
    with pytest.raises(ValueError, match="shape"):
        dynamics.add(0.3, [three_states[0], three_states[0]], 0.1)
    assert len(dynamics) == 3


@pytest.mark.parametrize("extension", [".npz", ".h5"])
def test_export_import_round_trip(tmp_path, tempo_run, extension):
    filename = tmp_path / f"dynamics{extension}"
    tempo_run.export(str(filename))
    loaded = nm.import_mean_field_dynamics(str(filename))
    assert loaded.name == tempo_run.name == "two emitters"
    assert loaded.description == tempo_run.description
    np.testing.assert_array_equal(loaded.times, tempo_run.times)
    np.testing.assert_array_equal(loaded.fields, tempo_run.fields)
    assert len(loaded.system_dynamics) == 2
    for a, b in zip(states_of(loaded), states_of(tempo_run)):
        assert a.shape == b.shape
        np.testing.assert_array_equal(a, b)
    # an existing file is kept unless overwrite=True
    before = filename.read_bytes()
    other, *_ = small_dynamics()
    with pytest.raises(FileExistsError, match="overwrite"):
        other.export(str(filename))
    assert filename.read_bytes() == before
    other.export(str(filename), overwrite=True)
    np.testing.assert_array_equal(nm.import_mean_field_dynamics(str(filename)).fields, other.fields)
    assert sorted(os.listdir(tmp_path)) == [filename.name]  # no temporary left


def test_export_refuses_unknown_file_types(tmp_path):
    dynamics, *_ = small_dynamics()
    with pytest.raises(ValueError, match="unknown file type"):
        dynamics.export(str(tmp_path / "dynamics.txt"))
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize("extension", [".npz", ".h5"])
def test_export_that_fails_half_way_leaves_no_file(tmp_path, monkeypatch, extension):
    """A write that fails after part of the file is written leaves nothing behind."""
    dynamics, *_ = small_dynamics()
    if extension == ".npz":

        def broken_savez(handle, *args, **kwargs):
            handle.write(b"PK\x03\x04 part of an archive")
            raise OSError("disk full")

        monkeypatch.setattr(np, "savez", broken_savez)
    else:
        h5py = pytest.importorskip("h5py")
        original = h5py.Group.create_dataset
        calls = []

        def broken_create_dataset(self, name, *args, **kwargs):
            calls.append(name)
            if len(calls) > 1:  # the first dataset is written, then the disk fills
                raise OSError("disk full")
            return original(self, name, *args, **kwargs)

        monkeypatch.setattr(h5py.Group, "create_dataset", broken_create_dataset)
    with pytest.raises(OSError, match="disk full"):
        dynamics.export(str(tmp_path / f"dynamics{extension}"))
    assert os.listdir(tmp_path) == []


def test_import_refuses_other_files(tmp_path):
    plain = nm.Dynamics([0.0], [SPIN_RHO0])
    plain.export(str(tmp_path / "plain.npz"))
    with pytest.raises(ValueError, match="not a nonmarkov mean-field dynamics file"):
        nm.import_mean_field_dynamics(str(tmp_path / "plain.npz"))
    with pytest.raises(ValueError, match="unknown file type"):
        nm.import_mean_field_dynamics(str(tmp_path / "plain.txt"))


# --------------------------------------------------------------------------
# NumPy and JAX
# --------------------------------------------------------------------------


@pytest.mark.skip_backend("numpy", reason="compares a JAX session's run with NumPy")
def test_jax_agrees_with_numpy(tol, process_tensors, tempo_run):
    system = two_emitter_system()
    initial = [SPIN_RHO0, THREE_RHO0]
    control = nm.Control(2)
    control.add_single(KICK_STEP, SPIN_KICK)

    def with_pts(pts):
        return nm.compute_dynamics_with_field(
            system,
            FIELD0,
            pts,
            initial_state_list=initial,
            control_list=[control, None],
            subdiv_limit=None,
            **SILENT,
        )

    session_pts = with_pts(process_tensors[False])
    with backends.use_backend("numpy"):
        numpy_tempo = nm.MeanFieldTempo(
            system, [spin_bath(), three_level_bath()], parameters(), initial, FIELD0
        ).compute(END, **SILENT)
        numpy_pts = with_pts(
            [
                nm.pt_tempo_compute(bath, 0.0, END, parameters(), **SILENT)
                for bath in (spin_bath(), three_level_bath())
            ]
        )
    for session, reference in ((tempo_run, numpy_tempo), (session_pts, numpy_pts)):
        tol.assert_close(session.fields, reference.fields, kind="agree")
        for a, b in zip(states_of(session), states_of(reference)):
            tol.assert_close(a, b, kind="agree")


# --------------------------------------------------------------------------
# bad input: clear errors before any computation
# --------------------------------------------------------------------------


def spin_with_field():
    return LaserSpin().system()


def spin_only_system(eom=None):
    eom = eom or (lambda t, states, field: -field)
    return nm.MeanFieldSystem([spin_with_field()], eom)


@pytest.mark.parametrize(
    "eom, match",
    [
        (lambda t, states, field: np.array([field, field]), "complex scalar"),
        (lambda t, states, field: [1.0, 2.0], "complex scalar"),
        (lambda t, states, field: "fast", "complex scalar"),
        (lambda t, states, field: np.nan, "non-finite"),
        (lambda t, states, field: complex(0.0, np.inf), "non-finite"),
        (lambda t, states, field: 1.0 / 0.0, "field_eom failed.*division by zero"),
    ],
    ids=["array", "list", "string", "nan", "infinite", "raises"],
)
def test_bad_field_equation(eom, match):
    with pytest.raises(ValueError, match=match):
        nm.MeanFieldSystem([spin_with_field()], eom)


def bad_at_the_initial_field(t, states, field):
    """Fine at the check of MeanFieldSystem (field 0), infinite at |field| > 0.5."""
    return np.inf if abs(field) > 0.5 else -field


@pytest.mark.parametrize("method", ["tempo", "process_tensor"])
def test_field_equation_bad_at_the_initial_data(method):
    system = spin_only_system(bad_at_the_initial_field)
    with pytest.raises(ValueError, match=r"non-finite value at t=0\.0"):
        if method == "tempo":
            nm.MeanFieldTempo(system, [spin_bath()], parameters(), [SPIN_RHO0], 1.0)
        else:
            without_bath(system, 1.0)


def test_field_equation_that_fails_later_names_the_time():
    def eom(t, states, field):
        if t > 0.25:
            raise RuntimeError("out of range")
        return -field

    with pytest.raises(ValueError, match=r"field_eom failed at t=0\.3.*out of range"):
        without_bath(spin_only_system(eom))


def test_list_lengths_must_match_the_systems(process_tensors):
    system = two_emitter_system()
    initial = [SPIN_RHO0, THREE_RHO0]
    with pytest.raises(ValueError, match="bath_list has 1 items.*2 systems"):
        nm.MeanFieldTempo(system, [spin_bath()], parameters(), initial, FIELD0)
    with pytest.raises(ValueError, match="initial_state_list has 1 items"):
        nm.MeanFieldTempo(
            system, [spin_bath(), three_level_bath()], parameters(), [SPIN_RHO0], FIELD0
        )
    with pytest.raises(ValueError, match="process_tensor_list has 3 items"):
        nm.compute_dynamics_with_field(
            system,
            FIELD0,
            process_tensors[False] + [process_tensors[False][0]],
            initial_state_list=initial,
            **SILENT,
        )
    with pytest.raises(ValueError, match="control_list has 1 items"):
        nm.compute_dynamics_with_field(
            system,
            FIELD0,
            process_tensors[False],
            initial_state_list=initial,
            control_list=[None],
            **SILENT,
        )
    with pytest.raises(ValueError, match="initial_state_list must be given"):
        nm.compute_dynamics_with_field(system, FIELD0, process_tensors[False], **SILENT)


def test_initial_states_of_the_wrong_dimension(process_tensors):
    system = two_emitter_system()
    swapped = [THREE_RHO0, SPIN_RHO0]
    with pytest.raises(ValueError, match=r"initial_state_list\[0\] has dimension 3"):
        nm.MeanFieldTempo(system, [spin_bath(), three_level_bath()], parameters(), swapped, FIELD0)
    with pytest.raises(ValueError, match=r"initial_state_list\[0\] has dimension 3"):
        nm.compute_dynamics_with_field(
            system, FIELD0, process_tensors[False], initial_state_list=swapped, **SILENT
        )


def test_baths_and_process_tensors_of_the_wrong_dimension(process_tensors):
    system = two_emitter_system()
    initial = [SPIN_RHO0, THREE_RHO0]
    with pytest.raises(ValueError, match=r"bath_list\[0\] has dimension 3"):
        nm.MeanFieldTempo(system, [three_level_bath(), spin_bath()], parameters(), initial, FIELD0)
    with pytest.raises(ValueError, match=r"process_tensor_list\[0\] has dimension 3"):
        nm.compute_dynamics_with_field(
            system, FIELD0, process_tensors[False][::-1], initial_state_list=initial, **SILENT
        )


def test_process_tensors_of_different_time_steps(process_tensors):
    system = two_emitter_system()
    finer = nm.pt_tempo_compute(three_level_bath(), 0.0, END, parameters(dt=DT / 2), **SILENT)
    with pytest.raises(ValueError, match="dt=0.05.*does not fit dt=0.1"):
        nm.compute_dynamics_with_field(
            system,
            FIELD0,
            [process_tensors[False][0], finer],
            initial_state_list=[SPIN_RHO0, THREE_RHO0],
            **SILENT,
        )


@pytest.mark.parametrize(
    "hamiltonian, match",
    [
        (lambda t, field: np.eye(3)[:2], "square matrix"),
        (lambda t, field: np.eye(2) if field == 0 else np.eye(3), "dimension 3"),
        (lambda t, field: 0.5 * SZ + field * SIGMA_MINUS, "Hermitian"),
        (lambda t, field: 0.5 * SZ + (field + np.conj(field)) * 1j * SX, "Hermitian"),
    ],
    ids=["not-square", "shape-depends-on-field", "not-hermitian", "not-hermitian-for-complex"],
)
def test_bad_hamiltonian_with_field(hamiltonian, match):
    with pytest.raises(ValueError, match=match):
        nm.TimeDependentSystemWithField(hamiltonian)


def test_hamiltonian_changing_shape_later_is_a_clear_error():
    def hamiltonian(t, field):
        return 0.5 * SZ if t < 0.25 else np.eye(3)

    system = nm.MeanFieldSystem(
        [nm.TimeDependentSystemWithField(hamiltonian)], lambda t, states, field: -field
    )
    with pytest.raises(ValueError, match="shape"):
        without_bath(system, subdiv_limit=None)


def test_wrong_types():
    with pytest.raises(TypeError, match="TimeDependentSystemWithField"):
        nm.MeanFieldSystem([nm.System(0.5 * SZ)], lambda t, states, field: -field)
    with pytest.raises(TypeError, match="list of TimeDependentSystemWithField"):
        nm.MeanFieldSystem(spin_with_field(), lambda t, states, field: -field)
    with pytest.raises(ValueError, match="at least one system"):
        nm.MeanFieldSystem([], lambda t, states, field: -field)
    with pytest.raises(TypeError, match="field_eom must be a callable"):
        nm.MeanFieldSystem([spin_with_field()], 1.0)
    with pytest.raises(TypeError, match="callable"):
        nm.TimeDependentSystemWithField(0.5 * SZ)
    with pytest.raises(TypeError, match="MeanFieldSystem"):
        nm.compute_dynamics_with_field(
            spin_with_field(), FIELD0, dt=DT, num_steps=2, initial_state_list=[SPIN_RHO0]
        )
    with pytest.raises(TypeError, match="initial_field must be a complex number"):
        nm.compute_dynamics_with_field(
            spin_only_system(), "0.3", dt=DT, num_steps=2, initial_state_list=[SPIN_RHO0]
        )
    with pytest.raises(TypeError, match=r"bath_list\[0\] must be a Bath"):
        nm.MeanFieldTempo(spin_only_system(), [0.5 * SZ], parameters(), [SPIN_RHO0], FIELD0)


def test_system_with_field_is_refused_by_tempo_and_compute_dynamics():
    system = spin_with_field()
    with pytest.raises(TypeError, match="MeanFieldTempo"):
        nm.Tempo(system, spin_bath(), parameters(), SPIN_RHO0, 0.0)
    with pytest.raises(TypeError, match="MeanFieldTempo"):
        nm.compute_dynamics(system, SPIN_RHO0, dt=DT, num_steps=2, **SILENT)
    pt = nm.pt_tempo_compute(spin_bath(), 0.0, 2 * DT, parameters(), **SILENT)
    with pytest.raises(TypeError, match="MeanFieldTempo"):
        nm.compute_dynamics(system, SPIN_RHO0, process_tensor=pt, **SILENT)
