"""Gradients with respect to control parameters: the adjoint method and JAX autodiff.

Checks: the adjoint gradient equals central finite differences of the same
objective (target state and functional target, one and two process tensors,
Lindblad terms, controls); a closed system against the analytic gradient of a
rotation; two baths at alpha/2 against one at alpha; the forward dynamics against
compute_dynamics; on JAX, jax.grad through the compiled scan against the adjoint,
and the JAX adjoint against the NumPy one; bad input. The process tensors are
built on NumPy (their JAX build is tested in test_pt_tempo.py).
"""

from __future__ import annotations

import numpy
import pytest

import nonmarkov as nm
from nonmarkov import backends

op = nm.operators
SX, SY, SZ = op.sigma("x"), op.sigma("y"), op.sigma("z")
DT = 0.1
STEPS = 12


def hamiltonian(x, z):
    return 0.5 * x * SX + 0.5 * z * SZ


def lossy_system():
    """Two controls, a constant decay and a control-dependent dephasing rate."""
    return nm.ParameterizedSystem(
        hamiltonian,
        gammas=[lambda x, z: 0.05, lambda x, z: 0.02 * (1.0 + x**2)],
        lindblad_operators=[lambda x, z: op.sigma("-"), lambda x, z: SZ],
    )


def build_pt(alpha, coupling=SZ, steps=STEPS, cutoff=5.0, temperature=0.2):
    bath = nm.Bath(0.5 * coupling, nm.PowerLawSD(alpha, 1, cutoff, temperature=temperature))
    parameters = nm.TempoParameters(dt=DT, tcut=0.6, epsrel=1e-8)
    with backends.use_backend("numpy"):
        return nm.pt_tempo_compute(bath, 0.0, steps * DT, parameters, progress_type="silent")


@pytest.fixture(scope="module")
def pts():
    return build_pt(0.1), build_pt(0.05, SX, cutoff=3.0, temperature=0.5)


@pytest.fixture(scope="module")
def parameters():
    return numpy.random.default_rng(7).normal(size=(2 * STEPS, 2))


def objective(system, target, pts, parameters, control=None):
    """Z of the final state, by the forward pass alone, on NumPy (the finite differences
    check the adjoint's mathematics; JAX = NumPy is checked apart)."""
    with backends.use_backend("numpy"):
        _, dynamics = nm.compute_gradient_and_dynamics(
            system,
            op.spin_dm("x-"),
            target,
            list(pts),
            parameters,
            control=control,
            progress_type="silent",
        )
    final = dynamics.states[-1]
    return numpy.sum((target(final) if callable(target) else target) * final), final


def central_differences(function, parameters, entries, h=1e-5):
    values = {}
    for r, j in entries:
        up, down = parameters.copy(), parameters.copy()
        up[r, j] += h
        down[r, j] -= h
        values[r, j] = (function(up) - function(down)) / (2 * h)
    return values


ENTRIES = [(0, 0), (1, 1), (9, 0), (2 * STEPS - 1, 1), (2 * STEPS - 2, 0)]


@pytest.mark.parametrize("baths", [1, 2], ids=["one-bath", "two-baths"])
@pytest.mark.parametrize("target_kind", ["state", "purity"])
def test_adjoint_equals_finite_differences(pts, parameters, baths, target_kind):
    system = lossy_system()
    chosen = pts[:baths]
    if target_kind == "state":
        target = op.spin_dm("z+").T
        linear = target
    else:  # purity Tr(rho^2): dZ/drho = 2 rho^T, a functional target
        target = lambda rho: 2 * rho.T  # noqa: E731
        linear = None
    result = nm.state_gradient(
        system, op.spin_dm("x-"), target, list(chosen), parameters, progress_type="silent"
    )
    gradient = result["gradient"]
    assert gradient.shape == (2 * STEPS, 2)
    assert len(result["gradprop"]) == STEPS and result["gradprop"][0].shape == (4, 4, 4, 4)
    assert len(result["dynamics"]) == STEPS + 1
    numpy.testing.assert_allclose(result["final_state"], result["dynamics"].states[-1])

    def z(q):
        if linear is not None:
            return objective(system, linear, chosen, q)[0]
        final = objective(system, SZ, chosen, q)[1]
        return numpy.trace(final @ final)

    expected = central_differences(z, parameters, ENTRIES)
    scale = numpy.abs(gradient).max()
    assert scale > 1e-3
    for (r, j), value in expected.items():
        assert abs(gradient[r, j] - value) < 1e-6 * scale, (r, j, gradient[r, j], value)
    # a real objective: real up to the process tensors' truncation (epsrel 1e-8; the
    # sketched cuts keep the conjugation symmetry of the classes to that level, not rounding)
    assert numpy.abs(gradient.imag).max() < 1e-7 * scale


def test_adjoint_with_controls(pts, parameters):
    """A Control's pre- and post-controls inside the run enter the adjoint too."""
    system = lossy_system()
    control = nm.Control(2)
    control.add_single(3, op.left_right_super(SX, SX), post=True)
    control.add_single(7, op.left_super(op.spin_dm("z+")) @ op.right_super(op.spin_dm("z+")))
    target = op.spin_dm("y+").T
    result = nm.state_gradient(
        system,
        op.spin_dm("x-"),
        target,
        [pts[0]],
        parameters,
        control=control,
        progress_type="silent",
    )
    expected = central_differences(
        lambda q: objective(system, target, [pts[0]], q, control)[0], parameters, ENTRIES
    )
    scale = numpy.abs(result["gradient"]).max()
    for (r, j), value in expected.items():
        assert abs(result["gradient"][r, j] - value) < 1e-6 * scale


def test_forward_dynamics_equal_compute_dynamics(pts):
    """Constant parameters: the gradient's dynamics are compute_dynamics' of the System."""
    system = lossy_system()
    constant = numpy.tile([0.7, -0.3], (2 * STEPS, 1))
    _, dynamics = nm.compute_gradient_and_dynamics(
        system, op.spin_dm("x-"), SZ, list(pts), constant, progress_type="silent"
    )
    fixed = nm.System(
        hamiltonian(0.7, -0.3),
        gammas=[0.05, 0.02 * (1 + 0.7**2)],
        lindblad_operators=[op.sigma("-"), SZ],
    )
    expected = nm.compute_dynamics(
        fixed, op.spin_dm("x-"), process_tensor=list(pts), progress_type="silent"
    )
    numpy.testing.assert_allclose(dynamics.times, expected.times, atol=1e-14)
    numpy.testing.assert_allclose(dynamics.states, expected.states, atol=1e-12)


def test_file_backed_process_tensor_and_final_state_only(pts, parameters, tmp_path):
    """A process tensor read from its file step by step (the engine's step route on
    every backend) gives the gradient of the one in memory; ``record_all=False`` keeps
    the initial and the final state only, with the same D tensors."""
    system = lossy_system()
    target = op.spin_dm("z+").T
    path = str(tmp_path / "pt.hdf5")
    pts[0].export(path)
    from_file = nm.import_process_tensor(path, "file")
    in_memory = nm.state_gradient(
        system, op.spin_dm("x-"), target, [pts[0]], parameters, progress_type="silent"
    )
    streamed = nm.state_gradient(
        system, op.spin_dm("x-"), target, [from_file], parameters, progress_type="silent"
    )
    scale = numpy.abs(in_memory["gradient"]).max()
    numpy.testing.assert_allclose(
        streamed["gradient"], in_memory["gradient"], rtol=0, atol=1e-12 * scale
    )
    gradprop, dynamics = nm.compute_gradient_and_dynamics(
        system,
        op.spin_dm("x-"),
        target,
        [pts[0]],
        parameters,
        record_all=False,
        progress_type="silent",
    )
    assert len(dynamics) == 2
    numpy.testing.assert_allclose(dynamics.states[-1], in_memory["final_state"], atol=1e-14)
    numpy.testing.assert_allclose(
        numpy.asarray(gradprop), numpy.asarray(in_memory["gradprop"]), atol=1e-14
    )


@pytest.mark.skip_backend("numpy", reason="the streamed compiled adjoint is the JAX engine's")
def test_adjoint_streams_a_file_pt_in_chunks(pts, parameters, tmp_path, monkeypatch):
    """On JAX with compiled='on', the adjoint method on a file PT (beside one in memory,
    with a control) runs forward and backward over chunks of 5 of its 12 steps (the last
    chunk of 2 not padded); the gradient and D tensors equal NumPy's step route."""
    from nonmarkov.engines.jax import engine as jax_engine

    monkeypatch.setattr(jax_engine, "STREAM_STEPS", 5)
    calls = []
    original = jax_engine.adjoint_stream
    monkeypatch.setattr(
        jax_engine, "adjoint_stream", lambda *args: calls.append(args[4]) or original(*args)
    )
    path = str(tmp_path / "pt.hdf5")
    pts[0].export(path)
    control = nm.Control(2)
    control.add_single(4, numpy.kron(SX, SX.conj()), post=True)

    def gradient():
        return nm.state_gradient(
            lossy_system(),
            op.spin_dm("x-"),
            op.spin_dm("z+").T,
            [nm.import_process_tensor(path, "file"), pts[1]],
            parameters,
            control=control,
            progress_type="silent",
        )

    with backends.use_backend("numpy", "double"):
        expected = gradient()
    with nm.options.use_options(compiled="on"):
        streamed = gradient()
    assert calls == [5]
    scale = numpy.abs(expected["gradient"]).max()
    numpy.testing.assert_allclose(
        streamed["gradient"], expected["gradient"], rtol=0, atol=1e-10 * scale
    )
    for mine, reference in zip(streamed["gradprop"], expected["gradprop"]):
        numpy.testing.assert_allclose(mine, reference, rtol=0, atol=1e-10)
    numpy.testing.assert_allclose(streamed["final_state"], expected["final_state"], atol=1e-10)


def test_closed_system_rotation():
    """No bath: H = x sigma_x / 2 per half step rotates |up> by Theta = sum x dt/2, so
    F = |<down|psi>|^2 = sin^2(Theta/2) and dF/dx_r = sin(Theta) dt / 4 for every r."""
    system = nm.ParameterizedSystem(lambda x: 0.5 * x * SX)
    x = numpy.linspace(0.2, 1.4, 2 * STEPS)
    theta = x.sum() * DT / 2
    result = nm.state_gradient(
        system, op.spin_dm("up"), op.spin_dm("down").T, [], x, dt=DT, progress_type="silent"
    )
    final = result["final_state"]
    assert abs(final[1, 1] - numpy.sin(theta / 2) ** 2) < 1e-13
    numpy.testing.assert_allclose(
        result["gradient"][:, 0], numpy.full(2 * STEPS, numpy.sin(theta) * DT / 4), atol=1e-13
    )


def test_two_half_baths_equal_one_bath(parameters):
    """Independent baths with the same coupling add their influence: two at alpha/2
    give the gradient of one at alpha (to the truncation, epsrel 1e-8)."""
    system = lossy_system()
    target = op.spin_dm("z+").T
    steps = 6
    shorter = parameters[: 2 * steps]
    one = nm.state_gradient(
        system,
        op.spin_dm("x-"),
        target,
        [build_pt(0.2, steps=steps)],
        shorter,
        progress_type="silent",
    )["gradient"]
    half = build_pt(0.1, steps=steps)
    two = nm.state_gradient(
        system, op.spin_dm("x-"), target, [half, half], shorter, progress_type="silent"
    )["gradient"]
    numpy.testing.assert_allclose(two, one, rtol=0, atol=1e-6 * numpy.abs(one).max())


def test_chain_rule_and_given_derivatives(pts, parameters):
    """OQuPy's route (gradprop, then the chain rule with the system's callables) and a
    system given its propagator derivatives agree with state_gradient."""
    system = lossy_system()
    target = op.spin_dm("z+").T
    result = nm.state_gradient(
        system, op.spin_dm("x-"), target, [pts[0]], parameters, progress_type="silent"
    )
    gradprop, _ = nm.compute_gradient_and_dynamics(
        system, op.spin_dm("x-"), target, [pts[0]], parameters, progress_type="silent"
    )
    by_chain_rule = nm.gradient._chain_rule(
        gradprop,
        system.get_propagator_derivatives(DT, parameters),
        system.get_propagators(DT, parameters),
        STEPS,
        2,
        progress_type="silent",
    )
    numpy.testing.assert_allclose(by_chain_rule, result["gradient"], rtol=0, atol=1e-15)

    derivative = system.halfstep_propagator_derivative(DT)
    given = nm.ParameterizedSystem(
        hamiltonian,
        gammas=system.gammas,
        lindblad_operators=system.lindblad_operators,
        propagator_derivatives=lambda dt, row: derivative(row),
    )
    again = nm.state_gradient(
        given, op.spin_dm("x-"), target, [pts[0]], parameters, progress_type="silent"
    )
    numpy.testing.assert_allclose(again["gradient"], result["gradient"], rtol=0, atol=1e-15)


def test_propagator_derivatives_are_exact():
    """The Frechet derivative of expm against central differences with Richardson
    extrapolation, for a nonlinear dependence (x^2 and sin x)."""
    import scipy.linalg

    system = nm.ParameterizedSystem(
        lambda x, z: 0.5 * x * SX + 0.5 * z**2 * SZ + 0.3 * numpy.sin(x) * SY,
        gammas=[lambda x, z: 0.1 * x**2],
        lindblad_operators=[lambda x, z: op.sigma("-")],
    )
    rows = numpy.array([[0.3, -1.2], [1.7, 0.4]])
    halves, derivatives = system.propagators_and_derivatives(0.2, numpy.repeat(rows, 1, axis=0))

    def propagator(row):
        return scipy.linalg.expm(system.liouvillian(*row) * 0.1)

    for r, row in enumerate(rows):
        numpy.testing.assert_allclose(halves[r], propagator(row), atol=1e-14)
        for j in range(2):

            def difference(h):
                up, down = row.copy(), row.copy()
                up[j] += h
                down[j] -= h
                return (propagator(up) - propagator(down)) / (2 * h)

            richardson = (4 * difference(1e-3) - difference(2e-3)) / 3
            numpy.testing.assert_allclose(derivatives[r, j], richardson, rtol=0, atol=1e-10)


@pytest.mark.skip_backend("numpy", "jax.grad needs the JAX backend")
def test_jax_grad_equals_adjoint(pts, parameters):
    import jax
    import jax.numpy as jnp

    system = lossy_system()
    target = op.spin_dm("z+").T
    dynamics = nm.differentiable_dynamics(system, list(pts))

    def fidelity(q):
        return jnp.real(jnp.sum(target * dynamics(q, op.spin_dm("x-"))[-1]))

    gradient = numpy.asarray(jax.grad(fidelity)(parameters))
    adjoint = nm.state_gradient(
        system, op.spin_dm("x-"), target, list(pts), parameters, progress_type="silent"
    )
    scale = numpy.abs(adjoint["gradient"]).max()
    numpy.testing.assert_allclose(gradient, adjoint["gradient"].real, rtol=0, atol=1e-9 * scale)
    states = numpy.asarray(dynamics(parameters, op.spin_dm("x-")))
    numpy.testing.assert_allclose(states, adjoint["dynamics"].states, rtol=0, atol=1e-12)
    with backends.use_backend("numpy"):
        on_numpy = nm.state_gradient(
            system, op.spin_dm("x-"), target, list(pts), parameters, progress_type="silent"
        )
    numpy.testing.assert_allclose(
        adjoint["gradient"], on_numpy["gradient"], rtol=0, atol=1e-10 * scale
    )

    # the initial state and control superoperators: forward-mode against the adjoint's
    # linearity in rho0 (Z is linear in the initial state: dZ/drho0 . rho0 = Z)
    final = jax.jacfwd(lambda rho: dynamics(parameters, rho)[-1], holomorphic=True)(
        jnp.asarray(op.spin_dm("x-"), dtype=complex)
    )
    numpy.testing.assert_allclose(
        numpy.einsum("ijkl,kl->ij", numpy.asarray(final), op.spin_dm("x-")),
        adjoint["final_state"],
        atol=1e-12,
    )
    identity = jnp.broadcast_to(jnp.eye(4, dtype=complex), (STEPS, 4, 4))
    numpy.testing.assert_allclose(
        numpy.asarray(dynamics(parameters, op.spin_dm("x-"), identity)), states, atol=1e-13
    )


@pytest.mark.skip_backend("numpy", "jax.grad needs the JAX backend")
def test_differentiable_correlation_through_controls(pts, parameters):
    """<B(t_b) A(t_a)> as A inserted on the left at t_a (a control superoperator) and B
    measured at t_b equals compute_correlations; its jax.grad equals central
    differences of the same compiled function."""
    import jax
    import jax.numpy as jnp

    k_a, k_b = 3, 9
    system = nm.ParameterizedSystem(hamiltonian)
    dynamics = nm.differentiable_dynamics(system, [pts[0]])
    controls = numpy.broadcast_to(numpy.eye(4, dtype=complex), (STEPS, 4, 4)).copy()
    controls[k_a - 1] = op.left_super(SZ)

    def correlation(q):
        states = dynamics(q, op.spin_dm("x-"), jnp.asarray(controls))
        return jnp.sum(SX.T * states[k_b])

    constant = numpy.tile([0.7, -0.3], (2 * STEPS, 1))
    _, expected = nm.compute_correlations(
        nm.System(hamiltonian(0.7, -0.3)),
        pts[0],
        SZ,
        SX,
        [k_a],
        [k_b],
        initial_state=op.spin_dm("x-"),
        progress_type="silent",
    )
    assert abs(complex(correlation(constant)) - expected[0, 0]) < 1e-12
    gradient = numpy.asarray(jax.grad(lambda q: jnp.real(correlation(q)))(parameters))
    h = 1e-6
    for r, j in [(1, 0), (2 * k_a - 1, 1), (2 * k_b - 2, 0)]:
        up, down = parameters.copy(), parameters.copy()
        up[r, j] += h
        down[r, j] -= h
        difference = float(jnp.real(correlation(up) - correlation(down))) / (2 * h)
        assert abs(gradient[r, j] - difference) < 1e-7
    assert numpy.abs(gradient[2 * k_b :]).max() < 1e-14  # nothing after t_b matters


def test_autodiff_refused_on_numpy(pts):
    if backends.get_backend() == "jax":
        pytest.skip("checks the NumPy backend's refusal")
    with pytest.raises(ValueError, match="JAX backend"):
        nm.differentiable_dynamics(lossy_system(), [pts[0]])


def test_bad_input(pts, parameters):
    system = lossy_system()
    rho0, target = op.spin_dm("x-"), op.spin_dm("z+").T

    def call(**changes):
        arguments = dict(
            system=system,
            initial_state=rho0,
            target_derivative=target,
            process_tensors=[pts[0]],
            parameters=parameters,
            progress_type="silent",
        )
        arguments.update(changes)
        return nm.state_gradient(**arguments)

    with pytest.raises(ValueError, match=r"shape \(2N, 2\)"):
        call(parameters=parameters[:, :1])
    with pytest.raises(ValueError, match="rows"):
        call(parameters=parameters[:-2])
    bad = parameters.copy()
    bad[3, 1] = numpy.nan
    with pytest.raises(ValueError, match="finite"):
        call(parameters=bad)
    with pytest.raises(TypeError, match="real"):
        call(parameters=parameters + 1j)
    with pytest.raises(ValueError, match=r"\(2, 2\) matrix"):
        call(target_derivative=numpy.eye(3))
    with pytest.raises(ValueError, match="target_derivative must be given"):
        call(target_derivative=None)
    with pytest.raises(ValueError, match="exceeds the length"):
        call(parameters=numpy.zeros((2 * STEPS + 2, 2)), num_steps=STEPS + 1)
    with pytest.raises(ValueError, match="26 rows"):
        call(parameters=numpy.zeros((2 * STEPS + 2, 2)))
    with pytest.raises(TypeError, match="ParameterizedSystem"):
        call(system=nm.System(SX))
    with pytest.raises(ValueError, match=r"target_derivative\(final_state\)"):
        call(target_derivative=lambda rho: numpy.eye(3))
    with pytest.raises(TypeError, match="ParameterizedSystem needs its parameters"):
        nm.compute_dynamics(system, rho0, process_tensor=pts[0])
    with pytest.raises(TypeError, match=r"\*args"):
        nm.ParameterizedSystem(lambda *p: SX)
    with pytest.raises(ValueError, match="Hermitian"):
        nm.ParameterizedSystem(lambda x: x * op.sigma("+"))
