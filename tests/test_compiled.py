"""The compiled kernels of the JAX backend, through the public API.

- the kept-rank rule traced with ``jax.numpy`` (``truncation.rank_rule``)
  equals the host rule ``truncation.kept_rank``; bond buckets;
- the compiled zip-up window (``compiled='on'``): results do not depend on the
  bond bucket (padding) nor on the chunking and agree with NumPy's kernels
  (TEMPO, PT-TEMPO with growing buckets and redone chunks, streamed to a file);
  after compilation the steps make no implicit host transfers and fetch once
  per chunk; the ``svd`` option; single precision;
- the persistent compilation cache (option, environment variable, default);
- ``compute_dynamics`` as one compiled scan (one or two process tensors,
  record_all on and off, a prefix of the process tensor) equals the NumPy step
  loop; a control keeps the loop;
- a change of precision first stops the compilations ahead.

Skipped on the NumPy backend (the compiled kernels are used with JAX only).
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading

import numpy
import pytest

import nonmarkov as nm
from models import SX, SZ, spin_boson
from nonmarkov import backends, config
from nonmarkov.kernels import truncation

pytestmark = pytest.mark.skip_backend("numpy", "the compiled kernels are JAX-only")

jax = pytest.importorskip("jax")
padding = pytest.importorskip("nonmarkov.engines.jax.padding")
planner = pytest.importorskip("nonmarkov.engines.jax.planner")
compiler = pytest.importorskip("nonmarkov.engines.jax.compiler")
jax_engine = pytest.importorskip("nonmarkov.engines.jax.engine")


def engine_options(**changes):
    """The session's engine options (deterministic) with ``changes``."""
    return nm.options.default_options().replace(**changes)


def run_tempo(model, parameters, end_time, backend="jax", precision="double", **options):
    """States of a TEMPO run; ``options`` change the engine options."""
    system, bath, rho0 = model
    with backends.use_backend(backend, precision):
        tempo = nm.Tempo(system, bath, parameters, rho0, 0.0, options=engine_options(**options))
        states = tempo.compute(end_time, progress_type="silent").states
    return numpy.asarray(states), tempo


# --------------------------------------------------------------------------
# the kept-rank rule on the device
# --------------------------------------------------------------------------


def spectra():
    """Descending spectra: random decays, multiplets at the cut, zeros, one value."""
    rng = numpy.random.default_rng(7)
    cases = []
    for _ in range(40):
        size = int(rng.integers(1, 30))
        cases.append(numpy.sort(10.0 ** rng.uniform(-12, 0, size))[::-1])
    base = numpy.array([1.0, 0.5, 0.1, 1e-3, 1e-3, 1e-3, 1e-5])
    cases.append(base)  # a triplet where epsrel=1e-3 would cut
    cases.append(base * numpy.array([1, 1, 1, 1, 1 - 1e-10, 1 - 2e-10, 1]))  # near-equal
    cases.append(numpy.array([1.0, 1.0, 1.0, 1.0]))  # all equal
    cases.append(numpy.array([1.0, 1e-2, 0.0, 0.0]))  # exact zeros
    cases.append(numpy.zeros(5))  # zero matrix
    cases.append(numpy.array([3.0]))
    return cases


def device_rank(s, epsrel, max_rank=None):
    """The rank rule traced with ``jax.numpy`` (as in the compiled kernels)."""
    return truncation.rank_rule(s, epsrel, max_rank, jax.numpy)


def test_device_rank_rule_equals_host_rule():
    cases = spectra()
    with backends.use_backend("jax", "double"):
        for max_rank in (None, 2):
            rule = jax.jit(
                jax.vmap(lambda s, e, m=max_rank: device_rank(s, e, m), in_axes=(0, None))
            )
            for epsrel in (1e-1, 1e-3, 1e-6, 1e-10):
                expected = [truncation.kept_rank(s, epsrel, max_rank) for s in cases]
                for length in (30, 37):  # trailing zeros of a padded bond change nothing
                    padded = numpy.zeros((len(cases), length))
                    for row, s in zip(padded, cases):
                        row[: len(s)] = s
                    got = numpy.asarray(rule(jax.device_put(padded), epsrel)).tolist()
                    assert got == expected, (epsrel, max_rank, length)


def test_device_rank_rule_does_not_split_a_multiplet():
    s = numpy.array([1.0, 0.2, 0.2, 0.2, 1e-9])
    with backends.use_backend("jax", "double"):
        rule = jax.jit(device_rank, static_argnums=2)
        # epsrel between the pair's tails: the plain rule would keep 2 or 3 of the triplet
        assert int(rule(jax.device_put(s), 0.25, None)) == 4
        assert int(rule(jax.device_put(s), 0.25, 3)) == 3


def test_bond_buckets():
    assert planner.bond_bucket(1) == planner.BOND_BUCKETS[0]
    for rank in (3, 9, 10, 33, 130, 1000):
        size = planner.bond_bucket(rank)
        assert size >= rank and size <= 1.25 * rank + 2
    assert planner.bond_bucket(10**5) >= 10**5


# --------------------------------------------------------------------------
# the compiled zip-up window
# --------------------------------------------------------------------------

# weak coupling, tight epsrel: no truncation decision near its threshold, so any
# two roundings of the algorithm agree to ~1e-14 (a change of 1e-13 in the coupling
# moves the NumPy result by as little)
WELL_CONDITIONED = dict(alpha=0.1, temperature=0.5)


def test_padding_and_chunks_do_not_change_the_result():
    model = spin_boson(**WELL_CONDITIONED)
    parameters = nm.TempoParameters(dt=0.1, epsrel=1e-8, dkmax=6)
    small, tempo_small = run_tempo(model, parameters, 1.6, compiled="on", chunk=1)
    large, tempo_large = run_tempo(model, parameters, 1.6, compiled="on", chunk=16)
    reference, _ = run_tempo(model, parameters, 1.6, backend="numpy")
    for tempo in (tempo_small, tempo_large):
        assert tempo.engine.stats.compiled_steps == 15 and tempo.engine.stats.host_steps == 0
    assert tempo_small.engine.stats.fetches > tempo_large.engine.stats.fetches
    numpy.testing.assert_allclose(small, large, rtol=0, atol=1e-12)
    numpy.testing.assert_allclose(large, reference, rtol=0, atol=1e-10)


def test_svd_algorithm_is_a_choice_that_does_not_change_the_result():
    """The ``svd`` option picks JAX's SVD algorithm; QR-based, divide and conquer and
    default agree; removed or unknown names are refused."""
    from jax import lax

    assert padding.svd_algorithm("default", "cpu") is None
    assert padding.svd_algorithm("qr", "cpu") == lax.linalg.SvdAlgorithm.QR
    assert (
        padding.svd_algorithm("divide_and_conquer", "gpu")
        == lax.linalg.SvdAlgorithm.DIVIDE_AND_CONQUER
    )
    for removed in ("eigh", "jacobi", "polar", "fast"):
        with pytest.raises(ValueError, match="svd option"):
            nm.options.EngineOptions(svd=removed)
    model = spin_boson(**WELL_CONDITIONED)
    parameters = nm.TempoParameters(dt=0.1, epsrel=1e-8, dkmax=5)
    default, _ = run_tempo(model, parameters, 1.0, compiled="on")
    for algorithm in ("qr", "divide_and_conquer"):
        other, tempo = run_tempo(model, parameters, 1.0, compiled="on", svd=algorithm)
        assert tempo.engine.stats.compiled_steps == 9
        numpy.testing.assert_allclose(other, default, rtol=0, atol=1e-12)


def test_steps_make_no_implicit_transfers_and_fetch_once_per_chunk():
    system, bath, rho0 = spin_boson(**WELL_CONDITIONED)
    parameters = nm.TempoParameters(dt=0.1, epsrel=1e-8, dkmax=5)
    with backends.use_backend("jax", "double"):
        options = engine_options(compiled="on", chunk=4)
        tempo = nm.Tempo(system, bath, parameters, rho0, 0.0, options=options)
        tempo.compute(0.8, progress_type="silent")  # compiles; the bond settles
        stats = tempo.engine.stats
        fetches, redos, compiled = stats.fetches, stats.redos, stats.kernels_compiled
        with jax.transfer_guard("disallow"):
            # the guard is active: an implicit device-to-host copy fails
            with pytest.raises(Exception, match="[Dd]isallowed"):
                float(jax.numpy.ones(()) + 1.0)
            tempo.compute(2.0, progress_type="silent")  # 12 more steps
    assert stats.redos == redos and stats.kernels_compiled == compiled
    # chunks of at most 4 steps, one fetch each
    assert 3 <= stats.fetches - fetches <= 12
    assert len(tempo.get_dynamics()) == 21 and stats.host_steps == 0


def test_single_precision_runs_compiled_and_stays_close_to_double():
    model = spin_boson(**WELL_CONDITIONED)
    parameters = nm.TempoParameters(dt=0.1, epsrel=1e-5, dkmax=8)
    double, _ = run_tempo(model, parameters, 1.5, compiled="on")
    single, tempo = run_tempo(model, parameters, 1.5, precision="single", compiled="on")
    assert tempo.engine.stats.compiled_steps == 14
    # float32 rounding (~1e-7 per operation) accumulated over 15 steps
    on_gpu = jax.default_backend() != "cpu"
    numpy.testing.assert_allclose(single, double, rtol=0, atol=5e-3 if on_gpu else 1e-4)
    assert numpy.max(numpy.abs(single - double)) > 0.0  # it really ran in single precision
    single_numpy, _ = run_tempo(model, parameters, 1.5, backend="numpy", precision="single")
    numpy.testing.assert_allclose(single_numpy, double, rtol=0, atol=1e-4)


# --------------------------------------------------------------------------
# PT-TEMPO with the compiled window (oldest='finalize')
# --------------------------------------------------------------------------


def run_pt_tempo(bath, parameters, end_time, backend="jax", filename=None, **options):
    """A PT-TEMPO run; ``options`` change the engine options (bucket, chunk...)."""
    with backends.use_backend(backend, "double"):
        pt_tempo = nm.PtTempo(
            bath,
            0.0,
            end_time,
            parameters,
            process_tensor_file=filename,
            options=engine_options(**options),
        )
        process_tensor = pt_tempo.get_process_tensor(progress_type="silent")
    return process_tensor, pt_tempo


def pt_dynamics(process_tensor, backend="numpy"):
    """Spin-boson dynamics (H_S = 0.5 sx + 0.2 sz, spin up) with ``process_tensor``."""
    with backends.use_backend(backend, "double"):
        dynamics = nm.compute_dynamics(
            nm.System(0.5 * SX + 0.2 * SZ),
            numpy.diag([1.0, 0.0]),
            process_tensor=process_tensor,
            progress_type="silent",
        )
    return numpy.asarray(dynamics.states)


@pytest.mark.parametrize("dkmax", [2, 3])
def test_compiled_pt_tempo_agrees_with_numpy(dkmax):
    """Same process tensor (bonds, norms, dynamics) as NumPy; the bond bucket grows."""
    bath = spin_boson(**WELL_CONDITIONED)[1]
    parameters = nm.TempoParameters(dt=0.1, epsrel=1e-8, dkmax=dkmax)
    on_jax, pt_tempo = run_pt_tempo(bath, parameters, 1.4, compiled="on", chunk=3)
    on_numpy, reference = run_pt_tempo(bath, parameters, 1.4, backend="numpy")
    stats = pt_tempo.engine.stats
    assert stats.compiled_steps == 13 and stats.redos > 0  # outgrew the first bucket
    assert pt_tempo.max_bond_dimension == reference.max_bond_dimension
    assert len(on_jax) == len(on_numpy) == 14
    numpy.testing.assert_array_equal(on_jax.get_bond_dimensions(), on_numpy.get_bond_dimensions())
    # a step tensor is fixed up to unitary gauges on its bonds: its norm (with the
    # log-norm share it received) is not
    for step in range(len(on_numpy)):
        tensors = [pt.get_step_tensor(step)[0] for pt in (on_jax, on_numpy)]
        numpy.testing.assert_allclose(*[numpy.linalg.norm(t) for t in tensors], rtol=1e-8)
    numpy.testing.assert_allclose(pt_dynamics(on_jax), pt_dynamics(on_numpy), rtol=0, atol=1e-10)


def test_compiled_pt_tempo_streams_to_a_file(tmp_path):
    bath = spin_boson(**WELL_CONDITIONED)[1]
    parameters = nm.TempoParameters(dt=0.1, epsrel=1e-8, dkmax=2)
    in_memory, _ = run_pt_tempo(bath, parameters, 1.0, compiled="on")
    filename = tmp_path / "pt.hdf5"
    on_file, pt_tempo = run_pt_tempo(bath, parameters, 1.0, filename=filename, compiled="on")
    assert pt_tempo.engine.stats.compiled_steps == 9
    assert isinstance(on_file, nm.FileProcessTensor) and filename.is_file()
    assert len(on_file) == len(in_memory) == 10
    numpy.testing.assert_array_equal(on_file.get_bond_dimensions(), in_memory.get_bond_dimensions())
    numpy.testing.assert_allclose(
        pt_dynamics(on_file, "jax"), pt_dynamics(in_memory), rtol=0, atol=1e-12
    )


# --------------------------------------------------------------------------
# persistent compilation cache
# --------------------------------------------------------------------------


def test_enable_compilation_cache_sets_jax_options(tmp_path):
    previous = jax.config.jax_compilation_cache_dir
    try:
        path = backends.enable_compilation_cache(tmp_path / "cache")
        assert os.path.isdir(path)
        assert jax.config.jax_compilation_cache_dir == path
        assert jax.config.jax_persistent_cache_min_compile_time_secs == 0.0
        assert backends.compilation_cache_dir() == path
    finally:
        jax.config.update("jax_compilation_cache_dir", previous)


def test_compilation_cache_rejects_bad_paths(tmp_path):
    a_file = tmp_path / "file"
    a_file.write_text("x")
    with pytest.raises(ValueError, match="not a directory"):
        backends.enable_compilation_cache(a_file)
    with pytest.raises(TypeError, match="path"):
        backends.enable_compilation_cache(3)
    with pytest.raises(ValueError, match="path"):
        config.check_cache_dir("  ")


def test_cache_environment_variable_fills_the_cache(tmp_path):
    cache = tmp_path / "jax-cache"
    code = (
        "import numpy as np, nonmarkov as nm\n"
        "s = nm.System(np.diag([0.3, -0.3]).astype(complex))\n"
        "b = nm.Bath(np.diag([0.5, -0.5]).astype(complex), nm.PowerLawSD(0.1, 1.0, 4.0))\n"
        "p = nm.TempoParameters(dt=0.2, epsrel=1e-8, dkmax=2)\n"
        "o = nm.options.EngineOptions(compiled='on')\n"
        "nm.Tempo(s, b, p, np.diag([1.0, 0.0]), 0.0, options=o).compute(\n"
        "    0.6, progress_type='silent')\n"
        "print(nm.backends.compilation_cache_dir())\n"
    )
    # compiled='on': this short run would stay on the host
    env = {**os.environ, "NONMARKOV_BACKEND": "jax", "NONMARKOV_JAX_CACHE_DIR": str(cache)}
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == str(cache)
    assert cache.is_dir() and len(os.listdir(cache)) > 0
    bad = subprocess.run(
        [sys.executable, "-c", "import nonmarkov"],
        capture_output=True,
        text=True,
        timeout=120,
        env={**env, "NONMARKOV_JAX_CACHE_DIR": os.devnull},
    )
    assert bad.returncode != 0
    assert "NONMARKOV_JAX_CACHE_DIR" in bad.stderr and "not a directory" in bad.stderr


def test_the_cache_is_on_by_default_in_the_users_cache_directory(tmp_path):
    code = (
        "import nonmarkov as nm\n"
        "nm.backends.set_backend('jax')\n"
        "print(nm.backends.compilation_cache_dir())\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "NONMARKOV_JAX_CACHE_DIR"}
    env["XDG_CACHE_HOME"] = str(tmp_path)
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == str(tmp_path / "nonmarkov" / "jax")
    off = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env={**env, "NONMARKOV_JAX_CACHE_DIR": "off"},
        timeout=300,
    )
    assert off.returncode == 0, off.stderr
    assert off.stdout.strip() == "None"


def test_info_names_the_device():
    with backends.use_backend("jax"):
        details = backends.info()
    default = jax.devices()[0]
    assert details["default_device"].split(" ")[0].endswith(f":{default.id}")
    assert default.device_kind in details["default_device"]
    assert details["devices"][0] == details["default_device"]


# --------------------------------------------------------------------------
# compute_dynamics as one compiled scan
# --------------------------------------------------------------------------


@pytest.fixture(scope="module")
def two_process_tensors():
    """Two short process tensors of different baths and bonds (built with NumPy)."""
    parameters = nm.TempoParameters(dt=0.1, epsrel=1e-9, dkmax=3)
    baths = [spin_boson()[1], nm.Bath(0.5 * SX, nm.PowerLawSD(0.1, 1.0, 3.0))]
    with backends.use_backend("numpy", "double"):
        return [
            nm.PtTempo(bath, 0.0, 1.2, parameters).get_process_tensor(progress_type="silent")
            for bath in baths
        ]


@pytest.mark.parametrize("record_all", [True, False])
@pytest.mark.parametrize("num_baths", [1, 2])
def test_scanned_dynamics_agrees_with_the_step_loop(
    two_process_tensors, monkeypatch, num_baths, record_all
):
    calls = []
    original = jax_engine.run_members
    monkeypatch.setattr(
        jax_engine,
        "run_members",
        lambda *args, **kwargs: calls.append(1) or original(*args, **kwargs),
    )
    process_tensor = two_process_tensors[0] if num_baths == 1 else two_process_tensors
    system = nm.System(0.5 * SX + 0.2 * SZ)
    rho0 = spin_boson()[2]
    results = {}
    for backend in ("numpy", "jax"):
        with backends.use_backend(backend, "double"):
            dynamics = nm.compute_dynamics(
                system,
                rho0,
                process_tensor=process_tensor,
                record_all=record_all,
                progress_type="silent",
                options=engine_options(compiled="on"),
            )
        results[backend] = (numpy.asarray(dynamics.times), numpy.asarray(dynamics.states))
    assert calls == [1]  # the JAX run took the scan, the NumPy run the loop
    assert len(results["jax"][0]) == (13 if record_all else 2)
    numpy.testing.assert_allclose(results["jax"][0], results["numpy"][0], rtol=0, atol=1e-12)
    numpy.testing.assert_allclose(results["jax"][1], results["numpy"][1], rtol=0, atol=1e-10)


def test_dynamics_with_control_is_one_compiled_scan(two_process_tensors, monkeypatch):
    """A control is folded into the propagators next to it: the run is still one scan."""
    calls = []
    original = jax_engine.run_members
    monkeypatch.setattr(
        jax_engine,
        "run_members",
        lambda *args, **kwargs: calls.append(1) or original(*args, **kwargs),
    )
    system = nm.System(0.5 * SX)
    control = nm.Control(2)
    control.add_single(3, nm.operators.left_super(SX) @ nm.operators.right_super(SX))
    results = []
    for backend in ("numpy", "jax"):
        with backends.use_backend(backend, "double"):
            results.append(
                numpy.asarray(
                    nm.compute_dynamics(
                        system,
                        numpy.diag([1.0, 0.0]),
                        process_tensor=two_process_tensors[0],
                        control=control,
                        progress_type="silent",
                        options=engine_options(compiled="on"),
                    ).states
                )
            )
    assert calls == [1]
    numpy.testing.assert_allclose(results[1], results[0], rtol=0, atol=1e-10)


def test_scanned_dynamics_of_a_prefix_uses_the_whole_process_tensor(two_process_tensors):
    """num_steps shorter than the process tensor: the caps still close its full future."""
    system = nm.System(0.5 * SX + 0.2 * SZ)
    results = []
    for backend in ("numpy", "jax"):
        with backends.use_backend(backend, "double"):
            results.append(
                numpy.asarray(
                    nm.compute_dynamics(
                        system,
                        numpy.diag([0.0, 1.0]),
                        process_tensor=two_process_tensors,
                        num_steps=5,
                        progress_type="silent",
                    ).states
                )
            )
    assert len(results[1]) == 6
    numpy.testing.assert_allclose(results[1], results[0], rtol=0, atol=1e-10)


def test_a_short_chain_runs_on_the_host_unless_its_scan_is_compiled(two_process_tensors):
    """The planner's choice for compute_dynamics: 12 steps do not repay a compilation
    (host steps, recorded with the reason); once the scan of the same shapes is
    compiled in the process, the next run takes it."""
    from nonmarkov.engines.base import ChainRun

    system = nm.System(0.5 * SX + 0.2 * SZ)
    halves = system.get_propagators(0.1)
    with backends.use_backend("jax", "double"):
        first, second = halves(0)
        record = []

        def run() -> ChainRun:
            return ChainRun(
                initial=numpy.diag([1.0, 0.0]).astype(complex).reshape(-1),
                num_steps=11,
                propagators=lambda k: (first, second),
                constant_propagators=True,
                controls=None,
                process_tensors=[two_process_tensors[1]],
                record_all=True,
                on_step=record.append,
            )

        def last_run(engine) -> tuple[str, str, str]:
            return [decision for decision in engine.decisions if decision[0] == "run"][-1]

        planned = jax_engine.JaxChainEngine(engine_options())
        host = planned.run(run())
        assert last_run(planned)[1] == "host" and "compile" in last_run(planned)[2]
        compiled = jax_engine.JaxChainEngine(engine_options(compiled="on"))
        scanned = compiled.run(run())
        assert last_run(compiled)[1] == "compiled"
        again = planned.run(run())
        assert last_run(planned)[1] == "compiled"  # no compilation left to repay
    numpy.testing.assert_allclose(scanned, host, rtol=0, atol=1e-12)
    numpy.testing.assert_allclose(again, host, rtol=0, atol=1e-12)


# --------------------------------------------------------------------------
# compilations ahead and a change of JAX's configuration
# --------------------------------------------------------------------------


def test_a_change_of_precision_first_stops_the_compilations_ahead():
    """No compilation ahead runs while JAX's configuration changes (x64 on or off): the
    queued ones are dropped, the one in progress is waited for; later ones work."""
    started = threading.Event()

    def many_kernels():
        started.set()
        for rows in range(1, 200):
            compiler.check_ahead()
            shape = jax.ShapeDtypeStruct((rows, 60), numpy.complex128)
            jax.jit(lambda a: a @ a.T.conj()).lower(shape).compile()

    with backends.use_backend("jax", "double"):
        running = compiler.compile_ahead(many_kernels)
        queued = compiler.compile_ahead(many_kernels)
        assert started.wait(timeout=60)
        with backends.use_backend("jax", "single"):
            assert running.done() and queued.done()
            with pytest.raises(RuntimeError, match="compilations ahead stopped"):
                queued.result()
            assert not compiler._pausing.is_set()
    assert compiler.compile_ahead(lambda: None).result(timeout=60) is None
