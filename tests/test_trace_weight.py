"""TEMPO's window truncated in the trace-weighted norm (the ``trace_weight`` engine
option, docs/trace_weight.md): exact independent-boson dynamics, the same dynamics
as the flat norm where nothing is truncated (every sweep, memory cut, lumped
coupling and tail modes), a far smaller truncation error at the same epsrel, and
the refusals."""

from __future__ import annotations

import math

import numpy as np
import pytest

import nonmarkov as nm
from models import assert_coherences_match, independent_boson_problem
from nonmarkov.engines import trace_window_engine
from nonmarkov.engines.base import WindowSpec
from nonmarkov.kernels.window import trace_basis
from nonmarkov.options import EngineOptions

SZ = nm.operators.sigma("z")


def spin_boson(temperature: float = 0.1):
    """A biased tunnelling spin with a Drude-Lorentz bath (lambda 0.25, gamma 1)."""
    system = nm.System(0.25 * SZ + 0.5 * nm.operators.sigma("x"))
    correlations = nm.DrudeLorentzSD(
        reorganisation_energy=0.25, cutoff=1.0, temperature=temperature
    )
    return system, nm.Bath(SZ, correlations), nm.operators.spin_dm("up")


def sigma_z(parameters, weight, sweep="auto", temperature=0.1, end=6.0):
    system, bath, rho0 = spin_boson(temperature)
    options = EngineOptions(trace_weight=weight, window_sweep=sweep)
    dynamics = nm.tempo_compute(
        system, bath, rho0, 0.0, end, parameters, progress_type="silent", options=options
    )
    return dynamics.expectations(SZ, real=True)[1]


def test_the_basis_reads_the_class_sum_with_the_weight():
    """A (m, m) maps the class sum (1, ..., 1) to (w sqrt(m), 0, ..., 0), keeps the
    directions orthogonal to it orthonormal, and A^-1 inverts it."""
    for m, weight in ((4, 10.0), (9, 0.3), (1, 2.0)):
        basis, inverse = trace_basis(m, weight)
        np.testing.assert_allclose(basis @ inverse, np.eye(m), atol=1e-14)
        image = basis @ np.ones(m)
        np.testing.assert_allclose(image, np.eye(m)[0] * weight * math.sqrt(m), atol=1e-13)
        rest = basis[1:]
        np.testing.assert_allclose(rest @ rest.T, np.eye(m - 1), atol=1e-14)


@pytest.mark.parametrize("key", ["ohmic-T0", "three-level"])
def test_a_weighted_window_gives_the_exact_independent_boson_dynamics(key):
    system, bath, rho0, parameters, end_time, exact, closed = independent_boson_problem(key)
    dynamics = nm.tempo_compute(
        system,
        bath,
        rho0,
        0.0,
        end_time,
        parameters,
        progress_type="silent",
        options=EngineOptions(trace_weight=10.0),
    )
    assert_coherences_match(dynamics.states, exact, closed, bound=1e-8)


@pytest.mark.parametrize("sweep", ["zip_up", "exact"])
@pytest.mark.parametrize("memory", ["cut", "lumped", "tail"])
def test_weighted_and_flat_windows_agree_where_nothing_is_cut(sweep, memory):
    """At epsrel 1e-11 the weighting changes nothing but rounding: a traced memory cut,
    one with the lumped coupling of an infinite extra time, and tail modes (T = 1,
    where they are light), with both sweeps."""
    extra = {"lumped": {"add_correlation_time": math.inf}, "tail": {"exponential_tail": True}}
    parameters = nm.TempoParameters(dt=0.2, tcut=1.2, epsrel=1e-11, **extra.get(memory, {}))
    temperature = 1.0 if memory == "tail" else 0.1
    flat = sigma_z(parameters, 1.0, sweep, temperature, end=4.0)
    weighted = sigma_z(parameters, 10.0, sweep, temperature, end=4.0)
    assert np.ptp(flat) > 0.5  # the spin tunnels: the comparison is not trivial
    np.testing.assert_allclose(weighted, flat, rtol=0, atol=1e-8)


def test_the_weighted_window_truncates_far_less_at_the_same_epsrel():
    """Against a run at epsrel 1e-11, a plain memory cut at epsrel 1e-6 is off by ~4e-5
    in the flat norm and by ~2e-7 with trace_weight 10 (measured; asserted: at least
    20 times less, and below 2e-6)."""
    reference = sigma_z(nm.TempoParameters(dt=0.2, tcut=2.0, epsrel=1e-11), 10.0)
    loose = nm.TempoParameters(dt=0.2, tcut=2.0, epsrel=1e-6)
    flat = np.max(np.abs(sigma_z(loose, 1.0) - reference))
    weighted = np.max(np.abs(sigma_z(loose, 10.0) - reference))
    assert flat > 1e-5  # the flat cut's error is visible
    assert weighted < flat / 20 and weighted < 2e-6


@pytest.mark.parametrize("weight", [0, -1.0, math.nan, math.inf, "10", True, None])
def test_a_trace_weight_that_is_not_a_positive_number_is_refused(weight):
    with pytest.raises(ValueError, match="trace_weight option must be a finite number > 0"):
        EngineOptions(trace_weight=weight)


def test_only_a_traced_window_takes_a_trace_weight():
    """A process tensor's window (finalised points) is not read along the class sum:
    a weight other than 1 is refused there; a traced window takes it on any backend."""
    arguments = {
        "front": np.ones(4) / 2.0,
        "log_scale": 0.0,
        "projector": np.eye(4),
        "first": np.ones((4, 4)),
        "carrier": np.zeros(4, dtype=int),
        "lag_rows": lambda lag: np.ones((1, 4)),
        "out_map": np.eye(4),
        "epsrel": 1e-8,
        "memory": 3,
    }
    with pytest.raises(ValueError, match="needs oldest='trace'"):
        WindowSpec(**arguments, oldest="finalize", trace_weight=10.0)
    with pytest.raises(ValueError, match="trace_weight must be a finite number > 0"):
        WindowSpec(**arguments, oldest="trace", trace_weight=-2.0)
    engine = trace_window_engine(WindowSpec(**arguments, oldest="trace", trace_weight=10.0))
    assert engine.capabilities.trace_weight


@pytest.mark.skip_backend("numpy", "the compiled window step is JAX's")
@pytest.mark.parametrize("extra", [{}, {"add_correlation_time": math.inf}])
def test_the_compiled_step_runs_the_weighted_window_as_the_host(extra):
    """JAX's compiled zip-up step (matrix lags, the class sum read with the covector)
    and the host kernels give the same weighted window's dynamics to rounding."""
    system, bath, rho0 = spin_boson()
    parameters = nm.TempoParameters(dt=0.2, tcut=1.6, epsrel=1e-7, **extra)
    states = {}
    for compiled in ("on", "off"):
        tempo = nm.Tempo(
            system,
            bath,
            parameters,
            rho0,
            0.0,
            options=EngineOptions(trace_weight=10.0, compiled=compiled),
        )
        states[compiled] = np.asarray(tempo.compute(4.0, progress_type="silent").states)
        assert (tempo.engine.stats.compiled_steps > 0) == (compiled == "on")
    np.testing.assert_allclose(states["on"], states["off"], rtol=0, atol=1e-10)
