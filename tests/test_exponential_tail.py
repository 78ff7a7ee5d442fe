"""TEMPO with the bath's memory beyond the cut carried by exponential tail modes
(``TempoParameters(exponential_tail=True)``): the fit of the couplings beyond the
cut, the mode algebra, exact independent-boson dynamics with a memory cut far
shorter than the bath's memory (correlations that are sums of exponentials and
ones that are not), agreement with long-memory TEMPO on a spin-boson model, and
the refusals."""

from __future__ import annotations

import numpy as np
import pytest

import nonmarkov as nm
from nonmarkov.kernels.tail import (
    MAX_FIT_TERMS,
    fit_geometric,
    occupations,
    tail_depth,
    tail_operators,
)


def test_the_fit_finds_a_sum_of_exponentials_exactly():
    """A sequence of three geometric terms (a real rate and a complex pair, complex
    amplitudes) is fitted by those three rates, to rounding."""
    rates = np.array([0.9, 0.7 * np.exp(0.4j), 0.7 * np.exp(-0.4j)])
    amplitudes = np.array([0.3 - 0.1j, 0.2 + 0.05j, -0.1 + 0.2j])
    powers = np.arange(120)[:, None]
    samples = (rates[None, :] ** powers) @ amplitudes
    fitted_amplitudes, fitted_rates = fit_geometric(samples, 1e-12)
    order = np.argsort(np.angle(fitted_rates))
    np.testing.assert_allclose(fitted_rates[order], rates[[2, 0, 1]], atol=1e-10)
    np.testing.assert_allclose(fitted_amplitudes[order], amplitudes[[2, 0, 1]], atol=1e-9)


def test_the_fit_compresses_many_terms_to_the_tolerance():
    """Forty Matsubara-like terms (rates k nu, amplitudes 1/k^2) seen beyond a cut
    are a few terms at a tolerance of 1e-8 of their sum: the residual is within it."""
    nu, cut = 0.3, 4.0
    k = np.arange(1, 41)
    j = np.arange(400)
    samples = np.exp(-nu * np.outer(cut + 0.1 * j, k)) @ (1.0 / k**2) * (1 - 0.5j)
    tolerance = 1e-8 * float(np.sum(np.abs(samples)))
    amplitudes, rates = fit_geometric(samples, tolerance)
    assert 1 <= len(rates) <= 6
    assert np.all(np.abs(rates) < 1.0)
    residual = samples - (rates[None, :] ** j[:, None]) @ amplitudes
    assert np.sum(np.abs(residual)) <= tolerance


def test_the_fit_refuses_what_few_exponentials_cannot_hold():
    with pytest.raises(ValueError, match=f"{MAX_FIT_TERMS} or fewer decaying exponentials"):
        fit_geometric(1.0 / (1.0 + np.arange(3000.0)), 1e-12)
    with pytest.raises(ValueError, match="decaying exponentials"):
        fit_geometric(1.01 ** np.arange(200.0), 1e-6)
    amplitudes, rates = fit_geometric(np.full(10, 1e-12), 1e-9)
    assert len(amplitudes) == len(rates) == 0
    couple, merge = tail_operators(rates, np.zeros((0, 4)), np.array([0.0, 2.0]), 3)
    np.testing.assert_array_equal(couple, np.ones((2, 1, 1)))
    np.testing.assert_array_equal(merge, np.ones((4, 1, 1)))


def _random_modes(rng, complex_rates):
    rates = np.array([0.8 * np.exp(0.3j), 0.8 * np.exp(-0.3j)] if complex_rates else [0.9, 0.7])
    injections = 0.05 * (rng.normal(size=(len(rates), 4)) + 1j * rng.normal(size=(len(rates), 4)))
    return rates, injections


@pytest.mark.parametrize("complex_rates", [False, True])
def test_the_modes_give_every_pair_its_factor(complex_rates):
    """A sequence of points, each coupled to the modes and then put into them, closed
    with the vacuum: the product over all pairs k > k' of
    exp(-x_k sum_m beta_m(c_k') r_m^(k - k' - 1)) (beta: the amplitude when a point
    enters the modes)."""
    rng = np.random.default_rng(7)
    rates, injections = _random_modes(rng, complex_rates)
    rows = np.array([0.0, 2.0, -2.0])
    depth = 12
    couple, merge = tail_operators(rates, injections, rows, depth)
    assert couple.shape[1] == len(occupations(len(rates), depth))
    row_of = rng.integers(0, 3, size=6)
    class_of = rng.integers(0, 4, size=6)
    vector = np.zeros(couple.shape[1], dtype=complex)
    vector[0] = 1.0
    exponent = 0.0j
    for k in range(6):
        vector = couple[row_of[k]] @ vector
        vector = merge[class_of[k]] @ vector
        for older in range(k):
            power = k - older - 1
            exponent += -rows[row_of[k]] * np.sum(injections[:, class_of[older]] * rates**power)
    assert abs(exponent) > 0.05  # the modes carry a visible influence
    np.testing.assert_allclose(vector[0], np.exp(exponent), rtol=1e-10)


def _coherent_tail_error(rates, injections, rows, depth, points):
    """Relative error of the modes at ``depth`` against the exact product of pair
    factors, for a history that couples as strongly as it can: every point has the
    largest row value and enters with the first class."""
    couple, merge = tail_operators(rates, injections, rows, depth)
    vector = np.zeros(couple.shape[1], dtype=complex)
    vector[0] = 1.0
    row = int(np.argmax(np.abs(rows)))
    exponent, held = 0.0j, np.zeros(len(rates), dtype=complex)
    for _ in range(points):
        vector = merge[0] @ (couple[row] @ vector)
        exponent += -rows[row] * np.sum(held)
        held = held * rates + injections[:, 0]
    return abs(vector[0] / np.exp(exponent) - 1.0)


@pytest.mark.parametrize("epsrel", [1e-4, 1e-7])
def test_the_depth_rule_holds_its_error_as_dt_shrinks(epsrel):
    """Two modes with decay rates nu = 0.1, 0.3 per unit time seen at steps h = 1, 1/2,
    1/4: a mode's rate per step is exp(-nu h) and its injection ~ h^2 (a discretised
    correlation), so the memory the modes carry is the same at every h. The depth the
    rule picks holds the error of a maximally coherent history within a few epsrel per
    lifetime of the slower mode (20 lifetimes here) at every h: it does not shrink the
    depth as h shrinks; and one level less loses more."""
    rows = np.array([0.0, 2.0, -2.0])
    depths = []
    for step in (1.0, 0.5, 0.25):
        rates = np.exp(-np.array([0.1, 0.3]) * step)
        injections = 2e-3 * step**2 * np.array([[1.0, -1.0, 0.5j, 0.0], [0.3, -0.3j, 1.0, 0.0]])
        depth = tail_depth(rates, injections, rows, epsrel)
        depths.append(depth)
        points = int(round(200 / step))
        error = _coherent_tail_error(rates, injections, rows, depth, points)
        assert error <= 5 * epsrel * 20
        assert _coherent_tail_error(rates, injections, rows, depth - 1, points) > error
    assert max(depths) - min(depths) <= 1
    assert tail_depth(rates, injections, rows, 1e-4) < tail_depth(rates, injections, rows, 1e-12)


def _independent_boson(correlations):
    energies, couplings = (0.0, 1.3), (0.5, -0.5)
    system = nm.System(np.diag(energies).astype(complex))
    bath = nm.Bath(np.diag(couplings).astype(complex), correlations)
    psi = np.array([0.8, 0.6 * np.exp(0.4j)])
    return system, bath, np.outer(psi, psi.conj()), energies, couplings


def _exact(correlations, rho0, energies, couplings, times):
    """rho_nm(t) = rho_nm(0) e^{-i (E_n - E_m) t} e^{-(s_n - s_m)^2 G + i (s_n^2 - s_m^2) P},
    G - i P = Phi(t) = int_0^t int_0^t' C(t' - t'') (``eta_function``)."""
    phi = np.asarray(correlations.eta_function(times))
    g, p = phi.real, -phi.imag
    e, s = np.asarray(energies), np.asarray(couplings)
    de, ds2, dsq = (
        np.subtract.outer(e, e),
        np.subtract.outer(s, s) ** 2,
        np.subtract.outer(s**2, s**2),
    )
    return np.array(
        [rho0 * np.exp(-1j * de * t - ds2 * gt + 1j * dsq * pt) for t, gt, pt in zip(times, g, p)]
    )


@pytest.mark.parametrize(
    ("correlations", "tcut", "epsrel", "bound", "without"),
    [
        (nm.DrudeLorentzSD(0.3, cutoff=1.0, temperature=0.5), 0.6, 1e-10, 1e-9, 1e-3),
        (nm.UnderdampedSD(0.2, 2.0, 0.6, temperature=1.0), 0.6, 1e-10, 1e-9, 1e-3),
        (nm.PowerLawSD(0.1, 3.0, 1.0, "exponential", temperature=0.5), 2.0, 1e-7, 1e-8, 1e-2),
        (nm.DrudeLorentzSD(0.3, cutoff=1.0, temperature=0.1), 2.0, 1e-7, 1e-8, 1e-2),
    ],
    ids=["drude-lorentz", "underdamped", "super-ohmic", "drude-lorentz-low-t"],
)
def test_independent_boson_is_exact_with_a_short_cut(correlations, tcut, epsrel, bound, without):
    """[H_S, S] = 0: TEMPO has no splitting error, so with the memory beyond the cut
    carried by the modes the coherence is the exact one to the truncation's accuracy
    (within 10 epsrel at epsrel 1e-10, epsrel / 10 at 1e-7: the modes' depth is part
    of that accuracy); without them the cut costs far more. Sums of exponentials
    (Drude-Lorentz and underdamped, T > 0) with a cut of 0.6, a tenth of the run
    where the memory lasts ~10; tails that few exact exponentials do not hold with a
    cut of 2: a super-Ohmic bath (C falls as a power of t) and a low-temperature
    Drude-Lorentz bath (Matsubara terms at nu_k = 0.63 k, many of them outlasting the
    cut)."""
    system, bath, rho0, energies, couplings = _independent_boson(correlations)
    dt, end = 0.1, 6.0
    times = dt * np.arange(int(round(end / dt)) + 1)
    exact = _exact(correlations, rho0, energies, couplings, times)
    errors = {}
    for tail in (True, False):
        parameters = nm.TempoParameters(dt=dt, tcut=tcut, epsrel=epsrel, exponential_tail=tail)
        dynamics = nm.tempo_compute(
            system, bath, rho0, 0.0, end, parameters, progress_type="silent"
        )
        errors[tail] = np.max(np.abs(np.asarray(dynamics.states) - exact))
    assert np.max(np.abs(exact[:, 0, 1] - rho0[0, 1] * np.exp(1.3j * times))) > 0.05
    assert errors[True] < bound
    assert errors[False] > without


@pytest.mark.parametrize("sweep", ["zip_up", "exact"])
def test_spin_boson_with_a_short_cut_matches_a_long_memory(sweep):
    """A spin-boson model (sigma_x tunnelling): with the tail modes a cut of 1.2 gives
    the dynamics of the whole memory, with either sweep of the window; the same short
    cut without them is off by > 1e-2."""
    sz, sx = nm.operators.sigma("z"), nm.operators.sigma("x")
    system = nm.System(0.25 * sz + 0.5 * sx)
    bath = nm.Bath(sz, nm.DrudeLorentzSD(reorganisation_energy=0.1, cutoff=1.0, temperature=1.0))
    rho0 = nm.operators.spin_dm("up")
    options = nm.EngineOptions(window_sweep=sweep)

    def sigma_z(tcut, tail):
        parameters = nm.TempoParameters(dt=0.2, tcut=tcut, epsrel=1e-9, exponential_tail=tail)
        dynamics = nm.tempo_compute(
            system, bath, rho0, 0.0, 8.0, parameters, progress_type="silent", options=options
        )
        return np.asarray(dynamics.expectations(sz, real=True)[1])

    long = sigma_z(None, False)
    assert np.max(np.abs(sigma_z(1.2, True) - long)) < 5e-6
    assert np.max(np.abs(sigma_z(1.2, False) - long)) > 1e-2


def test_mean_field_tempo_runs_the_tail():
    """MeanFieldTempo shares TEMPO's window: one system with a zero field coupling is
    TEMPO, with or without the tail modes."""
    sz, sx = nm.operators.sigma("z"), nm.operators.sigma("x")
    bath = nm.Bath(sz, nm.DrudeLorentzSD(reorganisation_energy=0.1, cutoff=1.0, temperature=1.0))
    rho0 = nm.operators.spin_dm("up")
    parameters = nm.TempoParameters(dt=0.2, tcut=1.0, epsrel=1e-9, exponential_tail=True)
    tempo = nm.tempo_compute(
        nm.System(0.5 * sx), bath, rho0, 0.0, 3.0, parameters, progress_type="silent"
    )
    system = nm.TimeDependentSystemWithField(lambda t, field: 0.5 * sx)
    mean_field = nm.MeanFieldSystem([system], field_eom=lambda t, states, field: 0.0j)
    result = nm.MeanFieldTempo(mean_field, [bath], parameters, [rho0], 0.0j, 0.0).compute(
        3.0, progress_type="silent"
    )
    states = np.asarray(result.system_dynamics[0].states)
    np.testing.assert_allclose(states, np.asarray(tempo.states), atol=1e-10)


@pytest.mark.parametrize(
    ("keywords", "message"),
    [
        ({"exponential_tail": True}, "memory cut"),
        ({"tcut": 1.0, "add_correlation_time": 1.0, "exponential_tail": True}, "one of them"),
        ({"tcut": 1.0, "exponential_tail": "yes"}, "exponential_tail"),
    ],
)
def test_parameters_refuse_what_the_tail_cannot_mean(keywords, message):
    with pytest.raises((ValueError, TypeError), match=message):
        nm.TempoParameters(dt=0.1, epsrel=1e-6, **keywords)


@pytest.mark.parametrize(
    ("correlations", "message"),
    [
        (nm.PowerLawSD(0.1, 1.0, 5.0, temperature=1.0), "power-law tail"),
        (nm.DrudeLorentzSD(0.1, 1.0, temperature=0.0), "power-law tail"),
    ],
)
def test_a_bath_without_an_exponential_tail_is_refused(correlations, message):
    parameters = nm.TempoParameters(dt=0.1, tcut=0.5, epsrel=1e-6, exponential_tail=True)
    bath = nm.Bath(nm.operators.sigma("z"), correlations)
    system = nm.System(0.5 * nm.operators.sigma("x"))
    with pytest.raises(ValueError, match=message):
        nm.Tempo(system, bath, parameters, nm.operators.spin_dm("up"), 0.0)


def test_a_process_tensor_with_the_tail_gives_tempos_dynamics():
    """PT-TEMPO with the tail modes (the leaving point split off from them, its index
    kept): the process tensor's dynamics of a spin-boson model equal TEMPO's with the
    same cut and tail (which test_spin_boson_with_a_short_cut_matches_a_long_memory
    holds to the whole memory); on the independent-boson model they are the exact ones."""
    sz, sx = nm.operators.sigma("z"), nm.operators.sigma("x")
    correlations = nm.DrudeLorentzSD(reorganisation_energy=0.1, cutoff=1.0, temperature=1.0)
    bath = nm.Bath(sz, correlations)
    system = nm.System(0.25 * sz + 0.5 * sx)
    rho0 = nm.operators.spin_dm("up")
    parameters = nm.TempoParameters(dt=0.2, tcut=1.2, epsrel=1e-9, exponential_tail=True)
    pt = nm.pt_tempo_compute(bath, 0.0, 4.0, parameters, progress_type="silent")
    from_pt = nm.compute_dynamics(system, rho0, process_tensor=pt, progress_type="silent")
    tempo = nm.tempo_compute(system, bath, rho0, 0.0, 4.0, parameters, progress_type="silent")
    np.testing.assert_allclose(np.asarray(from_pt.states), np.asarray(tempo.states), atol=2e-6)

    ibm_system, ibm_bath, ibm_rho0, energies, couplings = _independent_boson(correlations)
    pt = nm.pt_tempo_compute(ibm_bath, 0.0, 4.0, parameters, progress_type="silent")
    dynamics = nm.compute_dynamics(ibm_system, ibm_rho0, process_tensor=pt, progress_type="silent")
    times = np.asarray(dynamics.times)
    exact = _exact(correlations, ibm_rho0, energies, couplings, times)
    np.testing.assert_allclose(np.asarray(dynamics.states), exact, atol=2e-7)


@pytest.mark.parametrize("construction", ["divide_and_conquer", "uniform"])
def test_other_process_tensor_constructions_refuse_the_tail(construction):
    parameters = nm.TempoParameters(dt=0.1, tcut=0.5, epsrel=1e-6, exponential_tail=True)
    bath = nm.Bath(nm.operators.sigma("z"), nm.DrudeLorentzSD(0.1, 1.0, temperature=1.0))
    with pytest.raises(ValueError, match="exponential_tail"):
        if construction == "uniform":
            nm.pt_uniform_compute(bath, parameters, progress_type="silent")
        else:
            nm.pt_divide_and_conquer_compute(bath, 0.0, 1.0, parameters, progress_type="silent")


def test_converge_keeps_the_tail():
    """``nm.converge`` from parameters with the tail runs its whole ladder with it: the
    estimate bounds the true error against the whole memory, and the result's
    parameters say exponential_tail."""
    sz, sx = nm.operators.sigma("z"), nm.operators.sigma("x")
    system = nm.System(0.25 * sz + 0.5 * sx)
    bath = nm.Bath(sz, nm.DrudeLorentzSD(reorganisation_energy=0.1, cutoff=1.0, temperature=1.0))
    rho0 = nm.operators.spin_dm("up")
    start = nm.TempoParameters(dt=0.2, tcut=0.8, epsrel=1e-6, exponential_tail=True)
    dynamics = nm.converge(system, bath, rho0, 0.0, 3.0, 1e-3, parameters=start)
    assert dynamics.metadata["parameters"]["exponential_tail"] is True
    exact = nm.tempo_compute(
        system,
        bath,
        rho0,
        0.0,
        3.0,
        nm.TempoParameters(dt=0.025, epsrel=1e-9),
        progress_type="silent",
    )
    t, values = dynamics.expectations(sz, real=True)
    te, reference = exact.expectations(sz, real=True)
    on_grid = np.interp(np.asarray(t), np.asarray(te), np.asarray(reference))
    assert np.max(np.abs(np.asarray(values) - on_grid)) < 1e-3
