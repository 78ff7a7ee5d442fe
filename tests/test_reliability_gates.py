"""Reliability of the newer entry points, by class of problem (issue 36).

- cost: every entry point that loops over steps, members, sites or grid points
  refuses a run that cannot finish before it starts, by the one rule of
  ``nonmarkov.cost``, with the estimate and the argument that set the size;
- PT-TEBD physics: non-Hermitian Hamiltonians and pair terms, negative rates,
  unphysical initial chain states and epsrel > 1 are refused; chain controls
  outside the run are warned;
- the command line: the whole spec is checked (sweep size, each point's cost, the
  system dimension, the run name) before anything is written; every output stays
  inside ``-o``; failures are exit status 2 with a one-line message, never a
  traceback; ``--overwrite`` leaves no stale output of the spec it replaces.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys

import numpy as np
import pytest

import nonmarkov as nm
from nonmarkov import backends, cost
from nonmarkov.io.spec import SpecError, parse_spec
from nonmarkov.methods import spec_run
from nonmarkov.options import default_options
from nonmarkov.process_tensors.file import ProcessTensorFileError, tensor_name

SX, SZ = nm.operators.sigma("x"), nm.operators.sigma("z")
UP = nm.operators.spin_dm("up")
SILENT = {"progress_type": "silent"}


def _bath() -> nm.Bath:
    return nm.Bath(0.5 * SZ, nm.PowerLawSD(0.1, 1, 5.0, temperature=0.0))


def _mean_field_system() -> nm.MeanFieldSystem:
    member = nm.TimeDependentSystemWithField(lambda t, a: SX * abs(a))
    return nm.MeanFieldSystem([member], field_eom=lambda t, states, a: -1j * a)


# -- cost: one rule at every entry point ------------------------------------------------


def _mean_field_tempo():
    parameters = nm.TempoParameters(dt=0.1, tcut=0.5, epsrel=1e-5)
    tempo = nm.MeanFieldTempo(_mean_field_system(), [_bath()], parameters, [UP], 1.0)
    tempo.compute(1e12, **SILENT)


def _with_field():
    nm.compute_dynamics_with_field(
        _mean_field_system(), 1.0, dt=0.1, num_steps=10**15, initial_state_list=[UP], **SILENT
    )


def _pt_tebd():
    chain = nm.SystemChain([2, 2])
    chain.add_site_hamiltonian(0, SX)
    tebd = nm.PtTebd(nm.AugmentedMPS([UP, UP]), chain, [None, None], nm.PtTebdParameters(0.1))
    tebd.compute(10**12, **SILENT)


def _uniform():
    nm.pt_uniform_compute(_bath(), nm.TempoParameters(dt=0.1, dkmax=10**9, epsrel=1e-5))


def _batch():
    # 1e10 member steps
    nm.compute_dynamics_batch([nm.System(SX)] * 10**4, UP, dt=0.1, num_steps=10**6, **SILENT)


def test_a_batch_that_cannot_finish_is_refused_before_its_members_are_checked():
    """The cost of a batch is judged from the first member's grid, before the others:
    a batch of 1e10 member steps whose last member's state is wrong is refused for its
    cost, not for that state (checking 1e6 members first would take half a minute)."""
    states = [UP] * (10**4 - 1) + [np.eye(3)]
    with pytest.raises(ValueError, match="member steps"):
        nm.compute_dynamics_batch([nm.System(SX)] * 10**4, states, dt=0.1, num_steps=10**6)
    with pytest.raises(ValueError, match="batch member 9999"):
        nm.compute_dynamics_batch([nm.System(SX)] * 10**4, states, dt=0.1, num_steps=10)


def _correlations_batch():
    nm.compute_correlations_batch(
        [nm.System(SX)] * 10**4,
        None,
        SZ,
        SZ,
        [0.0, 1.0, 2.0],
        3.0,
        initial_states=UP,
        dt=0.1,
        num_steps=10**5,
        **SILENT,
    )


COST_CASES = [
    ("MeanFieldTempo", _mean_field_tempo, "end_time=1e\\+12"),
    ("compute_dynamics_with_field", _with_field, "num_steps=1000000000000000"),
    ("PtTebd.compute", _pt_tebd, "end_step=1000000000000"),
    ("GibbsParameters", lambda: nm.GibbsParameters(n_steps=10**7, epsrel=1e-5), "n_steps=10+"),
    ("pt_uniform_compute", _uniform, "dkmax=1000000000"),
    ("compute_dynamics_batch", _batch, "1e\\+10 member steps .*10000 members"),
    ("compute_correlations_batch", _correlations_batch, "10000 members, 4 branches"),
    # 1.5e5 GiB of Liouvillians: refused on any machine (1e7 qubits needed 40 GiB, which
    # a machine with more than 81 GiB of memory would have tried to build)
    ("SystemChain", lambda: nm.SystemChain([10] * 10**5), "100000 sites"),
    (
        "sweep",
        lambda: nm.sweep(lambda **k: 0, {"a": list(range(10**4)), "b": list(range(10**4))}),
        "10000 a x 10000 b",
    ),
]


@pytest.mark.parametrize(("method", "call", "cause"), COST_CASES, ids=[c[0] for c in COST_CASES])
@pytest.mark.slow
def test_a_run_that_cannot_finish_is_refused_naming_the_estimate_and_the_cause(method, call, cause):
    with pytest.raises(ValueError) as info:
        call()
    message = str(info.value)
    assert message.startswith(method), message
    assert re.search(cause, message), message
    # the estimate: a count against the limit, or the memory it needs
    assert "cannot finish" in message or "GiB" in message or "site updates" in message


def test_the_rule_is_one_function_with_time_and_memory_estimates():
    assert nm.methods.checks.affordable_run is cost.affordable_run
    with pytest.raises(ValueError, match="at least .* days"):
        cost.affordable_run(10**12, 2, 0, "demo")
    with pytest.raises(ValueError, match="2e\\+09 member steps cannot finish \\(why\\)"):
        cost.affordable_run(2000, 2, 0, "demo", members=10**6, unit="member steps", cause="why")
    with pytest.raises(ValueError, match="use a smaller system dimension"):
        cost.affordable_run(1, 10**5, 0, "demo")
    cost.affordable_run(10**6, 2, 10**6, "fine", 10)  # nothing to refuse or warn


def test_affordable_runs_of_the_newer_entry_points_still_run():
    nm.GibbsParameters(n_steps=1000, epsrel=1e-5)
    nm.SystemChain([2] * 1000)
    parameters = nm.TempoParameters(dt=0.1, tcut=0.3, epsrel=1e-5)
    tempo = nm.MeanFieldTempo(_mean_field_system(), [_bath()], parameters, [UP], 1.0)
    assert len(tempo.compute(0.3, **SILENT)) == 4


# -- PT-TEBD: physics checks like the single-site code -------------------------------------


def test_pt_tebd_refuses_unphysical_terms():
    chain = nm.SystemChain([2, 2])
    with pytest.raises(ValueError, match="hamiltonian must be Hermitian"):
        chain.add_site_hamiltonian(0, SX + 1j * SZ)
    with pytest.raises(ValueError, match="pair term .* must be Hermitian"):
        chain.add_nn_hamiltonian(0, SX, 1j * SZ)
    chain.add_nn_hamiltonian(0, 1j * SX, -1j * SZ)  # a Hermitian product of non-Hermitian factors
    with pytest.raises(ValueError, match="gamma must be >= 0"):
        chain.add_site_dissipation(0, SX, gamma=-0.1)
    with pytest.raises(ValueError, match="gamma must be >= 0"):
        chain.add_nn_dissipation(0, SX, SX, gamma=-0.1)
    with pytest.raises(ValueError, match="epsrel must lie in \\(0, 1\\]"):
        nm.PtTebdParameters(dt=0.1, epsrel=1.5)


@pytest.mark.parametrize(
    ("site", "match"),
    [
        (2 * UP, "trace 2"),
        (np.diag([1.5, -0.5]), "negative eigenvalue"),
        (np.array([[0.5, 0.4], [0.1, 0.5]]), "not Hermitian"),
    ],
    ids=["trace 2", "negative", "non-Hermitian"],
)
def test_pt_tebd_refuses_an_unphysical_initial_chain_state(site, match):
    chain = nm.SystemChain([2, 2])
    with pytest.raises(ValueError, match=f"initial_augmented_mps.*{match}|{match}"):
        nm.PtTebd(nm.AugmentedMPS([site, UP]), chain, [None, None], nm.PtTebdParameters(0.1))


def test_pt_tebd_refuses_an_mps_of_trace_two_and_accepts_an_entangled_state():
    chain = nm.SystemChain([2, 2])
    bell = np.zeros((4, 4), dtype=complex)
    bell[np.ix_([0, 3], [0, 3])] = 0.5  # |00> + |11> (normalised), rows (a1 a2), cols (b1 b2)
    # split the joint vector (p1, p2), p = (a, b), into an MPS of two sites
    joint = bell.reshape(2, 2, 2, 2).transpose(0, 2, 1, 3).reshape(4, 4)
    u, s, vh = np.linalg.svd(joint)
    rank = int(np.sum(s > 1e-12))
    left = (u[:, :rank] * s[:rank]).reshape(1, 4, rank)
    right = vh[:rank].reshape(rank, 4, 1)
    parameters = nm.PtTebdParameters(0.1)
    tebd = nm.PtTebd(nm.AugmentedMPS([left, right]), chain, [None, None], parameters)
    assert np.allclose(tebd.get_current_density_matrix((0, 1)), bell)
    with pytest.raises(ValueError, match="trace 2"):
        nm.PtTebd(nm.AugmentedMPS([2 * left, right]), chain, [None, None], parameters)


def test_pt_tebd_warns_of_chain_controls_outside_the_run():
    chain = nm.SystemChain([2, 2])
    control = nm.ChainControl([2, 2])
    control.add_single_site_control(np.identity(4), 0, 50)
    tebd = nm.PtTebd(
        nm.AugmentedMPS([UP, UP]), chain, [None, None], nm.PtTebdParameters(0.1), control
    )
    with pytest.warns(UserWarning, match="steps \\[50\\] lie outside this run"):
        tebd.compute(3, **SILENT)


# -- the command line: the whole spec checked, outputs inside -o ---------------------------

SPEC = """
name = "gate"
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
end = 0.3
"""


def _spec(**replace: str) -> str:
    text = SPEC
    options = default_options()
    text += (
        f"\n[options]\ndeterministic = {str(options.deterministic).lower()}\n"
        f'window_sweep = "{options.window_sweep}"\n'
    )
    for old, new in replace.items():
        assert old in text, old
        text = text.replace(old, new)
    return text


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


def _one_line_error(result: subprocess.CompletedProcess, *words: str) -> None:
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr, result.stderr
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr
    for word in words:
        assert word in result.stderr, (word, result.stderr)


@pytest.mark.parametrize(
    ("name", "match"),
    [('"../../x"', "plain file name"), ('"sub/x"', "plain file name"), ('""', "plain file name")],
)
def test_a_spec_name_that_is_not_a_file_name_is_refused(name, match):
    with pytest.raises(SpecError, match=f"name must be a {match}"):
        parse_spec(_spec(**{'name = "gate"': f"name = {name}"}))


@pytest.mark.parametrize(
    ("old", "new", "match"),
    [
        ("[parameters]", "[sweep]\nbath.alpha = [0.1, 0.2]\n[parameters]", None),
        ("dt = 0.1", "dt = 1e-12", "cannot finish"),
        ("[system]", "[system]\ndimension = 100000", "system.dimension"),
    ],
    ids=["fine", "steps", "dimension"],
)
def test_every_point_s_cost_is_checked_with_the_spec(old, new, match):
    text = _spec(**{old: new})
    if match is None:
        assert len(parse_spec(text).runs) == 2
        return
    with pytest.raises(SpecError, match=match):
        parse_spec(text)


def test_a_huge_sweep_is_refused_before_its_points_are_expanded():
    values = "[" + ", ".join(str(0.1 + 0.001 * k) for k in range(1000)) + "]"
    sweep = f"[sweep]\nbath.alpha = {values}\nbath.cutoff = {values}\nbath.temperature = {values}"
    with pytest.raises(SpecError, match="\\[sweep\\]: the sweep: .*1000 bath.alpha"):
        parse_spec(_spec(**{"[parameters]": sweep + "\n[parameters]"}))


def test_output_paths_stay_inside_the_output_directory(tmp_path):
    spec = parse_spec(_spec())
    target = tmp_path / "out"
    (target / "gate.h5").mkdir(parents=True)  # a directory where a result would go
    with pytest.raises(SpecError, match="not a file"):
        spec_run.prepare_spec(spec, str(target), overwrite=True)
    afile = tmp_path / "file"
    afile.write_text("x")
    with pytest.raises(SpecError, match="is not a directory"):
        spec_run.prepare_spec(spec, str(afile))


@pytest.mark.slow
def test_cli_failures_are_one_line_exit_2_and_write_nothing(tmp_path):
    (tmp_path / "escape.toml").write_text(_spec(**{'name = "gate"': 'name = "../../x"'}))
    (tmp_path / "latin.toml").write_bytes(_spec().replace("up", "up\u00e9").encode("latin-1"))
    (tmp_path / "ok.toml").write_text(_spec())
    (tmp_path / "a_file").write_text("not a directory")
    _one_line_error(_cli("run", "escape.toml", "-o", "out", cwd=tmp_path), "escape.toml", "name")
    _one_line_error(_cli("run", "latin.toml", cwd=tmp_path), "latin.toml", "UTF-8")
    _one_line_error(_cli("run", "ok.toml", "-o", "a_file", cwd=tmp_path), "a_file")
    assert not (tmp_path / "out").exists() and not (tmp_path.parent / "x.h5").exists()


@pytest.mark.slow
def test_overwrite_with_a_smaller_sweep_removes_the_old_outputs(tmp_path):
    big = "[sweep]\nbath.alpha = [0.1, 0.15, 0.2]\n[parameters]"
    (tmp_path / "s.toml").write_text(_spec(**{"[parameters]": big}))
    assert _cli("run", "s.toml", "-o", "out", "--progress", "silent", cwd=tmp_path).returncode == 0
    assert sorted(os.listdir(tmp_path / "out")) == [
        "gate.png",
        "gate_0.h5",
        "gate_1.h5",
        "gate_2.h5",
        "gate_sweep.h5",
    ]
    (tmp_path / "out" / "other.h5").write_text("not ours")
    small = "[sweep]\nbath.alpha = [0.1, 0.2]\n[parameters]"
    (tmp_path / "s.toml").write_text(_spec(**{"[parameters]": small}))
    # a sweep point that cannot run: checked first, nothing is written or removed
    (tmp_path / "bad.toml").write_text(
        _spec(**{"[parameters]": "[sweep]\nparameters.dt = [0.1, 1e-12]\n[parameters]"})
    )
    _one_line_error(_cli("run", "bad.toml", "-o", "out", "--overwrite", cwd=tmp_path), "bad.toml")
    assert len(os.listdir(tmp_path / "out")) == 6
    result = _cli("run", "s.toml", "-o", "out", "--overwrite", "--progress", "silent", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert sorted(os.listdir(tmp_path / "out")) == [
        "gate.png",
        "gate_0.h5",
        "gate_1.h5",
        "gate_sweep.h5",
        "other.h5",
    ]


# -- files that lie: damage found on read, naming the file and the dataset -----------------


def _rewrite(filename, dataset, change):
    import h5py

    with h5py.File(filename, "r+") as handle:
        data = change(handle[dataset][()])
        del handle[dataset]
        handle.create_dataset(dataset, data=data, fletcher32=True)  # checksums made anew


def test_a_dynamics_file_rewritten_to_nan_is_refused(tmp_path):
    dynamics = nm.compute_dynamics(nm.System(0.5 * SX), UP, dt=0.1, num_steps=5, **SILENT)
    filename = str(tmp_path / "dynamics.h5")
    dynamics.export(filename)
    _rewrite(filename, "states", lambda states: np.where(np.abs(states) >= 0, np.nan, states))
    with pytest.raises(ValueError, match="dynamics.h5 is damaged: the dataset 'states' has NaN"):
        nm.import_dynamics(filename)


@pytest.mark.parametrize(
    ("change", "match"),
    [
        (lambda tensor: np.zeros_like(tensor), "step tensor 3 .* is all zeros"),
        (lambda tensor: 0.5 * tensor, "trace with a traced future is 0.5"),
    ],
    ids=["zeros", "scaled"],
)
def test_a_process_tensor_file_whose_step_was_changed_is_refused(tmp_path, change, match):
    parameters = nm.TempoParameters(dt=0.1, tcut=0.3, epsrel=1e-6)
    pt = nm.pt_tempo_compute(_bath(), 0.0, 1.0, parameters, **SILENT)
    filename = str(tmp_path / "pt.h5")
    pt.export(filename)
    nm.import_process_tensor(filename).close()  # the file as written is accepted
    _rewrite(filename, f"tensors/{tensor_name(3)}", change)
    with pytest.raises(ProcessTensorFileError, match=match) as info:
        nm.import_process_tensor(filename)
    assert "pt.h5" in str(info.value)


# -- weak messages: what went wrong, in the library's words --------------------------------


def test_an_exception_in_the_target_derivative_names_the_callable():
    system = nm.ParameterizedSystem(lambda x: x * SX)
    with pytest.raises(ValueError, match=r"target_derivative\(final_state\) raised ZeroDivision"):
        nm.state_gradient(
            system, UP, lambda rho: 1 / 0, [], np.zeros((6, 1)), dt=0.1, num_steps=3, **SILENT
        )


def test_a_control_of_the_system_s_size_is_told_it_must_be_a_superoperator():
    with pytest.raises(
        ValueError, match="2x2 matrix, but a superoperator .* dimension 2 .*\\(4, 4\\)"
    ):
        nm.Control(2).add_single(0, np.identity(2))


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs")
def test_a_fifo_is_not_reported_as_missing(tmp_path):
    fifo = str(tmp_path / "fifo.h5")
    os.mkfifo(fifo)
    with pytest.raises(ValueError, match="not a regular file"):
        nm.import_dynamics(fifo)
    with pytest.raises(ProcessTensorFileError, match="not a regular file"):
        nm.import_process_tensor(fifo)


def test_a_time_step_far_above_the_model_s_time_scales_is_warned():
    with pytest.warns(UserWarning, match="system's largest frequency = 0.1 x 2e\\+08"):
        nm.compute_dynamics(nm.System(1e8 * SX), UP, dt=0.1, num_steps=2, **SILENT)
    parameters = nm.TempoParameters(dt=10.0, epsrel=1e-5, dkmax=2)
    with pytest.warns(UserWarning, match="bath's cutoff = 10 x 5"):
        nm.PtTempo(_bath(), 0.0, 20.0, parameters)


def test_an_epsrel_that_truncates_nothing_is_warned_with_the_estimate():
    parameters = nm.TempoParameters(dt=0.1, epsrel=1e-15)
    with pytest.warns(UserWarning, match="epsrel=1e-15 truncates almost nothing.*4\\^50"):
        nm.PtTempo(_bath(), 0.0, 10.0, parameters)


def test_a_coupling_too_strong_for_dt_is_named_not_a_scipy_nan_message():
    bath = nm.Bath(0.5 * SZ, nm.PowerLawSD(1e6, 1, 5.0))
    parameters = nm.TempoParameters(dt=0.1, tcut=0.3, epsrel=1e-6)
    with pytest.raises(ValueError, match="influence over one time step overflows"):
        nm.pt_tempo_compute(bath, 0.0, 1.0, parameters, **SILENT)


def test_a_checkpoint_with_a_nan_window_is_named(tmp_path):
    target = str(tmp_path / "pt.hdf5")
    np.savez(
        target + ".checkpoint.npz",
        step=3,
        count=3,
        assigned=0.0,
        log_scale=0.0,
        num_sites=1,
        site_0=np.full((1, 4, 1), np.nan),
        temporary=str(tmp_path / "partial"),
        fingerprint="any",
    )
    parameters = nm.TempoParameters(dt=0.1, tcut=0.3, epsrel=1e-6)
    build = nm.PtTempo(_bath(), 0.0, 1.0, parameters, process_tensor_file=target, resume=True)
    with pytest.raises(ValueError, match="checkpoint .* is damaged: its window"):
        build.compute(progress_type="silent")


def test_a_system_whose_liouvillian_cannot_be_held_is_refused_before_it_is_built():
    with pytest.raises(ValueError, match="System: a system of dimension 400 .* GiB"):
        nm.System(np.diag(np.arange(400.0)))
    with pytest.raises(ValueError, match="TimeDependentSystem: a system of dimension 3000"):
        nm.TimeDependentSystem(lambda t: np.identity(3000))


def test_a_sweep_point_that_fails_while_running_leaves_nothing_written(tmp_path):
    failing = "[sweep]\nbath.alpha = [0.1, 1e6]\n[parameters]"
    (tmp_path / "f.toml").write_text(_spec(**{"[parameters]": failing}))
    result = _cli("run", "f.toml", "-o", "out", "--progress", "silent", cwd=tmp_path)
    assert result.returncode == 1, result.stderr
    assert "overflows" in result.stderr and "Traceback" not in result.stderr
    assert "bath.alpha = 1000000.0" in result.stderr  # the sweep point that failed
    # no output; the finished run is kept for the same command to resume from
    assert [name.split("-")[0] for name in os.listdir(tmp_path / "out")] == ["gate_sweep.points"]


def test_a_long_full_memory_run_is_warned_with_its_least_time():
    parameters = nm.TempoParameters(dt=0.1, epsrel=1e-6)
    with pytest.warns(UserWarning, match="1e\\+08 site updates: at least 16.7 minutes"):
        nm.PtTempo(_bath(), 0.0, 1000.0, parameters)
    with pytest.warns(UserWarning, match="at least 1.16 days .*fewer imaginary-time steps"):
        nm.GibbsParameters(n_steps=10**5, epsrel=1e-6)
