"""Sweeps (``nonmarkov.sweep``; imported from ``nonmarkov.sweeps``): a function
over a grid on a real Dask cluster (``dask.distributed.LocalCluster``), the
default process pool and in this process; per-point failures, resumption after
a crash, the results file, and process tensors cached in files."""

from __future__ import annotations

import concurrent.futures
import functools
import os
import uuid

import h5py
import numpy as np
import pytest

import nonmarkov as nm
from nonmarkov.sweeps import (
    SweepFailure,
    SweepFileError,
    cached_process_tensor,
    import_sweep,
    sweep,
)
from nonmarkov.sweeps.grid import point_key

SX = nm.operators.sigma("x")
SZ = nm.operators.sigma("z")
SM = nm.operators.sigma("-")
GRID = {"gamma": [0.1, 0.3], "omega": [0.5, 1.0, 2.0]}


# ---------------------------------------------------------------- point functions
# (module level: a process pool's workers import them from here)


def decay(gamma, omega):
    """Damped Rabi oscillation of a spin (Lindblad, no bath): a real dynamics run."""
    system = nm.System(0.5 * omega * SX, gammas=[gamma], lindblad_operators=[SM])
    dynamics = nm.compute_dynamics(
        system, nm.operators.spin_dm("up"), dt=0.1, num_steps=8, progress_type="silent"
    )
    times, sz = dynamics.expectations(SZ, real=True)
    return {"dynamics": dynamics, "sz": sz, "final_sz": sz[-1]}


def fragile(gamma, omega):
    if omega == 1.0 and gamma == 0.3:
        raise ValueError(f"no convergence at omega={omega}")
    return decay(gamma, omega)


def counted(x, directory, refuse=()):
    """x**2, leaving a file per call in ``directory``; raises for x in ``refuse``
    (finished points that a resumed sweep must not compute again)."""
    if x in refuse:
        raise AssertionError(f"point x={x} was finished and computed again")
    with open(os.path.join(directory, f"call-{x}-{os.getpid()}-{uuid.uuid4().hex}"), "w"):
        pass
    return {"square": np.array([x * x]), "x": x, "jax": nm.backends.get_backend() == "jax"}


def interrupted(x, directory):
    """A crash of the sweep itself at x = 3 (KeyboardInterrupt is not a point's failure)."""
    if x == 3:
        raise KeyboardInterrupt
    return counted(x, directory)


def dies(x):
    """Kills its worker process at x = 2 (as the out-of-memory killer would)."""
    if x == 2:
        os._exit(3)
    return {"x": x}


def calls(directory):
    return sorted(int(name.split("-")[1]) for name in os.listdir(directory))


def serial_run(function, grid):
    names = list(grid)
    import itertools

    return [function(**dict(zip(names, values))) for values in itertools.product(*grid.values())]


def assert_equal_results(results, expected):
    for got, want in zip(results.results, expected):
        assert got["sz"].tobytes() == want["sz"].tobytes()  # exactly the serial run
        assert np.array_equal(got["dynamics.states"], want["dynamics"].states)
        assert np.array_equal(got["dynamics.times"], want["dynamics"].times)
        assert got["final_sz"] == want["final_sz"]


@pytest.fixture(scope="module")
def dask_executor():
    """One in-process Dask cluster for the module: 2 workers of 1 thread."""
    distributed = pytest.importorskip("dask.distributed")
    cluster = distributed.LocalCluster(
        n_workers=2, threads_per_worker=1, processes=False, dashboard_address=None
    )
    client = distributed.Client(cluster)
    try:
        yield client.get_executor()
    finally:
        client.close()
        cluster.close()


# ---------------------------------------------------------------- results


@pytest.mark.slow
def test_a_dask_sweep_equals_the_serial_run_and_writes_one_results_file(dask_executor, tmp_path):
    path = tmp_path / "decay.h5"
    results = sweep(decay, GRID, dask_executor, results_file=path, progress_type="silent")
    expected = serial_run(decay, GRID)
    assert results.names == ["gamma", "omega"]
    assert results.points[1] == {"gamma": 0.1, "omega": 1.0}  # the last name varies fastest
    assert results.status == ["ok"] * 6 and results.failed == []
    assert_equal_results(results, expected)
    assert not os.path.exists(f"{path}.points")  # the point files were gathered
    back = import_sweep(path)
    assert back.points == results.points and back.status == results.status
    assert_equal_results(back, expected)
    assert np.array_equal(back.grid["omega"], [0.5, 1.0, 2.0] * 2)
    assert back.stack("sz").shape == (6, 9)
    assert back.get(gamma=0.3, omega=2.0)["final_sz"] == expected[5]["final_sz"]
    with h5py.File(path, "r") as handle:
        assert bool(handle.attrs["complete"]) and handle.attrs["num_points"] == 6
        assert handle.attrs["function"].endswith("decay")
        assert list(handle["grid/gamma"][()]) == [0.1] * 3 + [0.3] * 3


@pytest.mark.slow
def test_one_point_that_raises_loses_none_of_the_others(dask_executor, tmp_path):
    path = tmp_path / "fragile.h5"
    with pytest.warns(UserWarning, match="1 of 6 points failed"):
        results = sweep(fragile, GRID, dask_executor, results_file=path, progress_type="silent")
    assert results.failed == [4] and results.ok == [0, 1, 2, 3, 5]
    assert "ValueError: no convergence at omega=1.0" in results.errors[4]
    assert "fragile" in results.errors[4]  # the traceback is kept
    assert results.results[4] is None
    expected = serial_run(decay, GRID)
    for i in results.ok:
        assert np.array_equal(results.results[i]["sz"], expected[i]["sz"])
    back = import_sweep(path)
    assert back.status[4] == "failed" and "no convergence" in back.errors[4]
    with pytest.raises(SweepFailure, match=r"point 4 \{'gamma': 0.3, 'omega': 1.0\}"):
        back.raise_failures()
    with pytest.raises(ValueError, match="failed"):
        back.get(gamma=0.3, omega=1.0)
    with pytest.raises(ValueError, match="1 of 6 points failed"):
        back.stack("sz")


def batch_of_decays(gamma):
    systems = [nm.System(0.5 * w * SX, gammas=[gamma], lindblad_operators=[SM]) for w in (1, 2)]
    return nm.compute_dynamics_batch(
        systems, nm.operators.spin_dm("up"), dt=0.1, num_steps=4, progress_type="silent"
    )


def test_a_point_may_return_a_batch_of_dynamics():
    results = sweep(batch_of_decays, {"gamma": [0.1, 0.2]}, "serial", progress_type="silent")
    assert results.stack("states").shape == (2, 2, 5, 2, 2)
    assert np.array_equal(results.results[1]["states"], batch_of_decays(0.2).states)


def test_a_result_that_is_not_an_array_fails_its_point(tmp_path):
    def named(x):
        return {"ok": x} if x else {"label": "text"}

    with pytest.warns(UserWarning, match="1 of 2"):
        results = sweep(named, {"x": [0, 1]}, "serial", progress_type="silent")
    assert results.failed == [0] and "must be numeric or boolean" in results.errors[0]
    assert results.results[1] == {"ok": 1}


# ---------------------------------------------------------------- resumption


@pytest.mark.slow
def test_a_resumed_dask_sweep_skips_the_finished_points(dask_executor, tmp_path):
    calls_dir = tmp_path / "calls"
    calls_dir.mkdir()
    cache = tmp_path / "cache"
    grid = {"x": [0, 1, 2, 3, 4]}
    first = functools.partial(counted, directory=str(calls_dir))
    sweep(first, {"x": [0, 1, 3]}, dask_executor, cache_dir=cache, progress_type="silent")
    assert calls(calls_dir) == [0, 1, 3] and len(os.listdir(cache)) == 3  # kept: explicit
    again = functools.partial(counted, directory=str(calls_dir), refuse=(0, 1, 3))
    results = sweep(again, grid, dask_executor, cache_dir=cache, progress_type="silent")
    assert results.failed == [] and calls(calls_dir) == [0, 1, 2, 3, 4]
    assert [int(r["square"][0]) for r in results.results] == [0, 1, 4, 9, 16]
    fresh = sweep(first, grid, dask_executor, cache_dir=cache, resume=False)
    assert fresh.failed == [] and calls(calls_dir) == [0, 0, 1, 1, 2, 2, 3, 3, 4, 4]


def test_after_a_crash_only_the_unfinished_points_run(tmp_path):
    calls_dir = tmp_path / "calls"
    calls_dir.mkdir()
    path = tmp_path / "run.h5"
    grid = {"x": [0, 1, 2, 3, 4, 5]}
    crash = functools.partial(interrupted, directory=str(calls_dir))
    with pytest.raises(KeyboardInterrupt):
        sweep(crash, grid, "serial", results_file=path, progress_type="silent")
    assert not path.exists()  # no results file that looks complete
    assert len(os.listdir(f"{path}.points")) == 3 and calls(calls_dir) == [0, 1, 2]
    resumed = functools.partial(counted, directory=str(calls_dir), refuse=(0, 1, 2))
    results = sweep(resumed, grid, "serial", results_file=path, progress_type="silent")
    assert results.failed == [] and calls(calls_dir) == [0, 1, 2, 3, 4, 5]
    assert [int(r["x"]) for r in results.results] == [0, 1, 2, 3, 4, 5]
    # a finished sweep is read back from its results file: nothing runs again
    everything = functools.partial(counted, directory=str(calls_dir), refuse=tuple(range(6)))
    again = sweep(everything, grid, "serial", results_file=path, progress_type="silent")
    assert again.failed == [] and calls(calls_dir) == [0, 1, 2, 3, 4, 5]


def test_failed_points_run_again_and_a_damaged_point_file_is_recomputed(tmp_path):
    calls_dir = tmp_path / "calls"
    calls_dir.mkdir()
    cache = tmp_path / "cache"
    refusing = functools.partial(counted, directory=str(calls_dir), refuse=(1,))
    with pytest.warns(UserWarning, match="1 of 3"):
        sweep(refusing, {"x": [0, 1, 2]}, "serial", cache_dir=cache, progress_type="silent")
    point_file = cache / f"point-{point_key({'x': 0})}.h5"
    with open(point_file, "r+b") as handle:  # damage one finished point
        handle.truncate(100)
    plain = functools.partial(counted, directory=str(calls_dir))
    with pytest.warns(UserWarning, match="cannot be read"):
        results = sweep(plain, {"x": [0, 1, 2]}, "serial", cache_dir=cache)
    assert results.failed == [] and len(calls(calls_dir)) == 4  # the failed and the damaged


def test_a_damaged_results_file_is_named(tmp_path):
    path = tmp_path / "run.h5"
    path.write_bytes(b"not hdf5")
    with pytest.raises(SweepFileError, match="run.h5.*resume=False"):
        sweep(abs, {"x": [1]}, "serial", results_file=path)
    with pytest.raises(SweepFileError, match="cannot be read"):
        import_sweep(path)


# ---------------------------------------------------------------- executors


@pytest.mark.slow
def test_the_default_process_pool_runs_the_points(tmp_path):
    calls_dir = tmp_path / "calls"
    calls_dir.mkdir()
    function = functools.partial(counted, directory=str(calls_dir))
    results = sweep(function, [{"x": 3}, {"x": 1}, {"x": 2}], progress_type="silent")
    assert [int(r["square"][0]) for r in results.results] == [9, 1, 4]  # grid order
    on_jax = nm.backends.get_backend() == "jax"
    assert [bool(r["jax"]) for r in results.results] == [on_jax] * 3  # the caller's backend
    assert calls(calls_dir) == [1, 2, 3]
    names = os.listdir(calls_dir)
    assert {name.split("-")[2] for name in names} != {str(os.getpid())}  # other processes


@pytest.mark.slow
def test_a_point_that_kills_its_worker_loses_only_the_points_in_flight():
    with pytest.warns(UserWarning, match="points failed"):
        results = sweep(dies, {"x": list(range(6))}, max_workers=1, progress_type="silent")
    assert results.status[2] == "failed" and "a worker process died" in results.errors[2]
    assert len(results.failed) <= 2  # one worker: two points in flight at a time
    assert all(int(results.results[i]["x"]) == i for i in results.ok)
    assert 5 in results.ok  # a fresh pool ran the points after the crash


def test_a_thread_pool_and_serial_give_the_serial_run(tmp_path):
    grid = {"gamma": [0.2], "omega": [0.5, 1.5]}
    expected = serial_run(decay, grid)
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        assert_equal_results(sweep(decay, grid, pool, progress_type="silent"), expected)
    assert_equal_results(sweep(decay, grid, "serial", progress_type="silent"), expected)


# ---------------------------------------------------------------- bad input


def test_bad_input_is_refused_before_any_point_runs(tmp_path):
    path = tmp_path / "run.h5"
    bad = [
        (ValueError, "parameter_grid is empty", dict(parameter_grid={})),
        (ValueError, "parameter_grid is empty", dict(parameter_grid=[])),
        (ValueError, r"parameter_grid\['x'\] is empty", dict(parameter_grid={"x": []})),
        (TypeError, "must be a list of values", dict(parameter_grid={"x": 1.0})),
        (TypeError, "bool, int, finite float or str", dict(parameter_grid={"x": [[1, 2]]})),
        (ValueError, "must be finite", dict(parameter_grid={"x": [float("nan")]})),
        (ValueError, "the same parameters", dict(parameter_grid=[{"x": 1}, {"y": 2}])),
        (ValueError, "twice", dict(parameter_grid=[{"x": 1}, {"x": 1}])),
        (TypeError, "identifiers", dict(parameter_grid={"a b": [1]})),
        (TypeError, "dict", dict(parameter_grid=3)),
        (TypeError, "must be callable", dict(function=42)),
        (TypeError, "cannot be pickled", dict(function=lambda x: x)),
        (TypeError, "executor must be", dict(executor="dask")),
        (ValueError, "max_workers", dict(executor="serial", max_workers=2)),
        (ValueError, "max_workers", dict(max_workers=0)),
        (ValueError, r"\.h5 or \.hdf5", dict(results_file=tmp_path / "run.txt")),
        (FileNotFoundError, "does not exist", dict(results_file=tmp_path / "no" / "run.h5")),
        (TypeError, "resume must be True or False", dict(resume="yes")),
        (ValueError, "progress_type", dict(progress_type="loud")),
    ]
    for error, message, changes in bad:
        arguments = dict(function=abs, parameter_grid={"x": [1, 2]}, results_file=path)
        arguments.update(changes)
        with pytest.raises(error, match=message):
            sweep(**arguments)
        assert not path.exists() and not os.path.exists(f"{path}.points"), changes


# ---------------------------------------------------------------- cached process tensors


def tiny_process_tensor(calls_dir=None):
    if calls_dir is not None:
        with open(os.path.join(calls_dir, f"call-0-{len(os.listdir(calls_dir))}"), "w"):
            pass
    bath = nm.Bath(0.5 * SZ, nm.PowerLawSD(0.2, 1.0, 4.0, temperature=0.5))
    parameters = nm.TempoParameters(dt=0.2, epsrel=1e-6, tcut=0.4)
    return nm.pt_tempo_compute(bath, 0.0, 0.8, parameters, progress_type="silent")


@pytest.mark.slow
def test_a_cached_process_tensor_is_built_once(tmp_path):
    calls_dir = tmp_path / "calls"
    calls_dir.mkdir()
    path = tmp_path / "pt.h5"
    build = functools.partial(tiny_process_tensor, str(calls_dir))
    built = cached_process_tensor(path, build)
    assert path.exists() and len(calls(calls_dir)) == 1

    def refuse():
        raise AssertionError("the cached process tensor was built again")

    for kind in ("simple", "file"):
        cached = cached_process_tensor(path, refuse, kind)
        assert len(cached) == len(built)
        for step in range(len(built)):
            assert np.array_equal(cached.get_step_tensor(step)[0], built.get_step_tensor(step)[0])
        if kind == "file":
            cached.close()
    with pytest.raises(TypeError, match="build must be callable"):
        cached_process_tensor(tmp_path / "other.h5", None)
    with pytest.raises(TypeError, match="must return a process tensor"):
        cached_process_tensor(tmp_path / "other.h5", lambda: 3)
    with pytest.raises(ValueError, match="'simple' or 'file'"):
        cached_process_tensor(path, refuse, "memory")
    assert not (tmp_path / "other.h5").exists()
    nested = tmp_path / "cache" / "pt.h5"  # the cache directory is made
    assert len(cached_process_tensor(nested, lambda: built)) == len(built) and nested.exists()
