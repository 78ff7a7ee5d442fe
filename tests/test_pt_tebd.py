"""PT-TEBD (``SystemChain``, ``AugmentedMPS``, ``PtTebd``) against exact results.

Closed chains against the dense propagator of the whole chain (and the Trotter
error falling as dt^order), an XX chain against its free-fermion solution, an
open chain against the dense Lindblad equation, uncoupled bathed sites against
single-site ``compute_dynamics`` with the same process tensors (of every
construction), sites of different dimensions, controls, NumPy = JAX, and the
errors raised before computing. Public interfaces only.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy import linalg

import nonmarkov as nm
from nonmarkov import backends

SX, SY, SZ = nm.operators.sigma("x"), nm.operators.sigma("y"), nm.operators.sigma("z")
SM = nm.operators.sigma("-")
UP, DOWN = nm.operators.spin_dm("z+"), nm.operators.spin_dm("z-")


# ----------------------------------------------------------------- dense helpers


def embed(operator, site, dims):
    """``operator`` on ``site`` of a chain of ``dims`` (identity elsewhere)."""
    out = np.eye(1)
    for k, d in enumerate(dims):
        out = np.kron(out, operator if k == site else np.eye(d))
    return out


def dense_liouvillian(hamiltonian, jumps=()):
    """Row-major Liouvillian of H and (rate, A) jump pairs."""
    eye = np.eye(hamiltonian.shape[0])
    out = -1j * (np.kron(hamiltonian, eye) - np.kron(eye, hamiltonian.T))
    for rate, a in jumps:
        ada = a.conj().T @ a
        out += rate * (np.kron(a, a.conj()) - 0.5 * np.kron(ada, eye) - 0.5 * np.kron(eye, ada.T))
    return out


def reduced(rho, dims, keep):
    """The reduced density matrix of the sites ``keep`` (ascending) of ``rho``."""
    n = len(dims)
    tensor = rho.reshape(list(dims) * 2)
    rows = list(range(n))
    cols = [n + k if k in keep else k for k in range(n)]
    out = np.einsum(tensor, rows + cols, list(keep) + [n + k for k in keep])
    size = int(np.prod([dims[k] for k in keep]))
    return out.reshape(size, size)


def product(states):
    out = np.eye(1)
    for state in states:
        out = np.kron(out, state)
    return out


# ----------------------------------------------------------------- models

XYZ = (1.3, 0.7, 1.2)
FIELDS = (0.3, 0.5, 0.7, 0.9, 1.1)


def xyz_chain(n=5, couplings=XYZ, fields=FIELDS, transverse=0.2):
    """SystemChain and dense H of an XYZ chain with fields along z (and x)."""
    chain = nm.SystemChain([2] * n)
    dims = [2] * n
    hamiltonian = np.zeros((2**n, 2**n), dtype=complex)
    for k in range(n):
        site = 0.5 * fields[k] * SZ + transverse * SX
        chain.add_site_hamiltonian(k, site)
        hamiltonian += embed(site, k, dims)
    for k in range(n - 1):
        for s, j in zip((SX, SY, SZ), couplings):
            if j:
                chain.add_nn_hamiltonian(k, 0.5 * j * s, 0.5 * s)
                hamiltonian += 0.25 * j * embed(s, k, dims) @ embed(s, k + 1, dims)
    return chain, hamiltonian


def run(
    chain,
    states,
    dt,
    steps,
    order=2,
    epsrel=1e-12,
    pts=None,
    sites=None,
    control=None,
    options=None,
):
    n = len(states)
    tebd = nm.PtTebd(
        initial_augmented_mps=nm.AugmentedMPS(list(states)),
        system_chain=chain,
        process_tensors=[None] * n if pts is None else pts,
        parameters=nm.PtTebdParameters(dt=dt, epsrel=epsrel, order=order),
        chain_control=control,
        dynamics_sites=list(range(n)) if sites is None else sites,
        options=options,
    )
    return tebd, tebd.compute(steps, progress_type="silent")


@pytest.fixture(scope="module")
def closed_xyz():
    chain, hamiltonian = xyz_chain()
    states = [UP, DOWN, DOWN, UP, DOWN]
    return chain, hamiltonian, states


def test_closed_chain_against_dense_expm_and_trotter_orders(closed_xyz):
    chain, hamiltonian, states = closed_xyz
    dims = [2] * 5
    total = 1.0
    rho0 = product(states)
    exact = linalg.expm(-1j * hamiltonian * total) @ rho0 @ linalg.expm(1j * hamiltonian * total)
    errors = {}
    for order in (1, 2):
        for dt in (0.1, 0.05):
            _, results = run(
                chain, states, dt, round(total / dt), order=order, sites=[0, 2, 4, (1, 2)]
            )
            error = max(
                np.abs(results["dynamics"][k].states[-1] - reduced(exact, dims, [k])).max()
                for k in (0, 2, 4)
            )
            pair = np.abs(results["dynamics"][(1, 2)].states[-1] - reduced(exact, dims, [1, 2]))
            errors[order, dt] = max(error, pair.max())
            assert results["dynamics"][(1, 2)].states[-1].shape == (4, 4)
            np.testing.assert_allclose(results["time"], np.arange(round(total / dt) + 1) * dt)
            np.testing.assert_allclose(results["norm"], 1.0, atol=1e-9)
    assert errors[2, 0.05] < 2e-5
    assert 1.8 < errors[1, 0.1] / errors[1, 0.05] < 2.2  # first order
    assert 3.6 < errors[2, 0.1] / errors[2, 0.05] < 4.4  # second order


def test_whole_trajectory_and_current_density_matrix(closed_xyz):
    chain, hamiltonian, states = closed_xyz
    dims = [2] * 5
    dt, steps = 0.02, 10
    tebd, results = run(chain, states, dt, steps, sites=[(0, 3)])
    rho0 = product(states)
    for k, t in enumerate(results["time"]):
        u = linalg.expm(-1j * hamiltonian * t)
        exact = reduced(u @ rho0 @ u.conj().T, dims, [0, 3])
        np.testing.assert_allclose(results["dynamics"][(0, 3)].states[k], exact, atol=2e-5)
    current = tebd.get_current_density_matrix((0, 3))
    np.testing.assert_allclose(current, results["dynamics"][(0, 3)].states[-1], atol=1e-12)
    assert results["bond_dimensions"].shape == (steps + 1, 4)
    # continuing the computation equals computing it at once
    more = tebd.compute(steps + 5, progress_type="silent")
    _, once = run(chain, states, dt, steps + 5, sites=[(0, 3)])
    np.testing.assert_allclose(
        more["dynamics"][(0, 3)].states, once["dynamics"][(0, 3)].states, atol=1e-12
    )


def test_xx_chain_against_free_fermions():
    n, j, t_end, dt = 6, 1.0, 2.0, 0.025
    fields = (0.2, -0.3, 0.5, 0.1, -0.4, 0.3)
    chain = nm.SystemChain([2] * n)
    for k in range(n):
        chain.add_site_hamiltonian(k, 0.5 * fields[k] * SZ)
    for k in range(n - 1):
        chain.add_nn_hamiltonian(k, 0.5 * j * SX, 0.5 * SX)
        chain.add_nn_hamiltonian(k, 0.5 * j * SY, 0.5 * SY)
    occupied = [1, 0, 1, 1, 0, 0]
    states = [UP if o else DOWN for o in occupied]
    _, results = run(chain, states, dt, round(t_end / dt), epsrel=1e-10)
    # Jordan-Wigner: hopping j/2 between neighbours, on-site energy h_k
    single = np.diag(np.array(fields, dtype=complex))
    single += np.diag([0.5 * j] * (n - 1), 1) + np.diag([0.5 * j] * (n - 1), -1)
    for step in (20, 80):
        u = linalg.expm(-1j * single * step * dt)
        occupation = np.real(np.diag(u @ np.diag(occupied) @ u.conj().T))
        for k in range(n):
            sz = np.real(np.trace(SZ @ results["dynamics"][k].states[step]))
            assert abs(sz - (2 * occupation[k] - 1)) < 1e-4


@pytest.mark.slow
def test_open_chain_against_dense_lindblad():
    n, dims = 5, [2] * 5
    chain, hamiltonian = xyz_chain(n, couplings=(1.0, 0.6, 0.4))
    jumps = []
    for k, rate in ((0, 0.3), (2, 0.2), (4, 0.4)):
        chain.add_site_dissipation(k, SM, gamma=rate)
        jumps.append((rate, embed(SM, k, dims)))
    chain.add_site_dissipation(1, SZ, gamma=0.1)
    jumps.append((0.1, embed(SZ, 1, dims)))
    chain.add_nn_dissipation(2, SM, SM, gamma=0.25)
    jumps.append((0.25, embed(SM, 2, dims) @ embed(SM, 3, dims)))
    dephase = nm.operators.lindblad_dissipator(SZ)
    chain.add_site_liouvillian(3, 0.05 * dephase)
    jumps.append((0.05, embed(SZ, 3, dims)))
    states = [UP, UP, DOWN, UP, nm.operators.spin_dm("x+")]
    dt, steps = 0.05, 20
    _, results = run(chain, states, dt, steps, sites=[0, 1, 2, 3, 4, (2, 3)], epsrel=1e-10)
    generator = dense_liouvillian(hamiltonian, jumps)
    rho = linalg.expm(generator * dt * steps) @ product(states).reshape(-1)
    rho = rho.reshape(2**n, 2**n)
    for k in range(n):
        np.testing.assert_allclose(
            results["dynamics"][k].states[-1], reduced(rho, dims, [k]), atol=2e-5
        )
    np.testing.assert_allclose(
        results["dynamics"][(2, 3)].states[-1], reduced(rho, dims, [2, 3]), atol=2e-5
    )
    np.testing.assert_allclose(results["norm"], 1.0, atol=1e-8)


def test_sites_of_different_dimensions_and_controls():
    dims = [2, 3, 2]
    rng = np.random.default_rng(7)

    def hermitian(d):
        a = rng.normal(size=(d, d)) + 1j * rng.normal(size=(d, d))
        return 0.3 * (a + a.conj().T)

    chain = nm.SystemChain(dims)
    hamiltonian = np.zeros((12, 12), dtype=complex)
    for k, d in enumerate(dims):
        h = hermitian(d)
        chain.add_site_hamiltonian(k, h)
        hamiltonian += embed(h, k, dims)
    for k in range(2):
        hl, hr = hermitian(dims[k]), hermitian(dims[k + 1])
        chain.add_nn_hamiltonian(k, hl, hr)
        hamiltonian += embed(hl, k, dims) @ embed(hr, k + 1, dims)
    qutrit = np.diag([0.5, 0.3, 0.2]).astype(complex)
    states = [UP, qutrit, DOWN]
    kick = np.kron(SX, SX.conj())  # sigma_x rho sigma_x on site 2, after step 4 is recorded
    control = nm.ChainControl(dims)
    control.add_single_site_control(kick, site=2, step=4, post=True)
    dt, steps = 0.01, 10
    _, results = run(chain, states, dt, steps, sites=[0, 1, 2, (0, 1), (1, 2)], control=control)
    u = linalg.expm(-1j * hamiltonian * dt * 4)
    rho = u @ product(states) @ u.conj().T
    x2 = embed(SX, 2, dims)
    rho = x2 @ rho @ x2
    u = linalg.expm(-1j * hamiltonian * dt * 6)
    rho = u @ rho @ u.conj().T
    for keep in ([0], [1], [2], [0, 1], [1, 2]):
        key = keep[0] if len(keep) == 1 else tuple(keep)
        got = results["dynamics"][key].states[-1]
        assert got.shape == (int(np.prod([dims[k] for k in keep])),) * 2
        np.testing.assert_allclose(got, reduced(rho, dims, keep), atol=1e-5)


def test_single_site_chain_equals_compute_dynamics():
    chain = nm.SystemChain([2])
    chain.add_site_hamiltonian(0, 0.7 * SX + 0.2 * SZ)
    chain.add_site_dissipation(0, SM, 0.3)
    _, results = run(chain, [UP], 0.1, 10)
    system = nm.System(0.7 * SX + 0.2 * SZ, gammas=[0.3], lindblad_operators=[SM])
    dynamics = nm.compute_dynamics(system, UP, dt=0.1, num_steps=10, progress_type="silent")
    np.testing.assert_allclose(results["dynamics"][0].states, dynamics.states, atol=1e-12)


# ----------------------------------------------------------------- baths

DT, STEPS = 0.1, 8


@pytest.fixture(scope="module")
def baths():
    """Two baths and their process tensors (sequential PT-TEMPO)."""
    first = nm.Bath(0.5 * SZ, nm.PowerLawSD(0.2, 1, 4.0, "exponential", 0.5))
    second = nm.Bath(0.5 * SX, nm.PowerLawSD(0.1, 3, 3.0, "gaussian", 1.0))
    parameters = nm.TempoParameters(dt=DT, dkmax=4, epsrel=1e-7)
    with backends.use_backend("numpy"):  # host objects either way; PT-TEMPO is tested elsewhere
        pts = [
            nm.pt_tempo_compute(b, 0.0, STEPS * DT, parameters, progress_type="silent")
            for b in (first, second)
        ]
    return (first, second), parameters, pts


def site_hamiltonians():
    return [0.5 * SX + 0.3 * SZ, 0.8 * SX, 0.4 * SY - 0.2 * SZ]


def uncoupled_chain():
    chain = nm.SystemChain([2, 2, 2])
    for k, h in enumerate(site_hamiltonians()):
        chain.add_site_hamiltonian(k, h)
    return chain


def assert_uncoupled_sites_match(pts, states, steps=STEPS, tolerance=1e-10):
    """Each site of an uncoupled chain equals its single-site dynamics with the same
    process tensor. States are not divided by the chain's trace (as in OQuPy), so
    a site's state carries the traces of the others (a truncated process tensor
    keeps the trace to its epsrel): compare them divided by their traces, and
    the chain's trace with the product of the single-site traces."""
    _, results = run(uncoupled_chain(), states, DT, steps, pts=pts, epsrel=1e-14)
    traces = np.ones(steps + 1, dtype=complex)
    for k, (h, pt) in enumerate(zip(site_hamiltonians(), pts)):
        single = nm.compute_dynamics(
            nm.System(h),
            states[k],
            dt=DT,
            num_steps=steps,
            process_tensor=pt,
            progress_type="silent",
        )
        ours = results["dynamics"][k].states
        ours = ours / np.trace(ours, axis1=1, axis2=2)[:, None, None]
        trace = np.trace(single.states, axis1=1, axis2=2)
        traces *= trace
        np.testing.assert_allclose(ours, single.states / trace[:, None, None], atol=tolerance)
    np.testing.assert_allclose(results["norm"], traces, atol=tolerance)


def test_uncoupled_bathed_sites_equal_single_site_dynamics(baths):
    _, _, (first, second) = baths
    assert_uncoupled_sites_match([first, None, second], [UP, DOWN, nm.operators.spin_dm("x+")])


def test_process_tensors_of_every_construction(baths, tmp_path):
    (first, second), parameters, (sequential, _) = baths
    divided = nm.pt_divide_and_conquer_compute(
        first, 0.0, STEPS * DT, parameters, progress_type="silent"
    )
    uniform = nm.pt_uniform_compute(second, parameters, progress_type="silent")
    path = str(tmp_path / "pt.hdf5")
    sequential.export(path)
    from_file = nm.import_process_tensor(path)
    try:
        assert_uncoupled_sites_match([divided, uniform, from_file], [UP, DOWN, UP])
    finally:
        from_file.close()


def test_coupled_chain_with_baths_runs_and_converges(baths):
    _, _, (first, second) = baths
    chain, _ = xyz_chain(3, fields=(1.0, 1.0, 1.0), transverse=0.0)
    states = [UP, DOWN, DOWN]
    with backends.use_backend("numpy"):  # the reference (its large bonds compile slowly on JAX)
        _, fine = run(chain, states, DT, STEPS, pts=[first, None, second], epsrel=1e-7)
    errors = []
    for epsrel in (1e-3, 1e-5):
        _, coarse = run(chain, states, DT, STEPS, pts=[first, None, second], epsrel=epsrel)
        errors.append(
            max(
                np.abs(fine["dynamics"][k].states - coarse["dynamics"][k].states).max()
                for k in range(3)
            )
        )
        # the error adds up over the cuts (6 gates a step, up to 3 cuts each, each
        # discarding at most epsrel of its norm); measured ~0.7 and ~1.1 STEPS epsrel
        assert errors[-1] < 12 * STEPS * epsrel
    assert errors[1] < 0.1 * errors[0]
    np.testing.assert_allclose(np.abs(fine["norm"]), 1.0, atol=1e-4)
    assert set(fine["pt_bond_dimensions"]) == {0, 1, 2}


@pytest.mark.skip_backend("numpy", reason="compares a JAX session's run with NumPy")
@pytest.mark.parametrize("compiled", ["on", "auto"])  # the compiled engine, the host's
def test_jax_equals_numpy(baths, compiled):
    _, _, (first, second) = baths
    chain, _ = xyz_chain(4, fields=(1.0, 0.8, 0.6, 0.4))
    states = [UP, DOWN, UP, DOWN]
    sites = [0, 1, 2, 3, (1, 2)]
    options = nm.options.default_options().replace(compiled=compiled)
    _, on_jax = run(
        chain,
        states,
        DT,
        STEPS,
        pts=[first, None, None, second],
        epsrel=1e-8,
        sites=sites,
        options=options,
    )
    with backends.use_backend("numpy"):
        _, on_numpy = run(
            chain, states, DT, STEPS, pts=[first, None, None, second], epsrel=1e-8, sites=sites
        )
    for key in sites:
        np.testing.assert_allclose(
            on_jax["dynamics"][key].states, on_numpy["dynamics"][key].states, atol=1e-10
        )
    np.testing.assert_array_equal(on_jax["bond_dimensions"], on_numpy["bond_dimensions"])


# ----------------------------------------------------------------- errors


def test_errors_before_computing(baths):
    _, _, (first, _) = baths
    chain = nm.SystemChain([2, 2, 2])
    with pytest.raises(ValueError, match="site"):
        chain.add_site_hamiltonian(3, SZ)
    with pytest.raises(TypeError, match="site"):
        chain.add_site_hamiltonian(1.0, SZ)
    with pytest.raises(ValueError, match="site"):
        chain.add_nn_hamiltonian(2, SZ, SZ)
    with pytest.raises(ValueError, match="dimension"):
        chain.add_site_hamiltonian(0, np.eye(3))
    with pytest.raises(ValueError, match="dimension"):
        chain.add_nn_dissipation(0, SM, np.eye(3))
    with pytest.raises(ValueError):
        nm.SystemChain([])
    with pytest.raises(ValueError):
        nm.SystemChain([2, 0])
    parameters = nm.PtTebdParameters(dt=DT)
    mps = nm.AugmentedMPS([UP, DOWN, UP])

    def make(**changes):
        arguments = dict(
            initial_augmented_mps=mps,
            system_chain=chain,
            process_tensors=[None, None, None],
            parameters=parameters,
        )
        arguments.update(changes)
        return nm.PtTebd(**arguments)

    with pytest.raises(ValueError, match="sites"):
        make(initial_augmented_mps=nm.AugmentedMPS([UP, DOWN]))
    with pytest.raises(ValueError, match="dimension"):
        make(initial_augmented_mps=nm.AugmentedMPS([UP, np.eye(3) / 3, UP]))
    with pytest.raises(ValueError, match="entries"):
        make(process_tensors=[None, None])
    with pytest.raises(TypeError, match="process tensor"):
        make(process_tensors=[None, "pt", None])
    with pytest.raises(ValueError, match="dimension"):
        make(
            system_chain=nm.SystemChain([3, 2, 2]),
            initial_augmented_mps=nm.AugmentedMPS([np.eye(3) / 3, UP, UP]),
            process_tensors=[first, None, None],
        )
    with pytest.raises(ValueError, match="dt"):
        make(parameters=nm.PtTebdParameters(dt=2 * DT), process_tensors=[first, None, None])
    with pytest.raises(ValueError, match="site dimensions"):
        make(chain_control=nm.ChainControl([2, 2]))
    with pytest.raises(TypeError, match="ChainControl"):
        make(chain_control=nm.Control(2))
    with pytest.raises(ValueError, match="outside the chain"):
        make(dynamics_sites=[0, 3])
    with pytest.raises(ValueError, match="ascending"):
        make(dynamics_sites=[(2, 1)])
    with pytest.raises(TypeError, match="AugmentedMPS"):
        make(initial_augmented_mps=[UP, DOWN, UP])
    with pytest.raises(TypeError, match="SystemChain"):
        make(system_chain=nm.System(SZ))
    with pytest.raises(ValueError, match="beyond"):
        make(process_tensors=[first, None, None]).compute(STEPS + 1)
    with pytest.raises(ValueError, match="order"):
        nm.PtTebdParameters(dt=0.1, order=3)
    with pytest.raises(ValueError, match="dt"):
        nm.PtTebdParameters(dt=-0.1)
    control = nm.ChainControl([2, 3])
    with pytest.raises(ValueError, match="site"):
        control.add_single_site_control(np.eye(4), site=2, step=0)
    with pytest.raises(ValueError):
        control.add_single_site_control(np.eye(4), site=1, step=0)
    with pytest.raises(ValueError, match="bond"):
        nm.AugmentedMPS([np.ones((1, 4, 2)), np.ones((3, 4, 1))])
    with pytest.raises(ValueError, match="positive"):
        nm.AugmentedMPS([np.ones((1, 4, 2)), np.ones((2, 4, 1))], [[1.0, -1.0]])


def test_entangled_initial_state_and_augmented_mps_roundtrip(closed_xyz):
    chain, hamiltonian, _ = closed_xyz
    # a Bell pair on sites (0, 1) in Vidal form, the rest down
    bell = np.zeros((4, 4), dtype=complex)
    bell[0, 0] = bell[0, 3] = bell[3, 0] = bell[3, 3] = 0.5  # rows (a0 a1), columns (b0 b1)
    liouville = bell.reshape(2, 2, 2, 2).transpose(0, 2, 1, 3).reshape(4, 4)  # (p0, p1)
    u, s, vh = np.linalg.svd(liouville)
    rank = int(np.sum(s > 1e-12))
    gammas = [u[:, :rank].reshape(1, 4, rank), vh[:rank].reshape(rank, 4, 1)] + [DOWN] * 3
    mps = nm.AugmentedMPS(gammas, [s[:rank], None, None, None])
    tebd = nm.PtTebd(
        mps, chain, [None] * 5, nm.PtTebdParameters(dt=0.05, epsrel=1e-12), dynamics_sites=[(0, 1)]
    )
    results = tebd.compute(10, progress_type="silent")
    np.testing.assert_allclose(results["dynamics"][(0, 1)].states[0], bell, atol=1e-12)
    rho0 = np.kron(bell, product([DOWN] * 3))
    u_t = linalg.expm(-1j * hamiltonian * 0.5)
    exact = reduced(u_t @ rho0 @ u_t.conj().T, [2] * 5, [0, 1])
    np.testing.assert_allclose(results["dynamics"][(0, 1)].states[-1], exact, atol=1e-4)
    # the current state as an AugmentedMPS starts an equal computation
    again = nm.PtTebd(
        tebd.get_augmented_mps(),
        chain,
        [None] * 5,
        nm.PtTebdParameters(dt=0.05, epsrel=1e-12),
        dynamics_sites=[(0, 1)],
    )
    np.testing.assert_allclose(
        again.compute(0, progress_type="silent")["dynamics"][(0, 1)].states[0],
        results["dynamics"][(0, 1)].states[-1],
        atol=1e-12,
    )
