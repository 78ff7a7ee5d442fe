"""The device policy of the JAX engines (``nonmarkov.engines.jax.placement``).

Checked here, in both the NumPy and the JAX session:

- the ``device`` engine option: its values, its default, bad values refused;
- the rule (``placement.choose`` / ``placement.place``) with a faked list of
  accelerators: small windows and chains on the host, large ones on the
  accelerator, ``host`` always the host, ``accelerator`` without one an error;
- the work measures order the benchmark problems as the rule needs (B1/B2
  below the threshold, the large-bond B3 steps above);

and where JAX is installed (skipped cleanly without it):

- ``device='host'`` and ``'auto'`` on this CPU-only machine give NumPy's
  results to 1e-10 (TEMPO, PT-TEMPO with ``compute_dynamics``, batched dynamics);
- a window that grows past the threshold moves to the (faked) accelerator once
  and gives the same result (in a subprocess with two CPU devices, the second
  standing in for the accelerator, so that the arrays really move between two
  devices); ``device='accelerator'`` with none present is a ``RuntimeError``
  before any step.
"""

from __future__ import annotations

import os
import subprocess
import sys

import numpy
import pytest

import nonmarkov as nm
from models import spin_boson
from nonmarkov import backends, config
from nonmarkov.options import EngineOptions

try:
    import jax
except ImportError:  # the NumPy-only install: the JAX parts skip
    jax = None

needs_jax = pytest.mark.skipif(jax is None, reason="JAX is not installed")

# a PT-TEMPO window like B2/B3: m = 4 classes, r = 3 carrier rows
PT_ROWS, PT_CLASSES = 3, 4


@pytest.fixture
def placement():
    return pytest.importorskip("nonmarkov.engines.jax.placement")


@pytest.fixture
def planner():
    return pytest.importorskip("nonmarkov.engines.jax.planner")


def options(**changes):
    """The session's engine options (deterministic) with ``changes``."""
    return nm.options.default_options().replace(**changes)


# --------------------------------------------------------------------------
# the option
# --------------------------------------------------------------------------


def test_device_option_values_and_default():
    assert config.VALID_JAX_DEVICES == ("auto", "host", "accelerator")
    assert EngineOptions().device == config.JAX_DEVICE
    for value in config.VALID_JAX_DEVICES:
        assert EngineOptions(device=value).device == value
    assert EngineOptions(device=" Host ").device == "host"  # as the other choices


@pytest.mark.parametrize("value", ["gpu", "cpu", "", "accelerators"])
def test_a_bad_device_value_is_refused_naming_the_valid_ones(value):
    with pytest.raises(ValueError, match="device option") as error:
        EngineOptions(device=value)
    for valid in config.VALID_JAX_DEVICES:
        assert valid in str(error.value)


def test_a_device_that_is_not_a_string_is_a_type_error():
    with pytest.raises(TypeError, match="device option"):
        EngineOptions(device=0)


def test_the_environment_sets_the_default_and_is_checked():
    code = "from nonmarkov.options import EngineOptions; print(EngineOptions().device)"
    env = {**os.environ, "NONMARKOV_JAX_DEVICE": "host", "NONMARKOV_BACKEND": "numpy"}
    done = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "host"
    env["NONMARKOV_JAX_DEVICE"] = "gpu"
    done = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode != 0
    assert "NONMARKOV_JAX_DEVICE" in done.stderr and "accelerator" in done.stderr


# --------------------------------------------------------------------------
# the rule
# --------------------------------------------------------------------------


def test_the_rule_by_size(placement, planner):
    small = placement.window_work(10, PT_ROWS, PT_CLASSES)  # B2 at its bucket 12 is alike
    large = placement.window_work(176, PT_ROWS, PT_CLASSES)  # B3 at bond 170
    assert small < planner.ACCELERATOR_WORK <= large
    assert placement.choose("auto", small, True) == "host"
    assert placement.choose("auto", large, True) == "accelerator"
    assert placement.choose("auto", large, False) == "host"  # no accelerator: the CPU
    assert placement.choose("host", large, True) == "host"
    assert placement.choose("accelerator", small, True) == "accelerator"
    with pytest.raises(RuntimeError, match="no GPU or TPU"):
        placement.choose("accelerator", small, False)
    with pytest.raises(ValueError, match="device option"):
        placement.choose("gpu", small, True)


def test_the_threshold_is_between_the_measured_problems(placement, planner):
    """The measured basis (benchmarks/README.md, the H200 run): B1 (TEMPO, bucket 10)
    and B2 (PT, bucket 12) were 6-9x slower on the GPU; B3's steps at bond ~170 faster.
    The work grows with the bucket, so the rule is a bucket threshold per problem."""
    threshold = planner.ACCELERATOR_WORK
    assert placement.window_work(12, PT_ROWS, PT_CLASSES) < threshold
    assert placement.window_work(10, 3, 3) < threshold  # B1, unique classes
    assert placement.window_work(176, PT_ROWS, PT_CLASSES) >= threshold
    buckets = [b for b in (12, 24, 40, 48, 64, 128) if placement.window_work(b, 3, 4) >= threshold]
    assert buckets[0] == 48  # the bucket from which a B3-like window goes
    # chains: B2's dynamics (one member, bond 12, d^2 = 4) stays on the host
    assert placement.chain_work(1, [12], 4) < threshold
    assert placement.chain_work(100_000, [40], 4) >= threshold
    assert placement.chain_work(10, [4, 5], 4) == 10 * 20 * 4 * (4 + 5)


def test_place_with_a_faked_accelerator(placement, monkeypatch):
    """The device discovery is one function; with it faked, ``place`` names the
    devices the rule chose."""
    pytest.importorskip("jax")
    host = jax.devices("cpu")[0]
    fake = object()
    monkeypatch.setattr(placement, "accelerators", lambda: [fake])
    large = placement.window_work(176, PT_ROWS, PT_CLASSES)
    assert placement.place("auto", 1.0) == placement.Placement("host", host)
    assert placement.place("auto", large) == placement.Placement("accelerator", fake)
    assert placement.place("host", large).device is host
    monkeypatch.setattr(placement, "accelerators", lambda: [])
    assert placement.place("auto", large).device is host
    with pytest.raises(RuntimeError, match="no GPU or TPU"):
        placement.place("accelerator", 1.0)


def test_auto_without_a_cpu_backend_runs_on_the_accelerator(placement, monkeypatch):
    """``JAX_PLATFORMS=cuda`` leaves no host device: ``auto`` then uses the accelerator
    (documented), ``host`` is an error that says how to enable the CPU."""
    fake = object()
    monkeypatch.setattr(placement, "accelerators", lambda: [fake])
    monkeypatch.setattr(placement, "host_device", lambda: None)
    assert placement.place("auto", 1.0) == placement.Placement("accelerator", fake)
    with pytest.raises(RuntimeError, match="JAX_PLATFORMS"):
        placement.place("host", 1.0)


# --------------------------------------------------------------------------
# the engines on this CPU
# --------------------------------------------------------------------------


def tempo_states(backend, end_time=0.8, **changes):
    system, bath, rho0 = spin_boson()
    parameters = nm.TempoParameters(dt=0.1, epsrel=1e-6, dkmax=5)
    with backends.use_backend(backend):
        tempo = nm.Tempo(system, bath, parameters, rho0, 0.0, options=options(**changes))
        states = numpy.asarray(tempo.compute(end_time, progress_type="silent").states)
    return states, tempo


@pytest.fixture(scope="module")
def numpy_tempo():
    return tempo_states("numpy")[0]


@needs_jax
@pytest.mark.parametrize("device", ["host", "auto"])
@pytest.mark.slow
def test_host_and_auto_equal_numpy_on_this_machine(device, numpy_tempo):
    states, tempo = tempo_states("jax", device=device, chunk=3, compiled="on")
    numpy.testing.assert_allclose(states, numpy_tempo, rtol=0, atol=1e-10)
    if not jax.devices()[0].platform == "cpu":
        pytest.skip("an accelerator is present: auto may place elsewhere")
    assert tempo.engine.stats.compiled_steps > 0
    assert tempo.engine.stats.device == str(jax.devices("cpu")[0])
    assert tempo.engine.stats.device_moves == 0


@needs_jax
@pytest.mark.slow
def test_pt_dynamics_and_batches_on_the_host_equal_numpy():
    # weak coupling: no truncation decision near its threshold (at alpha 0.3 any two
    # roundings of the build differ by ~1e-9)
    system, bath, rho0 = spin_boson(alpha=0.1)
    detuned = nm.System(0.5 * numpy.array([[0.3, 1.0], [1.0, -0.3]]))
    parameters = nm.TempoParameters(dt=0.1, epsrel=1e-6, dkmax=5)
    results = []
    for backend in ("numpy", "jax"):
        with backends.use_backend(backend):
            engine = options(device="host", compiled="on")
            pt = nm.pt_tempo_compute(
                bath, 0.0, 0.8, parameters, progress_type="silent", options=engine
            )
            dynamics = nm.compute_dynamics(
                system,
                initial_state=rho0,
                process_tensor=pt,
                progress_type="silent",
                options=engine,
            )
            batch = nm.compute_dynamics_batch(
                [system, detuned],
                initial_states=rho0,
                process_tensor=pt,
                progress_type="silent",
                options=engine,
            )
            results.append([numpy.asarray(dynamics.states)] + [numpy.asarray(batch.states)])
    for on_jax, on_numpy in zip(results[1], results[0]):
        numpy.testing.assert_allclose(on_jax, on_numpy, rtol=0, atol=1e-10)


@needs_jax
def test_accelerator_without_one_is_an_error_before_any_step():
    if any(device.platform != "cpu" for device in jax.devices()):
        pytest.skip("an accelerator is present")
    system, bath, rho0 = spin_boson()
    parameters = nm.TempoParameters(dt=0.1, epsrel=1e-9, dkmax=6)
    with backends.use_backend("jax"):
        with pytest.raises(RuntimeError, match="no GPU or TPU"):
            nm.Tempo(system, bath, parameters, rho0, 0.0, options=options(device="accelerator"))


_TWO_DEVICES = r"""
import sys
import numpy, jax
import nonmarkov as nm
from nonmarkov import backends
from nonmarkov.engines.jax import placement, planner
sys.path.insert(0, sys.argv[1])
from models import spin_boson

host, other = jax.devices("cpu")
placement.accelerators = lambda: [other]          # the second CPU device stands in
planner.ACCELERATOR_WORK = placement.window_work(6, 3, 4)
system, bath, rho0 = spin_boson(alpha=0.1)  # well-conditioned: roundings agree to 1e-14
parameters = nm.TempoParameters(dt=0.1, epsrel=1e-6, dkmax=5)
results = {}
for backend in ("numpy", "jax"):
    with backends.use_backend(backend):
        options = nm.options.EngineOptions(compiled="on", chunk=3, deterministic=True)
        pt = nm.pt_tempo_compute(bath, 0.0, 0.8, parameters, progress_type="silent",
                                 options=options)
        tempo = nm.Tempo(system, bath, parameters, rho0, 0.0, options=options)
        results[backend] = (numpy.asarray(tempo.compute(0.8, progress_type="silent").states),
                            numpy.asarray(nm.compute_dynamics(system, initial_state=rho0,
                                          process_tensor=pt, progress_type="silent").states))
        if backend == "jax":
            stats = tempo.engine.stats
            assert stats.device_moves == 1 and stats.device == str(other), stats
for a, b in zip(results["numpy"], results["jax"]):
    assert numpy.abs(a - b).max() < 1e-10, numpy.abs(a - b).max()
print("ok")
"""


@needs_jax
@pytest.mark.slow
def test_a_move_between_two_devices_in_a_subprocess():
    """Two real CPU devices (XLA's host device count): compiled TEMPO and PT-TEMPO
    windows grow from the first to the second; NumPy's results to 1e-10."""
    env = {
        **os.environ,
        "XLA_FLAGS": "--xla_force_host_platform_device_count=2",
        "JAX_PLATFORMS": "cpu",
        "NONMARKOV_PROGRESS": "silent",
    }
    tests = os.path.dirname(os.path.abspath(__file__))
    done = subprocess.run(
        [sys.executable, "-c", _TWO_DEVICES, tests],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip().endswith("ok")
