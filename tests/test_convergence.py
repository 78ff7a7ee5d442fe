"""``nonmarkov.converge``: results converged to a tolerance, with error estimates.

On models with exact answers (the independent-boson family of ``models.py``:
several couplings, temperatures, super- and sub-Ohmic baths, a qutrit, and a
spin whose splitting changes in time, which gives TEMPO a genuine error in dt),
at tolerances 1e-3, 1e-4 and 1e-5:

- the true error (max over times and matrix elements of |rho - rho_exact|) is
  at most the estimate, and the estimate at most 10x the true error (both with a
  floor of 1e-12: below it both are rounding);
- the result is within the tolerance of the exact one.

The ladders start from coarse parameters (dt 0.2, a memory cut of two steps) on
short intervals so that each takes a few seconds; the heavier cases are marked
``slow``. A spin-boson model is checked against a converged reference computed
in the test (Richardson extrapolation of full-memory runs, its order checked).
"""

from __future__ import annotations

import math
import os

import numpy as np
import pytest

import nonmarkov as nm
from models import (
    INDEPENDENT_BOSON_MODELS,
    SZ,
    independent_boson,
    independent_boson_exact,
    spectral_density,
    spin_boson,
)
from nonmarkov.methods.extrapolation import on_common_times, richardson

END_TIME = 3.0
ROUNDING = 1e-12
TOLERANCES = (1e-3, 1e-4, 1e-5)


def coarse_start(dt=0.2, dkmax=2, epsrel=1e-7, **extra):
    return nm.TempoParameters(dt=dt, dkmax=dkmax, epsrel=epsrel, **extra)


# (key of INDEPENDENT_BOSON_MODELS, changes): couplings, temperatures, spectral densities
CASES = {
    "ohmic-T0": ("ohmic-T0", {}),
    "strong-T1": ("ohmic-T1", {"alpha": 0.5}),
    "subohmic": ("ohmic-T1", {"zeta": 0.5, "temperature": 0.5}),
    "superohmic": ("superohmic-gaussian", {}),
    "qutrit": ("three-level", {}),
}
FAST = {("ohmic-T0", 1e-3), ("strong-T1", 1e-3), ("strong-T1", 1e-4), ("superohmic", 1e-3)}


def _exact(key, changes, rho0, times):
    model = {**INDEPENDENT_BOSON_MODELS[key], **changes}
    upper = (60.0 if model["cutoff_type"] == "exponential" else 10.0) * model["cutoff"]
    j_function = spectral_density(
        model["alpha"], model["zeta"], model["cutoff"], model["cutoff_type"]
    )
    return independent_boson_exact(
        rho0, model["energies"], model["couplings"], j_function, model["temperature"], times, upper
    )


def _max_error(states, exact):
    return float(np.max(np.abs(np.asarray(states) - exact)))


def _assert_estimate(dynamics, exact, tolerance):
    true = _max_error(dynamics.states, exact)
    estimate = float(np.max(dynamics.error_estimate))
    assert true <= estimate + ROUNDING, (true, estimate)
    # an estimate far below the tolerance (1e-5 of it) is as good as zero: there both
    # are the rounding of the runs compared, which need not be within 10x of each other
    assert estimate <= 10.0 * true + max(ROUNDING, 1e-5 * tolerance), (true, estimate)
    assert true <= tolerance
    assert estimate <= tolerance
    assert dynamics.error_estimate.shape == (len(dynamics),)


@pytest.mark.parametrize(
    "case, tolerance",
    [
        pytest.param(
            case, tol, marks=() if (case, tol) in FAST else pytest.mark.slow, id=f"{case}-{tol:g}"
        )
        for case in CASES
        for tol in TOLERANCES
    ],
)
def test_independent_boson_estimate_brackets_the_true_error(case, tolerance):
    key, changes = CASES[case]
    system, bath, rho0 = independent_boson(key, **changes)
    dynamics = nm.converge(system, bath, rho0, 0.0, END_TIME, tolerance, parameters=coarse_start())
    _assert_estimate(dynamics, _exact(key, changes, rho0, dynamics.times), tolerance)


# a spin whose splitting E(t) = 0.3 + 0.8 sin(2 t) changes in time, S = sz / 2 commuting
# with H_S(t); midpoint Liouvillians (subdiv_limit=None) give an error of second order in dt


def _splitting(t):
    return 0.3 + 0.8 * math.sin(2.0 * t)


def _time_dependent_model():
    system = nm.TimeDependentSystem(
        lambda t: np.diag([_splitting(t), -_splitting(t)]).astype(complex)
    )
    _, bath, rho0 = independent_boson("ohmic-T1")
    return system, bath, rho0


def _time_dependent_exact(rho0, times):
    states = _exact("ohmic-T1", {"energies": (0.0, 0.0)}, rho0, times)
    phase = 2.0 * (0.3 * times + 0.8 * (1.0 - np.cos(2.0 * times)) / 2.0)
    states[:, 0, 1] *= np.exp(-1j * phase)
    states[:, 1, 0] *= np.exp(1j * phase)
    return states


@pytest.mark.parametrize(
    "tolerance", [1e-3, 1e-4, pytest.param(1e-5, marks=pytest.mark.slow)], ids=str
)
def test_dt_error_of_a_time_dependent_splitting(tolerance):
    system, bath, rho0 = _time_dependent_model()
    start = nm.TempoParameters(dt=0.2, epsrel=1e-8, subdiv_limit=None)  # full memory
    dynamics = nm.converge(system, bath, rho0, 0.0, 1.6, tolerance, parameters=start)
    _assert_estimate(dynamics, _time_dependent_exact(rho0, dynamics.times), tolerance)
    ladder = dynamics.statistics["ladder"]
    assert ladder[0]["contributions"]["dt"] > 1e-4  # the dt error is what the ladder removes
    assert ladder[-1]["accepted"]
    if tolerance < 3e-4:  # below the error at dt 0.2: dt was refined
        assert ladder[-1]["dt"] < 0.2
    if len(ladder) > 2:  # three levels in dt: the order was observed and checked
        assert ladder[-1]["dt_order"]["order_check"] == "passed"
        assert ladder[-1]["dt_order"]["observed_order"] == pytest.approx(2.0, abs=0.2)


def test_ladder_table_statistics_file_and_plot(tmp_path):
    system, bath, rho0 = independent_boson("ohmic-T1", alpha=0.5)
    sz = 0.5 * SZ
    dynamics = nm.converge(
        system, bath, rho0, 0.0, END_TIME, 1e-3, parameters=coarse_start(), observables={"sz": sz}
    )
    record = dynamics.metadata["convergence"]
    assert record["applies_to"] == ["sz"] and record["tolerance"] == 1e-3
    ladder = dynamics.statistics["ladder"]
    row = ladder[-1]
    assert row["accepted"] and set(row["contributions"]) == {"dt", "memory", "epsrel"}
    assert {run["role"] for run in row["runs"]} == {"base", "dt", "memory", "epsrel"}
    assert all(run["cost_units"] == run["num_steps"] * run["dkmax"] for run in row["runs"])
    assert dynamics.statistics["ladder_cost_units"] == sum(r["cost_units"] for r in ladder)
    assert record["parameters"]["dt"] == row["dt"]
    # the observable's error: at most its estimate, which is within the tolerance
    exact = _exact("ohmic-T1", {"alpha": 0.5}, rho0, dynamics.times)
    _, values = dynamics.expectations(sz)
    true = np.abs(values - np.einsum("ij,nji->n", sz, exact))
    errors = dynamics.observable_errors()["sz"]
    assert np.all(true <= errors + ROUNDING) and np.max(errors) <= 1e-3
    # the file keeps the estimates and the ladder
    path = tmp_path / "converged.npz"
    dynamics.export(str(path))
    loaded = nm.import_dynamics(str(path))
    np.testing.assert_array_equal(loaded.error_estimate, dynamics.error_estimate)
    assert loaded.statistics["ladder"] == ladder
    # an old result has no estimate
    assert nm.Dynamics([0.0], [rho0]).error_estimate is None
    # the plot draws the estimate as a band
    matplotlib = pytest.importorskip("matplotlib")
    matplotlib.use("Agg")
    ax = dynamics.plot()
    assert len(ax.collections) == 3  # one band per default observable
    matplotlib.pyplot.close("all")


def test_tempo_compute_option_gives_the_same_ladder():
    system, bath, rho0 = independent_boson("ohmic-T1", alpha=0.5)
    start = coarse_start()
    direct = nm.converge(system, bath, rho0, 0.0, END_TIME, 1e-3, parameters=start)
    option = nm.tempo_compute(
        system, bath, rho0, 0.0, END_TIME, start, 1e-3, progress_type="silent", converge=True
    )
    np.testing.assert_allclose(option.states, direct.states, atol=1e-12)
    np.testing.assert_allclose(option.error_estimate, direct.error_estimate, atol=1e-12)
    # without converge=True, tempo_compute is OQuPy's
    plain = nm.tempo_compute(system, bath, rho0, 0.0, END_TIME, start, progress_type="silent")
    assert "convergence" not in plain.metadata
    with pytest.raises(ValueError, match="converge=True only"):
        nm.tempo_compute(system, bath, rho0, 0.0, 1.0, start, max_cost=10)


def test_process_tensor_route_shares_the_ladder_between_systems():
    _, bath, rho0 = independent_boson("ohmic-T1", alpha=0.5)
    systems = [
        nm.System(np.diag([0.3, -0.3]).astype(complex)),
        nm.System(np.diag([0.8, -0.8]).astype(complex)),
    ]
    results = nm.converge(
        systems,
        bath,
        [rho0, rho0],
        0.0,
        END_TIME,
        1e-3,
        parameters=coarse_start(),
        method="process_tensor",
    )
    assert len(results) == 2
    for energy, dynamics in zip((0.3, 0.8), results):
        exact = _exact(
            "ohmic-T1", {"alpha": 0.5, "energies": (energy, -energy)}, rho0, dynamics.times
        )
        _assert_estimate(dynamics, exact, 1e-3)
    assert results[0].statistics["ladder"] == results[1].statistics["ladder"]
    with pytest.raises(ValueError, match="method='process_tensor'"):
        nm.converge(systems, bath, [rho0, rho0], 0.0, 1.0)


def test_cost_limit_names_the_parameter_the_best_estimate_and_the_next_cost():
    system, bath, rho0 = independent_boson("ohmic-T0")
    with pytest.raises(nm.ConvergenceError) as info:
        nm.converge(
            system, bath, rho0, 0.0, END_TIME, 1e-5, parameters=coarse_start(), max_cost=300
        )
    error = info.value
    assert error.parameter is not None and "memory" in error.parameter
    assert "memory" in str(error) and "next level would cost" in str(error)
    assert error.next_cost > 0 and error.next_seconds > 0
    assert math.isfinite(error.estimate) and error.estimate > 1e-5
    assert isinstance(error.best, nm.Dynamics) and error.best.error_estimate is not None
    assert sum(row["cost_units"] for row in error.ladder) + error.next_cost > 300
    # a limit below the first level: nothing ran
    with pytest.raises(nm.ConvergenceError, match="no level could run") as info:
        nm.converge(system, bath, rho0, 0.0, END_TIME, 1e-3, parameters=coarse_start(), max_cost=5)
    assert info.value.best is None and info.value.parameter is None


def test_bad_input():
    system, bath, rho0 = independent_boson("ohmic-T0")
    with pytest.raises(ValueError, match="tolerance must be < 1"):
        nm.converge(system, bath, rho0, 0.0, 1.0, 2.0)
    with pytest.raises(ValueError, match="end_time"):
        nm.converge(system, bath, rho0, 1.0, 0.5)
    with pytest.raises(ValueError, match="unknown method"):
        nm.converge(system, bath, rho0, 0.0, 1.0, method="heom")
    with pytest.raises(TypeError, match="observables must be"):
        nm.converge(system, bath, rho0, 0.0, 1.0, observables=SZ, parameters=coarse_start())
    with pytest.raises(TypeError, match="parameters must be TempoParameters"):
        nm.converge(system, bath, rho0, 0.0, 1.0, parameters={"dt": 0.1})


@pytest.mark.slow
def test_spin_boson_against_a_converged_reference():
    """Spin-boson (alpha 0.1, T 1, bias 0.2): the reference is the Richardson
    extrapolation of full-memory runs at dt 0.05, 0.025, 0.0125 (epsrel 1e-9; order
    check passed, its own error estimate ~1.5e-6)."""
    system, bath, rho0 = spin_boson(0.1, 1.0)
    end = 1.0
    levels = [
        nm.tempo_compute(
            system,
            bath,
            rho0,
            0.0,
            end,
            nm.TempoParameters(dt=dt, epsrel=1e-9),
            progress_type="silent",
        )
        for dt in (0.05, 0.025, 0.0125)
    ]
    reference = richardson(levels)
    assert reference.order_check == "passed" and reference.max_error < 1e-5
    for tolerance in (1e-3, 1e-4):
        dynamics = nm.converge(
            system, bath, rho0, 0.0, end, tolerance, parameters=coarse_start(0.1, 4, 1e-6)
        )
        times, (states, exact), _ = on_common_times(
            [dynamics, (reference.times, reference.values)], reference.times
        )
        true = _max_error(states, exact)
        estimate = float(np.max(dynamics.error_estimate))
        assert true <= estimate and estimate <= 10.0 * true and true <= tolerance


SPEC = """
name = "converged"

[system]
hamiltonian = { sigma_z = 0.3 }
initial_state = "x+"

[bath]
coupling = { sigma_z = 0.5 }
alpha = 0.5
cutoff = 4.0
temperature = 1.0

[parameters]
dt = 0.2
dkmax = 2
epsrel = 1e-7

[times]
end = 3.0

[output]
observables = ["sigma_x", "sigma_z"]

[convergence]
tolerance = 1e-3
observables = ["sigma_x"]
"""


def test_a_convergence_table_in_a_spec_runs_converge_and_inspect_shows_the_ladder(tmp_path, capsys):
    from nonmarkov import cli
    from nonmarkov.io.spec import SpecError, parse_spec

    spec = tmp_path / "converged.toml"
    spec.write_text(SPEC)
    out = tmp_path / "out"
    assert cli.main(["run", str(spec), "-o", str(out), "--progress", "silent"]) == 0
    files = [f for f in os.listdir(out) if f.endswith((".h5", ".npz"))]
    assert len(files) == 1
    result = nm.import_dynamics(str(out / files[0]))
    record = result.metadata["convergence"]
    assert record["applies_to"] == ["sigma_x"] and record["estimate"] <= 1e-3
    system, bath, rho0 = independent_boson("ohmic-T1", alpha=0.5)
    direct = nm.converge(
        system,
        bath,
        np.array([[0.5, 0.5], [0.5, 0.5]], dtype=complex),
        0.0,
        3.0,
        1e-3,
        parameters=coarse_start(),
        observables={"sigma_x": np.array([[0, 1], [1, 0]], dtype=complex)},
    )
    np.testing.assert_allclose(result.states, direct.states, atol=1e-10)
    capsys.readouterr()
    assert cli.main(["inspect", str(out / files[0])]) == 0
    shown = capsys.readouterr().out
    assert "convergence: tolerance 0.001" in shown and "accepted" in shown
    with pytest.raises(SpecError, match="convergence.tolerance"):
        parse_spec(SPEC.replace("tolerance = 1e-3", "tolerance = 2.0"))
    with pytest.raises(SpecError, match="convergence"):
        parse_spec(SPEC.replace("tolerance = 1e-3", "tolerance = 1e-3\nmax_cost = -1"))
