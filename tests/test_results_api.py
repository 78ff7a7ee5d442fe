"""Results people can use: the readable ``Dynamics`` (repr, several expectations at
once, selection by time, plot), its run statistics and provenance through files,
progress types and the ``nonmarkov`` logger."""

from __future__ import annotations

import logging
import os
import subprocess
import sys

import matplotlib
import numpy
import pytest

import nonmarkov as nm
from nonmarkov.progress import PROGRESS_TYPES, Progress, check_progress_type

matplotlib.use("Agg")

SX, SY, SZ = (nm.operators.sigma(name) for name in "xyz")


@pytest.fixture(scope="module")
def model():
    system = nm.System(0.5 * SX)
    bath = nm.Bath(0.5 * SZ, nm.PowerLawSD(0.1, 1.0, 5.0, "exponential", 0.2))
    parameters = nm.TempoParameters(dt=0.1, tcut=0.3, epsrel=1e-6)
    return system, bath, parameters


@pytest.fixture(scope="module")
def tempo_dynamics(model):
    system, bath, parameters = model
    return nm.tempo_compute(
        system, bath, nm.operators.spin_dm("up"), 0.0, 1.0, parameters, progress_type="silent"
    )


def test_repr_tells_times_steps_dimension_and_method(tempo_dynamics):
    text = repr(tempo_dynamics)
    for part in ("11 states", "t = 0 .. 1", "10 steps", "dt 0.1", "d = 2", "by Tempo"):
        assert part in text, text
    assert "epsrel=1e-06" in text and "dkmax=3" in text and "max bond" in text
    assert repr(nm.Dynamics(name="x")) == "<Dynamics 'x': empty>"
    assert str(tempo_dynamics).startswith("Dynamics")  # str unchanged


def test_run_statistics_are_recorded_by_tempo_and_compute_dynamics(model, tempo_dynamics):
    stats = tempo_dynamics.statistics
    assert stats["num_steps"] == 10 and stats["wall_time_s"] > 0
    assert 1 <= stats["max_bond_dimension"] <= 16
    system, bath, parameters = model
    pt = nm.pt_tempo_compute(bath, 0.0, 0.5, parameters, progress_type="silent")
    dynamics = nm.compute_dynamics(system, nm.operators.spin_dm("up"), process_tensor=pt)
    assert dynamics.statistics["max_bond_dimension"] == int(max(pt.get_bond_dimensions()))
    assert dynamics.statistics["num_steps"] == 5
    alone = nm.compute_dynamics(system, nm.operators.spin_dm("up"), dt=0.1, num_steps=2)
    assert alone.statistics["max_bond_dimension"] is None
    assert "by compute_dynamics on PtTempo (dt=0.1" in repr(dynamics)


def test_expectations_of_several_operators(tempo_dynamics):
    states = tempo_dynamics.states
    times, values = tempo_dynamics.expectations_of([SX, SY, SZ], real=True)
    assert values.shape == (3, len(tempo_dynamics)) and values.dtype == float
    for row, operator in zip(values, (SX, SY, SZ)):
        _, single = tempo_dynamics.expectations(operator, real=True)
        numpy.testing.assert_allclose(row, single, rtol=0, atol=1e-14)
    numpy.testing.assert_allclose(times, tempo_dynamics.times)
    _, complex_values = tempo_dynamics.expectations_of(numpy.array([SX, SZ]))
    assert complex_values.dtype == complex
    _, labelled = tempo_dynamics.expectations_of({"z": SZ, "x": SX})
    assert list(labelled) == ["z", "x"]
    numpy.testing.assert_allclose(labelled["z"], numpy.einsum("ij,nji->n", SZ, states))
    with pytest.raises(ValueError, match="empty"):
        tempo_dynamics.expectations_of([])
    with pytest.raises(TypeError, match="list of"):
        tempo_dynamics.expectations_of(SZ)
    with pytest.raises(ValueError, match="dimension"):
        tempo_dynamics.expectations_of([numpy.eye(3)])
    assert nm.Dynamics().expectations_of([SZ]) == (None, None)


def test_expectations_keeps_oqupy_behaviour(tempo_dynamics):
    times, trace = tempo_dynamics.expectations()
    numpy.testing.assert_allclose(trace, 1.0, atol=1e-10)
    assert trace.dtype == complex
    _, z = tempo_dynamics.expectations(SZ, real=True)
    assert z.dtype == float and z[0] == pytest.approx(1.0)
    assert nm.Dynamics().expectations(SZ) == (None, None)


def test_between_selects_times_inclusive(tempo_dynamics):
    part = tempo_dynamics.between(0.2, 0.5)
    numpy.testing.assert_allclose(part.times, [0.2, 0.3, 0.4, 0.5])
    numpy.testing.assert_array_equal(part.states, tempo_dynamics.states[2:6])
    assert part.metadata["selected_times"] == [0.2, 0.5]
    assert part.metadata["created_by"] == "Tempo" and part.name == tempo_dynamics.name
    assert len(tempo_dynamics.between(5.0, 6.0)) == 0
    assert len(tempo_dynamics.between(-float("inf"), float("inf"))) == len(tempo_dynamics)
    with pytest.raises(ValueError, match="before start"):
        tempo_dynamics.between(0.5, 0.2)


def test_plot_draws_one_line_per_operator(tempo_dynamics):
    import matplotlib.pyplot as plt

    ax = tempo_dynamics.plot()
    assert [line.get_label() for line in ax.get_lines()] == ["sigma_x", "sigma_y", "sigma_z"]
    figure, ax2 = plt.subplots()
    assert tempo_dynamics.plot(SZ, ax=ax2, label="run") is ax2
    assert [line.get_label() for line in ax2.get_lines()] == ["run: operator 0"]
    tempo_dynamics.plot({"pop": numpy.diag([1.0, 0.0])}, ax=ax2)
    numpy.testing.assert_allclose(ax2.get_lines()[-1].get_ydata()[0], 1.0)
    plt.close("all")
    three = nm.Dynamics([0.0], [numpy.eye(3) / 3])
    assert list(three.default_observables()) == ["proj_0", "proj_1", "proj_2"]


@pytest.mark.parametrize("extension", [".h5", ".npz"])
def test_provenance_survives_export_and_import(tmp_path, tempo_dynamics, extension, caplog):
    dynamics = tempo_dynamics.between(0.0, 1.0)
    dynamics.metadata["provenance"] = {"library_version": nm.__version__, "command": ["x"]}
    filename = str(tmp_path / f"dynamics{extension}")
    with caplog.at_level(logging.INFO, logger="nonmarkov"):
        dynamics.export(filename)
    assert filename in caplog.text  # where a file was written: the logger, not print
    loaded = nm.import_dynamics(filename)
    assert loaded.metadata == dynamics.metadata
    assert loaded.statistics == tempo_dynamics.statistics
    assert repr(loaded) == repr(dynamics)


def test_progress_types_everywhere(model, capsys):
    assert PROGRESS_TYPES == ("bar", "simple", "silent")
    system, bath, parameters = model
    nm.tempo_compute(
        system, bath, nm.operators.spin_dm("up"), 0.0, 0.3, parameters, progress_type="simple"
    )
    err = capsys.readouterr().err
    assert "TEMPO: 3 steps ..." in err and "TEMPO: done" in err
    pt = nm.pt_tempo_compute(bath, 0.0, 0.2, parameters, progress_type="simple")
    nm.compute_dynamics(
        system, nm.operators.spin_dm("up"), process_tensor=pt, progress_type="simple"
    )
    err = capsys.readouterr().err
    assert "PT-TEMPO: 2 steps" in err and "dynamics: 2 steps" in err
    with pytest.raises(ValueError, match=r"\['bar', 'simple', 'silent'\]"):
        check_progress_type("quiet")
    with Progress(2, "silent", "x") as progress:
        progress.update()
    assert capsys.readouterr().err == ""


def test_nonmarkov_progress_sets_the_default():
    env = dict(os.environ, NONMARKOV_BACKEND="numpy", NONMARKOV_PROGRESS="simple")
    code = "from nonmarkov import progress; print(progress.check_progress_type(None))"
    good = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120
    )
    assert good.returncode == 0, good.stderr
    assert good.stdout.strip() == "simple"
    env["NONMARKOV_PROGRESS"] = "loud"
    bad = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120
    )
    assert bad.returncode != 0
    assert "NONMARKOV_PROGRESS" in bad.stderr and "['bar', 'simple', 'silent']" in bad.stderr
