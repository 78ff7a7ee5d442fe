"""The BLAS thread rule of the hot loops (``NONMARKOV_BLAS_THREADS``, read once
at import into ``config.BLAS_THREADS``): one thread for small operations, the
cores for large ones, and the overrides."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy
import pytest
from tests.models import spin_boson
from threadpoolctl import threadpool_info, threadpool_limits

import nonmarkov as nm
from nonmarkov import _threads, backends, config


def blas_threads() -> int:
    return max(entry["num_threads"] for entry in threadpool_info() if entry["user_api"] == "blas")


@pytest.fixture
def eight_cores(monkeypatch):
    monkeypatch.setattr(_threads, "available_cores", lambda: 8)
    with threadpool_limits(limits=8, user_api="blas"):
        if blas_threads() < 8:
            pytest.skip("this BLAS does not take 8 threads")
        yield


def test_auto_gives_large_operations_the_cores_and_small_ones_one(eight_cores, monkeypatch):
    monkeypatch.setattr(config, "BLAS_THREADS", config.blas_threads_setting(""))
    with _threads.hot_loop_threads():
        assert blas_threads() == 1
        with _threads.large_work_threads(_threads.LARGE_WORK - 1):
            assert blas_threads() == 1
        with _threads.large_work_threads(_threads.LARGE_WORK):
            assert blas_threads() == 8
        assert blas_threads() == 1
    assert blas_threads() == 8


def test_auto_keeps_a_sweep_workers_limit(eight_cores, monkeypatch):
    monkeypatch.setattr(config, "BLAS_THREADS", config.blas_threads_setting("auto"))
    with threadpool_limits(limits=2, user_api="blas"):  # below MIN_CORES: one thread throughout
        with _threads.hot_loop_threads(), _threads.large_work_threads(10**12):
            assert blas_threads() == 1
    with threadpool_limits(limits=5, user_api="blas"):
        with _threads.hot_loop_threads(), _threads.large_work_threads(10**12):
            assert blas_threads() == 5


@pytest.mark.parametrize("setting, inside", [("3", 3), ("0", 8)])
def test_a_number_pins_every_operation_and_zero_leaves_the_blas(
    eight_cores, monkeypatch, setting, inside
):
    monkeypatch.setattr(config, "BLAS_THREADS", config.blas_threads_setting(setting))
    with _threads.hot_loop_threads():
        assert blas_threads() == inside
        with _threads.large_work_threads(10**12):
            assert blas_threads() == inside


@pytest.mark.parametrize("setting", ["many", "-1", "1.5"])
def test_a_bad_setting_is_refused(setting):
    with pytest.raises(ValueError, match="NONMARKOV_BLAS_THREADS must be 'auto'"):
        config.blas_threads_setting(setting)


@pytest.mark.slow
def test_the_environment_is_read_at_import():
    """A bad value stops the import, before any work; a good one is the setting."""
    code = "import nonmarkov.config as c; print(c.BLAS_THREADS)"
    for value, expected in (("many", None), (" 3 ", "3"), ("AUTO", "auto")):
        env = dict(os.environ, NONMARKOV_BLAS_THREADS=value)
        run = subprocess.run(
            [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=False
        )
        if expected is None:
            assert run.returncode != 0
            assert "NONMARKOV_BLAS_THREADS must be 'auto'" in run.stderr
        else:
            assert run.returncode == 0, run.stderr
            assert run.stdout.strip() == expected


def test_the_thread_rule_does_not_change_results(monkeypatch):
    """Every operation counted large on this machine's cores: same dynamics as one
    thread to rounding (a tight epsrel, so that no cut sits at a rounding-sized gap)."""
    monkeypatch.setattr(_threads, "LARGE_WORK", 1)
    monkeypatch.setattr(_threads, "MIN_CORES", 2)
    system, bath, rho0 = spin_boson(alpha=0.3)
    parameters = nm.TempoParameters(dt=0.1, dkmax=6, epsrel=1e-12)
    states = {}
    for setting in ("1", "auto"):
        monkeypatch.setattr(config, "BLAS_THREADS", config.blas_threads_setting(setting))
        with backends.use_backend("numpy", "double"):
            pt = nm.pt_tempo_compute(bath, 0.0, 0.8, parameters, progress_type="silent")
            dynamics = nm.compute_dynamics(
                system, initial_state=rho0, process_tensor=pt, progress_type="silent"
            )
        states[setting] = numpy.asarray(dynamics.states)
    numpy.testing.assert_allclose(states["auto"], states["1"], rtol=0, atol=1e-10)
