"""``compute_dynamics`` with several environments (a list of process tensors).

Independent baths multiply their influence functionals. Checks that hold
exactly for the discretised problem (up to SVD truncation, epsrel 1e-10):

- two half-strength baths (alpha/2 each) equal one bath of strength alpha;
- independent-boson model with two baths at different temperatures and
  couplings: the exact coherences with G = G_1 + G_2, P = P_1 + P_2;
- a sigma_z bath at T = 0.8 on qubit 1 and a sigma_x bath at T = 1.6 on qubit 2
  (commuting couplings S_1 x I and I x S_2): the state factorises into the
  single-qubit states, each computed with its own bath;
- one qubit with a sigma_z bath at T_1 and a sigma_x bath at T_2 (couplings
  that do not commute): the Hadamard rotation maps it onto the problem with a
  sigma_x bath at T_1 and a sigma_z bath at T_2.

A comparison of the sigma_x + sigma_z problem with a Born-Markov master
equation is not made: at couplings where that limit applies it is accurate
only up to O(alpha) transients (initial slip, Lamb shift), so a tolerance
that it would pass could not detect an error in the contraction.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

import nonmarkov as nm
from models import HADAMARD, SX, SY, SZ, g_and_p, pure_state, spectral_density

SILENT = {"progress_type": "silent"}
DT, STEPS, WC = 0.2, 4, 4.0
EYE = np.eye(2)
# (alpha, temperature) of the two baths
BATH_1, BATH_2 = (0.2, 0.8), (0.15, 1.6)


def make_pt(coupling, alpha, temperature, unique=False):
    """PT-TEMPO, full memory, epsrel 1e-10, STEPS steps of DT."""
    bath = nm.Bath(coupling, nm.PowerLawSD(alpha, 1.0, WC, temperature=temperature))
    parameters = nm.TempoParameters(dt=DT, epsrel=1e-10)
    return nm.PtTempo(bath, 0.0, STEPS * DT, parameters, unique=unique).get_process_tensor(**SILENT)


@pytest.fixture(scope="module")
def pts():
    """The process tensors shared by the tests."""
    return {
        "z1": make_pt(0.5 * SZ, *BATH_1),
        "z2": make_pt(0.5 * SZ, *BATH_2),
        "x1": make_pt(0.5 * SX, *BATH_1),
        "x2": make_pt(0.5 * SX, *BATH_2),
        "z1-half": make_pt(0.5 * SZ, 0.5 * BATH_1[0], BATH_1[1]),
        "z1-qubit1": make_pt(np.kron(0.5 * SZ, EYE), *BATH_1, unique=True),
        "x2-qubit2": make_pt(np.kron(EYE, 0.5 * SX), *BATH_2, unique=True),
    }


def dynamics(system, rho0, process_tensor):
    return nm.compute_dynamics(system, rho0, process_tensor=process_tensor, **SILENT).states


RHO0 = pure_state(0.8, 0.6 * np.exp(0.7j))


def test_two_half_strength_baths_equal_one_bath(pts):
    system = nm.System(0.5 * SX + 0.2 * SZ)
    one = dynamics(system, RHO0, pts["z1"])
    two = dynamics(system, RHO0, [pts["z1-half"], pts["z1-half"]])
    np.testing.assert_allclose(two, one, rtol=0, atol=1e-8)
    half = dynamics(system, RHO0, pts["z1-half"])
    assert np.max(np.abs(half - one)) > 1e-2


def test_independent_boson_two_baths_at_different_temperatures(pts):
    """rho_nm(t) = rho_nm(0) e^{-i(E_n - E_m)t} prod_b e^{-(s_n - s_m)^2 G_b + i(s_n^2 - s_m^2) P_b}
    with the G_b, P_b of bath b (its alpha and temperature). [H_S, S] = 0 and full memory:
    exact up to truncation and quadrature; bound 1e-8."""
    energies = [0.3, -0.3]
    system = nm.System(np.diag(energies).astype(complex))
    states = dynamics(system, RHO0, [pts["z1"], pts["z2"]])
    times = DT * np.arange(STEPS + 1)
    s = np.array([0.5, -0.5])
    exact = []
    for t in times:
        factor = RHO0 * np.exp(-1j * np.subtract.outer(energies, energies) * t)
        for alpha, temperature in (BATH_1, BATH_2):
            g, p = g_and_p(
                spectral_density(alpha, 1.0, WC, "exponential"), temperature, t, 60.0 * WC
            )
            factor = factor * np.exp(
                -(np.subtract.outer(s, s) ** 2) * g + 1j * np.subtract.outer(s**2, s**2) * p
            )
        exact.append(factor)
    exact = np.array(exact)
    np.testing.assert_allclose(states, exact, rtol=0, atol=1e-8)
    only_first = dynamics(system, RHO0, pts["z1"])
    assert np.max(np.abs(only_first - exact)) > 1e-2  # the second bath matters


def test_baths_on_two_qubits_factorise(pts):
    """sigma_z bath (T=0.8) on qubit 1, sigma_x bath (T=1.6) on qubit 2, both qubits driven:
    rho(t) = rho_1(t) x rho_2(t)."""
    h1, h2 = 0.5 * SX + 0.2 * SZ, 0.4 * SZ + 0.3 * SY
    rho1, rho2 = RHO0, pure_state(0.6, 0.8j)
    system = nm.System(np.kron(h1, EYE) + np.kron(EYE, h2))
    both = dynamics(system, np.kron(rho1, rho2), [pts["z1-qubit1"], pts["x2-qubit2"]])
    first = dynamics(nm.System(h1), rho1, pts["z1"])
    second = dynamics(nm.System(h2), rho2, pts["x2"])
    product = np.einsum("tab,tcd->tacbd", first, second).reshape(-1, 4, 4)
    np.testing.assert_allclose(both, product, rtol=0, atol=1e-8)
    closed = nm.compute_dynamics(nm.System(h2), rho2, dt=DT, num_steps=STEPS, **SILENT).states
    assert np.max(np.abs(second - closed)) > 1e-2


def test_sigma_z_and_sigma_x_baths_hadamard_symmetry(pts):
    """H_S = w (sigma_x + sigma_z) / sqrt(8) is Hadamard invariant; the Hadamard maps the
    sigma_z bath at T_1 and sigma_x bath at T_2 onto a sigma_x bath at T_1 and a sigma_z
    bath at T_2 (same order in the list, so the same splitting)."""
    system = nm.System(0.9 * (SX + SZ) / math.sqrt(8.0))
    original = dynamics(system, RHO0, [pts["z1"], pts["x2"]])
    rotated = dynamics(system, HADAMARD @ RHO0 @ HADAMARD, [pts["x1"], pts["z2"]])
    np.testing.assert_allclose(
        np.einsum("ij,tjk,kl->til", HADAMARD, original, HADAMARD), rotated, rtol=0, atol=1e-8
    )
    # both baths matter, and the rotated problem is a different one
    for single in ("z1", "x2"):
        assert np.max(np.abs(dynamics(system, RHO0, pts[single]) - original)) > 1e-2
    swapped = dynamics(system, RHO0, [pts["x1"], pts["z2"]])
    assert np.max(np.abs(swapped - original)) > 3e-3
    np.testing.assert_allclose(np.trace(original, axis1=1, axis2=2), 1.0, atol=1e-8)
