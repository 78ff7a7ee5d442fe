"""QuTiP interop with the real ``qutip`` package (the ``qutip`` extra, installed in CI).

- The conversion rule (:func:`nonmarkov.validation.from_qutip`): operators,
  kets as states, superoperators from QuTiP's column stacking to the row-major
  convention, and the Qobj types that are refused.
- The same dynamics from Qobj inputs as from arrays, to 1e-13: systems,
  time-dependent systems (a callable returning a Qobj, a ``QobjEvo``), baths,
  initial kets, controls, expectations, correlations, chains.
- A pure Lindblad problem against ``qutip.mesolve``.
- ``Dynamics.to_qutip`` and QuTiP never being imported by the library itself.
"""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

import nonmarkov as nm
from models import SIGMA_MINUS, SX, SZ, pure_state
from nonmarkov.io.qutip_interop import states_to_qutip
from nonmarkov.validation import from_qutip

qutip = pytest.importorskip("qutip", minversion="5", reason="the qutip extra is not installed")

SILENT = {"progress_type": "silent"}
HAMILTONIAN = 0.5 * SX + 0.3 * SZ
PSI = np.array([0.8, 0.6 * np.exp(0.7j)])
GAMMA = 0.2
PARAMETERS = nm.TempoParameters(dt=0.2, epsrel=1e-7, dkmax=3)


def q(matrix) -> qutip.Qobj:
    return qutip.Qobj(np.asarray(matrix))


# --------------------------------------------------------------------------
# the conversion rule
# --------------------------------------------------------------------------


def test_operator_and_ket_conversion():
    assert np.array_equal(from_qutip(qutip.sigmax(), "x"), SX)
    ket = qutip.Qobj(PSI.reshape(2, 1))
    assert np.allclose(from_qutip(ket, "state", "state"), np.outer(PSI, PSI.conj()), atol=1e-15)
    two_qubits = qutip.tensor(qutip.sigmaz(), qutip.qeye(2))
    assert np.array_equal(from_qutip(two_qubits, "x"), np.kron(SZ, np.eye(2)))
    assert from_qutip(SX, "x") is SX  # not a Qobj: unchanged


def test_superoperators_change_to_row_major_vectorisation():
    rng = np.random.default_rng(3)
    a, b = (rng.normal(size=(3, 3)) + 1j * rng.normal(size=(3, 3)) for _ in range(2))
    converted = from_qutip(qutip.sprepost(q(a), q(b)), "s", "superoperator")
    assert np.allclose(converted, nm.operators.left_right_super(a, b), atol=1e-14)
    liouvillian = qutip.liouvillian(q(HAMILTONIAN), [np.sqrt(GAMMA) * q(SIGMA_MINUS)])
    ours = nm.System(HAMILTONIAN, [GAMMA], [SIGMA_MINUS]).liouvillian()
    assert np.allclose(from_qutip(liouvillian, "l", "superoperator"), ours, atol=1e-14)
    unitary = qutip.sigmax()
    choi = qutip.to_choi(qutip.to_super(unitary))
    assert np.allclose(from_qutip(choi, "c", "superoperator"), np.kron(SX, SX.conj()), atol=1e-14)


@pytest.mark.parametrize(
    ("value", "kind", "message"),
    [
        (qutip.basis(2, 0), "operator", "ket is accepted for a state only"),
        (qutip.basis(2, 0).dag(), "state", "bra.dag()"),
        (qutip.sigmax(), "superoperator", "to_super"),
        (qutip.spre(qutip.sigmax()), "operator", "type 'super'"),
        (qutip.operator_to_vector(qutip.sigmax()), "state", "operator-ket"),
    ],
)
def test_qobj_types_that_do_not_fit_are_type_errors(value, kind, message):
    with pytest.raises(TypeError, match="must be a") as error:
        from_qutip(value, "thing", kind)
    assert message in str(error.value)
    assert "thing" in str(error.value)


def test_wrong_dimension_is_a_value_error_naming_the_input():
    with pytest.raises(ValueError, match=r"lindblad_operators\[0\] has dimension 3"):
        nm.System(qutip.sigmaz(), [0.1], [qutip.destroy(3)])
    system = nm.System(qutip.sigmaz())
    bath = nm.Bath(qutip.Qobj(np.diag([1.0, 2.0, 3.0])), nm.PowerLawSD(0.1, 1.0, 5.0))
    with pytest.raises(ValueError, match="coupling operator has dimension 3"):
        nm.tempo_compute(system, bath, qutip.basis(2, 0), 0.0, 0.4, PARAMETERS, **SILENT)
    with pytest.raises(ValueError, match="initial_state has dimension 3"):
        nm.compute_dynamics(system, qutip.basis(3, 0), dt=0.1, num_steps=2, **SILENT)
    dynamics = nm.compute_dynamics(system, qutip.basis(2, 0), dt=0.1, num_steps=2, **SILENT)
    with pytest.raises(ValueError, match="operator has dimension 4"):
        dynamics.expectations(qutip.tensor(qutip.sigmax(), qutip.sigmax()))
    with pytest.raises(ValueError, match=r"control_operation is a 9x9 matrix.*\(4, 4\)"):
        nm.Control(2).add_single(0, qutip.to_super(qutip.qeye(3)))
    # a ket of norm 2 is |psi><psi| of trace 4: the linear map scales it
    scaled = nm.compute_dynamics(system, 2 * qutip.basis(2, 0), dt=0.1, num_steps=2, **SILENT)
    np.testing.assert_allclose(scaled.states, 4 * dynamics.states, atol=1e-12)


# --------------------------------------------------------------------------
# the same dynamics from Qobj inputs as from arrays
# --------------------------------------------------------------------------


def bath_of(coupling):
    return nm.Bath(coupling, nm.PowerLawSD(0.1, 1.0, 4.0, temperature=0.5))


@pytest.fixture(scope="module")
def process_tensors():
    """PTs of the same bath built from an array and from a Qobj coupling (6 steps of 0.2)."""
    arrays = nm.pt_tempo_compute(bath_of(0.5 * SZ), 0.0, 1.2, PARAMETERS, **SILENT)
    qobjs = nm.pt_tempo_compute(bath_of(0.5 * qutip.sigmaz()), 0.0, 1.2, PARAMETERS, **SILENT)
    return arrays, qobjs


def kick(angle):
    unitary = np.cos(angle) * np.eye(2) - 1j * np.sin(angle) * SX
    return unitary, np.kron(unitary, unitary.conj())


def test_process_tensors_from_a_qobj_coupling_equal_those_from_arrays(process_tensors):
    arrays, qobjs = process_tensors
    for step in range(len(arrays)):
        assert np.array_equal(arrays.get_mpo_tensor(step), qobjs.get_mpo_tensor(step))


def test_dynamics_from_qobj_inputs_equal_those_from_arrays(process_tensors):
    pt, _ = process_tensors
    unitary, superoperator = kick(0.3)
    array_control = nm.Control(2)
    array_control.add_single(2, superoperator)
    array_control.add_single(4, superoperator, post=True)
    qobj_control = nm.Control(2)
    qobj_control.add_single(2, qutip.to_super(q(unitary)))
    qobj_control.add_single(4, qutip.sprepost(q(unitary), q(unitary).dag()), post=True)
    array_system = nm.System(HAMILTONIAN, [GAMMA], [SIGMA_MINUS])
    qobj_system = nm.System(q(HAMILTONIAN), [GAMMA], [qutip.Qobj(SIGMA_MINUS)])

    from_arrays = nm.compute_dynamics(
        array_system, pure_state(*PSI), process_tensor=pt, control=array_control, **SILENT
    )
    from_qobjs = nm.compute_dynamics(
        qobj_system, qutip.Qobj(PSI), process_tensor=pt, control=qobj_control, **SILENT
    )
    assert np.max(np.abs(from_arrays.states - from_qobjs.states)) < 1e-13
    _, sx_arrays = from_arrays.expectations(SX, real=True)
    _, sx_qobjs = from_qobjs.expectations(qutip.sigmax(), real=True)
    assert np.max(np.abs(sx_arrays - sx_qobjs)) < 1e-13


def test_tempo_from_qobj_inputs_equals_tempo_from_arrays():
    arrays = nm.tempo_compute(
        nm.System(HAMILTONIAN), bath_of(0.5 * SZ), pure_state(*PSI), 0.0, 0.8, PARAMETERS, **SILENT
    )
    qobjs = nm.tempo_compute(
        nm.System(q(HAMILTONIAN)),
        bath_of(0.5 * qutip.sigmaz()),
        qutip.Qobj(PSI),
        0.0,
        0.8,
        PARAMETERS,
        **SILENT,
    )
    assert np.max(np.abs(arrays.states - qobjs.states)) < 1e-13


def test_time_dependent_systems_take_qobj_values_and_qobjevo():
    def h_array(t):
        return HAMILTONIAN + np.cos(2.0 * t) * SZ

    def h_qobj(t):
        return q(HAMILTONIAN) + np.cos(2.0 * t) * qutip.sigmaz()

    evo = qutip.QobjEvo([q(HAMILTONIAN), [qutip.sigmaz(), lambda t: np.cos(2.0 * t)]])
    rate, lowering = (lambda t: GAMMA), qutip.Qobj(SIGMA_MINUS)
    runs = [
        nm.compute_dynamics(
            nm.TimeDependentSystem(h, [rate], [op]), state, dt=0.1, num_steps=5, **SILENT
        ).states
        for h, op, state in [
            (h_array, lambda t: SIGMA_MINUS, pure_state(*PSI)),
            (h_qobj, lambda t: lowering, qutip.Qobj(PSI)),
            (evo, qutip.QobjEvo(lowering), qutip.Qobj(PSI)),
        ]
    ]
    assert np.max(np.abs(runs[0] - runs[1])) < 1e-13
    assert np.max(np.abs(runs[0] - runs[2])) < 1e-13
    # the vectorised accessors over arrays of times too
    system = nm.TimeDependentSystem(h_qobj, [rate], [lambda t: lowering])
    times = np.array([0.1, 0.7])
    np.testing.assert_allclose(system.hamiltonian(0.7), h_array(0.7), atol=1e-15)
    assert system.hamiltonian(times).shape == (2, 2, 2)
    assert system.lindblad_operators[0](times).shape == (2, 2, 2)


def test_continuous_controls_may_return_qobj_superoperators():
    system = nm.System(HAMILTONIAN)
    runs = []
    for make in (lambda u: kick(u)[1], lambda u: qutip.to_super(q(kick(u)[0]))):
        control = nm.Control(2)
        control.add_continuous(lambda t, make=make: make(0.05 * t))
        runs.append(
            nm.compute_dynamics(
                system, pure_state(*PSI), dt=0.1, num_steps=4, control=control, **SILENT
            ).states
        )
    assert np.max(np.abs(runs[0] - runs[1])) < 1e-13


def test_correlations_take_qobj_operators(process_tensors):
    pt, _ = process_tensors
    system = nm.System(HAMILTONIAN)
    common = {"times_a": 0.4, "times_b": slice(0, 5), "initial_state": pure_state(*PSI)}
    _, arrays = nm.compute_correlations(system, pt, SIGMA_MINUS, SX, **common, **SILENT)
    common["initial_state"] = qutip.Qobj(PSI)
    _, qobjs = nm.compute_correlations(
        system, pt, qutip.Qobj(SIGMA_MINUS), qutip.sigmax(), **common, **SILENT
    )
    assert np.allclose(arrays, qobjs, atol=1e-13, equal_nan=True)


def test_chains_take_qobj_operators_and_superoperators():
    by_arrays, by_qobjs = nm.SystemChain([2, 3]), nm.SystemChain([2, 3])
    a, b = qutip.rand_herm(2, seed=1), qutip.rand_herm(3, seed=2)
    by_arrays.add_site_hamiltonian(1, b.full())
    by_qobjs.add_site_hamiltonian(1, b)
    by_arrays.add_site_dissipation(0, SIGMA_MINUS, gamma=0.1)
    by_qobjs.add_site_dissipation(0, qutip.Qobj(SIGMA_MINUS), gamma=0.1)
    by_arrays.add_nn_hamiltonian(0, a.full(), b.full())
    by_qobjs.add_nn_liouvillian(0, qutip.liouvillian(qutip.tensor(a, b)))
    for left, right in zip(
        by_arrays.get_nn_full_liouvillians(), by_qobjs.get_nn_full_liouvillians()
    ):
        assert np.max(np.abs(left - right)) < 1e-13
    kick_array, kick_qobj = nm.ChainControl([2, 3]), nm.ChainControl([2, 3])
    kick_array.add_single_site_control(kick(0.2)[1], 0, 1)
    kick_qobj.add_single_site_control(qutip.to_super(q(kick(0.2)[0])), 0, 1)
    assert np.array_equal(
        kick_array.get_single_site_controls(1, False)[0],
        kick_qobj.get_single_site_controls(1, False)[0],
    )


# --------------------------------------------------------------------------
# against QuTiP's master-equation solver
# --------------------------------------------------------------------------


def test_lindblad_dynamics_agree_with_mesolve():
    h = 0.5 * qutip.sigmax() + 0.3 * qutip.sigmaz()
    c_ops = [np.sqrt(GAMMA) * qutip.destroy(2), np.sqrt(0.05) * qutip.sigmaz()]
    psi0 = qutip.Qobj(PSI)
    dt, num_steps = 0.05, 60
    system = nm.System(h, [1.0, 1.0], c_ops)
    dynamics = nm.compute_dynamics(system, psi0, dt=dt, num_steps=num_steps, **SILENT)
    times = dt * np.arange(num_steps + 1)
    options = {"atol": 1e-12, "rtol": 1e-10, "nsteps": 100000}
    reference = qutip.mesolve(h, psi0, times, c_ops, options=options)
    expected = np.array([state.full() for state in reference.states])
    assert np.allclose(dynamics.times, times, atol=1e-12)
    assert np.max(np.abs(dynamics.states - expected)) < 1e-6


# --------------------------------------------------------------------------
# output, and QuTiP only when the user brings it
# --------------------------------------------------------------------------


def test_states_to_qutip():
    system = nm.System(np.kron(SZ, SX))
    dynamics = nm.compute_dynamics(
        system, qutip.tensor(qutip.basis(2, 0), qutip.basis(2, 1)), dt=0.1, num_steps=3, **SILENT
    )
    states = states_to_qutip(dynamics.states)
    assert len(states) == 4
    assert all(isinstance(state, qutip.Qobj) and state.isoper for state in states)
    assert np.array_equal(np.array([state.full() for state in states]), dynamics.states)
    composite = states_to_qutip(dynamics.states, dims=[2, 2])
    assert composite[0].dims == [[2, 2], [2, 2]]
    assert np.isclose(qutip.expect(qutip.tensor(qutip.sigmaz(), qutip.qeye(2)), composite[-1]), 1)
    with pytest.raises(ValueError, match="dimension 6"):
        states_to_qutip(dynamics.states, dims=[2, 3])
    with pytest.raises(ValueError, match=r"shape \(N, d, d\)"):
        states_to_qutip(dynamics.states[0])


def test_dynamics_to_qutip_and_back():
    dynamics = nm.compute_dynamics(
        nm.System(qutip.sigmax()), qutip.basis(2, 0), dt=0.1, num_steps=3, **SILENT
    )
    states = dynamics.to_qutip()
    assert np.array_equal(np.array([state.full() for state in states]), dynamics.states)
    assert dynamics.to_qutip(dims=[[2], [2]])[0].dims == [[2], [2]]
    back = nm.Dynamics(dynamics.times, states)
    assert np.array_equal(back.states, dynamics.states)
    assert nm.Dynamics().to_qutip() == []


def test_the_library_never_imports_qutip():
    code = (
        "import sys, numpy as np, nonmarkov as nm\n"
        "s = nm.System(np.diag([1.0, -1.0]), [0.1], [np.eye(2)])\n"
        "d = nm.compute_dynamics(s, np.diag([1.0, 0.0]), dt=0.1, num_steps=2,"
        " progress_type='silent')\n"
        "d.expectations(np.eye(2))\n"
        "assert 'qutip' not in sys.modules, 'qutip was imported'\n"
    )
    env = {**os.environ, "NONMARKOV_BACKEND": "numpy"}
    subprocess.run([sys.executable, "-c", code], check=True, env=env, timeout=60)
