"""Tests of bath dynamics (``TwoTimeBathCorrelations``): occupations and two-time
correlations of bath modes computed from the system correlations of a process tensor.

References, computed here independently of the library:

- the independent-boson model ([H_S, S] = 0, S = diag(1, 0)): S(t) = S, so in the
  bath's interaction picture b~(t) = b - g S (e^{i w t} - 1) / w exactly, and every
  moment of one or two modes is a closed form in <S^2> = rho_00 (plus n or n + 1 for
  b^dag b and b b^dag of one mode);
- energy conservation on a biased spin-boson model: <H_S>(t) + the bath's energy
  change (occupation changes summed over frequency bands, times the frequency) +
  <H_I>(t) stays at <H_S>(0); <H_I>(t) = 2 int_0^t Im[<S(t) S(u)> C(t - u)] du is
  computed here from the system correlations and the bath correlation function. The
  drift is a discretisation error of second order in dt.

The process tensors are built on NumPy (their JAX build is tested in test_pt_tempo.py);
the system correlations and everything after run on the session backend. NumPy against
JAX: on JAX the whole run is repeated under ``use_backend("numpy")``.
"""

from __future__ import annotations

import numpy as np
import pytest

import nonmarkov as nm
from models import SX, SZ
from nonmarkov import backends

SILENT = {"progress_type": "silent"}
PROJECTOR = np.diag([1.0, 0.0])
RHO0 = 0.5 * np.array([[1.0, 1.0], [1.0, 1.0]], dtype=complex)
TEMPERATURE = 0.7


def independent_boson(dt=0.1, steps=30, temperature=TEMPERATURE):
    bath = nm.Bath(PROJECTOR, nm.PowerLawSD(0.1, 1.0, 3.0, temperature=temperature))
    system = nm.System(0.8 * SZ)
    with backends.use_backend("numpy"):  # the PT build runs on JAX in test_pt_tempo.py
        pt = nm.pt_tempo_compute(
            bath, 0.0, dt * steps, nm.TempoParameters(dt=dt, epsrel=1e-10), **SILENT
        )
    return system, bath, pt


def coupling(bath, w, dw):
    return np.sqrt(bath.correlations.spectral_density(w) * dw)


def tilde_change(sigma, w, g, t):
    """b~(t) - b (sigma = -1) or b~^dag(t) - b^dag (sigma = +1), divided by S."""
    return -g * (np.exp(-1j * sigma * w * t) - 1.0) / w


@pytest.fixture(scope="module")
def ibm():
    return independent_boson()


@pytest.mark.parametrize("change_only", [True, False])
@pytest.mark.slow
def test_independent_boson_occupation(ibm, change_only):
    system, bath, pt = ibm
    w, dw = 1.3, 0.05
    times, occupation = nm.TwoTimeBathCorrelations(system, bath, pt, RHO0).occupation(
        w, dw, change_only=change_only, **SILENT
    )
    np.testing.assert_allclose(times, 0.1 * np.arange(31), atol=1e-14)
    exact = coupling(bath, w, dw) ** 2 * RHO0[0, 0].real * 2.0 * (1.0 - np.cos(w * times)) / w**2
    if not change_only:
        exact = exact + 1.0 / np.expm1(w / TEMPERATURE)
    np.testing.assert_allclose(occupation, exact, atol=1e-8)


@pytest.mark.parametrize("dagg", [(1, 0), (0, 1), (1, 1), (0, 0)])
@pytest.mark.parametrize(
    "w1, w2, t1, t2", [(1.3, 1.3, 1.0, 2.0), (1.3, 0.7, 2.5, 1.0), (0.9, 0.9, 3.0, 3.0)]
)
def test_independent_boson_two_time_correlations(ibm, dagg, w1, w2, t1, t2):
    system, bath, pt = ibm
    dw = 0.05
    correlations = nm.TwoTimeBathCorrelations(system, bath, pt, RHO0)
    sigma_2, sigma_1 = 2 * dagg[0] - 1, 2 * dagg[1] - 1
    g1, g2 = coupling(bath, w1, dw), coupling(bath, w2, dw)
    exact = tilde_change(sigma_2, w2, g2, t2) * tilde_change(sigma_1, w1, g1, t1) * RHO0[0, 0]
    if w1 == w2:
        n = 1.0 / np.expm1(w1 / TEMPERATURE)
        exact += {(1, 0): n, (0, 1): n + 1.0}.get(dagg, 0.0)
    value = correlations.correlation(
        w1, t1, w2, t2, dw=(dw, dw), dagg=dagg, interaction_picture=True, **SILENT
    )
    assert abs(value - exact) < 1e-8
    heisenberg = correlations.correlation(w1, t1, w2, t2, dw=(dw, dw), dagg=dagg, **SILENT)
    phase = np.exp(1j * (sigma_2 * w2 * t2 + sigma_1 * w1 * t1))
    assert abs(heisenberg - exact * phase) < 1e-8


def biased_spin_boson_energies(dt, end=2.0):
    """(total energy drift, largest bath energy change) of a biased spin-boson run."""
    spectral_density = nm.PowerLawSD(0.05, 1.0, 2.0, temperature=0.5)
    bath = nm.Bath(0.5 * SZ, spectral_density)
    hamiltonian = 0.5 * SX + 0.5 * SZ
    system = nm.System(hamiltonian)
    rho0 = np.diag([0.0, 1.0]).astype(complex)
    steps = int(round(end / dt))
    with backends.use_backend("numpy"):  # the PT build runs on JAX in test_pt_tempo.py
        pt = nm.pt_tempo_compute(bath, 0.0, end, nm.TempoParameters(dt=dt, epsrel=1e-8), **SILENT)
    _, system_energy = nm.compute_dynamics(
        system, initial_state=rho0, process_tensor=pt, **SILENT
    ).expectations(hamiltonian, real=True)
    correlations = nm.TwoTimeBathCorrelations(system, bath, pt, rho0)
    frequencies, dw = np.linspace(0.005, 24.0, 1200, retstep=True)
    bath_energy = sum(
        w * correlations.occupation(w, dw, change_only=True, **SILENT)[1] for w in frequencies
    )
    c_s = correlations.system_correlations  # [a, b] = <S(t_b) S(t_a)>, a <= b
    c_b = spectral_density.correlation(dt * np.arange(steps + 1))
    interaction = np.array(
        [
            2.0 * np.trapezoid(np.imag(c_s[: k + 1, k] * c_b[k::-1]), dx=dt) if k else 0.0
            for k in range(steps + 1)
        ]
    )
    total = system_energy + bath_energy + interaction
    return np.abs(total - total[0]).max(), np.abs(bath_energy).max()


def test_energy_is_conserved_to_second_order_in_dt():
    coarse, bath_energy = biased_spin_boson_energies(0.1)
    fine, _ = biased_spin_boson_energies(0.05)
    assert bath_energy > 0.05  # a real energy flow, not a trivial balance
    assert fine < 5e-3 * bath_energy  # measured: 2.0e-4 against 0.087
    assert coarse / fine == pytest.approx(4.0, rel=0.2)  # measured: 4.0


def test_results_reuse_and_extension(ibm):
    system, bath, pt = ibm
    direct = nm.TwoTimeBathCorrelations(system, bath, pt, RHO0)
    direct.generate_system_correlations(3.0, **SILENT)
    stepwise = nm.TwoTimeBathCorrelations(system, bath, pt, RHO0)
    stepwise.generate_system_correlations(1.2, **SILENT)
    assert stepwise.system_correlations.shape == (13, 13)
    stepwise.generate_system_correlations(3.0, **SILENT)
    np.testing.assert_allclose(
        stepwise.system_correlations, direct.system_correlations, atol=1e-13, equal_nan=True
    )
    reused = nm.TwoTimeBathCorrelations(
        system, bath, pt, RHO0, system_correlations=direct.system_correlations
    )
    np.testing.assert_allclose(
        reused.occupation(1.1, 0.1, **SILENT)[1], direct.occupation(1.1, 0.1, **SILENT)[1]
    )
    assert nm.bath_dynamics.TwoTimeBathCorrelations is nm.TwoTimeBathCorrelations


@pytest.mark.skip_backend("numpy", "compares the JAX engine with NumPy")
def test_jax_agrees_with_numpy(tol):
    def run():
        bath = nm.Bath(0.5 * SZ, nm.PowerLawSD(0.1, 1.0, 2.0, temperature=0.5))
        system = nm.System(0.5 * SX + 0.3 * SZ)
        pt = nm.pt_tempo_compute(bath, 0.0, 1.5, nm.TempoParameters(dt=0.1, epsrel=1e-7), **SILENT)
        correlations = nm.TwoTimeBathCorrelations(system, bath, pt, RHO0)
        occupation = correlations.occupation(1.5, 0.1, **SILENT)[1]
        two_time = correlations.correlation(1.5, 0.5, 0.8, 1.2, dw=(0.1, 0.1), **SILENT)
        return occupation, two_time

    session = run()
    with backends.use_backend("numpy"):
        reference = run()
    tol.assert_close(session[0], reference[0], kind="agree")
    assert abs(session[1] - reference[1]) < tol.agree


# -- bad input: a clear error before any work ------------------------------------------


def test_bad_input(ibm):
    system, bath, pt = ibm
    correlations = nm.TwoTimeBathCorrelations(system, bath, pt, RHO0)
    with pytest.raises(ValueError, match="freq"):
        correlations.occupation(0.0)
    with pytest.raises(ValueError, match="freq"):
        correlations.occupation(-1.0)
    with pytest.raises(ValueError, match="dw"):
        correlations.occupation(1.0, dw=0.0)
    with pytest.raises(TypeError, match="change_only"):
        correlations.occupation(1.0, change_only="yes")
    with pytest.raises(ValueError, match="dagg"):
        correlations.correlation(1.0, 1.0, dagg=(2, 0))
    with pytest.raises(TypeError, match="dw"):
        correlations.correlation(1.0, 1.0, dw=0.1)
    with pytest.raises(ValueError, match="beyond"):
        correlations.correlation(1.0, 5.0)
    hard = nm.Bath(PROJECTOR, nm.PowerLawSD(0.1, 1.0, 3.0, "hard", temperature=TEMPERATURE))
    hard_pt = nm.pt_tempo_compute(hard, 0.0, 0.6, nm.TempoParameters(dt=0.2, epsrel=1e-6), **SILENT)
    with pytest.raises(ValueError, match="support"):
        nm.TwoTimeBathCorrelations(system, hard, hard_pt, RHO0).occupation(4.0)


def test_bad_models(ibm):
    system, bath, pt = ibm
    with pytest.raises(ValueError, match="initial_state"):
        nm.TwoTimeBathCorrelations(system, bath, pt)
    with pytest.raises(ValueError, match="dimension"):
        nm.TwoTimeBathCorrelations(nm.System(np.eye(3)), bath, pt, np.eye(3) / 3)
    with pytest.raises(TypeError, match="spectral density"):
        nm.TwoTimeBathCorrelations(
            system, nm.Bath(PROJECTOR, nm.CustomCorrelations(lambda t: 0j)), pt, RHO0
        )
    with pytest.raises(ValueError, match="coupling operator"):
        nm.TwoTimeBathCorrelations(system, nm.Bath(0.5 * SZ, bath.correlations), pt, RHO0)
    hotter = nm.Bath(PROJECTOR, nm.PowerLawSD(0.1, 1.0, 3.0, temperature=2.0))
    with pytest.raises(ValueError, match="temperature"):
        nm.TwoTimeBathCorrelations(system, hotter, pt, RHO0)
    with pytest.raises(TypeError, match="process tensor"):
        nm.TwoTimeBathCorrelations(system, bath, "pt.hdf5", RHO0)
    with pytest.raises(ValueError, match="system_correlations"):
        nm.TwoTimeBathCorrelations(system, bath, pt, RHO0, system_correlations=np.zeros((3, 4)))
