"""The host start of the compiled window (``nonmarkov.engines.jax.host_start``), JAX only.

While XLA compiles the step kernel, TEMPO and PT-TEMPO run their first steps
on the host with NumPy and then move the window to the device. Checked here:

- the hand-over at any step (window filling, full and tracing, bucket grown
  on the host) gives the NumPy backend's results, for TEMPO and PT-TEMPO;
- a run that ends before the kernel is ready continues on the device;
- single precision stays complex64 across the hand-over;
- the host steps stop at the host-start bond; no host start without a memory cut;
- with the real background compilation the results equal those without;
- the NumPy override is per thread; the environment variable is validated.

The number of host steps is made deterministic by replacing the background
compilation with a gate that opens after a given number of polls (the steps
then compile their kernel themselves).
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading

import numpy
import pytest

import nonmarkov as nm
from models import spin_boson
from nonmarkov import backends, config
from nonmarkov.backends import numerical_backend

pytestmark = pytest.mark.skip_backend("numpy", "the host start is part of the JAX backend")

jax = pytest.importorskip("jax")
compiled = pytest.importorskip("nonmarkov.engines.jax.window")
host_start = pytest.importorskip("nonmarkov.engines.jax.host_start")



class Gate:
    """Stands for the future of a compilation: done after ``polls`` calls of done()."""

    def __init__(self, polls: int):
        self.polls = polls

    def done(self) -> bool:
        self.polls -= 1
        return self.polls < 0

    def cancel(self) -> bool:
        return False

    def exception(self) -> None:
        return None


@pytest.fixture
def gated(monkeypatch):
    """Host start on, the compilation ahead replaced by a :class:`Gate`.

    Call ``gated(polls)``; returns the list of buckets asked for (a new gate
    for a grown bucket opens after ``polls`` more polls).
    """
    requested: list[int] = []

    def setup(polls: int) -> list[int]:
        def compile_step_ahead(engine, bond):
            requested.append(bond)
            return Gate(polls)

        monkeypatch.setattr(config, "JAX_HOST_START", "on")
        monkeypatch.setattr(compiled.CompiledWindow, "compile_step_ahead", compile_step_ahead)
        return requested

    return setup


def run_tempo(end_times, backend="jax", dkmax=4, epsrel=1e-8):
    system, bath, rho0 = spin_boson()
    parameters = nm.TempoParameters(dt=0.1, epsrel=epsrel, dkmax=dkmax)
    with backends.use_backend(backend, "double"):
        tempo = nm.Tempo(system, bath, parameters, rho0, 0.0)
        for end_time in end_times:
            dynamics = tempo.compute(end_time, progress_type="silent")
    return numpy.asarray(dynamics.states), tempo


def count_host_steps(monkeypatch) -> list[int]:
    """Record the number of host steps of every host start."""
    counts: list[int] = []
    original = host_start.run_host_steps

    def recorded(*args, **kwargs):
        done, bucket = original(*args, **kwargs)
        counts.append(done)
        return done, bucket

    monkeypatch.setattr(host_start, "run_host_steps", recorded)
    return counts


@pytest.mark.parametrize("polls", [2, 9])
def test_tempo_hands_over_to_the_device_with_numpys_results(gated, monkeypatch, polls):
    """Hand-over while the window fills (2 host steps) and once it traces (9, dkmax 4)."""
    reference, _ = run_tempo([1.5], backend="numpy")
    requested = gated(polls)
    counts = count_host_steps(monkeypatch)
    states, tempo = run_tempo([1.5])
    # a bucket outgrown on the host starts a new gate
    assert counts == [polls] if len(requested) == 1 else counts[0] > polls
    assert tempo._engine.chunks > 0  # the rest ran on the device
    numpy.testing.assert_allclose(states, reference, rtol=0, atol=1e-10)


def test_a_bucket_outgrown_on_the_host_is_compiled_and_loaded(gated, monkeypatch):
    monkeypatch.setattr(compiled, "DEFAULT_INITIAL_BOND", 4)
    reference, numpy_run = run_tempo([2.0], backend="numpy", dkmax=6, epsrel=1e-10)
    assert numpy_run.max_bond_dimension > 4
    requested = gated(12)
    states, tempo = run_tempo([2.0], dkmax=6, epsrel=1e-10)
    assert requested[0] == 4 and len(requested) > 1  # a grown bucket was asked for
    assert tempo._engine.bond == requested[-1]
    numpy.testing.assert_allclose(states, reference, rtol=0, atol=1e-10)


def test_a_run_that_ends_on_the_host_continues_on_the_device(gated, monkeypatch):
    reference, _ = run_tempo([0.8, 1.6], backend="numpy")
    gated(1000)  # never ready within the first call
    counts = count_host_steps(monkeypatch)
    states, tempo = run_tempo([0.8, 1.6])
    assert counts == [7]  # steps 2..8 of the first call; the second call is compiled
    assert tempo._engine.chunks > 0
    numpy.testing.assert_allclose(states, reference, rtol=0, atol=1e-10)


def test_single_precision_hands_over_in_complex64(gated):
    gated(4)
    system, bath, rho0 = spin_boson()
    parameters = nm.TempoParameters(dt=0.1, epsrel=1e-5, dkmax=4)
    runs = {}
    for backend in ("numpy", "jax"):
        with backends.use_backend(backend, "single"):
            tempo = nm.Tempo(system, bath, parameters, rho0, 0.0)
            runs[backend] = numpy.asarray(tempo.compute(1.5, progress_type="silent").states)
    engine = tempo._engine
    assert engine.chunks > 0
    assert engine._front.dtype == engine._sites.dtype == numpy.complex64
    assert engine._log_scale.dtype == numpy.float32
    double, _ = run_tempo([1.5], backend="numpy", epsrel=1e-5)
    # float32 rounding over 15 steps, as for the compiled kernel alone
    numpy.testing.assert_allclose(runs["jax"], double, rtol=0, atol=1e-4)
    numpy.testing.assert_allclose(runs["jax"], runs["numpy"], rtol=0, atol=1e-4)
    assert numpy.max(numpy.abs(runs["jax"] - double)) > 0.0  # it really ran in single


def test_host_steps_stop_at_the_host_start_bond(gated, monkeypatch):
    monkeypatch.setattr(host_start, "HOST_START_BOND", 3)
    reference, _ = run_tempo([1.5], backend="numpy")
    gated(1000)
    counts = count_host_steps(monkeypatch)
    states, _ = run_tempo([1.5])
    assert 0 < counts[0] < 14
    numpy.testing.assert_allclose(states, reference, rtol=0, atol=1e-10)


def test_no_host_start_without_a_memory_cut(gated, monkeypatch):
    gated(3)
    started = []
    monkeypatch.setattr(host_start, "run_host_steps",
                        lambda *args, **kwargs: started.append(args))
    reference, _ = run_tempo([0.6], backend="numpy", dkmax=None)
    states, tempo = run_tempo([0.6], dkmax=None)
    assert started == [] and tempo._engine.memory == 0
    numpy.testing.assert_allclose(states, reference, rtol=0, atol=1e-10)


@pytest.mark.parametrize("polls", [2, 6])
def test_pt_tempo_hands_over_with_numpys_process_tensor(gated, polls):
    """PT-TEMPO: hand-over before and after the first site is finalised (dkmax 3)."""
    bath = spin_boson()[1]
    parameters = nm.TempoParameters(dt=0.1, epsrel=1e-10, dkmax=3)
    with backends.use_backend("numpy", "double"):
        reference = nm.PtTempo(bath, 0.0, 2.0, parameters).get_process_tensor("silent")
    gated(polls)
    with backends.use_backend("jax", "double"):
        pt_tempo = nm.PtTempo(bath, 0.0, 2.0, parameters)
        process_tensor = pt_tempo.get_process_tensor("silent")
    assert pt_tempo._engine.chunks > 0
    numpy.testing.assert_array_equal(process_tensor.get_bond_dimensions(),
                                     reference.get_bond_dimensions())
    for step in range(len(reference)):
        norms = [numpy.linalg.norm(pt.get_step_tensor(step)[0])
                 for pt in (process_tensor, reference)]
        numpy.testing.assert_allclose(*norms, rtol=1e-8)
    system, _, rho0 = spin_boson()
    with backends.use_backend("numpy", "double"):
        states = [numpy.asarray(nm.compute_dynamics(system, rho0, process_tensor=pt,
                                                    progress_type="silent").states)
                  for pt in (process_tensor, reference)]
    numpy.testing.assert_allclose(*states, rtol=0, atol=1e-10)


def test_a_pt_that_ends_on_the_host_is_the_numpy_process_tensor(gated):
    bath = spin_boson()[1]
    parameters = nm.TempoParameters(dt=0.1, epsrel=1e-10, dkmax=3)
    with backends.use_backend("numpy", "double"):
        reference = nm.PtTempo(bath, 0.0, 1.0, parameters).get_process_tensor("silent")
    gated(1000)  # never ready: every step on the host, the window read back from the device
    with backends.use_backend("jax", "double"):
        pt_tempo = nm.PtTempo(bath, 0.0, 1.0, parameters)
        process_tensor = pt_tempo.get_process_tensor("silent")
    assert pt_tempo._engine.chunks == 0
    numpy.testing.assert_array_equal(process_tensor.get_bond_dimensions(),
                                     reference.get_bond_dimensions())
    for step in range(len(reference)):
        numpy.testing.assert_allclose(process_tensor.get_step_tensor(step)[0],
                                      reference.get_step_tensor(step)[0], rtol=0, atol=1e-12)


def test_with_the_real_background_compilation_the_results_are_the_same(monkeypatch):
    without, _ = run_tempo([3.0], dkmax=5)
    monkeypatch.setattr(config, "JAX_HOST_START", "on")
    counts = count_host_steps(monkeypatch)
    states, tempo = run_tempo([3.0], dkmax=5)
    assert len(counts) == 1 and tempo._engine is not None
    numpy.testing.assert_allclose(states, without, rtol=0, atol=1e-10)


def test_numpy_in_this_thread_leaves_other_threads_on_jax():
    seen = {}
    inside = threading.Event()
    release = threading.Event()

    def other() -> None:
        inside.wait(10)
        seen["other"] = (numerical_backend.np.backend_name,
                         type(numerical_backend.np.zeros(2)).__module__)
        release.set()

    with backends.use_backend("jax", "double"):
        thread = threading.Thread(target=other)
        thread.start()
        with numerical_backend.numpy_in_this_thread():
            inside.set()
            release.wait(10)
            seen["here"] = (numerical_backend.np.backend_name,
                            type(numerical_backend.np.zeros(2)), numerical_backend.np.precision)
        thread.join(10)
        assert numerical_backend.np.backend_name == "jax"
    assert seen["here"] == ("numpy", numpy.ndarray, "double")
    assert seen["other"][0] == "jax" and seen["other"][1].startswith("jax")


def test_host_start_choice_comes_from_the_environment():
    code = "import nonmarkov.config as c; print(c.JAX_HOST_START)"
    for value, expected in (("off", "off"), ("", "on")):
        environment = dict(os.environ, NONMARKOV_JAX_HOST_START=value)
        result = subprocess.run([sys.executable, "-c", code], env=environment,
                                capture_output=True, text=True, timeout=120)
        assert result.stdout.strip() == expected, result.stderr
    environment = dict(os.environ, NONMARKOV_JAX_HOST_START="sometimes")
    result = subprocess.run([sys.executable, "-c", code], env=environment,
                            capture_output=True, text=True, timeout=120)
    assert result.returncode != 0
    assert "NONMARKOV_JAX_HOST_START" in result.stderr and "'on'" in result.stderr


def test_a_cancelled_compilation_ahead_does_not_run():
    sitewise = pytest.importorskip("nonmarkov.engines.jax.sitewise")
    started, release = threading.Event(), threading.Event()
    ran: list[int] = []

    def slow() -> None:
        started.set()
        release.wait(10)

    first = sitewise.compile_ahead(slow)
    assert started.wait(10)
    second = sitewise.compile_ahead(lambda: ran.append(2))
    assert second.cancel()  # still queued behind the first
    release.set()
    first.result(10)
    sitewise.compile_ahead(lambda: ran.append(3)).result(10)
    assert ran == [3] and second.cancelled()
