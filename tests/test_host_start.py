"""The host start of the JAX window engine (``nonmarkov.engines.jax.engine``), JAX only.

While XLA compiles the step kernel, TEMPO and PT-TEMPO run their first steps
on the host with NumPy and then move the window to the device. Checked here:

- the hand-over at any step (window filling, full and tracing, bucket grown
  on the host) gives the NumPy backend's results, for TEMPO and PT-TEMPO;
- a run that ends with the host phase continues on the device; a host phase
  longer than a call goes on in the next one, and the run repeats the one-call
  run bit for bit;
- single precision stays complex64 across the hand-over;
- the host steps stop at the host-start bond; no host start without a memory
  cut, nor with the ``host_start`` option off;
- with the real background compilation (scheduling not deterministic) the
  results equal those without a host start;
- the NumPy override is per thread; a cancelled compilation ahead does not run.

The session runs with deterministic scheduling (``tests/conftest.py``): the
host start then runs exactly ``scheduling.DETERMINISTIC_HOST_STEPS`` steps (set
here per test), fewer when a bond reaches ``engine.HOST_START_BOND``, and waits
for the kernel before the device steps.
"""

from __future__ import annotations

import threading

import numpy
import pytest

import nonmarkov as nm
from models import spin_boson
from nonmarkov import backends
from nonmarkov.backends import numerical_backend

pytestmark = pytest.mark.skip_backend("numpy", "the host start is part of the JAX backend")

jax = pytest.importorskip("jax")
compiled = pytest.importorskip("nonmarkov.engines.jax.window")
scheduling = pytest.importorskip("nonmarkov.engines.jax.scheduling")
compiler = pytest.importorskip("nonmarkov.engines.jax.compiler")
jax_engine = pytest.importorskip("nonmarkov.engines.jax.engine")


@pytest.fixture
def host_steps(monkeypatch):
    """Call ``host_steps(count)`` to make the deterministic host start run ``count`` steps."""

    def setup(count: int) -> None:
        monkeypatch.setattr(scheduling, "DETERMINISTIC_HOST_STEPS", count)

    return setup


def engine_options(**changes):
    """The session's engine options (deterministic scheduling, host start on) with
    ``changes``."""
    return nm.options.default_options().replace(**{"host_start": True, **changes})


def run_tempo(end_times, backend="jax", dkmax=4, epsrel=1e-8, **options):
    system, bath, rho0 = spin_boson()
    parameters = nm.TempoParameters(dt=0.1, epsrel=epsrel, dkmax=dkmax)
    with backends.use_backend(backend, "double"):
        tempo = nm.Tempo(system, bath, parameters, rho0, 0.0, options=engine_options(**options))
        for end_time in end_times:
            dynamics = tempo.compute(end_time, progress_type="silent")
    return numpy.asarray(dynamics.states), tempo


def test_the_session_runs_a_deterministic_host_start():
    options = nm.options.default_options()
    assert options.deterministic and options.host_start
    _, tempo = run_tempo([1.0])
    assert tempo.engine.host_steps == scheduling.DETERMINISTIC_HOST_STEPS
    assert tempo.engine.compiled.schedule.deterministic


@pytest.mark.parametrize("count", [2, 9])
def test_tempo_hands_over_to_the_device_with_numpys_results(host_steps, count):
    """Hand-over while the window fills (2 host steps) and once it traces (9, dkmax 4)."""
    reference, _ = run_tempo([1.5], backend="numpy")
    host_steps(count)
    states, tempo = run_tempo([1.5])
    assert tempo.engine.host_steps == count
    assert tempo.engine.compiled.chunks > 0  # the rest ran on the device
    numpy.testing.assert_allclose(states, reference, rtol=0, atol=1e-10)


def test_a_bucket_outgrown_on_the_host_is_compiled_and_loaded(host_steps, monkeypatch):
    reference, numpy_run = run_tempo([2.0], backend="numpy", dkmax=6, epsrel=1e-10)
    assert numpy_run.max_bond_dimension > 4
    requested = []
    original = compiled.CompiledWindow.compile_step_ahead

    def compile_step_ahead(window, bond):
        requested.append(bond)
        return original(window, bond)

    monkeypatch.setattr(compiled.CompiledWindow, "compile_step_ahead", compile_step_ahead)
    host_steps(12)
    states, tempo = run_tempo([2.0], dkmax=6, epsrel=1e-10, initial_bond=4)
    assert tempo.engine.host_steps == 12
    assert requested[0] == 4 and len(requested) > 1  # a grown bucket was asked for
    assert tempo.engine.compiled.bond == requested[-1]
    assert tempo.engine.compiled.chunks > 0
    numpy.testing.assert_allclose(states, reference, rtol=0, atol=1e-10)


def test_a_run_that_ends_on_the_host_continues_on_the_device(host_steps):
    """The host phase ends with the first call (7 steps): the second call runs on the
    device."""
    reference, _ = run_tempo([0.8, 1.6], backend="numpy")
    host_steps(7)
    states, tempo = run_tempo([0.8, 1.6])
    assert tempo.engine.host_steps == 7  # steps 2..8 of the first call
    assert tempo.engine.compiled.chunks > 0
    numpy.testing.assert_allclose(states, reference, rtol=0, atol=1e-10)


@pytest.mark.parametrize("count", [10, 1000])
def test_the_host_phase_spans_calls_and_repeats_one_call_bit_for_bit(host_steps, count):
    """More host steps than the first call has: the phase goes on in the next call (to
    its end: 15 steps, nothing on the device), and the run is the one-call run."""
    reference, _ = run_tempo([1.6], backend="numpy")
    host_steps(count)
    in_one, one_call = run_tempo([1.6])
    in_two, two_calls = run_tempo([0.8, 1.6])
    for tempo in (one_call, two_calls):
        assert tempo.engine.host_steps == min(count, 15)
        assert (tempo.engine.compiled.chunks > 0) == (count < 15)
    numpy.testing.assert_array_equal(in_two, in_one)
    numpy.testing.assert_allclose(in_two, reference, rtol=0, atol=1e-10)


def test_single_precision_hands_over_in_complex64(host_steps):
    host_steps(4)
    system, bath, rho0 = spin_boson()
    parameters = nm.TempoParameters(dt=0.1, epsrel=1e-5, dkmax=4)
    runs = {}
    for backend in ("numpy", "jax"):
        with backends.use_backend(backend, "single"):
            tempo = nm.Tempo(system, bath, parameters, rho0, 0.0, options=engine_options())
            runs[backend] = numpy.asarray(tempo.compute(1.5, progress_type="silent").states)
    assert tempo.engine.host_steps == 4
    engine = tempo.engine.compiled
    assert engine.chunks > 0
    assert engine._front.dtype == engine._sites.dtype == numpy.complex64
    assert engine._log_scale.dtype == numpy.float32
    double, _ = run_tempo([1.5], backend="numpy", epsrel=1e-5)
    # float32 rounding over 15 steps, as for the compiled kernel alone
    numpy.testing.assert_allclose(runs["jax"], double, rtol=0, atol=1e-4)
    numpy.testing.assert_allclose(runs["jax"], runs["numpy"], rtol=0, atol=1e-4)
    assert numpy.max(numpy.abs(runs["jax"] - double)) > 0.0  # it really ran in single


def test_host_steps_stop_at_the_host_start_bond(host_steps, monkeypatch):
    monkeypatch.setattr(jax_engine, "HOST_START_BOND", 3)
    reference, numpy_run = run_tempo([1.5], backend="numpy")
    # the first step whose largest bond reaches 3 is the last on the host
    with backends.use_backend("numpy", "double"):
        system, bath, rho0 = spin_boson()
        tempo = nm.Tempo(system, bath, numpy_run.parameters, rho0, 0.0)
        step = 0
        while tempo.max_bond_dimension < 3:
            step += 1
            tempo.compute(0.1 * (step + 1), progress_type="silent")
    assert 0 < step < 14
    host_steps(1000)
    states, tempo = run_tempo([1.5])
    assert tempo.engine.host_steps == step
    assert tempo.engine.compiled.chunks > 0
    numpy.testing.assert_allclose(states, reference, rtol=0, atol=1e-10)


@pytest.mark.parametrize("dkmax, host_start", [(None, True), (4, False)])
def test_no_host_start_without_a_memory_cut_or_when_switched_off(host_steps, dkmax, host_start):
    host_steps(3)
    reference, _ = run_tempo([0.6], backend="numpy", dkmax=dkmax)
    states, tempo = run_tempo([0.6], dkmax=dkmax, host_start=host_start)
    assert tempo.engine.host_steps == 0 and tempo.engine.memory == (dkmax or 0)
    assert tempo.engine.compiled.chunks > 0
    numpy.testing.assert_allclose(states, reference, rtol=0, atol=1e-10)


@pytest.mark.parametrize("count", [2, 6])
def test_pt_tempo_hands_over_with_numpys_process_tensor(host_steps, count):
    """PT-TEMPO: hand-over before and after the first site is finalised (dkmax 3)."""
    bath = spin_boson()[1]
    parameters = nm.TempoParameters(dt=0.1, epsrel=1e-10, dkmax=3)
    with backends.use_backend("numpy", "double"):
        reference = nm.PtTempo(bath, 0.0, 2.0, parameters).get_process_tensor("silent")
    host_steps(count)
    with backends.use_backend("jax", "double"):
        pt_tempo = nm.PtTempo(bath, 0.0, 2.0, parameters, options=engine_options())
        process_tensor = pt_tempo.get_process_tensor("silent")
    assert pt_tempo.engine.host_steps == count
    assert pt_tempo.engine.compiled.chunks > 0
    numpy.testing.assert_array_equal(
        process_tensor.get_bond_dimensions(), reference.get_bond_dimensions()
    )
    for step in range(len(reference)):
        norms = [
            numpy.linalg.norm(pt.get_step_tensor(step)[0]) for pt in (process_tensor, reference)
        ]
        numpy.testing.assert_allclose(*norms, rtol=1e-8)
    system, _, rho0 = spin_boson()
    with backends.use_backend("numpy", "double"):
        states = [
            numpy.asarray(
                nm.compute_dynamics(system, rho0, process_tensor=pt, progress_type="silent").states
            )
            for pt in (process_tensor, reference)
        ]
    numpy.testing.assert_allclose(*states, rtol=0, atol=1e-10)


def test_a_pt_that_ends_on_the_host_is_the_numpy_process_tensor(host_steps):
    bath = spin_boson()[1]
    parameters = nm.TempoParameters(dt=0.1, epsrel=1e-10, dkmax=3)
    with backends.use_backend("numpy", "double"):
        reference = nm.PtTempo(bath, 0.0, 1.0, parameters).get_process_tensor("silent")
    host_steps(1000)  # every step on the host, the window read back from the device
    with backends.use_backend("jax", "double"):
        pt_tempo = nm.PtTempo(bath, 0.0, 1.0, parameters, options=engine_options())
        process_tensor = pt_tempo.get_process_tensor("silent")
    assert pt_tempo.engine.host_steps == 9 and pt_tempo.engine.compiled.chunks == 0
    numpy.testing.assert_array_equal(
        process_tensor.get_bond_dimensions(), reference.get_bond_dimensions()
    )
    for step in range(len(reference)):
        numpy.testing.assert_allclose(
            process_tensor.get_step_tensor(step)[0],
            reference.get_step_tensor(step)[0],
            rtol=0,
            atol=1e-12,
        )


def test_host_steps_go_on_by_rule_or_while_the_kernel_compiles():
    """:meth:`Schedule.host_steps_go_on`: deterministic, a fixed count; else until the
    compilation's future is done."""
    pending = compiler.compile_ahead(lambda: None)
    pending.result(timeout=60)
    fixed = scheduling.Schedule(deterministic=True)
    count = scheduling.DETERMINISTIC_HOST_STEPS
    assert fixed.host_steps_go_on(pending, count - 1)  # done or not, the count decides
    assert not fixed.host_steps_go_on(pending, count)
    measured = scheduling.Schedule(deterministic=False)
    assert not measured.host_steps_go_on(pending, 0)
    release = threading.Event()
    compiling = compiler.compile_ahead(lambda: release.wait(10))
    try:
        assert measured.host_steps_go_on(compiling, 100)
    finally:
        release.set()
    compiling.result(timeout=60)
    assert not measured.host_steps_go_on(compiling, 0)


def test_with_the_real_background_compilation_the_results_are_the_same():
    """Scheduling not deterministic: the host steps run while the kernel compiles in the
    background (a kernel not compiled before in the session: memory 7)."""
    states, tempo = run_tempo([3.0], dkmax=7, deterministic=False)
    engine = tempo.engine
    assert not engine.compiled.schedule.deterministic
    assert 1 <= engine.host_steps <= 29
    if engine.host_steps < 29:
        assert engine.compiled.chunks > 0
    without, other = run_tempo([3.0], dkmax=7, host_start=False)
    assert other.engine.host_steps == 0
    numpy.testing.assert_allclose(states, without, rtol=0, atol=1e-10)


def test_the_host_start_option_is_a_bool():
    with pytest.raises(TypeError, match="host_start"):
        nm.options.EngineOptions(host_start="on")


def test_numpy_in_this_thread_leaves_other_threads_on_jax():
    seen = {}
    inside = threading.Event()
    release = threading.Event()

    def other() -> None:
        inside.wait(10)
        seen["other"] = (
            numerical_backend.np.backend_name,
            type(numerical_backend.np.zeros(2)).__module__,
        )
        release.set()

    with backends.use_backend("jax", "double"):
        thread = threading.Thread(target=other)
        thread.start()
        with numerical_backend.numpy_in_this_thread():
            inside.set()
            release.wait(10)
            seen["here"] = (
                numerical_backend.np.backend_name,
                type(numerical_backend.np.zeros(2)),
                numerical_backend.np.precision,
            )
        thread.join(10)
        assert numerical_backend.np.backend_name == "jax"
    assert seen["here"] == ("numpy", numpy.ndarray, "double")
    assert seen["other"][0] == "jax" and seen["other"][1].startswith("jax")


def test_a_cancelled_compilation_ahead_does_not_run():
    started, release = threading.Event(), threading.Event()
    ran: list[int] = []

    def slow() -> None:
        started.set()
        release.wait(10)

    first = compiler.compile_ahead(slow)
    assert started.wait(10)
    second = compiler.compile_ahead(lambda: ran.append(2))
    assert second.cancel()  # still queued behind the first
    release.set()
    first.result(10)
    compiler.compile_ahead(lambda: ran.append(3)).result(10)
    assert ran == [3] and second.cancelled()
