"""The extra correlation time of a memory cut (``TempoParameters(add_correlation_time=...)``).

With a memory cut of K steps and an extra time tau_a, the point at t_k feels the
bath correlations back to max(0, t_k - K dt - tau_a); the part beyond the cut is
lumped onto the oldest point in memory. For an independent-boson model without a
system Hamiltonian the classes of a path never change, so the lumping is exact:
the coherence is rho_01(0) exp(-Re S) with

    S = sum_{k=0}^{N-1} int_{t' in [t_k, t_k + dt]} int_{t'' in [a_k, t']} C(t' - t''),

a_k = 0 for k < K and max(0, t_k - K dt - tau_a) for k >= K (coupling +-1/2: the
factors (s+ - s-)^2 are 1 and the imaginary parts cancel). With tau_a = inf every
a_k = 0 and the result is the exact solution.
"""

from __future__ import annotations

import cmath
import math

import numpy as np
import pytest

import nonmarkov as nm
from nonmarkov.options import EngineOptions

ALPHA, CUTOFF, DT, DKMAX, END = 0.3, 5.0, 0.4, 2, 10.0
RHO0 = 0.5 * np.array([[1.0, -1.0j], [1.0j, 1.0]])  # the y+ state
SUPER_OHMIC = nm.PowerLawSD(ALPHA, 3.0, CUTOFF, "exponential", 0.0)
BATH = nm.Bath(0.25 * np.diag([2.0, -2.0]), SUPER_OHMIC)  # 0.5 sigma_z
SYSTEM = nm.System(np.zeros((2, 2)))


def exact_coherence(t: float) -> complex:
    """rho_01(t) of the super-Ohmic (zeta = 3) independent-boson model at T = 0."""
    x = (t * CUTOFF) ** 2
    return RHO0[0, 1] * math.exp(-2.0 * ALPHA * (1.0 + (x - 1.0) / (x + 1.0) ** 2))


def lumped_coherence(correlations, extra: float, num_steps: int) -> complex:
    """rho_01(t_N) with the couplings the lumping keeps (module docstring), from the
    correlation integrals of the public API."""
    total = 0.0j
    for k in range(num_steps):
        t_k = k * DT
        start = 0.0 if k < DKMAX else max(0.0, t_k - DKMAX * DT - extra)
        total += correlations.correlation_2d_integral(DT, 0.0, shape="upper-triangle")
        past = t_k - start
        if past > 1e-12:
            # t' over the step, t'' over [start, t_k]: boxes of lengths dt and past
            total += correlations.correlation_2d_integral(DT, DT, DT + past, shape="rectangle")
    return RHO0[0, 1] * cmath.exp(-total.real)


def tempo_coherence(extra, options=None) -> complex:
    parameters = nm.TempoParameters(dt=DT, dkmax=DKMAX, epsrel=1e-7, add_correlation_time=extra)
    tempo = nm.Tempo(SYSTEM, BATH, parameters, RHO0, start_time=0.0, options=options)
    return tempo.compute(END, progress_type="silent").states[-1][0, 1]


def pt_coherence(extra, options=None) -> complex:
    parameters = nm.TempoParameters(dt=DT, dkmax=DKMAX, epsrel=1e-7, add_correlation_time=extra)
    pt = nm.pt_tempo_compute(BATH, 0.0, END, parameters, progress_type="silent", options=options)
    dynamics = nm.compute_dynamics(SYSTEM, RHO0, process_tensor=pt, progress_type="silent")
    return dynamics.states[-1][0, 1]


@pytest.mark.parametrize("extra", [0.5, 2.0, 3.3])
@pytest.mark.parametrize("route", [tempo_coherence, pt_coherence])
def test_the_lumped_couplings_are_those_of_the_past_back_to_the_extra_time(route, extra):
    expected = lumped_coherence(SUPER_OHMIC, extra, round(END / DT))
    assert abs(route(extra) - expected) < 1e-6


@pytest.mark.parametrize("extra", [10.0, 1000.0, math.inf])
@pytest.mark.parametrize("route", [tempo_coherence, pt_coherence])
def test_a_long_extra_time_gives_the_exact_solution(route, extra):
    assert abs(route(extra) - exact_coherence(END)) < 1e-6


def test_the_error_of_the_memory_cut_falls_with_the_extra_time():
    errors = [abs(tempo_coherence(extra) - exact_coherence(END)) for extra in (None, 0.4, 2.0)]
    assert errors[0] > 0.05  # the plain memory cut of 0.8 is far off
    assert errors[0] > 2 * errors[1] > 4 * errors[2]
    assert abs(tempo_coherence(0.0) - tempo_coherence(None)) < 1e-12


def test_compiled_windows_from_the_first_step_lump_as_the_host(backend_name):
    """With ``compiled='on'`` every step of a JAX window runs compiled (on NumPy the
    option changes nothing); a lumped coupling that changes at every step (inf)."""
    options = EngineOptions(compiled="on", chunk=4)
    for extra in (2.0, math.inf):
        assert abs(tempo_coherence(extra, options) - tempo_coherence(extra)) < 1e-10
        assert abs(pt_coherence(extra, options) - pt_coherence(extra)) < 1e-10


def test_a_driven_spin_boson_model_with_the_extra_time_agrees_between_tempo_and_pt():
    system = nm.System(0.5 * np.array([[0.0, 1.0], [1.0, 0.0]]))
    bath = nm.Bath(0.5 * np.diag([1.0, -1.0]), nm.PowerLawSD(0.2, 1.0, 4.0, temperature=0.5))
    parameters = nm.TempoParameters(dt=0.1, dkmax=6, epsrel=1e-7, add_correlation_time=math.inf)
    tempo = nm.Tempo(system, bath, parameters, RHO0, 0.0).compute(3.0, progress_type="silent")
    pt = nm.pt_tempo_compute(bath, 0.0, 3.0, parameters, progress_type="silent")
    dynamics = nm.compute_dynamics(system, RHO0, process_tensor=pt, progress_type="silent")
    assert np.max(np.abs(np.asarray(tempo.states) - np.asarray(dynamics.states))) < 1e-5


def test_a_uniform_process_tensor_uses_the_couplings_of_an_infinite_past():
    """An extra time below one step is settled when the repeating tensor takes over:
    the uniform process tensor then equals sequential PT-TEMPO (untruncated)."""
    system = nm.System(0.5 * np.array([[0.0, 1.0], [1.0, 0.0]]))
    bath = nm.Bath(0.5 * np.diag([1.0, -1.0]), nm.PowerLawSD(0.1, 1.0, 3.0, temperature=0.0))
    parameters = nm.TempoParameters(dt=0.2, dkmax=3, epsrel=1e-12, add_correlation_time=0.1)
    uniform = nm.pt_uniform_compute(bath, parameters, progress_type="silent")
    sequential = nm.pt_tempo_compute(bath, 0.0, 4.0, parameters, progress_type="silent")
    a = nm.compute_dynamics(system, RHO0, process_tensor=uniform, num_steps=20)
    b = nm.compute_dynamics(system, RHO0, process_tensor=sequential, progress_type="silent")
    assert np.max(np.abs(np.asarray(a.states) - np.asarray(b.states))) < 1e-9


def test_the_correlation_integral_to_infinite_times_has_the_closed_form():
    """Ohmic, exponential cutoff, T = 0: C(tau) = 2 alpha wc^2 / (1 + i wc tau)^2, so
    the rectangle t' in [t1, inf), t'' in [0, d] has a closed form."""
    alpha, wc, d, t1 = 0.1, 5.0, 0.2, 0.6
    ohmic = nm.PowerLawSD(alpha, 1.0, wc, "exponential", 0.0)
    # ramp over [t1 - d, t1] (weight tau - t1 + d), then the weight d to infinity
    u1, u2, c = 1 + 1j * wc * (t1 - d), 1 + 1j * wc * t1, 1 + 1j * wc * (t1 - d)
    ramp = -2.0 * alpha * ((cmath.log(u2) + c / u2) - (cmath.log(u1) + c / u1))
    tail = -2.0j * alpha * wc / (1 + 1j * wc * t1)
    expected = ramp + d * tail
    value = ohmic.correlation_2d_integral(d, t1, math.inf, shape="rectangle")
    assert abs(value - expected) < 1e-9 * abs(expected)
    # an exponentially decaying custom correlation: against the sum of squares
    custom = nm.CustomCorrelations(lambda tau: math.exp(-2.0 * tau) * (1.0 - 0.3j))
    squares = sum(custom.correlation_2d_integral(d, j * d, shape="square") for j in range(3, 200))
    value = custom.correlation_2d_integral(d, t1, math.inf, shape="rectangle")
    assert abs(value - squares) < 1e-9


def test_an_extra_time_that_cannot_be_honoured_is_refused_before_any_work():
    sub_ohmic_hot = nm.Bath(np.diag([0.5, -0.5]), nm.PowerLawSD(0.1, 0.5, 5.0, temperature=1.0))
    infinite = nm.TempoParameters(dt=0.1, dkmax=4, epsrel=1e-6, add_correlation_time=math.inf)
    # a finite past is always finite; the infinite past of a uniform PT is not
    nm.Tempo(SYSTEM, sub_ohmic_hot, infinite, RHO0, 0.0).compute(1.0, progress_type="silent")
    with pytest.raises(ValueError, match="diverges"):
        nm.pt_uniform_compute(sub_ohmic_hot, infinite, progress_type="silent")
    one_step = nm.TempoParameters(dt=0.1, dkmax=1, epsrel=1e-6, add_correlation_time=1.0)
    with pytest.raises(ValueError, match="dkmax >= 2"):
        nm.Tempo(SYSTEM, BATH, one_step, RHO0, 0.0)
    lumped = nm.TempoParameters(dt=0.1, dkmax=4, epsrel=1e-6, add_correlation_time=1.0)
    for method in ("divide_and_conquer", "repeated_block"):
        with pytest.raises(ValueError, match="method='sequential'"):
            nm.pt_tempo_compute(BATH, 0.0, 2.0, lumped, method=method)
    with pytest.raises(ValueError, match="add_correlation_time must be >= 0"):
        nm.TempoParameters(dt=0.1, dkmax=4, epsrel=1e-6, add_correlation_time=-1.0)
    with pytest.raises(ValueError, match="finite"):
        nm.TempoParameters(dt=0.1, dkmax=4, epsrel=1e-6, add_correlation_time=math.nan)
