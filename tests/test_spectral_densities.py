"""Tests of the spectral densities of the field: ``DrudeLorentzSD``, ``UnderdampedSD``,
``TabulatedSD``.

Checks: the closed-form correlation C(tau) against direct numerical integration of J(w)
with the library's definition C(tau) = int_0^inf J(w) [coth(w/2T) cos(w tau) - i sin(w tau)]
dw (no 1/pi), and against QuTiP's environments (J_QuTiP = pi J); the reorganisation energy
int J(w)/w dw; the discretised influence (double integrals of C) against quadrature of the
closed form and against the generic frequency-domain path of a ``CustomSD`` with the same J;
the imaginary-time sum rule; the exact independent-boson dynamics reproduced by TEMPO for
each form; bad input.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import scipy.integrate

import nonmarkov as nm
from models import pure_state

# --------------------------------------------------------------------------
# references independent of the closed forms
# --------------------------------------------------------------------------


def numerical_correlation(j_function, temperature: float, tau: float) -> complex:
    """C(tau) = int_0^inf J(w) [coth(w/2T) cos(w tau) - i sin(w tau)] dw by QUADPACK's
    Fourier integrals (tau > 0)."""

    def real_part(w):
        return j_function(w) / math.tanh(w / (2.0 * temperature)) if w > 0 else 0.0

    kwargs = {"weight": "cos", "wvar": tau, "epsabs": 1e-14, "limlst": 200}
    real = scipy.integrate.quad(real_part, 0.0, np.inf, **kwargs)[0]
    kwargs["weight"] = "sin"
    imag = -scipy.integrate.quad(j_function, 0.0, np.inf, **kwargs)[0]
    return complex(real, imag)


def numerical_g_p(j_function, temperature: float, t: float, split: float) -> complex:
    """Phi(t) = G(t) - i P(t) of DESIGN.md, G = int J coth(w/2T) (1 - cos wt)/w^2 dw,
    P = int J (wt - sin wt)/w^2 dw, over [0, split] by plain quadrature and beyond by
    QUADPACK's Fourier integrals (J falls only as 1/w for Drude-Lorentz)."""

    def coth(w):
        return 1.0 / math.tanh(w / (2.0 * temperature))

    def g_near(w):
        return j_function(w) * coth(w) * 2.0 * math.sin(0.5 * w * t) ** 2 / w**2

    def p_near(w):
        x = w * t
        return j_function(w) * (x**3 / 6.0 - x**5 / 120.0 if x < 1e-3 else x - math.sin(x)) / w**2

    def far(w):
        return j_function(w) * coth(w) / w**2

    quad = scipy.integrate.quad
    near = {"limit": 2000, "epsabs": 0.0, "epsrel": 1e-13}
    fourier = {"wvar": t, "epsabs": 1e-16, "limlst": 200}
    g = (
        quad(g_near, 0.0, split, **near)[0]
        + quad(far, split, np.inf, epsabs=0.0, epsrel=1e-13)[0]
        - quad(far, split, np.inf, weight="cos", **fourier)[0]
    )
    p = (
        quad(p_near, 0.0, split, **near)[0]
        + quad(lambda w: j_function(w) * t / w, split, np.inf, epsabs=0.0, epsrel=1e-13)[0]
        - quad(lambda w: j_function(w) / w**2, split, np.inf, weight="sin", **fourier)[0]
    )
    return complex(g, -p)


def drude_lorentz_j(lam: float, gamma: float):
    """J(w) = (2 lam / pi) gamma w / (gamma^2 + w^2), written out here."""
    return lambda w: 2.0 * lam / math.pi * gamma * w / (gamma**2 + w**2)


def underdamped_j(lam: float, w0: float, damping: float):
    """J(w) = (2 lam / pi) Gamma w0^2 w / ((w0^2 - w^2)^2 + Gamma^2 w^2), written out here."""
    return lambda w: (
        2.0 * lam / math.pi * damping * w0**2 * w / ((w0**2 - w**2) ** 2 + damping**2 * w**2)
    )


# Drude-Lorentz: high T, low T (0.05 gamma), and T = gamma / 2 pi where gamma is the
# first Matsubara frequency (the resonant and Matsubara terms are summed as one pair)
DRUDE_LORENTZ_CASES = [(0.3, 2.0, 1.0), (0.3, 1.0, 0.05), (0.3, 1.0, 1.0 / (2.0 * math.pi))]
UNDERDAMPED_CASES = [(0.2, 1.0, 0.3, 0.5), (0.2, 1.0, 0.3, 0.02), (0.1, 2.0, 3.9, 1.0)]
TIMES = (0.01, 0.3, 1.0, 4.0)


# --------------------------------------------------------------------------
# Drude-Lorentz
# --------------------------------------------------------------------------


@pytest.mark.parametrize("lam, gamma, temperature", DRUDE_LORENTZ_CASES)
def test_drude_lorentz_correlation_matches_integral_of_j(lam, gamma, temperature):
    sd = nm.DrudeLorentzSD(lam, gamma, temperature)
    j = drude_lorentz_j(lam, gamma)
    np.testing.assert_allclose(sd.spectral_density(np.array([0.5, 3.0])), [j(0.5), j(3.0)])
    for tau in TIMES:
        expected = numerical_correlation(j, temperature, tau)
        assert abs(sd.correlation(tau) - expected) <= 1e-11 * abs(expected)
        # C(-tau) = C(tau)^*
        assert sd.correlation(-tau) == pytest.approx(np.conj(sd.correlation(tau)), rel=1e-15)
    # the reorganisation energy is int J(w)/w dw, and Im C(0+) = -lambda gamma
    reorganisation = scipy.integrate.quad(lambda w: j(w) / w, 0.0, np.inf, epsabs=0)[0]
    assert reorganisation == pytest.approx(lam, rel=1e-10)
    assert sd.correlation(1e-12).imag == pytest.approx(-lam * gamma, rel=1e-10)
    assert math.isinf(sd.correlation(0.0).real)  # J ~ 1/w: Re C(0) diverges


def test_drude_lorentz_equals_qutip_bath():
    """QuTiP's DrudeLorentzEnvironment(T, lam, gamma) has J_QuTiP = pi J and 1/pi in C:
    the same lam, gamma, T give the same C(t)."""
    qutip = pytest.importorskip("qutip")
    lam, gamma, temperature = 0.3, 1.0, 0.5
    sd = nm.DrudeLorentzSD(lam, gamma, temperature)
    env = qutip.DrudeLorentzEnvironment(T=temperature, lam=lam, gamma=gamma)
    w = np.array([0.2, 1.0, 5.0])
    np.testing.assert_allclose(env.spectral_density(w) / np.pi, sd.spectral_density(w), rtol=1e-14)
    t = np.array([0.05, 0.5, 2.0, 6.0])
    # QuTiP sums its Pade expansion (converged to ~5e-14 at 60 terms)
    np.testing.assert_allclose(env.correlation_function(t, Nk=60), sd.correlation(t), rtol=1e-12)


def _region_by_quadrature(sd, delta, time_1, shape):
    """int over the region of C(t' - t'') by quadrature of the closed-form C(tau)."""
    weight_segments = {
        "upper-triangle": [(time_1, time_1 + delta, delta, 0.0)],
        "square": [
            (time_1 - delta, time_1, 0.0, delta),
            (time_1, time_1 + delta, delta, 0.0),
        ],
    }[shape]
    total = 0.0j
    for a, b, wa, wb in weight_segments:
        cuts = [a] + ([0.0] if a < 0.0 < b else []) + [b]
        for x, y in zip(cuts[:-1], cuts[1:]):
            for part in (np.real, np.imag):

                def integrand(t, part=part, a=a, b=b, wa=wa, wb=wb):
                    return part((wa + (wb - wa) * (t - a) / (b - a)) * sd.correlation(t))

                value = scipy.integrate.quad(integrand, x, y, epsabs=0, epsrel=1e-12, limit=200)
                total += value[0] if part is np.real else 1j * value[0]
    return total


@pytest.mark.parametrize("lam, gamma, temperature", DRUDE_LORENTZ_CASES)
def test_drude_lorentz_discretised_influence(lam, gamma, temperature):
    """The closed-form double integrals (one term per exponential, Matsubara tail by
    Euler-Maclaurin) against quadrature of C over the same regions, and Phi = G - i P."""
    sd = nm.DrudeLorentzSD(lam, gamma, temperature)
    dt = 0.1
    for time_1, shape in [(0.1, "square"), (0.3, "square"), (2.0, "square")]:
        expected = _region_by_quadrature(sd, dt, time_1, shape)
        value = sd.correlation_2d_integral(dt, time_1, shape=shape)
        assert abs(value - expected) <= 1e-12 * abs(expected)
    # eta_0 and the square at lag 0 contain the log singularity of Re C at tau = 0:
    # compare with G(t) - i P(t) of DESIGN.md, integrated over w to infinity
    for t in (0.05, 0.1, 1.0):
        expected = numerical_g_p(drude_lorentz_j(lam, gamma), temperature, t, 50.0 * gamma)
        assert sd.eta_function(t) == pytest.approx(expected, rel=1e-10)
    # the tail of the memory (an infinite rectangle) is the limit of long ones
    tail = sd.correlation_2d_integral(dt, 0.5, math.inf, shape="rectangle")
    long_one = sd.correlation_2d_integral(dt, 0.5, 600.0, shape="rectangle")
    assert tail == pytest.approx(long_one, rel=1e-12)


def test_drude_lorentz_agrees_with_custom_sd_with_large_cutoff():
    """The generic frequency-domain path of CustomSD with the same J and a hard cutoff
    far above gamma gives the same discretised influence (to the cutoff's share)."""
    lam, gamma, temperature, dt = 0.3, 1.0, 0.5, 0.1
    sd = nm.DrudeLorentzSD(lam, gamma, temperature)
    custom = nm.CustomSD(
        drude_lorentz_j(lam, gamma), cutoff=2000.0, cutoff_type="hard", temperature=temperature
    )
    for lag in (1, 2, 5, 20):
        closed = sd.correlation_2d_integral(dt, lag * dt)
        generic = custom.correlation_2d_integral(dt, lag * dt)
        assert abs(closed - generic) <= 2e-5 * abs(closed)
    # eta_0 carries the w > cutoff part of J: ~ (2 lam gamma / pi) dt / cutoff
    closed, generic = sd.eta_function(dt), custom.eta_function(dt)
    assert abs(closed - generic) <= 2.0 * lam * gamma / math.pi * dt / 2000.0 * 2


def test_imaginary_time_sum_rule():
    """int_0^beta dtau' int_0^tau' C_M = beta lambda (a constant path's Gibbs weight)."""
    for sd in (nm.DrudeLorentzSD(0.3, 1.0, 0.5), nm.UnderdampedSD(0.2, 1.0, 0.3, 0.4)):
        beta = 1.0 / sd.temperature
        value = sd.correlation_2d_integral(beta, 0.0, shape="upper-triangle", matsubara=True)
        assert value.real == pytest.approx(beta * sd.reorganisation_energy, rel=1e-9)


# --------------------------------------------------------------------------
# underdamped
# --------------------------------------------------------------------------


@pytest.mark.parametrize("lam, w0, damping, temperature", UNDERDAMPED_CASES)
def test_underdamped_correlation_matches_integral_of_j(lam, w0, damping, temperature):
    sd = nm.UnderdampedSD(lam, w0, damping, temperature)
    j = underdamped_j(lam, w0, damping)
    for tau in TIMES:
        expected = numerical_correlation(j, temperature, tau)
        assert abs(sd.correlation(tau) - expected) <= 1e-11 * abs(expected)
    reorganisation = scipy.integrate.quad(lambda w: j(w) / w, 0.0, np.inf, epsabs=0)[0]
    assert reorganisation == pytest.approx(lam, rel=1e-10)
    dt = 0.1
    for time_1 in (0.1, 1.0):
        expected = _region_by_quadrature(sd, dt, time_1, "square")
        assert abs(sd.correlation_2d_integral(dt, time_1) - expected) <= 1e-12 * abs(expected)
    for t in (0.1, 2.0):
        expected = numerical_g_p(j, temperature, t, 20.0 * (w0 + damping))
        assert sd.eta_function(t) == pytest.approx(expected, rel=1e-10)


def test_underdamped_equals_qutip_bath():
    """QuTiP's UnderDampedEnvironment(T, lam, gamma, w0): J_QuTiP = lam^2 Gamma w /
    ((w0^2 - w^2)^2 + Gamma^2 w^2) = pi J, i.e. reorganisation energy lam^2 / (2 w0^2)."""
    qutip = pytest.importorskip("qutip")
    coupling, w0, damping, temperature = 0.5, 1.0, 0.3, 0.5
    sd = nm.UnderdampedSD.from_coupling(coupling, w0, damping, temperature)
    assert sd.reorganisation_energy == pytest.approx(coupling**2 / (2 * w0**2))
    env = qutip.UnderDampedEnvironment(T=temperature, lam=coupling, gamma=damping, w0=w0)
    w = np.array([0.3, 1.0, 2.5])
    np.testing.assert_allclose(env.spectral_density(w) / np.pi, sd.spectral_density(w), rtol=1e-14)
    t = np.array([0.05, 0.5, 2.0, 6.0])
    matsubara = env.approximate("matsubara", Nk=50)  # 2e-10 from the rest (terms ~ 1/k^3)
    np.testing.assert_allclose(matsubara.correlation_function(t), sd.correlation(t), rtol=1e-9)


# --------------------------------------------------------------------------
# the exact independent-boson model, by TEMPO
# --------------------------------------------------------------------------


def _independent_boson_run(correlations, j_function, temperature, split, steps=12, dt=0.1):
    """TEMPO (full memory) and the exact states rho_nm(0) e^{-i(E_n - E_m)t}
    e^{-(s_n - s_m)^2 G(t) + i(s_n^2 - s_m^2) P(t)} (DESIGN.md), each (steps + 1, 2, 2)."""
    energies, couplings = np.array([0.4, -0.4]), np.array([0.5, -0.5])
    system = nm.System(np.diag(energies).astype(complex))
    bath = nm.Bath(np.diag(couplings).astype(complex), correlations)
    rho0 = pure_state(0.8, 0.6 * np.exp(0.4j))
    parameters = nm.TempoParameters(dt=dt, epsrel=1e-10)
    dynamics = nm.Tempo(system, bath, parameters, rho0, 0.0).compute(
        steps * dt, progress_type="silent"
    )
    de = np.subtract.outer(energies, energies)
    ds2 = np.subtract.outer(couplings, couplings) ** 2
    dsq = np.subtract.outer(couplings**2, couplings**2)
    exact = [rho0]
    for t in dt * np.arange(1, steps + 1):
        phi = numerical_g_p(j_function, temperature, t, split)
        exact.append(rho0 * np.exp(-1j * de * t - ds2 * phi.real - 1j * dsq * phi.imag))
    return dynamics.states, np.array(exact)


def test_tempo_independent_boson_drude_lorentz():
    lam, gamma, temperature = 0.5, 2.0, 0.1
    states, exact = _independent_boson_run(
        nm.DrudeLorentzSD(lam, gamma, temperature),
        drude_lorentz_j(lam, gamma),
        temperature,
        split=50.0 * gamma,
    )
    assert abs(exact[-1, 0, 1]) < 0.9 * abs(exact[0, 0, 1])  # the bath acts visibly
    np.testing.assert_allclose(states, exact, rtol=0, atol=1e-7)


def test_tempo_independent_boson_underdamped():
    lam, w0, damping, temperature = 0.5, 3.0, 1.0, 0.3
    states, exact = _independent_boson_run(
        nm.UnderdampedSD(lam, w0, damping, temperature),
        underdamped_j(lam, w0, damping),
        temperature,
        split=20.0 * (w0 + damping),
    )
    assert abs(exact[-1, 0, 1]) < 0.9 * abs(exact[0, 0, 1])
    np.testing.assert_allclose(states, exact, rtol=0, atol=1e-7)


# --------------------------------------------------------------------------
# bad input
# --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "make, message",
    [
        (lambda: nm.DrudeLorentzSD(-0.1, 1.0, 1.0), "reorganisation_energy"),
        (lambda: nm.DrudeLorentzSD(0.1, 0.0, 1.0), "cutoff"),
        (lambda: nm.DrudeLorentzSD(0.1, 1.0, 0.0), "temperature > 0"),
        (lambda: nm.DrudeLorentzSD(0.1, 1.0, -1.0), "temperature"),
        (lambda: nm.UnderdampedSD(0.1, 1.0, 2.0, 1.0), "damping < 2 \\* frequency"),
        (lambda: nm.UnderdampedSD(0.1, -1.0, 0.5, 1.0), "frequency"),
        (lambda: nm.UnderdampedSD(0.1, 1.0, 0.0, 1.0), "damping"),
        (lambda: nm.UnderdampedSD(0.1, 1.0, 0.5, 0.0), "temperature > 0"),
    ],
)
def test_bad_parameters(make, message):
    with pytest.raises(ValueError, match=message):
        make()
