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
from nonmarkov import backends

# --------------------------------------------------------------------------
# references independent of the closed forms
# --------------------------------------------------------------------------


def numerical_correlation(j_function, temperature: float, tau: float) -> complex:
    """C(tau) = int_0^inf J(w) [coth(w/2T) cos(w tau) - i sin(w tau)] dw by QUADPACK's
    Fourier integrals (tau > 0)."""

    def real_part(w):
        if w <= 0:
            return 0.0
        return j_function(w) / (math.tanh(w / (2.0 * temperature)) if temperature else 1.0)

    kwargs = {"weight": "cos", "wvar": tau, "epsabs": 1e-14, "limlst": 200}
    real = scipy.integrate.quad(real_part, 0.0, np.inf, **kwargs)[0]
    kwargs["weight"] = "sin"
    imag = -scipy.integrate.quad(j_function, 0.0, np.inf, **kwargs)[0]
    return complex(real, imag)


def numerical_g_p(j_function, temperature: float, t: float, split: float) -> complex:
    """Phi(t) = G(t) - i P(t) of the independent-boson model,
    G = int J coth(w/2T) (1 - cos wt)/w^2 dw, P = int J (wt - sin wt)/w^2 dw, over
    [0, split] by plain quadrature and beyond by QUADPACK's Fourier integrals (J falls
    only as 1/w for Drude-Lorentz)."""

    def coth(w):
        return 1.0 / math.tanh(w / (2.0 * temperature)) if temperature else 1.0

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


# Drude-Lorentz: high T, low T (0.05 and 0.001 gamma), and T = gamma / 2 pi where gamma is the
# first Matsubara frequency (the resonant and Matsubara terms are summed as one pair)
DRUDE_LORENTZ_CASES = [
    (0.3, 2.0, 1.0),
    (0.3, 1.0, 0.05),
    (0.3, 1.0, 0.001),
    (0.3, 1.0, 1.0 / (2.0 * math.pi)),
]
UNDERDAMPED_CASES = [(0.2, 1.0, 0.3, 0.5), (0.2, 1.0, 0.3, 0.02), (0.1, 2.0, 3.9, 1.0)]
TIMES = (1e-4, 0.01, 0.3, 1.0, 4.0)


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


@pytest.mark.parametrize(
    "sd, cold, j",
    [
        (nm.DrudeLorentzSD(0.3, 1.0), nm.DrudeLorentzSD(0.3, 1.0, 1e-4), drude_lorentz_j(0.3, 1.0)),
        (
            nm.UnderdampedSD(0.2, 1.0, 0.3),
            nm.UnderdampedSD(0.2, 1.0, 0.3, 1e-4),
            underdamped_j(0.2, 1.0, 0.3),
        ),
    ],
    ids=["drude-lorentz", "underdamped"],
)
def test_zero_temperature(sd, cold, j):
    """T = 0: the Matsubara series becomes an integral over nu (a principal value for
    Drude-Lorentz, whose pole is on the imaginary axis); C and Phi = G - i P against
    direct integration of J, and the limit T -> 0 of the series."""
    assert sd.temperature == 0.0
    for tau in TIMES[1:]:
        expected = numerical_correlation(j, 0.0, tau)
        assert abs(sd.correlation(tau) - expected) <= 1e-11 * abs(expected)
    for t in (0.1, 1.0):
        expected = numerical_g_p(j, 0.0, t, 50.0)
        assert sd.eta_function(t) == pytest.approx(expected, rel=1e-10)
    for lag in (1, 5):
        value, limit = (
            sd.correlation_2d_integral(0.1, 0.1 * lag),
            cold.correlation_2d_integral(0.1, 0.1 * lag),
        )
        assert abs(value - limit) <= 1e-7 * abs(limit)  # (T / gamma)^2 = 1e-8


def test_tempo_independent_boson_drude_lorentz_zero_temperature():
    lam, gamma = 0.5, 2.0
    states, exact = _independent_boson_run(
        nm.DrudeLorentzSD(lam, gamma), drude_lorentz_j(lam, gamma), 0.0, split=50.0 * gamma, steps=8
    )
    assert abs(exact[-1, 0, 1]) < 0.9 * abs(exact[0, 0, 1])
    np.testing.assert_allclose(states, exact, rtol=0, atol=1e-7)


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
    # compare with G(t) - i P(t) (the independent-boson model), integrated to w = infinity
    for t in (0.05, 0.1, 1.0):
        expected = numerical_g_p(drude_lorentz_j(lam, gamma), temperature, t, 50.0 * gamma)
        assert sd.eta_function(t) == pytest.approx(expected, rel=1e-10)
    # the tail of the memory (an infinite rectangle) is a finite one plus the rest
    tail = sd.correlation_2d_integral(dt, 0.5, math.inf, shape="rectangle")
    rest = sd.correlation_2d_integral(dt, 3.0, math.inf, shape="rectangle")
    finite = sd.correlation_2d_integral(dt, 0.5, 3.0, shape="rectangle")
    assert tail == pytest.approx(finite + rest, rel=1e-12)
    if temperature >= 0.05:  # and the limit of long ones (at T = 0.001, C ~ 1/tau^2 to ~1e3)
        long_one = sd.correlation_2d_integral(dt, 0.5, 600.0, shape="rectangle")
        assert tail == pytest.approx(long_one, rel=1e-12)


@pytest.mark.parametrize(
    "sd",
    [
        nm.DrudeLorentzSD(0.25, 1.0, 1.0),
        nm.DrudeLorentzSD(0.25, 1.0, 0.05),
        nm.UnderdampedSD(0.2, 2.0, 0.6, temperature=1.0),
        nm.DrudeLorentzSD(0.25, 1.0, 0.0),
    ],
    ids=["drude-lorentz", "drude-lorentz-low-t", "underdamped", "drude-lorentz-t0"],
)
def test_square_integrals_at_once_equal_one_by_one(sd):
    """The couplings eta_j of many lags at once (closed form over the exponential terms
    where every tau on the squares is > 0; the one-by-one integrals otherwise: lag 1,
    T = 0) equal correlation_2d_integral lag by lag."""
    for dt, lags in [(0.05, np.arange(2, 90)), (0.2, np.arange(1, 40))]:
        at_once = sd.square_integrals(dt, lags)
        one_by_one = [sd.correlation_2d_integral(dt, j * dt) for j in lags]
        np.testing.assert_allclose(at_once, one_by_one, rtol=1e-12, atol=0.0)


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


@pytest.mark.parametrize("n_steps", [2, 7, 16])
def test_imaginary_time_integrals_in_closed_form(n_steps):
    """The closed-form eta_lag of the imaginary-time grid (Matsubara series by residue
    class) equal the region integrals one by one (quadrature over w), and tile the
    triangle: n eta_0 + sum_lag (n - lag) eta_lag = beta lambda."""
    for sd in (nm.DrudeLorentzSD(0.25, 1.0, 0.1), nm.UnderdampedSD(0.2, 1.0, 0.3, 0.4)):
        closed = sd.imaginary_time_integrals(n_steps)
        delta = 1.0 / (sd.temperature * n_steps)
        one_by_one = [
            sd.correlation_2d_integral(
                delta,
                lag * delta,
                shape="upper-triangle" if lag == 0 else "square",
                epsrel=1e-12,
                matsubara=True,
            ).real
            for lag in range(n_steps // 2 + 1)
        ]
        assert closed.shape == (n_steps // 2 + 1,)
        np.testing.assert_allclose(closed, one_by_one, rtol=1e-10, atol=0)
        lags = np.arange(1, n_steps)
        folded = closed[np.minimum(lags, n_steps - lags)]
        total = n_steps * closed[0] + np.sum((n_steps - lags) * folded)
        beta = 1.0 / sd.temperature
        assert total == pytest.approx(beta * sd.reorganisation_energy, rel=1e-12)
    with pytest.raises(ValueError, match="n_steps"):
        nm.DrudeLorentzSD(0.25, 1.0, 0.1).imaginary_time_integrals(1)


# --------------------------------------------------------------------------
# underdamped
# --------------------------------------------------------------------------


@pytest.mark.parametrize("lam, w0, damping, temperature", UNDERDAMPED_CASES)
def test_underdamped_correlation_matches_integral_of_j(lam, w0, damping, temperature):
    sd = nm.UnderdampedSD(lam, w0, damping, temperature)
    j = underdamped_j(lam, w0, damping)
    for tau in TIMES[1:]:  # (QUADPACK's Fourier integral fails at tau = 1e-4 here)
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
    e^{-(s_n - s_m)^2 G(t) + i(s_n^2 - s_m^2) P(t)} (the independent-boson model), each
    (steps + 1, 2, 2)."""
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
        (lambda: nm.DrudeLorentzSD(0.1, 1.0, -1.0), "temperature"),
        (lambda: nm.DrudeLorentzSD(0.1, 1.0, 1e-8), "temperature=1e-08 is too low"),
        (lambda: nm.UnderdampedSD(0.1, 1.0, 2.0, 1.0), "damping < 2 \\* frequency"),
        (lambda: nm.UnderdampedSD(0.1, -1.0, 0.5, 1.0), "frequency"),
        (lambda: nm.UnderdampedSD(0.1, 1.0, 0.0, 1.0), "damping"),
    ],
)
def test_bad_parameters(make, message):
    with pytest.raises(ValueError, match=message):
        make()


# --------------------------------------------------------------------------
# tabulated
# --------------------------------------------------------------------------


def ohmic_j(alpha: float, wc: float):
    """J(w) = 2 alpha w exp(-w / wc), written out here."""
    return lambda w: 2.0 * alpha * w * np.exp(-w / wc)


def test_tabulated_from_every_file_format(tmp_path):
    w = np.linspace(0.05, 10.0, 60)
    j = ohmic_j(0.1, 2.0)(w)
    (tmp_path / "j.csv").write_text(
        "# a measured spectral density\nw,J\n"
        + "".join(f"{float(a)!r},{float(b)!r}\n" for a, b in zip(w, j))
    )
    (tmp_path / "j.txt").write_text(
        "".join(f"{float(a)!r}  {float(b)!r}  # point\n" for a, b in zip(w, j))
    )
    np.save(tmp_path / "j.npy", np.stack([w, j], axis=1))
    np.savez(tmp_path / "j.npz", w=w, J=j)
    reference = nm.TabulatedSD(w, j, temperature=0.3)
    probe = np.array([0.0, 0.01, 0.05, 1.234, 9.99, 10.0, 12.0])
    for name in ("j.csv", "j.txt", "j.npy", "j.npz"):
        sd = nm.TabulatedSD.from_file(tmp_path / name, temperature=0.3)
        assert sd.name == name
        np.testing.assert_array_equal(sd.spectral_density(probe), reference.spectral_density(probe))
    # the table itself is reproduced; J(0) = 0 was added below the first point
    np.testing.assert_allclose(reference.spectral_density(w), j, rtol=1e-14)
    assert reference.spectral_density(0.0) == 0.0 and 0.0 < reference.spectral_density(0.01)


def test_tabulated_correlations_converge_to_the_function_tabulated():
    """A table of J = 2 alpha w e^{-w/wc} up to 20 wc gives the PowerLawSD's discretised
    influence to ~4e-6 with 800 points (PCHIP: the error falls as h^3)."""
    alpha, wc, temperature, dt = 0.1, 2.0, 0.5, 0.1
    exact = nm.PowerLawSD(alpha, 1.0, wc, "exponential", temperature)
    w = np.linspace(0.0, 20.0 * wc, 800)
    sd = nm.TabulatedSD(w, exact.spectral_density(w), temperature=temperature)
    for lag in (0, 1, 5):
        shape = "upper-triangle" if lag == 0 else "square"
        value = sd.correlation_2d_integral(dt, lag * dt, shape=shape)
        expected = exact.correlation_2d_integral(dt, lag * dt, shape=shape)
        assert abs(value - expected) <= 1e-5 * abs(expected)


def test_tabulated_tail_is_smooth_and_as_documented():
    """Beyond the last point J decays as J_n exp(-(w - w_n)/w_t), w_t continuing the
    last interval's decay; a table cut where J is still large then keeps C(tau) close
    to that of the full J, where a hard cut makes it ring (sin(w_n tau) / tau)."""
    alpha, wc, temperature = 0.1, 1.0, 0.2
    j = ohmic_j(alpha, wc)
    w = np.linspace(0.0, 4.0 * wc, 200)  # J(w_n) is 7 % of its maximum
    sd = nm.TabulatedSD(w, j(w), temperature=temperature)
    width = (w[-1] - w[-2]) / math.log(j(w[-2]) / j(w[-1]))
    assert sd.tail_width == pytest.approx(width)
    beyond = w[-1] + np.array([0.0, 0.5, 3.0])
    np.testing.assert_allclose(
        sd.spectral_density(beyond), j(w[-1]) * np.exp(-(beyond - w[-1]) / width), rtol=1e-14
    )
    full = nm.PowerLawSD(alpha, 1.0, wc, "exponential", temperature)
    hard = nm.CustomSD(
        lambda x: sd.spectral_density(x), cutoff=w[-1], cutoff_type="hard", temperature=temperature
    )
    taus = np.array([4.0, 8.0, 16.0])
    tail_error = np.abs(sd.correlation(taus) - full.correlation(taus))
    hard_error = np.abs(hard.correlation(taus) - full.correlation(taus))
    assert np.all(tail_error < 0.05 * hard_error)
    # explicit width; a table that ends at J = 0 needs no tail
    assert nm.TabulatedSD(w, j(w), tail_width=0.3).tail_width == 0.3
    ends_at_zero = nm.TabulatedSD([0.0, 1.0, 2.0], [0.0, 1.0, 0.0])
    assert ends_at_zero.spectral_density(2.5) == 0.0


def test_tempo_independent_boson_tabulated():
    alpha, wc, temperature = 0.2, 3.0, 0.4
    w = np.linspace(0.0, 15.0 * wc, 300)
    sd = nm.TabulatedSD(w, ohmic_j(alpha, wc)(w), temperature=temperature)
    # the exact states of the function tabulated: the difference (5e-6) is the interpolation
    states, exact = _independent_boson_run(sd, ohmic_j(alpha, wc), temperature, split=w[-1])
    assert abs(exact[-1, 0, 1]) < 0.9 * abs(exact[0, 0, 1])
    np.testing.assert_allclose(states, exact, rtol=0, atol=2e-5)


@pytest.mark.parametrize(
    "frequencies, values, message",
    [
        ([0.0, 2.0, 1.0], [0.0, 1.0, 1.0], "strictly increasing"),
        ([0.0, 1.0, 1.0], [0.0, 1.0, 1.0], "strictly increasing"),
        ([-1.0, 1.0], [0.0, 1.0], "must be >= 0"),
        ([0.0, 1.0, 2.0], [0.0, -1.0, 1.0], "J\\(w\\) must be >= 0"),
        ([0.0, 1.0, 2.0], [0.0, np.nan, 1.0], "values must be finite"),
        ([0.0, 1.0, np.inf], [0.0, 1.0, 1.0], "frequencies must be finite"),
        ([0.0, 1.0], [0.5, 1.0], "J\\(0\\) must be 0"),
        ([1.0], [1.0], "at least 2 points"),
        ([0.0, 1.0, 2.0], [0.0, 1.0], "same length"),
    ],
)
def test_tabulated_bad_tables(frequencies, values, message):
    with pytest.raises(ValueError, match=message):
        nm.TabulatedSD(frequencies, values)


def test_tabulated_bad_files_and_parameters(tmp_path):
    with pytest.raises(ValueError, match="no such file"):
        nm.TabulatedSD.from_file(tmp_path / "missing.csv")
    (tmp_path / "three.txt").write_text("0 0 1\n1 1 1\n")
    with pytest.raises(ValueError, match="two numbers"):
        nm.TabulatedSD.from_file(tmp_path / "three.txt")
    (tmp_path / "text.txt").write_text("w J\n0 0\n1 x\n")
    with pytest.raises(ValueError, match="line 3 is not numbers"):
        nm.TabulatedSD.from_file(tmp_path / "text.txt")
    np.save(tmp_path / "flat.npy", np.arange(5.0))
    with pytest.raises(ValueError, match="two columns"):
        nm.TabulatedSD.from_file(tmp_path / "flat.npy")
    with pytest.raises(ValueError, match="scale"):
        nm.TabulatedSD([0.0, 1.0], [0.0, 1.0], scale=0.0)
    with pytest.raises(ValueError, match="tail_width"):
        nm.TabulatedSD([0.0, 1.0], [0.0, 1.0], tail_width=-1.0)


# --------------------------------------------------------------------------
# every method accepts them; files describe them
# --------------------------------------------------------------------------


def _spin_boson(correlations):
    system = nm.System(0.5 * nm.operators.sigma("x"))
    bath = nm.Bath(0.5 * nm.operators.sigma("z"), correlations, name="bath")
    return system, bath


@pytest.mark.parametrize(
    "correlations",
    [nm.DrudeLorentzSD(0.2, 2.0, 0.5), nm.UnderdampedSD(0.2, 2.0, 0.8, 0.5)],
    ids=["drude-lorentz", "underdamped"],
)
def test_process_tensor_methods_agree_with_tempo(correlations, tmp_path):
    system, bath = _spin_boson(correlations)
    rho0 = nm.operators.spin_dm("up")
    parameters = nm.TempoParameters(dt=0.1, epsrel=1e-9, dkmax=4)
    steps = 8
    reference = nm.Tempo(system, bath, parameters, rho0, 0.0).compute(
        steps * 0.1, progress_type="silent"
    )
    for method in ("sequential", "divide_and_conquer"):
        pt = nm.pt_tempo_compute(
            bath, 0.0, steps * 0.1, parameters, method=method, progress_type="silent"
        )
        dynamics = nm.compute_dynamics(system, rho0, process_tensor=pt, progress_type="silent")
        np.testing.assert_allclose(dynamics.states, reference.states, atol=1e-7)
    # the file describes the bath and reads back
    filename = str(tmp_path / "pt.hdf5")
    pt.export(filename)
    described = nm.import_process_tensor(filename).metadata["bath"]["correlations"]
    assert described["type"] == type(correlations).__name__
    assert described["reorganisation_energy"] == correlations.reorganisation_energy
    assert described["temperature"] == correlations.temperature
    # uniform (stationary) process tensor: same memory cut, same states
    uniform = nm.pt_uniform_compute(bath, parameters, progress_type="silent")
    dynamics = nm.compute_dynamics(
        system, rho0, num_steps=steps, process_tensor=uniform, progress_type="silent"
    )
    np.testing.assert_allclose(dynamics.states, reference.states, atol=1e-7)


def test_gibbs_tempo_commuting_model_drude_lorentz():
    """[H_S, S] = 0: the mean-force Gibbs state is exp(-beta (E_n - lambda s_n^2)) / Z
    (constant imaginary-time paths; lambda the reorganisation energy)."""
    lam, temperature = 0.3, 0.5
    energies, couplings = np.array([0.0, 0.4]), np.array([1.0, 0.0])
    system = nm.System(np.diag(energies).astype(complex))
    bath = nm.Bath(np.diag(couplings).astype(complex), nm.DrudeLorentzSD(lam, 2.0, temperature))
    gibbs = nm.GibbsTempo(system, bath, nm.GibbsParameters(8, 1e-12))
    gibbs.compute(progress_type="silent")
    weights = np.exp(-(energies - lam * couplings**2) / temperature)
    np.testing.assert_allclose(gibbs.get_state(), np.diag(weights / weights.sum()), atol=1e-9)


def test_guess_parameters_are_sensible_for_drude_lorentz():
    """Re C(0) is infinite for Drude-Lorentz: the guessed time step comes from the decay
    of C beyond its integrable singularity (a fraction of 1/gamma), the memory cut from
    the integrals of |C|; the run meets the tolerance on the exact independent-boson
    model."""
    lam, gamma, temperature, end, tolerance = 0.2, 5.0, 1.0, 6.0, 1e-2
    _, bath = _spin_boson(nm.DrudeLorentzSD(0.1, gamma, temperature))
    with pytest.warns(UserWarning):
        parameters = nm.guess_tempo_parameters(bath, 0.0, 100.0, tolerance=tolerance)
    assert 0.05 / gamma < parameters.dt < 1.0 / gamma
    energies, couplings = np.array([0.5, -0.5]), np.array([0.5, -0.5])
    system = nm.System(np.diag(energies).astype(complex))
    bath = nm.Bath(np.diag(couplings).astype(complex), nm.DrudeLorentzSD(lam, gamma, temperature))
    with pytest.warns(UserWarning):
        parameters = nm.guess_tempo_parameters(bath, 0.0, end, system, tolerance=tolerance)
    steps = int(round(end / parameters.dt))
    assert parameters.dkmax < steps  # a memory cut, not the whole run
    rho0 = pure_state(0.8, 0.6)
    dynamics = nm.Tempo(system, bath, parameters, rho0, 0.0).compute(end, progress_type="silent")
    for t, state in list(zip(dynamics.times, dynamics.states))[1 :: max(1, steps // 8)]:
        phi = numerical_g_p(drude_lorentz_j(lam, gamma), temperature, t, 50.0 * gamma)
        exact = rho0[0, 1] * np.exp(-1j * (energies[0] - energies[1]) * t - phi.real)
        assert abs(state[0, 1] - exact) <= tolerance


def test_bath_dynamics_accepts_drude_lorentz():
    system, bath = _spin_boson(nm.DrudeLorentzSD(0.2, 2.0, 0.5))
    parameters = nm.TempoParameters(dt=0.1, epsrel=1e-8, dkmax=5)
    pt = nm.pt_tempo_compute(bath, 0.0, 0.5, parameters, progress_type="silent")
    correlations = nm.TwoTimeBathCorrelations(
        system, bath, pt, initial_state=nm.operators.spin_dm("up")
    )
    times, occupation = correlations.occupation(1.0, dw=0.1, progress_type="silent")
    assert len(times) == 6 and np.all(np.isfinite(occupation))
    # a process tensor made for another reorganisation energy is refused
    _, other = _spin_boson(nm.DrudeLorentzSD(0.3, 2.0, 0.5))
    with pytest.raises(ValueError, match="reorganisation_energy"):
        nm.TwoTimeBathCorrelations(system, other, pt, initial_state=nm.operators.spin_dm("up"))


# --------------------------------------------------------------------------
# specs name them
# --------------------------------------------------------------------------

SPEC = """
name = "{name}"
method = "tempo"

[system]
hamiltonian = {{ sigma_x = 0.5 }}
initial_state = "up"

[bath]
coupling = {{ sigma_z = 0.5 }}
{bath}

[parameters]
dt = 0.1
dkmax = 4
epsrel = 1e-8

[times]
end = 0.5

[output]
plot = false
"""


def test_specs_name_each_spectral_density(tmp_path):
    from nonmarkov.io.spec import load_spec
    from nonmarkov.methods import spec_run

    w = np.linspace(0.0, 20.0, 100)
    (tmp_path / "data").mkdir()
    np.savetxt(tmp_path / "data" / "j.csv", np.stack([w, ohmic_j(0.1, 2.0)(w)], 1), delimiter=",")
    cases = {
        "dl": (
            'spectral_density = "drude_lorentz"\nreorganisation_energy = 0.2\n'
            "cutoff = 2.0\ntemperature = 0.5",
            nm.DrudeLorentzSD(0.2, 2.0, 0.5),
        ),
        "ud": (
            'spectral_density = "underdamped"\nreorganisation_energy = 0.2\n'
            "frequency = 2.0\ndamping = 0.8\ntemperature = 0.5",
            nm.UnderdampedSD(0.2, 2.0, 0.8, 0.5),
        ),
        "tab": (
            'spectral_density = "tabulated"\nfile = "data/j.csv"\ntemperature = 0.5',
            nm.TabulatedSD.from_file(tmp_path / "data" / "j.csv", temperature=0.5),
        ),
    }
    for name, (bath_text, correlations) in cases.items():
        path = tmp_path / f"{name}.toml"
        path.write_text(SPEC.format(name=name, bath=bath_text))
        spec = load_spec(str(path))
        results = spec_run.run_spec(spec, str(tmp_path / "out"), progress_type="silent")
        system, bath = _spin_boson(correlations)
        expected = nm.Tempo(
            system,
            bath,
            nm.TempoParameters(dt=0.1, dkmax=4, epsrel=1e-8),
            nm.operators.spin_dm("up"),
            0.0,
        ).compute(0.5, progress_type="silent")
        np.testing.assert_allclose(results[0].dynamics.states, expected.states, atol=1e-12)


@pytest.mark.parametrize(
    "bath_text, message",
    [
        (
            'spectral_density = "lorentzian"',
            "unknown bath.spectral_density 'lorentzian'.*'drude_lorentz'",
        ),
        (
            'spectral_density = "drude_lorentz"\nreorganisation_energy = 0.2\ntemperature = 1',
            "bath.cutoff is missing",
        ),
        (
            'spectral_density = "drude_lorentz"\nreorganisation_energy = 0.2\ncutoff = 2.0\n'
            "temperature = 1e-9",
            "bath.temperature: temperature=1e-09 is too low",
        ),
        (
            'spectral_density = "drude_lorentz"\nreorganisation_energy = 0.2\ncutoff = 2.0\n'
            "temperature = 0.5\nalpha = 0.1",
            "bath.alpha is not a key of the 'drude_lorentz' spectral density",
        ),
        (
            'spectral_density = "underdamped"\nreorganisation_energy = 0.2\nfrequency = 1.0\n'
            "damping = 3.0\ntemperature = 0.5",
            "bath.damping: UnderdampedSD needs damping < 2",
        ),
        ('spectral_density = "tabulated"', "bath.file is missing"),
        ('spectral_density = "tabulated"\nfile = "nowhere.csv"', "bath.file: .*no such file"),
        (
            'spectral_density = "tabulated"\nfile = "bad.csv"\ntemperature = 0.1',
            "bath.file: TabulatedSD: frequencies must be strictly increasing",
        ),
    ],
)
def test_spec_errors_name_the_key(tmp_path, bath_text, message):
    from nonmarkov.io.spec import SpecError, load_spec

    (tmp_path / "bad.csv").write_text("0,0\n2,1\n1,1\n")
    path = tmp_path / "bad.toml"
    path.write_text(SPEC.format(name="bad", bath=bath_text))
    with pytest.raises(SpecError, match=message):
        load_spec(str(path))


def test_mean_field_and_pt_tebd_accept_drude_lorentz():
    """A field-free mean-field system is plain TEMPO; a one-site PT-TEBD chain with the
    bath's process tensor is compute_dynamics with it."""
    system, bath = _spin_boson(nm.DrudeLorentzSD(0.2, 2.0, 0.5))
    rho0 = nm.operators.spin_dm("up")
    parameters = nm.TempoParameters(dt=0.1, epsrel=1e-10, dkmax=4)
    reference = nm.Tempo(system, bath, parameters, rho0, 0.0).compute(0.6, progress_type="silent")
    hamiltonian = 0.5 * nm.operators.sigma("x")
    mean_field = nm.MeanFieldSystem(
        [nm.TimeDependentSystemWithField(lambda t, field: hamiltonian)],
        lambda t, states, field: -0.2 * field,
    )
    dynamics = nm.MeanFieldTempo(mean_field, [bath], parameters, [rho0], 1.0 + 0.0j).compute(
        0.6, progress_type="silent"
    )
    np.testing.assert_allclose(dynamics.system_dynamics[0].states, reference.states, atol=1e-10)
    pt = nm.pt_tempo_compute(bath, 0.0, 0.6, parameters, progress_type="silent")
    chain = nm.SystemChain([2])
    chain.add_site_hamiltonian(0, hamiltonian)
    tebd = nm.PtTebd(
        initial_augmented_mps=nm.AugmentedMPS([rho0]),
        system_chain=chain,
        process_tensors=[pt],
        parameters=nm.PtTebdParameters(dt=0.1, epsrel=1e-12, order=2),
        dynamics_sites=[0],
    )
    results = tebd.compute(6, progress_type="silent")
    expected = nm.compute_dynamics(system, rho0, process_tensor=pt, progress_type="silent")
    np.testing.assert_allclose(results["dynamics"][0].states, expected.states, atol=1e-10)


def test_session_backend_agrees_with_numpy(tol):
    """The closed forms are host work: TEMPO with a Drude-Lorentz bath on the session's
    backend agrees with NumPy to rounding."""
    system, bath = _spin_boson(nm.DrudeLorentzSD(0.2, 2.0, 0.5))
    rho0 = nm.operators.spin_dm("up")
    parameters = nm.TempoParameters(dt=0.1, epsrel=1e-9, dkmax=4)

    def run():
        return nm.Tempo(system, bath, parameters, rho0, 0.0).compute(0.8, progress_type="silent")

    session = run()
    with backends.use_backend("numpy"):
        reference = run()
    tol.assert_close(session.states, reference.states, kind="agree")
