"""Tests of ``compute_correlations`` and ``compute_correlations_nt``.

- Closed and Lindblad-only systems (no bath, or a zero-coupling bath): two- and
  three-time correlations against matrix products written here (Heisenberg
  picture, quantum regression for the Lindblad case).
- Independent-boson model: two- and three-time correlations of coherence
  operators against the exact Gaussian path sum (formula in
  :func:`models.independent_boson_correlation`).
- Conventions of the times and of ``time_order`` (shape, NaN pattern, times),
  stated as rules, on a tiny grid.
- Several environments: two half-strength baths equal one bath; baths that act
  on different qubits of a product system make the correlations factorise.
- Bad input.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import scipy.linalg

import nonmarkov as nm
from models import (
    SIGMA_MINUS,
    SX,
    SY,
    SZ,
    g_and_p,
    independent_boson_correlation,
    liouvillian,
    pure_state,
    spectral_density,
)
from models import independent_boson as independent_boson_model
from nonmarkov.methods.system_correlations import compute_correlations, compute_correlations_nt

SIGMA_PLUS = SIGMA_MINUS.T.copy()
SILENT = {"progress_type": "silent"}


def regression_chain(generator, rho0, operators, sides, times):
    """Tr[O_n ... O_2^{side} e^{G (t_2 - t_1)} O_1^{side} e^{G t_1} rho0] for t_1 <= t_2 <= ...

    ``times`` relative to the initial time; plain matrix products.
    """
    d = rho0.shape[0]
    rho, now = rho0.copy(), 0.0
    for operator, side, t in zip(operators, sides, times):
        rho = (scipy.linalg.expm(generator * (t - now)) @ rho.reshape(-1)).reshape(d, d)
        now = t
        rho = operator @ rho if side == "left" else rho @ operator
    return np.trace(rho)


def heisenberg(hamiltonian, operator, t):
    """U^dag(t) O U(t) with U = exp(-i H t)."""
    unitary = scipy.linalg.expm(-1j * hamiltonian * t)
    return unitary.conj().T @ operator @ unitary


# --------------------------------------------------------------------------
# closed and Lindblad-only systems
# --------------------------------------------------------------------------

HAMILTONIAN = 0.5 * SX + 0.35 * SZ
RHO0 = pure_state(0.8, 0.6 * np.exp(0.7j))
A_OP = SZ + 0.4 * SY
B_OP = SX + 0.3j * SZ  # not Hermitian on purpose


@pytest.fixture(scope="module")
def zero_coupling_pt():
    """Process tensor of a zero-coupling bath (non-diagonal coupling), 5 steps of 0.2."""
    bath = nm.Bath(0.5 * SX + 0.2 * SZ, nm.PowerLawSD(0.0, 1.0, 4.0))
    parameters = nm.TempoParameters(dt=0.2, epsrel=1e-10, dkmax=2)
    return nm.PtTempo(bath, 0.0, 1.0, parameters).get_process_tensor(**SILENT)


@pytest.mark.parametrize("with_pt", [False, True], ids=["trivial-pt", "zero-coupling-pt"])
def test_closed_system_two_time_equals_heisenberg_picture(with_pt, zero_coupling_pt):
    """<B(t_b) A(t_a)> = Tr[B_H(t_b) A_H(t_a) rho0] for every pair (time_order='full')."""
    system = nm.System(HAMILTONIAN)
    start = 0.4
    if with_pt:
        source = {"process_tensor": zero_coupling_pt}
    else:
        source = {"process_tensor": nm.TrivialProcessTensor(2), "dt": 0.2, "num_steps": 5}
    times, values = compute_correlations(
        system,
        operator_a=A_OP,
        operator_b=B_OP,
        times_a=slice(None),
        times_b=slice(None),
        time_order="full",
        initial_state=RHO0,
        start_time=start,
        **source,
        **SILENT,
    )
    grid = start + 0.2 * np.arange(6)
    np.testing.assert_allclose(times[0], grid, atol=1e-12)
    np.testing.assert_allclose(times[1], grid, atol=1e-12)
    exact = np.array(
        [
            [
                np.trace(
                    heisenberg(HAMILTONIAN, B_OP, tb - start)
                    @ heisenberg(HAMILTONIAN, A_OP, ta - start)
                    @ RHO0
                )
                for tb in grid
            ]
            for ta in grid
        ]
    )
    np.testing.assert_allclose(values, exact, rtol=0, atol=1e-12)
    # the times matter: the correlation is not constant along either axis
    assert np.ptp(np.abs(exact[0])) > 0.1 and np.ptp(np.abs(exact[:, -1])) > 0.1


def test_lindblad_two_and_three_time_equal_quantum_regression():
    """Markovian system: the regression formula holds exactly (no bath)."""
    gamma = 0.6
    system = nm.System(HAMILTONIAN, gammas=[gamma], lindblad_operators=[SIGMA_MINUS])
    generator = liouvillian(HAMILTONIAN, gamma, SIGMA_MINUS)
    dt, steps = 0.25, 4
    kwargs = {"initial_state": RHO0, "dt": dt, "num_steps": steps, **SILENT}
    times, values = compute_correlations(
        system, None, A_OP, B_OP, slice(None), slice(None), time_order="full", **kwargs
    )
    grid = dt * np.arange(steps + 1)
    for i, j in itertools.product(range(steps + 1), repeat=2):
        if i <= j:  # A from the left at t_a, read out B at t_b
            expected = regression_chain(
                generator, RHO0, [A_OP, B_OP], ["left", "left"], [grid[i], grid[j]]
            )
        else:  # B from the right at t_b, read out A at t_a
            expected = regression_chain(
                generator, RHO0, [B_OP, A_OP], ["right", "left"], [grid[j], grid[i]]
            )
        assert values[i, j] == pytest.approx(expected, abs=1e-12)
    # three times, mixed sides
    ops = [SIGMA_PLUS, SX, A_OP]
    sides = ["right", "left", "left"]
    times, values = compute_correlations_nt(
        system, None, ops, [[0, 2], slice(1, 4), 4], sides, **kwargs
    )
    assert values.shape == (2, 3, 1)
    for (i, ti), (j, tj) in itertools.product(enumerate(times[0]), enumerate(times[1])):
        if ti <= tj + 1e-12:
            expected = regression_chain(generator, RHO0, ops, sides, [ti, tj, times[2][0]])
            assert values[i, j, 0] == pytest.approx(expected, abs=1e-12)
        else:
            assert np.isnan(values[i, j, 0])


# --------------------------------------------------------------------------
# independent-boson model
# --------------------------------------------------------------------------


@pytest.fixture(scope="module")
def independent_boson():
    """Model, exact Phi on the grid, and a full-memory PT (dt=0.2, 5 steps, epsrel 1e-11)."""
    alpha, wc, temperature, dt, steps = 0.25, 4.0, 1.0, 0.2, 5
    energies, couplings = np.array([0.4, -0.3]), np.array([0.6, -0.4])
    j_function = spectral_density(alpha, 1.0, wc, "exponential")
    phi_values = {}
    for m in range(steps + 1):
        g, p = g_and_p(j_function, temperature, m * dt, 60.0 * wc)
        phi_values[m] = g - 1j * p

    def phi(u):
        return phi_values[int(round(u / dt))]

    system, bath, rho0 = independent_boson_model(
        "ohmic-T1",
        alpha=alpha,
        cutoff=wc,
        temperature=temperature,
        energies=energies,
        couplings=couplings,
    )
    parameters = nm.TempoParameters(dt=dt, epsrel=1e-11)  # full memory
    pt = nm.PtTempo(bath, 0.0, steps * dt, parameters).get_process_tensor(**SILENT)
    return system, pt, rho0, energies, couplings, phi, dt, steps


# Error bound of the independent-boson tests: [H_S, S] = 0, so the symmetric
# splitting has no Trotter error, and with operator times on the grid every
# path is constant within a step, for which the discretised influence
# functional (exact double integrals of C over the steps, full memory) equals
# the continuous one. What remains is the SVD truncation (epsrel 1e-11 per
# step) and the quadrature of the integrals; asserted: 1e-8.
IB_BOUND = 1e-8


def test_independent_boson_two_time_correlations(independent_boson):
    system, pt, rho0, energies, couplings, phi, dt, steps = independent_boson
    a_op, b_op = SX, SX + 0.5 * SY
    times, values = compute_correlations(
        system,
        pt,
        a_op,
        b_op,
        slice(None),
        slice(None),
        time_order="full",
        initial_state=rho0,
        **SILENT,
    )
    no_bath = lambda u: 0.0  # noqa: E731
    largest_effect = 0.0
    for i, j in itertools.product(range(steps + 1), repeat=2):
        ta, tb = times[0][i], times[1][j]
        if ta <= tb:
            args = ([a_op, b_op], ["left", "left"], [ta, tb])
        else:
            args = ([b_op, a_op], ["right", "left"], [tb, ta])
        exact = independent_boson_correlation(rho0, energies, couplings, phi, *args)
        closed = independent_boson_correlation(rho0, energies, couplings, no_bath, *args)
        largest_effect = max(largest_effect, abs(exact - closed))
        assert abs(values[i, j] - exact) <= IB_BOUND, (i, j, values[i, j], exact)
    assert largest_effect > 5e-2  # the bath matters


@pytest.mark.parametrize(
    "sides", [("left", "left", "left"), ("right", "left", "right"), ("left", "right", "left")]
)
def test_independent_boson_three_time_correlations(independent_boson, sides):
    system, pt, rho0, energies, couplings, phi, dt, steps = independent_boson
    operators = [SX, SX + 0.5j * SY, SIGMA_PLUS + 0.3 * SZ]
    ops_times = [slice(0, 3), [1, 2, 4], slice(3, None)]
    times, values = compute_correlations_nt(
        system, pt, operators, ops_times, list(sides), initial_state=rho0, **SILENT
    )
    assert values.shape == (3, 3, 3)
    no_bath = lambda u: 0.0  # noqa: E731
    largest_effect = 0.0
    for index in itertools.product(range(3), repeat=3):
        t = [times[k][index[k]] for k in range(3)]
        if not t[0] <= t[1] <= t[2]:
            assert np.isnan(values[index])
            continue
        exact = independent_boson_correlation(rho0, energies, couplings, phi, operators, sides, t)
        closed = independent_boson_correlation(
            rho0, energies, couplings, no_bath, operators, sides, t
        )
        largest_effect = max(largest_effect, abs(exact - closed))
        assert abs(values[index] - exact) <= IB_BOUND, (index, values[index], exact)
    assert largest_effect > 5e-2


# --------------------------------------------------------------------------
# conventions of times and time_order
# --------------------------------------------------------------------------


def tiny_case(**kwargs):
    """A closed spin on a grid of 4 steps of 0.1 from t = 0.5."""
    system = nm.System(HAMILTONIAN)
    base = {"initial_state": RHO0, "start_time": 0.5, "dt": 0.1, "num_steps": 4, **SILENT}
    base.update(kwargs)
    return system, base


def test_time_order_shapes_and_nan_patterns():
    system, kwargs = tiny_case()
    results = {}
    for order in ("ordered", "anti", "full"):
        times, values = compute_correlations(
            system, None, A_OP, B_OP, slice(None), slice(None), time_order=order, **kwargs
        )
        assert isinstance(times, list) and len(times) == 2
        np.testing.assert_allclose(times[0], 0.5 + 0.1 * np.arange(5), atol=1e-12)
        np.testing.assert_allclose(times[1], times[0], atol=1e-12)
        assert values.shape == (5, 5) and values.dtype == complex
        results[order] = values
    rows, columns = np.indices((5, 5))
    # 'ordered': t_a <= t_b only; 'anti': t_a >= t_b only; 'full': everything
    np.testing.assert_array_equal(np.isnan(results["ordered"]), rows > columns)
    np.testing.assert_array_equal(np.isnan(results["anti"]), rows < columns)
    assert not np.any(np.isnan(results["full"]))
    assert np.all(np.isnan(results["ordered"].imag) == np.isnan(results["ordered"].real))
    upper, lower = rows <= columns, rows >= columns
    np.testing.assert_allclose(results["full"][upper], results["ordered"][upper], atol=1e-14)
    np.testing.assert_allclose(results["full"][lower], results["anti"][lower], atol=1e-14)
    # at equal times both rules give Tr[B A rho(t)]
    np.testing.assert_allclose(np.diag(results["ordered"]), np.diag(results["anti"]), atol=1e-12)


def test_time_specifications_select_grid_steps():
    """int = step, float = nearest grid time, (t0, t1) = steps from nearest t0 to nearest t1."""
    system, kwargs = tiny_case()
    _, full = compute_correlations(
        system, None, A_OP, B_OP, slice(None), slice(None), time_order="full", **kwargs
    )
    grid = 0.5 + 0.1 * np.arange(5)
    cases = [
        (2, [2]),
        (0.74, [2]),  # nearest grid time 0.7
        ((0.56, 0.81), [1, 2, 3]),  # both ends rounded to the nearest step
        ((0.8, 0.6), [3, 2, 1]),  # a reversed interval runs backwards
        (slice(1, None, 2), [1, 3]),
        ([4, slice(0, 2), 0.61], [4, 0, 1, 1]),
        (np.array([3, 0]), [3, 0]),
    ]
    for spec, steps in cases:
        times, values = compute_correlations(
            system, None, A_OP, B_OP, spec, [0, 4], time_order="full", **kwargs
        )
        np.testing.assert_allclose(times[0], grid[steps], atol=1e-12, err_msg=str(spec))
        np.testing.assert_allclose(times[1], grid[[0, 4]], atol=1e-12)
        np.testing.assert_allclose(
            values, full[np.ix_(steps, [0, 4])], atol=1e-13, err_msg=str(spec)
        )


def test_two_operator_nt_equals_two_time_correlations():
    system, kwargs = tiny_case()
    _, ordered = compute_correlations(system, None, A_OP, B_OP, slice(None), slice(1, 4), **kwargs)
    _, anti = compute_correlations(
        system, None, A_OP, B_OP, slice(None), slice(1, 4), time_order="anti", **kwargs
    )
    times, left = compute_correlations_nt(
        system, None, [A_OP, B_OP], [slice(None), slice(1, 4)], ["left", "left"], **kwargs
    )
    assert len(times) == 2 and left.shape == (5, 3)
    np.testing.assert_array_equal(np.isnan(left), np.isnan(ordered))
    np.testing.assert_allclose(left, ordered, atol=1e-14)
    _, right = compute_correlations_nt(
        system, None, [B_OP, A_OP], [slice(1, 4), slice(None)], ["right", "right"], **kwargs
    )
    np.testing.assert_array_equal(np.isnan(right.T), np.isnan(anti))
    np.testing.assert_allclose(right.T, anti, atol=1e-14)


# --------------------------------------------------------------------------
# several environments
# --------------------------------------------------------------------------


def spin_boson_pt(alpha, temperature, coupling, dt=0.2, steps=4, unique=False):
    bath = nm.Bath(coupling, nm.PowerLawSD(alpha, 1.0, 4.0, temperature=temperature))
    parameters = nm.TempoParameters(dt=dt, epsrel=1e-10, dkmax=3)
    return nm.PtTempo(bath, 0.0, steps * dt, parameters, unique=unique).get_process_tensor(**SILENT)


@pytest.fixture(scope="module")
def two_baths():
    """Single-qubit PTs of a sigma_z bath at T = 0.8 and a sigma_x bath at T = 1.6, and the
    same baths coupled to qubit 1 (S_1 x I) and qubit 2 (I x S_2) of a two-qubit system."""
    s1, s2 = 0.5 * SZ, 0.5 * SX
    return {
        "z": spin_boson_pt(0.2, 0.8, s1),
        "x": spin_boson_pt(0.15, 1.6, s2),
        "z-qubit1": spin_boson_pt(0.2, 0.8, np.kron(s1, np.eye(2)), unique=True),
        "x-qubit2": spin_boson_pt(0.15, 1.6, np.kron(np.eye(2), s2), unique=True),
    }


def test_two_half_strength_baths_equal_one_bath(two_baths):
    """Independent baths add their correlation functions: alpha/2 + alpha/2 = alpha."""
    system = nm.System(HAMILTONIAN)
    full = two_baths["z"]
    half = spin_boson_pt(0.1, 0.8, 0.5 * SZ)
    kwargs = {"initial_state": RHO0, "time_order": "full", **SILENT}
    _, one = compute_correlations(system, full, A_OP, B_OP, slice(None), slice(None), **kwargs)
    _, two = compute_correlations(
        system, [half, half], A_OP, B_OP, slice(None), slice(None), **kwargs
    )
    # the same discretised influence functional; differences from truncation only
    np.testing.assert_allclose(two, one, rtol=0, atol=1e-7)
    _, single_half = compute_correlations(
        system, half, A_OP, B_OP, slice(None), slice(None), **kwargs
    )
    assert np.max(np.abs(single_half - one)) > 1e-2
    ops_times = [slice(0, 3), slice(1, 4), slice(2, 5)]
    sides = ["left", "right", "left"]
    _, one3 = compute_correlations_nt(
        system, full, [A_OP, B_OP, SX], ops_times, sides, initial_state=RHO0, **SILENT
    )
    _, two3 = compute_correlations_nt(
        system, [half, half], [A_OP, B_OP, SX], ops_times, sides, initial_state=RHO0, **SILENT
    )
    np.testing.assert_array_equal(np.isnan(two3), np.isnan(one3))
    np.testing.assert_allclose(two3, one3, rtol=0, atol=1e-7)


def test_identity_operator_gives_expectation_values_with_two_baths(two_baths):
    """<B(t_b) 1(t_a)> = Tr[B rho(t_b)] and <1(t_b) A(t_a)> = Tr[A rho(t_a)] for any other
    time, with rho from compute_dynamics with the same list of process tensors."""
    system = nm.System(HAMILTONIAN)
    pts = [two_baths["z"], two_baths["x"]]
    dynamics = nm.compute_dynamics(system, RHO0, process_tensor=pts, **SILENT)
    _, b_values = dynamics.expectations(B_OP)
    _, a_values = dynamics.expectations(A_OP)
    kwargs = {"time_order": "full", "initial_state": RHO0, **SILENT}
    _, values = compute_correlations(
        system, pts, np.eye(2), B_OP, slice(None), slice(None), **kwargs
    )
    np.testing.assert_allclose(values, np.broadcast_to(b_values, values.shape), atol=1e-12)
    _, values = compute_correlations(
        system, pts, A_OP, np.eye(2), slice(None), slice(None), **kwargs
    )
    np.testing.assert_allclose(values, np.broadcast_to(a_values[:, None], values.shape), atol=1e-12)
    only_z = nm.compute_dynamics(system, RHO0, process_tensor=pts[0], **SILENT)
    assert np.max(np.abs(only_z.expectations(B_OP)[1] - b_values)) > 1e-2


def test_baths_on_different_qubits_factorise(two_baths):
    """Two qubits, each driven and coupled to its own bath (commuting couplings S_1 x I and
    I x S_2, different temperatures, S_2 non-diagonal): for product operators and a
    product state <(B1 B2)(t_b) (A1 A2)(t_a)> = <B1(t_b) A1(t_a)>_1 <B2(t_b) A2(t_a)>_2."""
    eye = np.eye(2)
    h1, h2 = 0.5 * SX + 0.2 * SZ, 0.4 * SZ + 0.3 * SY
    rho1, rho2 = RHO0, pure_state(0.6, 0.8j)
    system = nm.System(np.kron(h1, eye) + np.kron(eye, h2))
    a1, b1, a2, b2 = SZ + 0.4 * SY, SX, SX, SIGMA_PLUS + SZ
    kwargs = {"time_order": "full", **SILENT}
    _, both = compute_correlations(
        system,
        [two_baths["z-qubit1"], two_baths["x-qubit2"]],
        np.kron(a1, a2),
        np.kron(b1, b2),
        slice(None),
        slice(None),
        initial_state=np.kron(rho1, rho2),
        **kwargs,
    )
    _, first = compute_correlations(
        nm.System(h1),
        two_baths["z"],
        a1,
        b1,
        slice(None),
        slice(None),
        initial_state=rho1,
        **kwargs,
    )
    _, second = compute_correlations(
        nm.System(h2),
        two_baths["x"],
        a2,
        b2,
        slice(None),
        slice(None),
        initial_state=rho2,
        **kwargs,
    )
    np.testing.assert_allclose(both, first * second, rtol=0, atol=1e-8)
    # each bath matters
    _, closed = compute_correlations(
        nm.System(h2),
        None,
        a2,
        b2,
        slice(None),
        slice(None),
        initial_state=rho2,
        dt=0.2,
        num_steps=4,
        **kwargs,
    )
    assert np.max(np.abs(second - closed)) > 1e-2


# --------------------------------------------------------------------------
# bad input
# --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "change, error, match",
    [
        ({"times_a": 5}, ValueError, "times_a"),
        ({"times_b": -1}, ValueError, "times_b"),
        ({"times_a": 0.96}, ValueError, "times_a"),
        ({"times_b": (0.5, 1.2)}, ValueError, "times_b"),
        ({"times_a": slice(7, 9)}, ValueError, "times_a"),
        ({"times_a": []}, ValueError, "times_a"),
        ({"times_a": "all"}, TypeError, "times_a"),
        ({"times_b": (0.5, 0.6, 0.7)}, TypeError, "times_b"),
        ({"times_b": [1, None]}, TypeError, "times_b"),
        ({"time_order": "forward"}, ValueError, "time_order"),
        ({"operator_a": np.eye(3)}, ValueError, "operator_a"),
        ({"operator_b": np.ones((2, 3))}, ValueError, "operator_b"),
        ({"initial_state": None}, ValueError, "initial_state"),
        ({"initial_state": np.eye(3)}, ValueError, "initial_state"),
        ({"progress_type": "loud"}, ValueError, "progress_type"),
        ({"num_steps": None}, ValueError, "num_steps"),
        ({"dt": None}, ValueError, "dt"),
        ({"control": np.eye(4)}, TypeError, "control"),
    ],
)
def test_compute_correlations_rejects_bad_input(change, error, match):
    system, kwargs = tiny_case()
    arguments = {
        "operator_a": A_OP,
        "operator_b": B_OP,
        "times_a": slice(None),
        "times_b": slice(None),
        **kwargs,
    }
    arguments.update(change)
    with pytest.raises(error, match=match):
        compute_correlations(system, None, **arguments)


def test_correlations_reject_bad_system_and_process_tensor(zero_coupling_pt):
    _, kwargs = tiny_case(start_time=0.0, dt=None, num_steps=None)
    with pytest.raises(TypeError, match="system"):
        compute_correlations(HAMILTONIAN, zero_coupling_pt, A_OP, B_OP, 0, 1, **kwargs)
    three = nm.System(np.diag([0.0, 1.0, 2.0]))
    with pytest.raises(ValueError, match="dimension"):
        compute_correlations(
            three,
            zero_coupling_pt,
            np.eye(3),
            np.eye(3),
            0,
            1,
            **dict(kwargs, initial_state=np.eye(3) / 3),
        )
    with pytest.raises(ValueError, match="times_b"):  # beyond the PT's 5 steps
        compute_correlations(nm.System(HAMILTONIAN), zero_coupling_pt, A_OP, B_OP, 0, 6, **kwargs)
    with pytest.raises(ValueError, match="dt"):
        compute_correlations(
            nm.System(HAMILTONIAN), zero_coupling_pt, A_OP, B_OP, 0, 1, **dict(kwargs, dt=0.1)
        )
    with pytest.raises(TypeError, match="process_tensor"):
        compute_correlations(
            nm.System(HAMILTONIAN), [zero_coupling_pt, "pt"], A_OP, B_OP, 0, 1, **kwargs
        )


@pytest.mark.parametrize(
    "change, error, match",
    [
        ({"operators": [SX]}, ValueError, "same length"),
        ({"ops_order": ["left", "up"]}, ValueError, r"ops_order\[1\]"),
        ({"ops_order": "left"}, TypeError, "ops_order"),
        ({"operators": [SX, np.eye(3)]}, ValueError, r"operators\[1\]"),
        ({"ops_times": [0, 9]}, ValueError, r"ops_times\[1\]"),
        ({"operators": []}, ValueError, "operators"),
    ],
)
def test_compute_correlations_nt_rejects_bad_input(change, error, match):
    system, kwargs = tiny_case()
    arguments = {
        "operators": [SX, SZ],
        "ops_times": [0, slice(None)],
        "ops_order": ["left", "left"],
        **kwargs,
    }
    arguments.update(change)
    if change.get("operators") == []:
        arguments.update(ops_times=[], ops_order=[])
    with pytest.raises(error, match=match):
        compute_correlations_nt(system, None, **arguments)


@pytest.mark.parametrize("post", [False, True], ids=["pre", "post"])
def test_correlations_with_control_match_manual_propagation(post):
    """A control at step 1 acts on rho(t_1) before an operator at t_1 (pre) or after it
    (post)."""
    system, kwargs = tiny_case(start_time=0.0)
    rotation = scipy.linalg.expm(-0.5j * 0.9 * SY)
    control = nm.Control(2)
    control.add_single(1, np.kron(rotation, rotation.conj()), post=post)
    _, values = compute_correlations(system, None, A_OP, B_OP, [0, 1], 3, control=control, **kwargs)
    generator = liouvillian(HAMILTONIAN)

    def evolve(rho, t):
        return (scipy.linalg.expm(generator * t) @ rho.reshape(-1)).reshape(2, 2)

    def kick(rho):
        return rotation @ rho @ rotation.conj().T

    at_t1 = [  # the state at t_1 after the control, A at t_0 or t_1
        kick(evolve(A_OP @ RHO0, 0.1)),
        kick(A_OP @ evolve(RHO0, 0.1)) if post else A_OP @ kick(evolve(RHO0, 0.1)),
    ]
    for i, rho in enumerate(at_t1):
        expected = np.trace(B_OP @ evolve(rho, 0.2))
        assert values[i, 0] == pytest.approx(expected, abs=1e-12)
    _, plain = compute_correlations(system, None, A_OP, B_OP, [0, 1], 3, **kwargs)
    assert np.max(np.abs(plain - values)) > 1e-2


# --------------------------------------------------------------------------
# the branch sweep on every backend
# --------------------------------------------------------------------------


def branch_sweep_cases(pts):
    """Correlations through every public entry point, on two process tensors: a
    time-dependent system with a control (full time order), three operators with two at
    the same time (the branch maps composed), and a batch of two systems."""
    from nonmarkov.methods.batched_correlations import compute_correlations_batch

    driven = nm.TimeDependentSystem(lambda t: HAMILTONIAN + 0.3 * np.cos(2.0 * t) * SZ)
    control = nm.Control(2)
    control.add_single(2, np.kron(SX, SX.conj()), post=True)
    two_time = compute_correlations(
        driven,
        pts,
        A_OP,
        B_OP,
        slice(None),
        slice(1, None),
        "full",
        initial_state=RHO0,
        control=control,
        **SILENT,
    )[1]
    three_time = compute_correlations_nt(
        nm.System(HAMILTONIAN),
        pts,
        [A_OP, B_OP, SX],
        [slice(0, 3), 2, slice(2, 5)],
        ["left", "right", "left"],
        initial_state=RHO0,
        **SILENT,
    )[1]
    batch = compute_correlations_batch(
        [nm.System(HAMILTONIAN), nm.System(0.7 * SX)],
        pts,
        A_OP,
        B_OP,
        slice(None),
        3,
        initial_states=RHO0,
        progress_type="silent",
    )[1]
    return [two_time, three_time, batch]


@pytest.mark.skip_backend("numpy", reason="the compiled branch sweep is the JAX engine's")
def test_compiled_branch_sweep_agrees_with_numpy(two_baths, monkeypatch):
    """The same correlations on NumPy (the eager sweep) and on JAX, where with
    compiled='on' every sweep runs as compiled kernels on padded branch buckets."""
    from nonmarkov import backends
    from nonmarkov.engines.jax import engine as jax_engine
    from nonmarkov.options import EngineOptions, use_options

    pts = [two_baths["z"], two_baths["x"]]
    with backends.use_backend("numpy", "double"):
        expected = branch_sweep_cases(pts)
    calls = []
    original = jax_engine.run_sweep
    monkeypatch.setattr(jax_engine, "run_sweep", lambda *args: calls.append(1) or original(*args))
    with use_options(EngineOptions(compiled="on")):
        compiled = branch_sweep_cases(pts)
    assert len(calls) == 3
    for value, reference in zip(compiled, expected):
        np.testing.assert_array_equal(np.isnan(value), np.isnan(reference))
        np.testing.assert_allclose(value, reference, rtol=0, atol=1e-10)
