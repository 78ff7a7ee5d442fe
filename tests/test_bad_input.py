"""Bad input, by class of problem: a clear error before (or instead of) wrong numbers.

- user callables: a value that is not finite, complex where a real one is required,
  negative where it must not be, of the wrong shape, not Hermitian, or an exception
  inside the callable is a ValueError naming the function and the argument (tau, w, t)
  where it happened, at whatever time it is evaluated (not only at t = 0); no NaN
  reaches a quadrature;
- booleans are booleans: a string or a number where True/False is asked is a
  TypeError naming the argument, in every public function;
- lists are lists (``gammas=0.1`` says so), silent adjustments are warned
  (``tcut`` < dt / 2), controls outside a run are warned, not silently dropped;
- numerical breakdown: a state that stops being finite is an error naming the step
  and time, a propagator that overflows is an error, a trace that drifts is a warning.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

import nonmarkov as nm
from models import SX, SZ

SILENT = {"progress_type": "silent"}
PARAMETERS = nm.TempoParameters(dt=0.1, epsrel=1e-6, tcut=0.5)


def run_tempo(system=None, correlations=None, end=1.0):
    system = nm.System(0.5 * SX) if system is None else system
    correlations = nm.PowerLawSD(0.1, 1, 4.0) if correlations is None else correlations
    bath = nm.Bath(0.5 * SZ, correlations)
    return nm.tempo_compute(
        system, bath, nm.operators.spin_dm("up"), 0.0, end, PARAMETERS, **SILENT
    )


# -- user callables ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "function, message",
    [
        (
            lambda t: math.nan if t > 0.3 else 1.0 + 0j,
            r"correlation_function\([\d.]+\) .*not finite",
        ),
        (lambda t: 1.0 + 0j if t < 0.3 else {}["C"], r"correlation_function\(.*raised KeyError"),
        (lambda t: [1.0, 2.0], r"correlation_function\(0\.0\) must return a number"),
    ],
    ids=["nan", "exception", "not-a-number"],
)
def test_correlation_function_is_guarded(function, message):
    with pytest.raises(ValueError, match=message):
        run_tempo(correlations=nm.CustomCorrelations(function))


@pytest.mark.parametrize(
    "j_function, message",
    [
        (lambda w: np.where(w > 2.0, np.nan, w), r"j_function\(.*not finite"),
        (lambda w: -w, r"j_function\(.*>= 0"),
        (lambda w: w * (1 + 1j), r"j_function\(.*real"),
        (lambda w: w / (w - w), r"j_function"),
    ],
    ids=["nan", "negative", "complex", "division"],
)
def test_spectral_density_is_real_non_negative_and_finite(j_function, message):
    correlations = nm.CustomSD(j_function, cutoff=4.0, temperature=0.5)
    with pytest.raises(ValueError, match=message):
        with np.errstate(all="ignore"):
            run_tempo(correlations=correlations)


def test_spectral_density_values_are_checked_on_arrays_too():
    correlations = nm.CustomSD(lambda w: 1.0 - w, cutoff=4.0)
    with pytest.raises(ValueError, match=r"j_function\(2\.0\) = -1\.0"):
        correlations.spectral_density(np.array([0.5, 2.0]))


@pytest.mark.parametrize(
    "hamiltonian, message",
    [
        (lambda t: 0.5 * SX + (t > 0.45) * 1j * SX, r"hamiltonian\(0\.4\d*\) is not Hermitian"),
        (lambda t: 0.5 * SX * (math.nan if t > 0.45 else 1.0), r"hamiltonian\(.*NaN"),
        (lambda t: 0.5 * SX if t < 0.45 else np.eye(3), r"hamiltonian\(.*shape \(3, 3\)"),
        (lambda t: 0.5 * SX if t < 0.45 else {}["H"], r"hamiltonian\(.*raised KeyError"),
    ],
    ids=["not-hermitian", "nan", "shape", "exception"],
)
def test_time_dependent_hamiltonian_is_checked_at_every_time(hamiltonian, message):
    system = nm.TimeDependentSystem(hamiltonian)  # fine at t = 0
    with pytest.raises(ValueError, match=message):
        run_tempo(system=system)


@pytest.mark.parametrize(
    "gamma, operator, message",
    [
        (lambda t: 0.1 - t, lambda t: SZ, r"gammas\[0\]\(.*>= 0"),
        (lambda t: math.nan if t > 0.45 else 0.1, lambda t: SZ, r"gammas\[0\]\(.*not finite"),
        (lambda t: 0.1 if t < 0.45 else 0.1 + 0.1j, lambda t: SZ, r"gammas\[0\]\(.*real"),
        (lambda t: 0.1, lambda t: SZ * (math.inf if t > 0.45 else 1.0), r"lindblad_operators\[0\]"),
    ],
    ids=["negative", "nan", "complex", "operator-inf"],
)
def test_time_dependent_lindblad_terms_are_checked_at_every_time(gamma, operator, message):
    system = nm.TimeDependentSystem(
        lambda t: 0.5 * SX, gammas=[gamma], lindblad_operators=[operator]
    )
    with pytest.raises(ValueError, match=message):
        nm.compute_dynamics(system, initial_state=nm.operators.spin_dm("up"), dt=0.1, num_steps=10)


# -- booleans are booleans --------------------------------------------------------------


def _pt():
    bath = nm.Bath(0.5 * SZ, nm.PowerLawSD(0.1, 1, 4.0))
    return nm.pt_tempo_compute(bath, 0.0, 0.3, PARAMETERS, **SILENT)


BOOLEAN_CALLS = {
    "unique/Tempo": lambda v: nm.Tempo(
        nm.System(0.5 * SX),
        nm.Bath(0.5 * SZ, nm.PowerLawSD(0.1, 1, 4.0)),
        PARAMETERS,
        nm.operators.spin_dm("up"),
        0.0,
        unique=v,
    ),
    "unique/pt_tempo_compute": lambda v: nm.pt_tempo_compute(
        nm.Bath(0.5 * SZ, nm.PowerLawSD(0.1, 1, 4.0)), 0.0, 0.3, PARAMETERS, unique=v, **SILENT
    ),
    "overwrite/pt_tempo_compute": lambda v: nm.pt_tempo_compute(
        nm.Bath(0.5 * SZ, nm.PowerLawSD(0.1, 1, 4.0)), 0.0, 0.3, PARAMETERS, overwrite=v, **SILENT
    ),
    "overwrite/export": lambda v: _pt().export("never-written.hdf5", overwrite=v),
    "overwrite/Dynamics.export": lambda v: nm.Dynamics([0.0], [np.eye(2) / 2]).export(
        "never-written.h5", overwrite=v
    ),
    "record_all/compute_dynamics": lambda v: nm.compute_dynamics(
        nm.System(0.5 * SX), initial_state=np.eye(2) / 2, dt=0.1, num_steps=2, record_all=v
    ),
    "real/expectations": lambda v: nm.Dynamics([0.0], [np.eye(2) / 2]).expectations(SZ, real=v),
    "post/Control.add_single": lambda v: nm.Control(2).add_single(0, np.eye(4), post=v),
    "post/Control.add_continuous": lambda v: nm.Control(2).add_continuous(lambda t: np.eye(4), v),
    "matsubara/correlation_2d_integral": lambda v: nm.PowerLawSD(
        0.1, 1, 4.0, temperature=1.0
    ).correlation_2d_integral(0.1, 0.0, matsubara=v),
    "transformed/get_mpo_tensor": lambda v: _pt().get_mpo_tensor(0, transformed=v),
}


@pytest.mark.parametrize("value", ["no", 1, None], ids=["str", "int", "None"])
@pytest.mark.parametrize("call", list(BOOLEAN_CALLS))
def test_booleans_are_booleans(call, value, tmp_path, monkeypatch):
    """(TwoTimeBathCorrelations' change_only and interaction_picture: test_bath_dynamics.py)"""
    monkeypatch.chdir(tmp_path)
    name = call.split("/")[0]
    with pytest.raises(TypeError, match=f"{name} must be True or False"):
        BOOLEAN_CALLS[call](value)


# -- lists, silent adjustments, controls outside the run ---------------------------------


def test_lists_of_lindblad_terms_must_be_lists():
    with pytest.raises(TypeError, match="gammas must be a list of rates"):
        nm.System(0.5 * SX, gammas=0.1, lindblad_operators=[SZ])
    with pytest.raises(TypeError, match="lindblad_operators must be a list of"):
        nm.System(0.5 * SX, gammas=[0.1], lindblad_operators=SZ)
    with pytest.raises(TypeError, match="gammas must be a list of rates"):
        nm.TimeDependentSystem(lambda t: 0.5 * SX, gammas=lambda t: 0.1, lindblad_operators=[])


def test_a_memory_cut_shorter_than_a_step_is_warned():
    with pytest.warns(UserWarning, match="dkmax=1"):
        parameters = nm.TempoParameters(dt=0.1, epsrel=1e-6, tcut=0.01)
    assert parameters.dkmax == 1


def test_controls_outside_the_run_are_warned():
    control = nm.Control(2, name="kicks")
    control.add_single(3, np.eye(4))
    control.add_single(12, np.eye(4), post=True)
    control.add_single(-0.5, np.eye(4))
    system = nm.System(0.5 * SX)
    with pytest.warns(UserWarning, match=r"'kicks': step 12 \(post\), time -0.5 lie outside"):
        nm.compute_dynamics(system, np.eye(2) / 2, dt=0.1, num_steps=10, control=control, **SILENT)


# -- numerical breakdown: an error naming the step, never NaN results -------------------


def test_a_state_that_overflows_is_an_error_naming_the_step():
    control = nm.Control(2)
    control.add_single(2, 1e200 * np.eye(4))
    control.add_single(3, 1e200 * np.eye(4))
    with np.errstate(all="ignore"):
        with pytest.raises(ValueError, match=r"broke down at step 3 \(t = 0.3\)"):
            nm.compute_dynamics(
                nm.System(0.5 * SX), np.eye(2) / 2, dt=0.1, num_steps=5, control=control, **SILENT
            )


def test_a_propagator_that_overflows_is_an_error():
    system = nm.System(0.5 * SX, gammas=[1e306], lindblad_operators=[SZ])
    with np.errstate(all="ignore"), pytest.raises(ValueError, match="propagator .* not finite"):
        run_tempo(system=system)


def test_a_trace_that_drifts_is_warned():
    pt = _pt()  # 3 steps; doubling a step tensor doubles the traced future: the trace is 2
    pt.set_mpo_tensor(1, 2.0 * pt.get_mpo_tensor(1, transformed=False))
    with pytest.warns(UserWarning, match=r"trace of the state at step 1 \(t = 0.1\) is 2"):
        nm.compute_dynamics(nm.System(0.5 * SX), np.eye(2) / 2, process_tensor=pt, **SILENT)


# -- cost before running: refuse what cannot finish ------------------------------------


def test_runs_that_cannot_finish_are_refused_up_front():
    system, rho0 = nm.System(0.5 * SX), np.eye(2) / 2
    bath = nm.Bath(0.5 * SZ, nm.PowerLawSD(0.1, 1, 4.0))
    with pytest.raises(ValueError, match="1e\\+15 steps cannot finish"):
        nm.compute_dynamics(system, rho0, dt=1e-12, num_steps=10**15)
    with pytest.raises(ValueError, match="steps cannot finish"):
        nm.tempo_compute(system, bath, rho0, 0.0, 1e9, PARAMETERS, **SILENT)
    with pytest.raises(ValueError, match="steps cannot finish"):
        nm.pt_tempo_compute(bath, 0.0, 1e15, PARAMETERS, **SILENT)
    with pytest.raises(ValueError, match="steps cannot finish"):
        nm.compute_correlations(
            system, None, SZ, SZ, 0, 1, initial_state=rho0, dt=1e-9, num_steps=10**12
        )


def test_recording_more_states_than_memory_holds_is_refused():
    with pytest.raises(ValueError, match="record_all=False"):
        nm.compute_dynamics(nm.System(0.5 * SX), np.eye(2) / 2, dt=1e-3, num_steps=10**9 - 1)


def test_a_memory_window_larger_than_memory_is_refused():
    bath = nm.Bath(0.5 * SZ, nm.PowerLawSD(0.1, 1, 4.0))
    parameters = nm.TempoParameters(dt=1e-3, epsrel=1e-6, dkmax=10**11)
    with pytest.raises(ValueError, match="shorter memory cut"):
        nm.PtTempo(bath, 0.0, 9e5, parameters)  # 9e8 steps in a window that never closes


def test_epsrel_below_the_floating_point_floor_is_refused():
    with pytest.raises(ValueError, match="below what a double-precision SVD"):
        nm.TempoParameters(dt=0.1, epsrel=1e-16)
    with pytest.raises(ValueError, match="below what a double-precision SVD"):
        nm.GibbsParameters(10, 1e-17)
