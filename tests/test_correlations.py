"""Bath correlation functions against closed forms and brute-force integrals."""

from __future__ import annotations

import numpy
import pytest
import scipy.integrate

import nonmarkov
from nonmarkov.model.correlations import CUTOFF_TYPES, SHAPES

ALPHA, WC = 0.1, 3.0


def ohmic_zero_temperature(tau):
    """C(tau) of J = 2 alpha w exp(-w/wc) at T = 0: 2 alpha wc^2 / (1 + i wc tau)^2."""
    return 2 * ALPHA * WC**2 / (1 + 1j * WC * numpy.asarray(tau)) ** 2


_N_TERMS = numpy.arange(1, 20001)


def _sum_inverse_squares(shift: complex, temperature: float) -> complex:
    """sum_{n >= 1} 1 / (n / T + shift)^2, with the tail sum_{n > N} added in closed
    form (T^2 / (N + 1/2 + shift T), error O(N^-3))."""
    head = numpy.sum(1.0 / (_N_TERMS / temperature + shift) ** 2)
    tail = temperature**2 / (_N_TERMS[-1] + 0.5 + shift * temperature)
    return head + tail


def ohmic_thermal(tau: float, temperature: float) -> complex:
    """C(tau) of the Ohmic exponential bath at T > 0.

    With coth(w/2T) = 1 + 2 sum_n exp(-n w / T) and int w e^{-a w} dw = 1/a^2:
    C = 2 alpha [1/(1/wc + i tau)^2 + sum_n (1/(1/wc + n/T - i tau)^2 + 1/(1/wc + n/T + i tau)^2)].
    """
    value = 1.0 / (1.0 / WC + 1j * tau) ** 2
    for sign in (-1, 1):
        value += _sum_inverse_squares(1.0 / WC + sign * 1j * tau, temperature)
    return 2 * ALPHA * value


def ohmic_matsubara(tau: float, temperature: float) -> float:
    """C_M(tau) = C(-i tau), the same sum continued to imaginary time (0 <= tau <= 1/T)."""
    value = 1.0 / (1.0 / WC + tau) ** 2
    for sign in (-1, 1):
        value += _sum_inverse_squares(1.0 / WC + sign * tau, temperature)
    return float((2 * ALPHA * value).real)


def region(delta, time_1, time_2, shape):
    """(t' range, t''(t') lower, t''(t') upper) of a shape, as documented."""
    if shape == "square":
        return time_1, time_1 + delta, lambda t: 0.0, lambda t: delta
    if shape == "upper-triangle":
        return time_1, time_1 + delta, lambda t: 0.0, lambda t: t - time_1
    if shape == "lower-triangle":
        return time_1, time_1 + delta, lambda t: t - time_1, lambda t: delta
    return time_1, time_2, lambda t: 0.0, lambda t: delta


def brute_force_2d(function, delta, time_1, time_2, shape):
    """int_region function(t' - t'') dt'' dt' with scipy.integrate.dblquad.

    The region is cut along t'' = t' (tau = 0), where ``function`` may have a kink.
    """
    a, b, lower, upper = region(delta, time_1, time_2, shape)

    def below_diagonal(t):  # t'' <= t', tau >= 0
        return min(upper(t), max(lower(t), t))

    pieces = [(lower, below_diagonal), (below_diagonal, upper)]
    total = 0j
    for low, high in pieces:
        for part, unit in ((numpy.real, 1), (numpy.imag, 1j)):
            value, _ = scipy.integrate.dblquad(
                lambda t2, t1: part(function(t1 - t2)), a, b, low, high, epsabs=1e-14, epsrel=1e-12
            )
            total += unit * value
    return total


REGIONS = [
    ("square", 0.0, None),
    ("square", 0.5, None),
    ("square", 30.0, None),
    ("upper-triangle", 0.0, None),
    ("upper-triangle", 0.7, None),
    ("lower-triangle", 0.0, None),
    ("lower-triangle", 0.7, None),
    ("rectangle", 0.0, 0.5),
    ("rectangle", 0.2, 0.9),
    ("rectangle", 12.0, 14.0),
]


@pytest.fixture(scope="module")
def ohmic_bath():
    return nonmarkov.PowerLawSD(ALPHA, 1.0, WC, "exponential", 0.0)


def test_every_shape_is_covered():
    assert {shape for shape, _, _ in REGIONS} == set(SHAPES)


def test_zero_temperature_correlation_has_the_closed_form(ohmic_bath):
    taus = numpy.array([0.0, 0.05, 0.3, -0.3, 1.0, 2.0, 25.0])
    values = ohmic_bath.correlation(taus)
    assert values.shape == taus.shape
    numpy.testing.assert_allclose(values, ohmic_zero_temperature(taus), rtol=1e-9, atol=1e-12)
    assert isinstance(ohmic_bath.correlation(0.3), complex)
    assert ohmic_bath.correlation(0.0) == pytest.approx(2 * ALPHA * WC**2)


@pytest.mark.parametrize("shape, time_1, time_2", REGIONS)
def test_correlation_2d_integral_matches_brute_force(ohmic_bath, shape, time_1, time_2):
    delta = 0.1
    expected = brute_force_2d(ohmic_zero_temperature, delta, time_1, time_2, shape)
    value = ohmic_bath.correlation_2d_integral(delta, time_1, time_2, shape=shape)
    assert value == pytest.approx(expected, rel=1e-9, abs=1e-15)


@pytest.mark.parametrize("shape, time_1, time_2", REGIONS)
def test_custom_correlations_agree_with_the_spectral_density(ohmic_bath, shape, time_1, time_2):
    custom = nonmarkov.CustomCorrelations(lambda tau: complex(ohmic_zero_temperature(tau)))
    delta = 0.1
    value = custom.correlation_2d_integral(delta, time_1, time_2, shape=shape)
    assert value == pytest.approx(
        ohmic_bath.correlation_2d_integral(delta, time_1, time_2, shape=shape), rel=1e-9, abs=1e-15
    )
    # negative times from the conjugate symmetry
    assert custom.correlation(-0.4) == pytest.approx(ohmic_zero_temperature(0.4).conjugate())


def test_triangles_add_up_to_the_square(ohmic_bath):
    delta, time_1 = 0.2, 0.6
    upper = ohmic_bath.correlation_2d_integral(delta, time_1, shape="upper-triangle")
    lower = ohmic_bath.correlation_2d_integral(delta, time_1, shape="lower-triangle")
    square = ohmic_bath.correlation_2d_integral(delta, time_1, shape="square")
    assert upper + lower == pytest.approx(square, rel=1e-10)


@pytest.mark.parametrize("temperature", [0.2, 0.8, 3.0])
def test_thermal_correlation_has_the_closed_form(temperature):
    bath = nonmarkov.PowerLawSD(ALPHA, 1.0, WC, "exponential", temperature)
    for tau in (0.0, 0.2, 1.0, 3.0, -0.7):
        assert bath.correlation(tau) == pytest.approx(
            ohmic_thermal(tau, temperature), rel=1e-9, abs=1e-13
        )


def test_thermal_correlation_symmetries():
    cold = nonmarkov.PowerLawSD(ALPHA, 1.0, WC, "exponential", 0.0)
    hot = nonmarkov.PowerLawSD(ALPHA, 1.0, WC, "exponential", 1.5)
    taus = numpy.array([0.1, 0.4, 1.3, 4.0])
    values = hot.correlation(taus)
    # C(-tau) = C(tau)^*
    numpy.testing.assert_allclose(hot.correlation(-taus), values.conj(), rtol=1e-12)
    # the dissipative (imaginary) part does not depend on temperature
    numpy.testing.assert_allclose(values.imag, cold.correlation(taus).imag, rtol=1e-9)
    # thermal noise: Re C(0) = int J coth grows with T, and C(0) is real
    assert hot.correlation(0.0).imag == 0.0
    assert hot.correlation(0.0).real > cold.correlation(0.0).real > 0


def test_matsubara_correlation_is_the_imaginary_time_continuation():
    # KMS: C(-i tau) continued to imaginary time is symmetric about beta / 2
    temperature = 0.8
    beta = 1.0 / temperature
    bath = nonmarkov.PowerLawSD(ALPHA, 1.0, WC, "exponential", temperature)
    taus = numpy.array([0.0, 0.1, 0.3 * beta, 0.5 * beta, beta])
    values = bath.matsubara_correlation(taus)
    expected = [ohmic_matsubara(tau, temperature) for tau in taus]
    numpy.testing.assert_allclose(values, expected, rtol=1e-9)
    numpy.testing.assert_allclose(bath.matsubara_correlation(beta - taus), values, rtol=1e-10)
    # C_M(0) = Re C(0)
    assert values[0] == pytest.approx(bath.correlation(0.0).real, rel=1e-10)


def test_matsubara_2d_integral_matches_brute_force():
    temperature = 0.8
    bath = nonmarkov.PowerLawSD(ALPHA, 1.0, WC, "exponential", temperature)
    delta = 0.1
    regions = [
        ("square", 0.3),
        ("upper-triangle", 0.0),
        ("upper-triangle", 0.5),
        # these reach tau < 0, where C_M(-tau) = C_M(tau)
        ("square", 0.0),
        ("square", 0.05),
        ("lower-triangle", 0.0),
    ]
    for shape, time_1 in regions:
        expected = brute_force_2d(
            lambda tau: ohmic_matsubara(abs(tau), temperature), delta, time_1, None, shape
        )
        value = bath.correlation_2d_integral(delta, time_1, shape=shape, matsubara=True)
        assert value == pytest.approx(expected, rel=1e-8)


def test_correlation_with_matsubara_is_the_imaginary_time_correlation():
    bath = nonmarkov.PowerLawSD(ALPHA, 1.0, WC, "exponential", 0.8)
    taus = numpy.array([0.0, 0.2, 0.9])
    numpy.testing.assert_array_equal(
        bath.correlation(taus, matsubara=True), bath.matsubara_correlation(taus)
    )
    custom = nonmarkov.CustomCorrelations(ohmic_zero_temperature)
    with pytest.raises(ValueError, match="imaginary-time"):
        custom.correlation(0.1, matsubara=True)


def test_eta_function_is_the_double_integral_of_the_correlation(ohmic_bath):
    """Phi(t) = G(t) - i P(t), for J = 2 alpha w exp(-w/wc) at T = 0:
    G = alpha ln(1 + wc^2 t^2), P = 2 alpha (wc t - arctan(wc t))."""
    times = numpy.array([0.0, 0.3, 2.5])
    g = ALPHA * numpy.log(1 + (WC * times) ** 2)
    p = 2 * ALPHA * (WC * times - numpy.arctan(WC * times))
    numpy.testing.assert_allclose(ohmic_bath.eta_function(times), g - 1j * p, rtol=1e-9)
    assert ohmic_bath.eta_function(0.3) == pytest.approx(g[1] - 1j * p[1], rel=1e-9)
    # custom correlations integrate C(tau) directly, to the same values
    custom = nonmarkov.CustomCorrelations(ohmic_zero_temperature)
    assert custom.eta_function(0.3) == pytest.approx(g[1] - 1j * p[1], rel=1e-7)
    # imaginary time: the double integral of C_M, real
    hot = nonmarkov.PowerLawSD(ALPHA, 1.0, WC, "exponential", 0.8)
    expected = scipy.integrate.dblquad(
        lambda t2, t1: hot.matsubara_correlation(t1 - t2), 0.0, 0.4, 0.0, lambda t1: t1
    )[0]
    assert hot.eta_function(0.4, matsubara=True) == pytest.approx(expected, rel=1e-7)
    with pytest.raises(ValueError, match="tau >= 0"):
        ohmic_bath.eta_function(-1.0)


def test_a_region_of_zero_width_integrates_to_zero(ohmic_bath):
    for shape in SHAPES:
        time_2 = 0.5 if shape == "rectangle" else None
        assert ohmic_bath.correlation_2d_integral(0.0, 0.2, time_2, shape=shape) == 0.0


def test_matsubara_needs_a_temperature(ohmic_bath):
    with pytest.raises(ValueError, match="temperature > 0"):
        ohmic_bath.matsubara_correlation(0.1)


@pytest.mark.parametrize("cutoff_type", CUTOFF_TYPES)
@pytest.mark.parametrize("zeta", [0.5, 1.0, 3.0])
def test_spectral_density_has_the_documented_form(cutoff_type, zeta):
    bath = nonmarkov.PowerLawSD(ALPHA, zeta, WC, cutoff_type)
    omegas = numpy.array([0.1, 1.0, 2.9, 3.1, 7.0])
    x = omegas / WC
    cutoff = {
        "exponential": numpy.exp(-x),
        "gaussian": numpy.exp(-(x**2)),
        "hard": (omegas <= WC).astype(float),
    }[cutoff_type]
    expected = 2 * ALPHA * omegas**zeta * WC ** (1 - zeta) * cutoff
    numpy.testing.assert_allclose(bath.spectral_density(omegas), expected, rtol=1e-14)
    assert bath.spectral_density(-1.0) == 0.0
    assert bath.spectral_density(0.0) == 0.0


@pytest.mark.parametrize("cutoff_type", ["gaussian", "hard"])
def test_reorganisation_of_gaussian_and_hard_cutoffs(cutoff_type):
    # C(0) = int_0^inf 2 alpha w X(w) dw = alpha wc^2 for both cutoffs (T = 0)
    bath = nonmarkov.PowerLawSD(ALPHA, 1.0, WC, cutoff_type, 0.0)
    assert bath.correlation(0.0) == pytest.approx(ALPHA * WC**2, rel=1e-10)


def test_hard_cutoff_correlation_has_the_closed_form():
    # int_0^wc 2 alpha w e^{-i w tau} dw = 2 alpha [e^{-i wc tau}(1 + i wc tau) - 1] / tau^2
    bath = nonmarkov.PowerLawSD(ALPHA, 1.0, WC, "hard", 0.0)
    for tau in (0.3, 0.7, 5.0):
        expected = 2 * ALPHA * (numpy.exp(-1j * WC * tau) * (1 + 1j * WC * tau) - 1) / tau**2
        assert bath.correlation(tau) == pytest.approx(expected, rel=1e-9, abs=1e-13)


def test_custom_sd_equals_power_law_sd():
    custom = nonmarkov.CustomSD(lambda w: 2 * ALPHA * w, WC, "exponential", 0.5)
    power = nonmarkov.PowerLawSD(ALPHA, 1.0, WC, "exponential", 0.5)
    assert custom.correlation(0.4) == pytest.approx(power.correlation(0.4), rel=1e-12)
    assert custom.correlation_2d_integral(0.1, 0.3) == pytest.approx(
        power.correlation_2d_integral(0.1, 0.3), rel=1e-12
    )


def test_max_correlation_time_estimate_bounds_the_decay(ohmic_bath):
    tau_c = ohmic_bath.max_correlation_time_estimate(tolerance=1e-3)
    # |C(tau)| / C(0) = 1 / (1 + wc^2 tau^2) falls to 1e-3 at tau ~ sqrt(999) / wc
    assert tau_c >= numpy.sqrt(999) / WC
    assert tau_c < 1.2 * numpy.sqrt(999) / WC


# --- bad input ----------------------------------------------------------------------------


def test_unknown_cutoff_type():
    with pytest.raises(ValueError, match="cutoff_type must be one of"):
        nonmarkov.PowerLawSD(ALPHA, 1.0, WC, "lorentzian")


@pytest.mark.parametrize(
    "argument, kwargs",
    [
        ("temperature", dict(temperature=-0.1)),
        ("alpha", dict(alpha=-0.1)),
        ("cutoff", dict(cutoff=-3.0)),
        ("cutoff", dict(cutoff=0.0)),
        ("zeta", dict(zeta=0.0)),
    ],
)
def test_negative_parameters(argument, kwargs):
    parameters = dict(alpha=ALPHA, zeta=1.0, cutoff=WC, cutoff_type="exponential", temperature=0.0)
    parameters.update(kwargs)
    with pytest.raises(ValueError, match=f"{argument} must be"):
        nonmarkov.PowerLawSD(**parameters)


def test_non_numeric_parameters():
    with pytest.raises(TypeError, match="temperature must be a real number"):
        nonmarkov.PowerLawSD(ALPHA, 1.0, WC, temperature="hot")
    with pytest.raises(TypeError, match="j_function must be a callable"):
        nonmarkov.CustomSD(1.0, WC)
    with pytest.raises(TypeError, match="correlation_function must be a callable"):
        nonmarkov.CustomCorrelations(1.0)


def test_bad_region_arguments(ohmic_bath):
    with pytest.raises(ValueError, match="shape must be one of"):
        ohmic_bath.correlation_2d_integral(0.1, 0.0, shape="circle")
    with pytest.raises(ValueError, match="delta must be >= 0"):
        ohmic_bath.correlation_2d_integral(-0.1, 0.0)
    with pytest.raises(ValueError, match="needs time_2"):
        ohmic_bath.correlation_2d_integral(0.1, 0.0, shape="rectangle")
