"""The command line: ``nonmarkov run SPEC.toml``, ``plot``, ``inspect``, ``--version``.

The spec checks run in-process (:func:`nonmarkov.io.spec.parse_spec`); the
commands run as real subprocesses on spec files in ``tmp_path``, on the
session's backend, few of them (each one imports the library). A run's file
holds the dynamics of the equivalent Python calls to 1e-12: the spec names the
session's engine options (``[options]``), so both make the same calls.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time

import numpy
import pytest

import nonmarkov as nm
from nonmarkov import backends, cli
from nonmarkov.io.spec import SpecError, load_spec, parse_spec
from nonmarkov.methods import spec_run
from nonmarkov.options import default_options
from nonmarkov.progress import Progress, remaining_time_text

SIGMA_X, SIGMA_Z = nm.operators.sigma("x"), nm.operators.sigma("z")

BASE = """
name = "tiny"
method = "tempo"

[system]
hamiltonian = { sigma_x = 0.5 }
initial_state = "up"

[bath]
coupling = { sigma_z = 0.5 }
alpha = 0.1
cutoff = 5.0
temperature = 0.2

[parameters]
dt = 0.1
tcut = 0.3
epsrel = 1e-6

[times]
end = 1.0
"""


def _options_table() -> str:
    """The session's engine options as a spec table (what the subprocess must use)."""
    options = default_options()
    return (
        f"\n[options]\ndeterministic = {str(options.deterministic).lower()}\n"
        f'window_sweep = "{options.window_sweep}"\n'
    )


def _system(coefficient: float = 0.5) -> nm.System:
    return nm.System(coefficient * SIGMA_X, name="system")


def _bath() -> nm.Bath:
    return nm.Bath(0.5 * SIGMA_Z, nm.PowerLawSD(0.1, 1.0, 5.0, "exponential", 0.2), name="bath")


PARAMETERS = {"dt": 0.1, "tcut": 0.3, "epsrel": 1e-6}


def _cli(*args: str, cwd: str) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    env["NONMARKOV_BACKEND"] = backends.get_backend()
    env["NONMARKOV_PRECISION"] = backends.get_precision()
    env["MPLBACKEND"] = "Agg"
    return subprocess.run(
        [sys.executable, "-m", "nonmarkov", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def _replace(text: str, old: str, new: str) -> str:
    assert old in text, old
    return text.replace(old, new)


# ----------------------------------------------------------------------------- spec checks


@pytest.mark.parametrize(
    ("old", "new", "expected"),
    [
        ('method = "tempo"', 'method = "tebd"', ["method", "'tempo', 'pt-tempo', 'uniform'"]),
        (
            'method = "tempo"',
            'method = { name = "pt-tempo", construction = "fast" }',
            ["method.construction", "'sequential', 'repeated_block', 'divide_and_conquer'"],
        ),
        (
            "alpha = 0.1",
            'alpha = 0.1\ncutoff_type = "soft"',
            ["bath.cutoff_type", "'exponential', 'gaussian', 'hard'"],
        ),
        (
            "sigma_x = 0.5",
            "sigma_w = 0.5",
            ["system.hamiltonian", "unknown operator 'sigma_w'", "sigma_x"],
        ),
        ('initial_state = "up"', 'initial_state = "sideways"', ["system.initial_state", "'x+'"]),
        ("alpha = 0.1", "alpha = -0.1", ["bath.alpha", ">= 0"]),
        ("alpha = 0.1", 'alpha = "big"', ["bath.alpha", "must be a real number"]),
        ("epsrel = 1e-6", "epsrel = 2.0", ["parameters.epsrel: epsrel must lie in (0, 1]"]),
        ("end = 1.0", "end = 1.0\nstart = '0'", ["times.start must be a real number"]),
        (
            "initial_state",
            "lindblad = { rate = -0.1, operator = 'sigma_-' }\ninitial_state",
            ["system.lindblad[0].rate: gammas[0] must be >= 0"],
        ),
        ("temperature = 0.2", "temprature = 0.2", ["unknown key bath.temprature", "'temperature'"]),
        ("end = 1.0", "stop = 1.0", ["times.stop", "'start', 'end'"]),
        ("tcut = 0.3", "tcut = 0.3\ndkmax = 3", ["parameters", "tcut or dkmax"]),
        (
            "tcut = 0.3\nepsrel = 1e-6",
            "epsrel = 1e-6\nexponential_tail = true",
            ["parameters", "exponential_tail", "memory cut"],
        ),
        ("dt = 0.1", "dt = 0.1\nguess = true", ["parameters", "guess = true takes only"]),
        (
            "sigma_x = 0.5",
            "sigma_x = 0.5, sigma_y = 0.5, sigma_z = '1j'",
            ["system.hamiltonian", "Hermitian"],
        ),
        ("end = 1.0", "end = 1.0\n[sweep]\nbath.alpha = 0.2", ["sweep.bath.alpha", "list"]),
        ("end = 1.0", "end = 1.0\n[sweep]\nbaths.alpha = [0.2]", ["sweep.baths.alpha", "keys of"]),
        (
            "end = 1.0",
            "end = 1.0\n[sweep]\nbath.alpha = [0.1, -1.0]",
            ["bath.alpha", "sweep point bath.alpha = -1.0"],
        ),
        ("end = 1.0", "end = 1.0\n[options]\nspeed = 3", ["[options]", "deterministic"]),
        (
            "end = 1.0",
            "end = 1.0\n[output]\nobservables = ['sigma_z*sigma_q']",
            ["output.observables[0]", "'sigma_q'"],
        ),
    ],
)
def test_spec_errors_name_the_key_and_the_allowed_values(old, new, expected):
    text = _replace(BASE, old, new)
    with pytest.raises(SpecError) as error:
        parse_spec(text, source="test.toml")
    message = str(error.value)
    assert message.startswith("test.toml: ")
    for part in expected:
        assert part in message, message


def test_a_spec_refuses_the_tail_for_a_method_without_it():
    text = _replace(BASE, "epsrel = 1e-6", "epsrel = 1e-6\nexponential_tail = true")
    parse_spec(text, source="test.toml")  # TEMPO takes it, for any bath
    with pytest.raises(SpecError, match="parameters.exponential_tail is run by method 'tempo'"):
        parse_spec(_replace(text, 'method = "tempo"', 'method = "uniform"'), source="test.toml")


def test_a_spec_takes_the_values_the_library_takes():
    """Every value is checked by the library's own objects, once: a spec accepts what
    they accept (an infinite add_correlation_time, a choice in capitals) and holds
    the objects they built."""
    text = _replace(BASE, "epsrel = 1e-6", "epsrel = 1e-6\nadd_correlation_time = inf")
    text = _replace(text, "temperature = 0.2", "temperature = 0.2\ncutoff_type = 'Gaussian'")
    run = parse_spec(text).runs[0]
    expected = nm.TempoParameters(dt=0.1, tcut=0.3, epsrel=1e-6, add_correlation_time=numpy.inf)
    assert run.tempo_parameters.add_correlation_time == expected.add_correlation_time
    assert run.tempo_parameters.dkmax == expected.dkmax == 3
    assert run.baths[0].bath.correlations.cutoff_type == "gaussian"
    numpy.testing.assert_array_equal(run.system.hamiltonian, 0.5 * SIGMA_X)


def test_spec_errors_of_the_method_and_the_system():
    two_baths = BASE.replace("[bath]", "[[bath]]") + (
        "[[bath]]\ncoupling = { sigma_x = 0.5 }\nalpha = 0.1\ncutoff = 5.0\n"
    )
    with pytest.raises(SpecError, match="method 'tempo' takes exactly one bath"):
        parse_spec(two_baths)
    uniform = _replace(BASE, 'method = "tempo"', 'method = "uniform"').replace("tcut = 0.3\n", "")
    with pytest.raises(SpecError, match="memory cut"):
        parse_spec(uniform)
    three = _replace(BASE, "[system]", "[system]\ndimension = 3")
    with pytest.raises(SpecError, match="two levels"):
        parse_spec(three)
    with pytest.raises(SpecError, match="not valid TOML"):
        parse_spec("name = ")
    with pytest.raises(SpecError, match=r"\[times\] is missing"):
        parse_spec(BASE.split("[times]")[0])


def test_spec_forms_of_operators_states_and_sweeps():
    text = _replace(
        BASE,
        "[times]",
        "[output]\nobservables = { up = 'proj_0', coherence = [[0, '0.5-0.5j'], ['0.5+0.5j', 0]] }"
        "\n[times]",
    )
    text = _replace(text, 'initial_state = "up"', "initial_state = [[0.5, 0.5], [0.5, 0.5]]")
    text = _replace(text, "{ sigma_x = 0.5 }", "{ sigma_x = 0.5, sigma_z = 0.0 }")
    text += "[sweep]\nsystem.hamiltonian.sigma_z = [0.0, 1.0]\n'bath.alpha' = [0.1, 0.2, 0.3]\n"
    spec = parse_spec(text)
    assert len(spec.runs) == 6 and spec.sweep_keys == ["system.hamiltonian.sigma_z", "bath.alpha"]
    last = spec.runs[-1]
    numpy.testing.assert_allclose(last.hamiltonian, 0.5 * SIGMA_X + SIGMA_Z)
    assert last.baths[0].alpha == 0.3 and last.point == {
        "system.hamiltonian.sigma_z": 1.0,
        "bath.alpha": 0.3,
    }
    numpy.testing.assert_allclose(last.initial_state, nm.operators.spin_dm("x+"))
    numpy.testing.assert_allclose(last.observables["coherence"][0, 1], 0.5 - 0.5j)
    # runs that differ in the system only share the process tensor key, others do not
    keys = [run.process_tensor_key() for run in spec.runs]
    assert keys[0] == keys[3] and keys[0] != keys[1]


def test_existing_results_are_not_replaced_unless_asked(tmp_path, capsys):
    spec = parse_spec(BASE, source="tiny.toml")
    (tmp_path / "tiny.h5").write_text("older results")
    with pytest.raises(FileExistsError, match="overwrite=True"):  # Python's words
        spec_run.prepare_spec(spec, str(tmp_path))
    assert len(spec_run.prepare_spec(spec, str(tmp_path), overwrite=True)) == 1
    (tmp_path / "tiny.toml").write_text(BASE + "[sweep]\nbath.alpha = [0.1, 0.2]\n")
    arguments = ["run", str(tmp_path / "tiny.toml"), "-o", str(tmp_path), "--progress", "silent"]
    assert cli.main([*arguments, "--check"]) == 0  # lists the runs, runs nothing
    out = capsys.readouterr().out
    assert "2 run(s), method tempo" in out and "tiny_1.h5" in out and "bath.alpha = 0.2" in out
    assert "tiny_sweep.h5" in out
    assert sorted(os.listdir(tmp_path)) == ["tiny.h5", "tiny.toml"]
    (tmp_path / "tiny_1.h5").write_text("older results")
    assert cli.main(arguments) == 2  # before the first run
    err = capsys.readouterr().err
    assert "tiny_1.h5 exists" in err and "--overwrite" in err and "overwrite=True" not in err
    assert sorted(os.listdir(tmp_path)) == ["tiny.h5", "tiny.toml", "tiny_1.h5"]


# ----------------------------------------------------------------------------- runs


@pytest.mark.slow
def test_run_writes_the_dynamics_of_tempo_and_a_plot(tmp_path):
    (tmp_path / "tiny.toml").write_text(BASE + _options_table())
    result = _cli("run", "tiny.toml", "--output", "out", "--progress", "silent", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "out/tiny.h5" in result.stdout and "out/tiny.png" in result.stdout
    assert (tmp_path / "out" / "tiny.png").stat().st_size > 1000
    dynamics = nm.import_dynamics(str(tmp_path / "out" / "tiny.h5"))
    expected = nm.tempo_compute(
        _system(),
        _bath(),
        nm.operators.spin_dm("up"),
        0.0,
        1.0,
        nm.TempoParameters(**PARAMETERS),
        progress_type="silent",
    )
    numpy.testing.assert_allclose(dynamics.times, expected.times, rtol=0, atol=1e-12)
    numpy.testing.assert_allclose(dynamics.states, expected.states, rtol=0, atol=1e-12)
    spec = dynamics.metadata["spec"]
    assert spec["text"] == BASE + _options_table() and spec["method"] == "tempo"
    assert dynamics.metadata["provenance"]["backend"] == backends.get_backend()
    assert dynamics.metadata["created_by"] == "Tempo"
    assert dynamics.statistics["max_bond_dimension"] >= 1

    # the results file: inspect (in-process) and plot (a subprocess)
    assert cli.main(["inspect", str(tmp_path / "out" / "tiny.h5")]) == 0
    plotted = _cli("plot", "out/tiny.h5", "--output", "again.png", cwd=tmp_path)
    assert plotted.returncode == 0, plotted.stderr
    assert (tmp_path / "again.png").stat().st_size > 1000


@pytest.mark.slow
def test_run_reuses_one_process_tensor_over_a_sweep_of_systems(tmp_path):
    text = _replace(
        BASE, 'method = "tempo"', 'method = { name = "pt-tempo", save_process_tensor = true }'
    )
    text += _options_table() + "[sweep]\nsystem.hamiltonian.sigma_x = [0.5, 1.0]\n"
    (tmp_path / "sweep.toml").write_text(text)
    result = _cli("run", "sweep.toml", "-o", "out", "--progress", "silent", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    pt = nm.pt_tempo_compute(
        _bath(), 0.0, 1.0, nm.TempoParameters(**PARAMETERS), progress_type="silent"
    )
    for k, coefficient in enumerate([0.5, 1.0]):
        dynamics = nm.import_dynamics(str(tmp_path / "out" / f"tiny_{k}.h5"))
        expected = nm.compute_dynamics(
            _system(coefficient),
            nm.operators.spin_dm("up"),
            process_tensor=pt,
            progress_type="silent",
        )
        numpy.testing.assert_allclose(dynamics.states, expected.states, rtol=0, atol=1e-12)
        assert dynamics.metadata["process_tensor_build"]["reused"] is (k == 1)
        assert dynamics.metadata["spec"]["point"] == {"system.hamiltonian.sigma_x": coefficient}
    assert "reused" in result.stdout and "wrote out/tiny_sweep.h5" in result.stdout
    # the saved process tensor: one file (the second run reused it), described by inspect
    assert sorted(os.listdir(tmp_path / "out")) == [
        "tiny.png",
        "tiny_0.h5",
        "tiny_0_pt.h5",
        "tiny_1.h5",
        "tiny_sweep.h5",
    ]
    # the sweep's results file: the grid by key path and each run's states
    swept = nm.import_sweep(str(tmp_path / "out" / "tiny_sweep.h5"))
    assert swept.names == ["system.hamiltonian.sigma_x"] and not swept.failed
    numpy.testing.assert_array_equal(swept.grid["system.hamiltonian.sigma_x"], [0.5, 1.0])
    first = nm.import_dynamics(str(tmp_path / "out" / "tiny_0.h5"))
    numpy.testing.assert_array_equal(swept.stack("states")[0], first.states)
    inspected = _cli("inspect", "out/tiny_0_pt.h5", cwd=tmp_path)
    assert inspected.returncode == 0, inspected.stderr
    assert "kind: process tensor" in inspected.stdout
    assert "steps: 10" in inspected.stdout and "dt: 0.1" in inspected.stdout
    assert f"max bond dimension: {max(pt.get_bond_dimensions())}" in inspected.stdout
    # named after the spec and its bath, not "Unnamed PtTempo"; its repr says what it is
    assert "name: tiny, bath" in inspected.stdout
    saved = nm.import_process_tensor(str(tmp_path / "out" / "tiny_0_pt.h5"))
    assert repr(saved).startswith("<FileProcessTensor 'tiny, bath'")
    assert "10 steps of dt=0.1, dimension 2" in repr(saved)
    saved.close()

    # the summary: the build's time and the dynamics' time of each run, the totals
    lines = result.stdout.splitlines()
    assert "process tensor" in lines[0] and "s, dynamics" in lines[0]
    assert "process tensor reused, dynamics" in lines[1]
    assert lines[-1].startswith("done: 2 runs in ") and "process tensors built in" in lines[-1]
    # legends and names say what the swept value is, not "sigma_x=0.5"
    first = nm.import_dynamics(str(tmp_path / "out" / "tiny_0.h5"))
    assert first.name == "tiny (0.5 sigma_x in H)"


def test_export_writes_the_expectation_values_as_csv(tmp_path):
    text = BASE + _options_table() + "[output]\nobservables = ['sigma_z', 'sigma_+']\n"
    (tmp_path / "tiny.toml").write_text(text)
    result = _cli("run", "tiny.toml", "-o", "out", "--progress", "silent", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    dynamics = nm.import_dynamics(str(tmp_path / "out" / "tiny.h5"))
    times, (z, plus) = dynamics.expectations_of([SIGMA_Z, nm.operators.sigma("+")], real=False)

    exported = _cli("export", "out/tiny.h5", "--csv", cwd=tmp_path)  # the file's observables
    assert exported.returncode == 0, exported.stderr
    rows = [line.split(",") for line in exported.stdout.splitlines()]
    assert rows[0] == ["t", "<sigma_z>", "<sigma_+>"] and len(rows) == len(times) + 1
    values = numpy.array(rows[1:], dtype=float)
    numpy.testing.assert_array_equal(values[:, 0], times)
    numpy.testing.assert_array_equal(values[:, 1], z.real)
    numpy.testing.assert_array_equal(values[:, 2], plus.real)

    arguments = ["export", "out/tiny.h5", "--observable", "sigma_+", "--complex", "-o", "p.csv"]
    assert _cli(*arguments, cwd=tmp_path).returncode == 0
    table = numpy.loadtxt(tmp_path / "p.csv", delimiter=",", skiprows=1)
    numpy.testing.assert_array_equal(table[:, 1] + 1j * table[:, 2], plus)
    again = _cli(*arguments, cwd=tmp_path)  # an existing file is kept
    assert again.returncode == 2 and "pass --overwrite" in again.stderr

    misspelt = _cli("export", "out/tiny.h5", "--observable", "sigma_zz", cwd=tmp_path)
    assert misspelt.returncode == 2 and "did you mean 'sigma_z'" in misspelt.stderr


def test_plot_overlays_several_files_with_chosen_observables(tmp_path):
    (tmp_path / "tiny.toml").write_text(
        BASE + _options_table() + "[sweep]\nbath.temperature = [0.2, 1.0]\n"
    )
    assert (
        _cli("run", "tiny.toml", "-o", "out", "--progress", "silent", cwd=tmp_path).returncode == 0
    )
    names = [nm.import_dynamics(str(tmp_path / "out" / f"tiny_{k}.h5")).name for k in (0, 1)]
    assert names == ["tiny (T = 0.2)", "tiny (T = 1)"]
    plotted = _cli(
        "plot",
        "out/tiny_0.h5",
        "out/tiny_1.h5",
        "--observable",
        "sigma_z",
        "-o",
        "both.png",
        cwd=tmp_path,
    )
    assert plotted.returncode == 0, plotted.stderr
    assert (tmp_path / "both.png").stat().st_size > 1000


def test_inspect_shows_every_model_parameter(tmp_path, capsys):
    spec = parse_spec(BASE + "[sweep]\nbath.alpha = [0.1]\n", source="tiny.toml")
    spec_run.run_spec(spec, str(tmp_path), progress_type="silent")
    assert cli.main(["inspect", str(tmp_path / "tiny.h5")]) == 0
    out = capsys.readouterr().out
    assert "..." not in out
    for line in ("temperature: 0.2", "cutoff: 5.0", "alpha: 0.1", "tcut: 0.3", "epsrel: 1e-06"):
        assert line in out, line
    assert "  [sweep]" in out.replace("    ", "  ")  # the spec's text, line by line


def test_spec_mistakes_get_suggestions_and_only_relevant_context():
    with pytest.raises(SpecError, match="did you mean 'temperature'"):
        parse_spec(_replace(BASE, "temperature = 0.2", "temprature = 0.2"))
    with pytest.raises(SpecError, match="did you mean 'pt-tempo'"):
        parse_spec(_replace(BASE, 'method = "tempo"', 'method = "pt_tempo"'))
    drude = _replace(
        BASE, "alpha = 0.1", 'spectral_density = "drude_lorentz"\nreorganisation = 0.1'
    )
    with pytest.raises(SpecError, match="did you mean 'reorganisation_energy'"):
        parse_spec(drude)
    # a sweep over a Hamiltonian term the spec does not have is refused, naming those it has
    with pytest.raises(SpecError, match=r"has no term 'sigma_z'.*its terms are \['sigma_x'\]"):
        parse_spec(BASE + "[sweep]\nsystem.hamiltonian.sigma_z = [0.0, 1.0]\n")
    # an error that every point shares is not blamed on the sweep
    with pytest.raises(SpecError) as error:
        parse_spec(
            _replace(BASE, "epsrel = 1e-6", "epsrel = 2.0") + "[sweep]\nbath.alpha = [0.1]\n"
        )
    assert "parameters.epsrel" in str(error.value) and "sweep point" not in str(error.value)
    with pytest.raises(SpecError, match="at the sweep point bath.alpha = -1.0"):
        parse_spec(BASE + "[sweep]\nbath.alpha = [0.1, -1.0]\n")


def test_the_progress_estimate_is_a_lower_bound_while_the_bond_grows():
    assert remaining_time_text(10, None, growing=False) == "ETA --"
    assert remaining_time_text(30, 2.0, growing=False) == "ETA 1m00s"
    assert remaining_time_text(5, 0.5, growing=True) == "ETA >= 2s (bond growing)"
    assert remaining_time_text(4000, 1.0, growing=False) == "ETA 1h06m"


def test_a_bad_spec_is_a_message_and_exit_status_2_before_anything_runs(tmp_path):
    (tmp_path / "bad.toml").write_text(_replace(BASE, "cutoff = 5.0", "cutof = 5.0"))
    result = _cli("run", "bad.toml", "-o", "out", cwd=tmp_path)
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    assert "unknown key bath.cutof" in result.stderr and "'cutoff'" in result.stderr
    assert not (tmp_path / "out").exists()


def test_version_and_inspect_errors(tmp_path, capsys):
    result = _cli("--version", cwd=tmp_path)
    assert result.returncode == 0 and result.stdout.strip() == f"nonmarkov {nm.__version__}"
    assert cli.main(["inspect", str(tmp_path / "missing.h5")]) == 2
    (tmp_path / "notes.txt").write_text("not a results file")
    assert cli.main(["inspect", str(tmp_path / "notes.txt")]) == 2
    assert "unknown file type" in capsys.readouterr().err


def test_uniform_runs_equal_the_python_calls(tmp_path):
    text = _replace(BASE, 'method = "tempo"', 'method = "uniform"')
    text += _options_table() + "[sweep]\nsystem.initial_state = ['up', 'x-']\n"
    spec = parse_spec(text, source="uniform.toml")
    results = spec_run.run_spec(spec, str(tmp_path), progress_type="silent")
    uniform = nm.pt_uniform_compute(_bath(), nm.TempoParameters(**PARAMETERS))
    for result, state in zip(results, ["up", "x-"]):
        expected = nm.compute_dynamics(
            _system(),
            nm.operators.spin_dm(state),
            num_steps=10,
            process_tensor=uniform,
            progress_type="silent",
        )
        numpy.testing.assert_allclose(result.dynamics.states, expected.states, atol=1e-12)
        stored = nm.import_dynamics(result.results_file)
        numpy.testing.assert_allclose(stored.states, expected.states, atol=1e-12)
    assert [result.reused_process_tensor for result in results] == [False, True]
    assert (tmp_path / "tiny.png").exists()


def test_a_sweep_that_fails_keeps_its_finished_runs_and_resumes(tmp_path, monkeypatch):
    """A spec's sweep runs on the sweeps' runner: a run that fails does not stop the
    others, nothing is written to the outputs, the finished runs are kept, and the
    same call again runs only the one that failed."""
    spec = parse_spec(BASE + _options_table() + "[sweep]\nbath.alpha = [0.1, 0.2, 0.3]\n")
    execute, ran = spec_run.execute, []

    def failing(prepared, *args, **kwargs):
        ran.append(prepared.spec.point["bath.alpha"])
        if prepared.spec.point["bath.alpha"] == 0.2:
            raise ValueError("the run broke")
        return execute(prepared, *args, **kwargs)

    monkeypatch.setattr(spec_run, "execute", failing)
    with pytest.raises(ValueError, match="the run broke") as error:
        spec_run.run_spec(spec, str(tmp_path / "out"), progress_type="silent")
    assert "bath.alpha = 0.2" in "".join(error.value.__notes__) and ran == [0.1, 0.2, 0.3]
    (kept,) = os.listdir(tmp_path / "out")  # the finished runs only, no output yet
    assert kept == os.path.basename(spec_run.sweep_directory(spec, str(tmp_path / "out")))
    older = tmp_path / "out" / "tiny_sweep.points-0123456789ab"  # an earlier spec's
    older.mkdir()

    monkeypatch.setattr(
        spec_run, "execute", lambda *a, **k: (ran.append("again"), execute(*a, **k))[1]
    )
    results = spec_run.run_spec(spec, str(tmp_path / "out"), progress_type="silent")
    assert ran[3:] == ["again"]  # only the run that failed
    assert sorted(os.listdir(tmp_path / "out")) == [
        "tiny.png",
        "tiny_0.h5",
        "tiny_1.h5",
        "tiny_2.h5",
        "tiny_sweep.h5",
    ]
    expected = nm.tempo_compute(
        _system(),
        nm.Bath(0.5 * SIGMA_Z, nm.PowerLawSD(0.3, 1.0, 5.0, "exponential", 0.2), name="bath"),
        nm.operators.spin_dm("up"),
        0.0,
        1.0,
        nm.TempoParameters(**PARAMETERS),
        progress_type="silent",
    )
    stored = nm.import_dynamics(str(tmp_path / "out" / "tiny_2.h5"))
    numpy.testing.assert_allclose(stored.states, expected.states, rtol=0, atol=1e-12)
    assert stored.metadata["spec"]["point"] == {"bath.alpha": 0.3}
    assert [r.dynamics.name for r in results] == [f"tiny (alpha = {a})" for a in (0.1, 0.2, 0.3)]
    swept = nm.import_sweep(str(tmp_path / "out" / "tiny_sweep.h5"))
    numpy.testing.assert_array_equal(swept.stack("states")[2], stored.states)


def test_the_example_specs_are_valid():
    examples = os.path.join(os.path.dirname(__file__), "..", "examples")
    spin_boson = load_spec(os.path.join(examples, "spin_boson.toml"))
    assert [run.baths[0].alpha for run in spin_boson.runs] == [0.05, 0.1, 0.2]
    assert spin_boson.runs[0].method == "tempo" and spin_boson.runs[0].end == 6.0
    reuse = load_spec(os.path.join(examples, "pt_reuse.toml"))
    assert len(reuse.runs) == 6 and len({run.process_tensor_key() for run in reuse.runs}) == 1


def test_several_baths_share_process_tensors_bath_by_bath(tmp_path):
    text = _replace(BASE, 'method = "tempo"', 'method = "pt-tempo"').replace("[bath]", "[[bath]]")
    text = _replace(text, "end = 1.0", "end = 0.5")
    text += "[[bath]]\ncoupling = { sigma_x = 0.5 }\nalpha = 0.02\ncutoff = 3.0\n"
    text += "[sweep]\nbath.1.alpha = [0.02, 0.04]\n"
    results = spec_run.run_spec(parse_spec(text), str(tmp_path), progress_type="silent")
    builds = [result.dynamics.metadata["process_tensor_build"] for result in results]
    assert [build["reused_per_bath"] for build in builds] == [[False, False], [True, False]]
    assert [result.spec.baths[1].alpha for result in results] == [0.02, 0.04]
    second = nm.Bath(0.5 * SIGMA_X, nm.PowerLawSD(0.04, 1.0, 3.0, "exponential", 0.0))
    parameters = nm.TempoParameters(**PARAMETERS)
    pts = [
        nm.pt_tempo_compute(bath, 0.0, 0.5, parameters, progress_type="silent")
        for bath in (_bath(), second)
    ]
    expected = nm.compute_dynamics(
        _system(), nm.operators.spin_dm("up"), process_tensor=pts, progress_type="silent"
    )
    numpy.testing.assert_allclose(results[1].dynamics.states, expected.states, atol=1e-12)


def test_convert_writes_a_process_tensor_file_that_reads_back(tmp_path, capsys):
    bath = nm.Bath(0.5 * nm.operators.sigma("z"), nm.PowerLawSD(0.1, 1, 4.0, temperature=0.5))
    with backends.use_backend("numpy"):
        pt = nm.pt_tempo_compute(
            bath,
            0.0,
            0.5,
            nm.TempoParameters(dt=0.1, tcut=0.3, epsrel=1e-6),
            progress_type="silent",
        )
    source, target = str(tmp_path / "a.hdf5"), str(tmp_path / "b.hdf5")
    pt.export(source)
    assert cli.main(["convert", source, target]) == 0
    assert target in capsys.readouterr().out
    converted = nm.import_process_tensor(target, "simple")
    for k in range(len(pt)):
        numpy.testing.assert_array_equal(converted.get_step_tensor(k)[0], pt.get_step_tensor(k)[0])
    assert cli.main(["convert", source, target]) == 2  # an existing target needs --overwrite
    assert cli.main(["convert", source, target, "--overwrite"]) == 0
    (tmp_path / "notes.txt").write_text("not a process tensor")
    assert cli.main(["convert", str(tmp_path / "notes.txt"), str(tmp_path / "c.hdf5")]) == 2
    assert not (tmp_path / "c.hdf5").exists()


def test_the_python_example_and_the_spec_write_different_files(tmp_path):
    """``python examples/spin_boson.py`` leaves what ``nonmarkov run
    examples/spin_boson.toml`` writes (and would refuse to replace) alone."""
    examples = os.path.join(os.path.dirname(__file__), "..", "examples")
    script = os.path.join(examples, "spin_boson.py")
    arguments = ["--alphas", "0.05", "--end-time", "0.3", "--progress", "silent", "--output", "out"]
    env = dict(os.environ, MPLBACKEND="Agg", NONMARKOV_BACKEND=backends.get_backend())
    ran = subprocess.run(
        [sys.executable, script, *arguments], cwd=tmp_path, env=env, capture_output=True, text=True
    )
    assert ran.returncode == 0, ran.stderr
    written = set(os.listdir(tmp_path / "out"))
    assert written and all(name.startswith("spin_boson_py") for name in written)
    spec = load_spec(os.path.join(examples, "spin_boson.toml"))
    targets = {os.path.basename(p.results_file) for p in spec_run.prepare_spec(spec, "x")}
    targets.add(os.path.basename(spec_run.plot_file(spec, "x")))
    assert not targets & written
    assert not spec_run.stale_outputs(spec, str(tmp_path / "out"), [])  # nothing it would remove


def test_the_progress_bar_marks_its_estimate_while_the_bond_grows(capsys):
    with Progress(40, "bar", "build") as progress:
        for step in range(12):
            time.sleep(0.03)
            progress.set_postfix(bond=2 + step)
            progress.update()
    shown = capsys.readouterr().err
    assert "bond=13" in shown and "(bond growing)" in shown and "ETA >= " in shown
