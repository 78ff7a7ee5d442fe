"""OQuPy 0.5's API corners that scripts rely on, checked by their behaviour
(tests/test_oqupy_api.py has the module paths and model attributes before these).

- Linear maps on operators of any trace: the reduced dynamics (process tensor and
  system alone), TEMPO, the correlations, the gradient and the mean-field run
  are linear in the initial operator, so any finite (d, d) operator is accepted
  (the identity, a traceless observable, a non-normalised state); the result of
  a*rho1 + b*rho2 is a*result(rho1) + b*result(rho2), and the identity gives the
  sum of the map's action on the basis projectors. The trace-drift warning is
  relative to the initial trace.
- ParameterizedSystem parameters in both layouts ((2N, M) rows, or M sequences).
- Module paths and classes: base_api.BaseAPIClass, util progress displays,
  dynamics.BaseDynamics, Bath degeneracy maps, BaseSystem's signature,
  BaseCorrelations as an interface.
- guess_tempo_parameters with a field system and a tiny tolerance; ops_times
  outside the grid; tcut together with dkmax.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import nonmarkov as nm
from nonmarkov import backends
from nonmarkov.model.parameters import EPSREL_FLOOR

op = nm.operators
SX, SY, SZ = op.sigma("x"), op.sigma("y"), op.sigma("z")
P0, P1 = op.spin_dm("z+"), op.spin_dm("z-")
DT = 0.1
STEPS = 6
# a state, a traceless Hermitian, a non-Hermitian operator and a scaled one
RHO1 = op.spin_dm("x+")
RHO2 = np.array([[0.2, 0.3 - 0.1j], [0.4j, -0.2]])
A, B = 0.7 - 0.2j, -1.3


@pytest.fixture(scope="module")
def pt():
    bath = nm.Bath(0.5 * SZ, nm.PowerLawSD(0.2, 1, 5.0, temperature=0.5))
    parameters = nm.TempoParameters(dt=DT, dkmax=4, epsrel=1e-9)
    return nm.pt_tempo_compute(bath, 0.0, STEPS * DT, parameters, progress_type="silent")


def system():
    return nm.System(0.5 * SX, gammas=[0.1], lindblad_operators=[op.sigma("-")])


def dynamics(initial, pt=None):
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no trace-drift warning on a trace-preserving run
        result = nm.compute_dynamics(
            system(), initial, dt=DT, num_steps=STEPS, process_tensor=pt, progress_type="silent"
        )
    return result.states


# -- linear maps on operators of any trace ---------------------------------------------


@pytest.mark.parametrize("with_pt", [True, False], ids=["process-tensor", "system-alone"])
def test_compute_dynamics_is_linear_in_the_initial_operator(pt, with_pt):
    chosen = pt if with_pt else None
    combined = dynamics(A * RHO1 + B * RHO2, chosen)
    np.testing.assert_allclose(
        combined, A * dynamics(RHO1, chosen) + B * dynamics(RHO2, chosen), atol=1e-10
    )
    identity = dynamics(np.eye(2), chosen)
    np.testing.assert_allclose(identity, dynamics(P0, chosen) + dynamics(P1, chosen), atol=1e-10)
    # the trace is preserved: the identity keeps trace 2, sigma_z trace 0
    np.testing.assert_allclose(np.trace(identity, axis1=1, axis2=2), 2.0, atol=1e-6)
    traceless = dynamics(SZ, chosen)
    np.testing.assert_allclose(np.trace(traceless, axis1=1, axis2=2), 0.0, atol=1e-6)


def test_the_trace_drift_warning_is_relative_to_the_initial_trace(pt):
    doubled = nm.SimpleProcessTensor(2, DT)
    for step in range(pt.num_steps):
        tensor = pt.get_mpo_tensor(step, transformed=False)
        doubled.set_mpo_tensor(step, 2.0 * tensor if step == 1 else tensor)
    with pytest.warns(UserWarning, match=r"the initial trace \(?2"):
        nm.compute_dynamics(
            system(), np.eye(2), process_tensor=doubled, num_steps=3, progress_type="silent"
        )


def test_tempo_is_linear_in_the_initial_operator():
    bath = nm.Bath(0.5 * SZ, nm.PowerLawSD(0.2, 1, 5.0, temperature=0.5))
    parameters = nm.TempoParameters(dt=DT, dkmax=4, epsrel=1e-12)

    def run(initial):
        return nm.tempo_compute(
            system(), bath, initial, 0.0, STEPS * DT, parameters, progress_type="silent"
        ).states

    np.testing.assert_allclose(run(np.eye(2)), run(P0) + run(P1), atol=1e-8)
    np.testing.assert_allclose(run(2.0 * RHO1), 2.0 * run(RHO1), atol=1e-10)


def test_correlations_are_linear_in_the_initial_operator(pt):
    def correlations(initial):
        _, values = nm.compute_correlations(
            system(), pt, SX, SZ, times_a=(0.1, 0.3), times_b=(0.3, 0.5),
            initial_state=initial, progress_type="silent",
        )  # fmt: skip
        return values

    def correlations_nt(initial):
        _, values = nm.compute_correlations_nt(
            system(), pt, [SX, SZ], [0.2, 0.4], ["left", "right"],
            initial_state=initial, progress_type="silent",
        )  # fmt: skip
        return values

    for function in (correlations, correlations_nt):
        np.testing.assert_allclose(
            function(SZ), function(P0) - function(P1), atol=1e-10, err_msg=function.__name__
        )
        np.testing.assert_allclose(
            function(A * RHO1 + B * RHO2),
            A * function(RHO1) + B * function(RHO2),
            atol=1e-10,
            err_msg=function.__name__,
        )


def test_gradient_is_linear_in_the_initial_operator(pt):
    def hamiltonian(x):
        return 0.5 * x * SX

    parameterized = nm.ParameterizedSystem(hamiltonian)
    parameters = np.linspace(0.2, 1.0, 2 * STEPS)
    target = op.spin_dm("y+").T  # a linear target: Z is linear in the initial operator

    def gradient(initial):
        result = nm.state_gradient(
            parameterized, initial, target, [pt], parameters, progress_type="silent"
        )
        return result["gradient"], result["dynamics"].states

    identity, states = gradient(np.eye(2))
    up, states_up = gradient(P0)
    down, states_down = gradient(P1)
    np.testing.assert_allclose(identity, up + down, atol=1e-10)
    np.testing.assert_allclose(states, states_up + states_down, atol=1e-10)
    # and a functional target from the identity runs (OQuPy's purity example)
    tensors, dynamics_identity = nm.compute_gradient_and_dynamics(
        parameterized, np.eye(2), lambda rho: 2 * rho.T, [pt], parameters, progress_type="silent"
    )
    assert len(tensors) == STEPS
    np.testing.assert_allclose(dynamics_identity.states, states, atol=1e-12)


def test_dynamics_with_field_takes_any_operator(pt):
    molecule = nm.TimeDependentSystemWithField(lambda t, a: 0.5 * SX + 0.1 * (a + np.conj(a)) * SZ)
    # a field equation that does not read the states: the run is linear in them
    mean_field = nm.MeanFieldSystem([molecule], field_eom=lambda t, states, a: -0.5j * a)

    def states(initial):
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            result = nm.compute_dynamics_with_field(
                mean_field, 1.0 + 0.5j, [pt], initial_state_list=[initial], progress_type="silent"
            )
        return result.system_dynamics[0].states

    np.testing.assert_allclose(states(0.5 * SZ), 0.5 * (states(P0) - states(P1)), atol=1e-10)


@pytest.mark.parametrize(
    "state, error",
    [(np.eye(3), ValueError), (np.ones((2, 3)), ValueError), ("rho", TypeError)],
    ids=["dimension", "not-square", "text"],
)
def test_operators_that_do_not_fit_are_refused(state, error):
    with pytest.raises(error, match="initial_state"):
        nm.compute_dynamics(system(), state, dt=DT, num_steps=2, progress_type="silent")


# -- ParameterizedSystem parameters in both layouts -----------------------------------


def xyz_hamiltonian(x, y, z):
    return x * SX + y * SY + z * SZ


def test_parameters_in_rows_or_one_sequence_per_parameter():
    parameterized = nm.ParameterizedSystem(xyz_hamiltonian)
    xv, yv, zv = [0.0, 0.1, 0.2, 0.3], [0.0, 0.0, 0.5, 0.0], [1.0, 0.9, 0.8, 0.7]
    rows = list(zip(xv, yv, zv))
    by_rows = parameterized.get_propagators(0.01, rows)
    by_sequences = parameterized.get_propagators(0.01, (xv, yv, zv))
    for step in range(2):
        for first, second in zip(by_rows(step), by_sequences(step)):
            np.testing.assert_array_equal(first, second)
    derivatives = parameterized.get_propagator_derivatives(0.01, (xv, yv, zv))(1)
    expected = parameterized.get_propagator_derivatives(0.01, rows)(1)
    for got, want in zip(derivatives, expected):
        np.testing.assert_allclose(got, want)
    with pytest.raises(ValueError, match=r"\(2N, 3\).*\(3, 2N\)"):
        parameterized.get_propagators(0.01, np.zeros((4, 2)))
    with pytest.raises(TypeError, match="3 parameters; got 0"):
        parameterized.liouvillian()


def test_a_rate_that_vanishes_at_a_parameter_has_a_derivative():
    """gamma(p) = 0.1 p at p = 0: the finite difference looks at p < 0, where the rate
    is negative; only its slope enters, so the derivative is that of the linear rate."""
    parameterized = nm.ParameterizedSystem(
        lambda h: 0.5 * h * SX, gammas=[lambda h: 0.1 * h], lindblad_operators=[lambda h: SZ]
    )
    parameters = np.zeros((2, 1))
    derivative = parameterized.get_propagator_derivatives(DT, parameters)(0)[0][0]
    h = 1e-6
    up = parameterized.get_propagators(DT, parameters + h)(0)[0]
    at = parameterized.get_propagators(DT, parameters)(0)[0]
    np.testing.assert_allclose(derivative, (up - at) / h, atol=1e-6)


# -- module paths and classes ---------------------------------------------------------


def test_base_api_class_name_and_description():
    item = nm.base_api.BaseAPIClass(name="a", description="b")
    assert (item.name, item.description) == ("a", "b")
    del item.name
    del item.description
    assert item.name == "__unnamed__" and item.description == ""
    assert "BaseAPIClass" in str(item)
    with pytest.raises(TypeError, match="name must be a str"):
        item.name = 0.1
    with pytest.raises(TypeError, match="description must be a str"):
        item.description = ["b"]
    bath = nm.Bath(SZ, nm.PowerLawSD(0.1, 1, 1.0))
    assert isinstance(bath, nm.base_api.BaseAPIClass)
    del bath.name
    assert bath.name == "Unnamed Bath"


def test_progress_displays_of_the_util_path():
    with pytest.raises(NotImplementedError):
        nm.util.BaseProgress().__enter__()
    with pytest.raises(NotImplementedError):
        nm.util.BaseProgress().update(3)
    for kind in (nm.util.ProgressSilent, nm.util.get_progress("silent")):
        with kind(4, "steps") as progress:
            progress.update(None)
            progress.update(3)
            assert progress._done == 3
    with nm.util.ProgressBar(0) as progress:
        progress.update(None)
    with pytest.raises(ValueError, match="max_value"):
        nm.util.ProgressBar(-1)


def test_base_dynamics_is_empty_and_dynamics_derives_from_it():
    empty = nm.dynamics.BaseDynamics()
    assert len(empty) == 0 and empty.shape is None
    assert empty.times.shape == (0,) and empty.states.shape == (0, 0, 0)
    assert empty.expectations() == (None, None)
    assert isinstance(nm.Dynamics(), nm.dynamics.BaseDynamics)
    with pytest.raises(TypeError, match="times must be a sequence"):
        nm.Dynamics(0.1, [P0])


def test_bath_degeneracy_maps():
    bath = nm.Bath(np.diag([1.0, -1.0, 1.0]), nm.PowerLawSD(0.1, 1, 1.0))
    comm, acomm = bath.coupling_comm.real, bath.coupling_acomm.real
    west, north = bath.west_degeneracy_map, bath.north_degeneracy_map
    assert west.shape == north.shape == (9,)
    # equal labels exactly where the values are equal
    for a in range(9):
        for b in range(9):
            assert (west[a] == west[b]) == (comm[a] == comm[b])
            assert (north[a] == north[b]) == (comm[a] == comm[b] and acomm[a] == acomm[b])
    assert west.max() == 2 and north.max() == 3  # comm in {-2, 0, 2}; four (comm, acomm)


def test_base_system_signature_and_base_correlations_interface():
    base = nm.system.BaseSystem(3)
    assert base.dimension == 3 and base.name == "Unnamed System" and base.description == ""
    assert nm.system.BaseSystem(2, "named").name == "named"
    with pytest.raises(TypeError, match="dimension"):
        nm.system.BaseSystem(2.5)
    correlations = nm.correlations.BaseCorrelations()
    with pytest.raises(NotImplementedError):
        correlations.correlation_2d_integral(time_1=None, delta=None, shape="square")
    with pytest.raises(NotImplementedError):
        correlations.correlation(0.1)


# -- parameters and grids --------------------------------------------------------------


def test_guess_for_a_field_system_and_a_tiny_tolerance():
    bath = nm.Bath(0.5 * SZ, nm.PowerLawSD(0.1, 1, 4.0))
    field_system = nm.TimeDependentSystemWithField(lambda t, a: 0.5 * SX + abs(a) * SZ)
    with pytest.warns(UserWarning, match="depend on the field"):
        nm.guess_tempo_parameters(bath, 0.0, 2.0, system=field_system)
    with pytest.warns(UserWarning, match="below what a double-precision SVD resolves"):
        guessed = nm.guess_tempo_parameters(bath, 0.0, 2.0, tolerance=1e-12)
    assert guessed.epsrel == EPSREL_FLOOR


def test_tcut_and_dkmax_together_are_refused():
    with pytest.raises(ValueError, match="tcut or dkmax"):
        nm.TempoParameters(dt=0.1, epsrel=1e-6, tcut=1.0, dkmax=10)


def test_subdiv_limit_is_a_whole_number():
    assert nm.TempoParameters(dt=0.1, epsrel=1e-6, subdiv_limit=1e3).subdiv_limit == 1000
    with pytest.raises(ValueError, match="subdiv_limit"):
        nm.TempoParameters(dt=0.1, epsrel=1e-6, subdiv_limit=-1.0)
    with pytest.raises(TypeError, match="subdiv_limit"):
        nm.TempoParameters(dt=0.1, epsrel=1e-6, subdiv_limit=2.5)


def test_times_outside_the_grid_are_a_value_and_an_index_error(pt):
    for error in (ValueError, IndexError):
        with pytest.raises(error, match="outside the grid"):
            nm.compute_correlations_nt(
                system(), pt, [SX, SX], [0.1, 1.2], ["left", "left"],
                initial_state=P0, progress_type="silent",
            )  # fmt: skip


def test_runs_on_the_active_backend(pt, backend_name):
    """The linear runs above go through the active backend's chain engine."""
    assert backends.get_backend() == backend_name
    np.testing.assert_allclose(
        dynamics(np.eye(2), pt), dynamics(P0, pt) + dynamics(P1, pt), atol=1e-10
    )
