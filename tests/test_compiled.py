"""The compiled TEMPO window (``nonmarkov.engines.jax.window``) of the JAX backend.

- the kept-rank rule traced with ``jax.numpy`` (``truncation.rank_rule``)
  equals the host rule ``truncation.kept_rank``;
- results do not depend on the bond bucket (padding) nor on the chunking,
  and agree with the NumPy backend; the padding holds exact zeros (QR with
  zero columns, bonds seen alike from both sides); the first growth of the
  bucket takes the smallest one that fits;
- chunk length, growth ahead of a steady rise and shrinking follow the rules
  of the window and of :class:`~nonmarkov.engines.jax.scheduling.Schedule`
  (deterministic mode and measured times);
- during a steady rise the bucket of the coming growth is compiled ahead; a
  step waits for it or drops a job not started;
- site levels: sites worked on at smaller sizes inside a bucket give the
  full bucket's step (one kernel call) and NumPy's runs (TEMPO, PT-TEMPO);
  the rule for the sizes, the device and the ``site_levels`` option;
- after compilation the steps make no implicit host transfers and fetch
  once per chunk (also with site levels);
- single precision runs in complex64 and stays close to double;
- the ``svd`` option picks JAX's SVD algorithm without changing the result;
- the persistent compilation cache option;
- PT-TEMPO with the compiled window (``oldest='finalize'``) gives the NumPy
  process tensor (bond dimensions, step-tensor norms, dynamics), also while
  the bond bucket grows and when streamed to a file;
- ``compute_dynamics`` as one compiled scan (one or two process tensors,
  record_all on and off, a prefix of the process tensor) equals the NumPy step
  loop; a control keeps the loop;
- site-by-site steps for large bonds (``nonmarkov.engines.jax.sitewise``): the
  bucket plans, the ``sitewise`` option (and its environment variable), NumPy's
  results, the kernels compiled ahead.

The engine options come from the session default (deterministic scheduling, host
start on: ``tests/conftest.py``) with the changes a test passes; a test that
checks what the compiled kernel does from the first step switches the host start
off. Skipped on the NumPy backend (the compiled kernels are used with JAX only).
"""

from __future__ import annotations

import math
import os
import subprocess
import sys
import threading
from concurrent.futures import Future

import numpy
import pytest

import nonmarkov as nm
from models import SX, SZ, independent_boson, spin_boson
from nonmarkov import backends, config
from nonmarkov.engines.host import HostWindowEngine
from nonmarkov.influence import DiscretisedInfluence
from nonmarkov.kernels import truncation

pytestmark = pytest.mark.skip_backend("numpy", "the compiled window is JAX-only")

jax = pytest.importorskip("jax")
compiled = pytest.importorskip("nonmarkov.engines.jax.window")
padding = pytest.importorskip("nonmarkov.engines.jax.padding")
scheduling = pytest.importorskip("nonmarkov.engines.jax.scheduling")
sitewise = pytest.importorskip("nonmarkov.engines.jax.sitewise")
compiler = pytest.importorskip("nonmarkov.engines.jax.compiler")
jax_engine = pytest.importorskip("nonmarkov.engines.jax.engine")


def step_pair(tempo):
    """(between, second) of a step of ``tempo``'s time-independent system in the
    coupling eigenbasis: what Tempo hands its window engine for every step."""
    influence = DiscretisedInfluence.from_parameters(tempo.bath, tempo.parameters, tempo.unique)
    to_eigen, from_eigen = influence.liouville_transforms()
    halves = tempo.system.get_propagators(tempo.parameters.dt)(0)
    first, second = (to_eigen @ half @ from_eigen for half in halves)
    return first @ second, second


def engine_options(**changes):
    """The session's engine options (deterministic scheduling) with ``changes``."""
    return nm.options.default_options().replace(**changes)


def run_tempo(
    model, parameters, end_time, backend="jax", precision="double", unique=False, **options
):
    """States of a TEMPO run; ``options`` change the engine options (bucket, chunk...)."""
    system, bath, rho0 = model
    with backends.use_backend(backend, precision):
        tempo = nm.Tempo(
            system, bath, parameters, rho0, 0.0, unique=unique, options=engine_options(**options)
        )
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
    assert padding.bond_bucket(1) == padding.BOND_BUCKETS[0]
    for rank in (3, 9, 10, 33, 130, 1000):
        size = padding.bond_bucket(rank)
        assert size >= rank and size <= 1.25 * rank + 2
        if rank >= compiled.CHEAP_BOND:  # finer where a step costs more than a compilation
            assert size <= 1.125 * rank + 1
    assert padding.bond_bucket(10**5) >= 10**5


# --------------------------------------------------------------------------
# padding, chunking and the NumPy backend
# --------------------------------------------------------------------------


def test_padding_and_chunks_do_not_change_the_result():
    model = spin_boson()
    parameters = nm.TempoParameters(dt=0.1, epsrel=1e-9, dkmax=6)
    # bucket 4 with chunks of 3 steps: the window outgrows its bucket and chunks are redone
    small, tempo_small = run_tempo(
        model, parameters, 1.2, initial_bond=4, chunk=3, host_start=False
    )
    large, tempo_large = run_tempo(
        model, parameters, 1.2, initial_bond=40, chunk=16, host_start=False
    )
    assert tempo_small.engine.compiled.bond > 4  # it did grow
    assert tempo_small.engine.compiled.redos > 0
    assert tempo_large.engine.compiled.bond == 40
    assert tempo_small.max_bond_dimension == tempo_large.max_bond_dimension > 4
    numpy.testing.assert_allclose(small, large, rtol=0, atol=1e-12)


@pytest.mark.parametrize(
    "dkmax, host_start", [(1, False), (1, True), (2, False), (2, True), (None, True)]
)
def test_compiled_agrees_with_numpy(dkmax, host_start):
    """Memory cut at 1 and 2 points (trace into the front) and full memory (growing
    capacity); from the first step on the device, or after the host start."""
    model = spin_boson()
    parameters = nm.TempoParameters(dt=0.2, epsrel=1e-10, dkmax=dkmax)
    on_jax, tempo = run_tempo(
        model, parameters, 1.4, initial_bond=4, chunk=4, host_start=host_start
    )
    on_numpy, reference = run_tempo(model, parameters, 1.4, backend="numpy")
    assert isinstance(tempo.engine, jax_engine.JaxWindowEngine)
    assert isinstance(reference.engine, HostWindowEngine)
    assert tempo.engine.compiled.chunks > 0
    expected_host_steps = scheduling.DETERMINISTIC_HOST_STEPS if host_start and dkmax else 0
    assert tempo.engine.host_steps == expected_host_steps
    assert tempo.max_bond_dimension == reference.max_bond_dimension
    numpy.testing.assert_allclose(on_jax, on_numpy, rtol=0, atol=1e-10)


def test_compiled_unique_three_level_and_continuation():
    model = independent_boson("three-level")
    parameters = nm.TempoParameters(dt=0.2, epsrel=1e-10, dkmax=3)
    on_numpy, _ = run_tempo(model, parameters, 1.0, backend="numpy", unique=True)
    system, bath, rho0 = model
    with backends.use_backend("jax", "double"):
        tempo = nm.Tempo(system, bath, parameters, rho0, 0.0, unique=True)
        tempo.compute(0.4, progress_type="silent")
        states = tempo.compute(1.0, progress_type="silent").states  # continued
    assert len(states) == len(on_numpy) == 6
    numpy.testing.assert_allclose(numpy.asarray(states), on_numpy, rtol=0, atol=1e-10)


def test_padded_qr_is_exact_and_leaves_padding_columns_zero():
    """Q R = X for tall matrices with zero (padding) columns, trailing or not."""
    rng = numpy.random.default_rng(3)
    with backends.use_backend("jax", "double"):
        qr = jax.jit(padding._padded_qr)
        for zero_columns in ([6, 7, 8, 9], [1, 4, 9], []):
            x = rng.normal(size=(40, 10)) + 1j * rng.normal(size=(40, 10))
            x[:, zero_columns] = 0.0
            x[30:] = 0.0  # padding rows, as in a padded chain
            x[:, 2] *= 1e-30  # a column far below the others
            q, r = (numpy.asarray(a) for a in qr(jax.device_put(x)))
            numpy.testing.assert_allclose(q @ r, x, rtol=0, atol=1e-13)
            numpy.testing.assert_allclose(q.conj().T @ q, numpy.eye(10), rtol=0, atol=1e-13)
            assert numpy.all(r[:, zero_columns] == 0.0)


def test_padding_of_the_window_is_exactly_zero():
    """A window padded far above its bonds (bucket 24) carries exact zeros in the padding.

    Rounding noise left there would be multiplied through the chain into
    subnormal numbers (slow LAPACK calls); every bond must have the same rank
    seen from both of its sites. (The window came from the host start: its
    padding is exact from the hand-over on.)
    """
    model = spin_boson()
    parameters = nm.TempoParameters(dt=0.1, epsrel=1e-6, dkmax=8)
    padded, tempo = run_tempo(model, parameters, 1.5, initial_bond=24)
    engine = tempo.engine.compiled
    assert engine.bond == 24 and tempo.max_bond_dimension < 24
    front = numpy.asarray(engine._front)
    sites = numpy.asarray(engine._sites)[: engine._count]
    lefts = [int(numpy.count_nonzero(numpy.any(site != 0.0, axis=(1, 2)))) for site in sites]
    rights = [int(numpy.count_nonzero(numpy.any(site != 0.0, axis=(0, 1)))) for site in sites]
    front_bond = int(numpy.count_nonzero(numpy.any(front != 0.0, axis=0)))
    assert [front_bond] + rights[:-1] == lefts
    assert 1 < max(lefts) <= tempo.max_bond_dimension  # the largest over all steps
    # and the used part is a right-orthonormal chain (what the zeros were cut from)
    for site, left in zip(sites, lefts):
        matrix = site[:left].reshape(left, -1)
        numpy.testing.assert_allclose(matrix @ matrix.conj().T, numpy.eye(left), atol=1e-12)
    tight, _ = run_tempo(model, parameters, 1.5, initial_bond=tempo.max_bond_dimension)
    numpy.testing.assert_allclose(padded, tight, rtol=0, atol=1e-12)


def test_first_growth_takes_the_smallest_bucket_that_fits():
    """A bucket above the bonds costs every step (~D^3); one more compilation costs once."""
    model = spin_boson()
    parameters = nm.TempoParameters(dt=0.1, epsrel=1e-9, dkmax=6)
    small, tempo = run_tempo(model, parameters, 1.2, initial_bond=4, chunk=3, host_start=False)
    engine = tempo.engine.compiled
    engine._grown = False
    assert engine.grown_bond(11) == 12  # first growth: no headroom
    assert (
        engine.grown_bond(11) == padding.bond_bucket(math.ceil(compiled.GROWTH_HEADROOM * 11)) == 14
    )  # the bond is still rising
    # the run itself grew from 4 through the policy and kept the NumPy result
    reference, numpy_tempo = run_tempo(model, parameters, 1.2, backend="numpy")
    assert tempo.max_bond_dimension == numpy_tempo.max_bond_dimension > 4
    numpy.testing.assert_allclose(small, reference, rtol=0, atol=1e-10)


def test_chunks_shorten_and_the_bucket_grows_ahead_of_a_steady_rise(monkeypatch):
    """A redo costs a whole chunk: while the largest rank rises the chunks are one step
    long, and the bucket grows before a steady rise would overflow it (not for a jump,
    which may stop anywhere); the bucket of the growth after that is compiled ahead."""
    model = spin_boson()
    parameters = nm.TempoParameters(dt=0.1, epsrel=1e-9, dkmax=6)
    # whole steps at every bucket
    _, tempo = run_tempo(
        model, parameters, 0.3, initial_bond=40, chunk=8, host_start=False, sitewise="off"
    )
    engine = tempo.engine.compiled
    assert engine.schedule.deterministic
    ahead = []

    def compile_step_ahead(self, bond):
        ahead.append(bond)
        return Future()

    monkeypatch.setattr(compiled.CompiledWindow, "compile_step_ahead", compile_step_ahead)
    engine.max_rank_seen, engine._stride, engine._growth, engine._grown = 30, 8, 0, False
    engine._plan_next_chunk(30, 8)  # the largest rank held: longer chunks, up to 8
    assert engine._stride == 8 and engine.bond == 40
    engine._stride = 2
    engine._plan_next_chunk(30, 2)
    assert engine._stride == 4
    engine._plan_next_chunk(36, 2)  # +3 per step: one-step chunks
    assert engine._stride == 1 and engine._growth == 3 and engine.bond == 40
    assert ahead == []  # not steady yet
    engine._plan_next_chunk(38, 1)  # steady: 38 + 2 still fits
    assert engine.bond == 40 and ahead == [48]  # 38 + 2 + 2 will not: compiled ahead
    engine._plan_next_chunk(39, 1)  # steady: 39 + 1 fits
    assert engine.bond == 40 and ahead == [48]  # 48 is on its way
    engine._plan_next_chunk(40, 1)  # steady: 40 + 1 would not fit: grow now
    assert engine.max_rank_seen == 40
    assert engine.bond == padding.bond_bucket(40 + 1) == 48  # first growth: no headroom
    assert ahead == [48, padding.bond_bucket(math.ceil(compiled.GROWTH_HEADROOM * 42))]
    engine._plan_next_chunk(47, 1)  # +7 <= 25 % of 40: steady; 47 + 7 > 48
    headroom = math.ceil(compiled.GROWTH_HEADROOM * 54)  # a cheap bucket grown before
    assert engine.bond == padding.bond_bucket(headroom) == 72
    assert ahead[-1] == 80  # for 47 + 2 * 7 = 61 with headroom
    engine._stride, engine._growth = 4, 0
    engine._plan_next_chunk(70, 1)  # a jump after a pause is not steady: no growth
    assert engine.bond == 72 and engine._stride == 1 and len(ahead) == 3
    # a bucket that will run site by site: no whole-step kernel ahead
    monkeypatch.setattr(engine, "_options", engine._options.replace(sitewise="on"))
    engine._compile_growth_ahead(96)
    assert len(ahead) == 3


def test_a_step_waits_for_its_kernel_compiled_ahead_or_drops_a_job_not_started():
    engine = compiled.CompiledWindow.__new__(compiled.CompiledWindow)
    queued, running = Future(), Future()
    running.set_running_or_notify_cancel()
    engine._ahead = {48: queued, 56: running}
    engine._await_ahead(48)
    assert queued.cancelled() and 48 not in engine._ahead
    threading.Timer(0.2, running.set_result, [None]).start()
    engine._await_ahead(56)
    assert running.done() and engine._ahead == {}
    engine._await_ahead(64)  # nothing ahead: nothing to do


def test_a_bucket_left_above_the_ranks_shrinks_with_the_same_result(monkeypatch):
    """Headroom taken while the bond rose is given back once the ranks hold (here
    whatever the steps saved: DETERMINISTIC_SHRINK_STEPS 0; kernels without site
    levels, which would work on the largest sites at a size that holds them)."""
    monkeypatch.setattr(scheduling, "DETERMINISTIC_SHRINK_STEPS", 0.0)
    force_site_levels(monkeypatch, ())
    model = spin_boson()
    parameters = nm.TempoParameters(dt=0.1, epsrel=1e-9, dkmax=6)
    buckets = []
    resize = compiled.CompiledWindow._resize

    def recorded(engine, bond, capacity):
        buckets.append(bond)
        resize(engine, bond, capacity)

    monkeypatch.setattr(compiled.CompiledWindow, "_resize", recorded)
    states, tempo = run_tempo(model, parameters, 3.0, initial_bond=4, chunk=4, host_start=False)
    engine = tempo.engine.compiled
    assert engine.shrinks >= 1 and engine._grown
    assert engine.bond < max(buckets)  # came down from a bucket grown with headroom
    assert engine.bond == padding.bond_bucket(engine._held_largest)
    reference, _ = run_tempo(model, parameters, 3.0, backend="numpy")
    numpy.testing.assert_allclose(states, reference, rtol=0, atol=1e-10)


def test_schedule_rules_deterministic_and_measured():
    """The choices of :class:`Schedule`: fixed rules in deterministic mode, else from the
    measured seconds per step (set here, not measured)."""
    fixed = scheduling.Schedule(deterministic=True)
    fixed.chunk_dispatched()
    fixed.chunk_done(4)
    assert fixed.step_seconds == 0.0  # nothing measured
    assert fixed.cap_chunk(16) == 16
    needed = scheduling.DETERMINISTIC_SHRINK_STEPS
    assert fixed.shrink_pays(math.ceil(needed / 0.5), 0.5)
    assert not fixed.shrink_pays(math.ceil(needed / 0.5) - 1, 0.5)
    measured = scheduling.Schedule(deterministic=False)
    assert measured.cap_chunk(16) == 16  # nothing measured yet
    measured.step_seconds = scheduling.REDO_SECONDS / 4
    assert measured.cap_chunk(16) == 4 and measured.cap_chunk(3) == 3
    measured.step_seconds = 10 * scheduling.REDO_SECONDS
    assert measured.cap_chunk(16) == 1  # at least one step
    measured.step_seconds = 0.01
    steps = scheduling.SHRINK_SECONDS / (0.01 * 0.5)  # steps to save a compilation at work 0.5
    assert measured.shrink_pays(math.ceil(steps) + 1, 0.5)
    assert not measured.shrink_pays(math.floor(steps) - 1, 0.5)
    measured.chunk_dispatched()
    measured.chunk_done(2)
    assert measured.step_seconds > 0.0  # measured now


def test_chunks_hold_at_most_the_redo_seconds_of_steps(monkeypatch):
    """A redo repeats a whole chunk: with long steps (measured, deterministic off) the
    chunks stay short."""
    monkeypatch.setattr(scheduling, "REDO_SECONDS", 1e-9)
    model = spin_boson()
    parameters = nm.TempoParameters(dt=0.1, epsrel=1e-6, dkmax=4)
    states, tempo = run_tempo(
        model, parameters, 2.0, chunk=8, host_start=False, deterministic=False
    )
    engine = tempo.engine.compiled
    assert not engine.schedule.deterministic
    assert engine.chunks == 19 and engine.schedule.step_seconds > 0.0  # steps 2..20
    reference, _ = run_tempo(model, parameters, 2.0, backend="numpy")
    numpy.testing.assert_allclose(states, reference, rtol=0, atol=1e-10)
    # deterministic: the chunks double up to ``chunk`` whatever the steps cost
    _, tempo = run_tempo(model, parameters, 2.0, chunk=8, host_start=False)
    assert tempo.engine.compiled.chunks < 19


def test_svd_algorithm_is_a_choice_that_does_not_change_the_result():
    """The ``svd`` option picks JAX's SVD algorithm; QR-based, divide and conquer and
    default agree; removed or unknown names are refused."""
    from jax import lax

    assert padding._svd_algorithm("default", "cpu") is None
    assert padding._svd_algorithm("qr", "cpu") == lax.linalg.SvdAlgorithm.QR
    assert (
        padding._svd_algorithm("divide_and_conquer", "gpu")
        == lax.linalg.SvdAlgorithm.DIVIDE_AND_CONQUER
    )
    for removed in ("eigh", "jacobi", "polar", "fast"):
        with pytest.raises(ValueError, match="svd option"):
            nm.options.EngineOptions(svd=removed)
    model = spin_boson()
    parameters = nm.TempoParameters(dt=0.1, epsrel=1e-9, dkmax=5)
    default, _ = run_tempo(model, parameters, 1.0)
    for algorithm in ("qr", "divide_and_conquer"):
        other, tempo = run_tempo(model, parameters, 1.0, svd=algorithm)
        assert tempo.engine.compiled.chunks > 0
        numpy.testing.assert_allclose(other, default, rtol=0, atol=1e-12)


# --------------------------------------------------------------------------
# host round trips
# --------------------------------------------------------------------------


@pytest.mark.parametrize("levels", [None, (2, 3, 4, 6)])
def test_steps_make_no_implicit_transfers_and_fetch_once_per_chunk(levels, monkeypatch):
    """Also with site levels: their sizes are chosen on the device."""
    if levels is not None:
        force_site_levels(monkeypatch, levels)
    system, bath, rho0 = spin_boson()
    parameters = nm.TempoParameters(dt=0.1, epsrel=1e-8, dkmax=5)
    with backends.use_backend("jax", "double"):
        tempo = nm.Tempo(system, bath, parameters, rho0, 0.0, options=engine_options(chunk=4))
        tempo.compute(0.5, progress_type="silent")  # host start, compiles; bond settles
        engine = tempo.engine.compiled
        bond, fetches, chunks, redos = engine.bond, engine.fetches, engine.chunks, engine.redos
        with jax.transfer_guard("disallow"):
            # the guard is active: an implicit device-to-host copy fails
            with pytest.raises(Exception, match="[Dd]isallowed"):
                float(jax.numpy.ones(()) + 1.0)
            tempo.compute(1.7, progress_type="silent")  # 12 more steps, 3 chunks
    assert tempo.engine.host_steps == scheduling.DETERMINISTIC_HOST_STEPS
    assert engine.bond == bond and engine.redos == redos  # so one fetch per chunk
    assert engine.fetches - fetches == engine.chunks - chunks
    # the bond holds: chunks double up to the chunk option (at worst 1 + 2 + 4 + 4 + 1 steps)
    assert 3 <= engine.fetches - fetches <= 5
    assert len(tempo.get_dynamics()) == 18


# --------------------------------------------------------------------------
# single precision
# --------------------------------------------------------------------------


@pytest.mark.parametrize("levels", [None, (3, 4, 6, 8)])
def test_single_precision_is_complex64_end_to_end_and_close_to_double(levels, monkeypatch):
    if levels is not None:  # sites at smaller sizes too
        force_site_levels(monkeypatch, levels)
    model = spin_boson()
    parameters = nm.TempoParameters(dt=0.1, epsrel=1e-5, dkmax=8)
    double, _ = run_tempo(model, parameters, 1.5)
    single, tempo = run_tempo(model, parameters, 1.5, precision="single")
    engine = tempo.engine.compiled
    assert engine.chunks > 0
    assert engine._front.dtype == numpy.complex64
    assert engine._sites.dtype == numpy.complex64
    assert engine._constants["lags"].dtype == numpy.complex64
    assert engine._log_scale.dtype == numpy.float32
    # float32 rounding (~1e-7 per operation) accumulated over 15 steps; on a GPU the
    # difference was 1.7e-3 (an H200, with full-precision matmuls; cause not found,
    # see docs/backends.md), so there the bound only guards against getting worse
    on_gpu = jax.default_backend() != "cpu"
    numpy.testing.assert_allclose(single, double, rtol=0, atol=5e-3 if on_gpu else 1e-4)
    assert numpy.max(numpy.abs(single - double)) > 0.0  # it really ran in single precision
    single_numpy, _ = run_tempo(model, parameters, 1.5, backend="numpy", precision="single")
    numpy.testing.assert_allclose(single_numpy, double, rtol=0, atol=1e-4)


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
        "o = nm.options.EngineOptions(host_start=False)\n"
        "nm.Tempo(s, b, p, np.diag([1.0, 0.0]), 0.0, options=o).compute(\n"
        "    0.6, progress_type='silent')\n"
        "print(nm.backends.compilation_cache_dir())\n"
    )
    # host start off: this short run would end on the host before its kernel compiled
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


def test_info_names_the_device():
    with backends.use_backend("jax"):
        details = backends.info()
    default = jax.devices()[0]
    assert details["default_device"].split(" ")[0].endswith(f":{default.id}")
    assert default.device_kind in details["default_device"]
    assert details["devices"][0] == details["default_device"]


# --------------------------------------------------------------------------
# sites worked on at smaller sizes than the bucket (site levels)
# --------------------------------------------------------------------------


def test_site_levels_are_grid_sizes_below_the_bucket_for_large_work_on_a_cpu():
    assert compiled.site_levels(20, 5, 9, "cpu") == (14, 15, 16, 18)  # choice 'auto'
    assert compiled.site_levels(64, 5, 9, "cpu", "auto") == (48, 52, 56, 60)
    for bond in (12, 24, 40, 100, 512):
        levels = compiled.site_levels(bond, 5, 9, "cpu")
        assert 0 < len(levels) <= compiled.SITE_LEVELS
        assert all(bond / 2 <= size < bond for size in levels)
        assert compiled.kernel_sizes(bond, levels) == tuple(sorted(levels)) + (bond,)
    assert compiled.site_levels(20, 5, 9, "gpu") == ()
    assert compiled.site_levels(12, 3, 4, "cpu") == ()  # B1-size work: one size
    assert compiled.kernel_sizes(8, ()) == (8,)
    assert compiled.site_levels(20, 5, 9, "gpu", "on") == (14, 15, 16, 18)
    assert compiled.site_levels(12, 3, 4, "gpu", "on") == ()
    assert compiled.site_levels(20, 5, 9, "cpu", "off") == ()
    with pytest.raises(ValueError, match="site_levels option"):
        nm.options.EngineOptions(site_levels="always")


def test_the_site_levels_option_reaches_the_window():
    """``site_levels='off'`` gives a window's kernels no levels where 'auto' gives some."""
    system, bath, rho0 = spin_boson()
    parameters = nm.TempoParameters(dt=0.1, epsrel=1e-6, dkmax=4)
    levels = {}
    with backends.use_backend("jax", "double"):
        for choice in ("auto", "on", "off"):
            tempo = nm.Tempo(
                system,
                bath,
                parameters,
                rho0,
                0.0,
                options=engine_options(site_levels=choice, initial_bond=24),
            )
            levels[choice] = tempo.engine.compiled._levels(24)
    # spin boson: m = 4, r = 3, m (24 r)^3 >= SITE_LEVEL_WORK
    expected = compiled.site_levels(24, 3, 4, jax.default_backend())
    assert levels["auto"] == expected
    assert levels["on"] == compiled.site_levels(24, 3, 4, "cpu") != ()
    assert levels["off"] == ()


def force_site_levels(monkeypatch, levels):
    """Kernels of any bucket D get the ``levels`` below D (and none above it)."""
    monkeypatch.setattr(
        compiled,
        "site_levels",
        lambda bond, num_rows, dim_m, platform, choice="auto": tuple(
            size for size in levels if size < bond
        ),
    )


def test_a_step_with_site_levels_equals_the_step_at_the_full_bucket():
    """One kernel call on a window whose bonds run from 1 to ~18 inside bucket 24: the
    sites worked on at sizes 3..16 (and 24) give the same window, read-out and ranks."""
    model = spin_boson()
    parameters = nm.TempoParameters(dt=0.1, epsrel=1e-6, dkmax=8)
    _, tempo = run_tempo(model, parameters, 1.0, initial_bond=24, unique=True)
    engine = tempo.engine.compiled
    assert engine.bond == 24 and engine._count == 7
    with backends.use_backend("jax", "double"):
        between, second = engine._device_propagators(*step_pair(tempo))
        args = (
            engine._front,
            engine._sites,
            engine._count_device,
            engine._log_scale,
            between,
            second,
            engine._constants,
        )
        results = {}
        for levels in [(), (3, 4, 6, 8, 12, 16)]:
            step = compiled._compiled_step(engine.memory, None, "cpu", "trace", "default", levels)
            results[levels] = jax.device_get(step(*args))
    bonds = [
        int((numpy.abs(site) > 0).any(axis=(1, 2)).sum())
        for site in numpy.asarray(engine._sites)[: engine._count]
    ]
    assert min(bonds) <= 4 and 16 < max(bonds) < 24  # sizes 4 to 24 are taken
    full, levelled = results[()], results[(3, 4, 6, 8, 12, 16)]
    for index in (2, 5):  # count, largest wanted rank
        assert int(levelled[index]) == int(full[index])
    for index in (3, 4):  # log-scale, read-out
        numpy.testing.assert_allclose(levelled[index], full[index], rtol=0, atol=1e-12)
    # the window as one state (its sites are fixed only up to gauges on the bonds)
    numpy.testing.assert_allclose(
        window_state(*levelled[:3]), window_state(*full[:3]), rtol=0, atol=1e-12
    )


def window_state(front, sites, count):
    """The padded window contracted to one tensor (x, m, m, ...) over ``count`` sites."""
    state = numpy.asarray(front)
    for site in numpy.asarray(sites)[: int(count)]:
        state = numpy.tensordot(state, site, axes=([state.ndim - 1], [0]))
    return state[..., 0]


@pytest.mark.parametrize("dkmax", [4, None])
def test_tempo_with_site_levels_agrees_with_numpy(dkmax, monkeypatch):
    """Growing buckets with levels (a window filling up, full memory growing the capacity)."""
    force_site_levels(monkeypatch, (2, 3, 5, 7, 10))
    model = independent_boson("three-level")
    parameters = nm.TempoParameters(dt=0.2, epsrel=1e-10, dkmax=dkmax)
    on_jax, tempo = run_tempo(
        model, parameters, 1.4, initial_bond=4, chunk=3, unique=True, host_start=False
    )
    on_numpy, reference = run_tempo(model, parameters, 1.4, backend="numpy", unique=True)
    assert tempo.engine.compiled.bond > 4
    assert tempo.max_bond_dimension == reference.max_bond_dimension
    numpy.testing.assert_allclose(on_jax, on_numpy, rtol=0, atol=1e-10)


def test_pt_tempo_with_site_levels_agrees_with_numpy(monkeypatch):
    force_site_levels(monkeypatch, (2, 3, 5, 7, 10))
    bath = spin_boson()[1]
    parameters = nm.TempoParameters(dt=0.1, epsrel=1e-10, dkmax=4)
    on_jax, pt_tempo = run_pt_tempo(
        bath, parameters, 1.0, initial_bond=4, chunk=3, host_start=False
    )
    on_numpy, _ = run_pt_tempo(bath, parameters, 1.0, backend="numpy")
    assert pt_tempo.engine.compiled.bond > 4
    numpy.testing.assert_array_equal(on_jax.get_bond_dimensions(), on_numpy.get_bond_dimensions())
    numpy.testing.assert_allclose(pt_dynamics(on_jax), pt_dynamics(on_numpy), rtol=0, atol=1e-10)


def test_a_shrink_counts_the_size_the_largest_sites_already_work_at(monkeypatch):
    """With levels, a bucket above the ranks costs little: its largest sites already
    work at a level that holds them, so a shrink saves only the difference to that."""
    engine = compiled.CompiledWindow.__new__(compiled.CompiledWindow)
    engine._jax, engine._num_rows, engine._dim_m = jax, 5, 9
    engine._options = nm.options.EngineOptions()
    engine._held_largest = 19
    force_site_levels(monkeypatch, (14, 15, 16, 18, 20, 22))
    assert engine._site_size(24) == 20 and engine._site_size(20) == 20
    engine._held_largest = 15
    assert engine._site_size(24) == 15
    force_site_levels(monkeypatch, ())
    assert engine._site_size(24) == 24 and engine._site_size(20) == 20


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
    bath = spin_boson()[1]
    parameters = nm.TempoParameters(dt=0.1, epsrel=1e-10, dkmax=dkmax)
    on_jax, pt_tempo = run_pt_tempo(
        bath, parameters, 1.4, initial_bond=4, chunk=3, host_start=False
    )
    on_numpy, reference = run_pt_tempo(bath, parameters, 1.4, backend="numpy")
    assert isinstance(pt_tempo.engine, jax_engine.JaxWindowEngine)
    assert isinstance(reference.engine, HostWindowEngine)
    assert pt_tempo.engine.host_steps == 0
    assert pt_tempo.engine.compiled.bond > 4  # outgrew the first bucket: chunks were redone
    assert pt_tempo.engine.compiled.redos > 0
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
    bath = spin_boson()[1]
    parameters = nm.TempoParameters(dt=0.1, epsrel=1e-9, dkmax=2)
    in_memory, _ = run_pt_tempo(bath, parameters, 1.0)
    filename = tmp_path / "pt.hdf5"
    on_file, pt_tempo = run_pt_tempo(bath, parameters, 1.0, filename=filename)
    assert isinstance(pt_tempo.engine, jax_engine.JaxWindowEngine)
    assert pt_tempo.engine.compiled.chunks > 0
    assert isinstance(on_file, nm.FileProcessTensor) and filename.is_file()
    assert len(on_file) == len(in_memory) == 10
    numpy.testing.assert_array_equal(on_file.get_bond_dimensions(), in_memory.get_bond_dimensions())
    numpy.testing.assert_allclose(
        pt_dynamics(on_file, "jax"), pt_dynamics(in_memory), rtol=0, atol=1e-12
    )


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
    original = jax_engine.run_chain
    monkeypatch.setattr(
        jax_engine,
        "run_chain",
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
            )
        results[backend] = (numpy.asarray(dynamics.times), numpy.asarray(dynamics.states))
    assert calls == [1]  # the JAX run took the scan, the NumPy run the loop
    assert len(results["jax"][0]) == (13 if record_all else 2)
    numpy.testing.assert_allclose(results["jax"][0], results["numpy"][0], rtol=0, atol=1e-12)
    numpy.testing.assert_allclose(results["jax"][1], results["numpy"][1], rtol=0, atol=1e-10)


def test_dynamics_with_control_keeps_the_step_loop(two_process_tensors, monkeypatch):
    monkeypatch.setattr(jax_engine, "run_chain", None)  # any use would fail
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
                    ).states
                )
            )
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


# --------------------------------------------------------------------------
# site-by-site steps for large bonds (nonmarkov.engines.jax.sitewise)
# --------------------------------------------------------------------------


def cubes(plan):
    return sum(float(bucket) ** 3 for bucket in plan)


def test_plan_covers_the_neighbouring_ranks_in_few_rising_stretches():
    profile = [3, 9, 23, 35, 47, 59, 70, 81, 92, 102, 111, 117, 120] + [129] * 17
    plan = sitewise.plan_buckets(profile, len(profile) + 1, margin=5)
    assert len(plan) == len(profile) + 1
    for k, bucket in enumerate(plan):
        neighbours = [profile[min(max(i, 0), len(profile) - 1)] for i in (k - 1, k, k + 1)]
        assert bucket >= max(neighbours) + 5 and bucket in padding.BOND_BUCKETS
    assert 1 + sum(a != b for a, b in zip(plan, plan[1:])) <= sitewise.SEGMENTS
    assert plan == sorted(plan)
    # far cheaper than one bucket for the whole window, and no dearer than two stretches
    assert cubes(plan) < 0.8 * len(plan) * max(plan) ** 3
    assert cubes(plan) <= cubes(sitewise.plan_buckets(profile, len(plan), 5, segments=2))


def test_a_previous_plan_keeps_its_stretches_until_it_costs_too_much():
    first = sitewise.plan_buckets([10] * 4 + [60] * 6, 11)
    assert first[0] < first[-1]
    # the tail rises a little: only its stretch grows (the head keeps its kernels)
    risen = sitewise.plan_buckets([10] * 4 + [66] * 6, 11, previous=first)
    assert risen[:3] == first[:3] and risen[-1] == padding.bond_bucket(66) > first[-1]
    # the bonds fall far below the plan: a fresh, cheaper plan replaces it
    fresh = sitewise.plan_buckets([5] * 11, 11)
    assert sitewise.plan_buckets([5] * 11, 11, previous=risen) == fresh
    assert cubes(fresh) < cubes(risen) / sitewise.REPLAN_COST


@pytest.fixture
def sitewise_from_the_start(monkeypatch):
    """Site-by-site steps as soon as the window holds two sites, on any device (the
    library default of the ``sitewise`` option 'on' for the test)."""
    monkeypatch.setattr(sitewise, "SITEWISE_BOND", 4)
    with nm.options.use_options(sitewise="on"):
        yield


def test_sitewise_choice_follows_the_option_and_the_environment_variable(monkeypatch):
    system, bath, rho0 = spin_boson()
    parameters = nm.TempoParameters(dt=0.1, epsrel=1e-10, dkmax=4)
    monkeypatch.setattr(sitewise, "SITEWISE_BOND", 4)
    engines = {}
    for choice in ("on", "off", "auto"):
        _, tempo = run_tempo((system, bath, rho0), parameters, 0.5, sitewise=choice)
        engines[choice] = tempo.engine.compiled.sitewise
    assert engines["on"] and not engines["off"]
    assert engines["auto"] == (jax.default_backend() == "cpu")
    # the environment variable gives the library default of the option, read at import
    code = "import nonmarkov.options as o; print(o.default_options().sitewise)"
    environment = dict(os.environ, NONMARKOV_JAX_SITEWISE=" ON")
    result = subprocess.run(
        [sys.executable, "-c", code], env=environment, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "on"
    environment = dict(os.environ, NONMARKOV_JAX_SITEWISE="sometimes")
    result = subprocess.run(
        [sys.executable, "-c", code], env=environment, capture_output=True, text=True, timeout=120
    )
    assert result.returncode != 0 and "NONMARKOV_JAX_SITEWISE" in result.stderr
    assert "'auto', 'on', 'off'" in result.stderr


@pytest.mark.parametrize(
    "dkmax, host_start, extra",
    [(3, True, None), (6, False, None), (None, True, None), (3, False, 0.25)],
)
def test_sitewise_tempo_agrees_with_numpy(dkmax, host_start, extra, sitewise_from_the_start):
    """Memory cut (trace into the site before, with or without the lumped coupling of an
    extra correlation time) and full memory (growing window); the window is handed
    over from the whole-step kernel after two sites (or from the host start, to the
    site-by-site steps at once)."""
    model = spin_boson()
    parameters = nm.TempoParameters(dt=0.1, epsrel=1e-10, dkmax=dkmax, add_correlation_time=extra)
    states, tempo = run_tempo(
        model, parameters, 1.2, initial_bond=4, chunk=4, host_start=host_start
    )
    expected, reference = run_tempo(model, parameters, 1.2, backend="numpy")
    assert tempo.engine.compiled.sitewise
    assert tempo.max_bond_dimension == reference.max_bond_dimension
    numpy.testing.assert_allclose(states, expected, rtol=0, atol=1e-10)


@pytest.mark.parametrize("dkmax, extra", [(3, None), (5, None), (3, math.inf)])
def test_sitewise_pt_tempo_agrees_with_numpy(dkmax, extra, sitewise_from_the_start):
    """Same process tensor (bonds, dynamics) as NumPy; chunks are redone when a rank
    outgrows its planned bucket; with and without an extra correlation time."""
    bath = spin_boson()[1]
    parameters = nm.TempoParameters(dt=0.1, epsrel=1e-10, dkmax=dkmax, add_correlation_time=extra)
    on_jax, pt_tempo = run_pt_tempo(
        bath, parameters, 1.4, initial_bond=4, chunk=3, host_start=False
    )
    on_numpy, reference = run_pt_tempo(bath, parameters, 1.4, backend="numpy")
    engine = pt_tempo.engine.compiled
    assert engine.sitewise and engine.redos > 0
    numpy.testing.assert_array_equal(on_jax.get_bond_dimensions(), on_numpy.get_bond_dimensions())
    numpy.testing.assert_allclose(pt_dynamics(on_jax), pt_dynamics(on_numpy), rtol=0, atol=1e-10)


STABLE = nm.TempoParameters(dt=0.1, epsrel=1e-8, dkmax=5)  # bonds that soon hold


def started_tempo():
    """A JAX TEMPO run of the driven spin-boson model, 10 steps done."""
    system, bath, rho0 = spin_boson()
    tempo = nm.Tempo(system, bath, STABLE, rho0, 0.0)
    tempo.compute(1.0, progress_type="silent")
    return tempo


def test_sitewise_steps_make_no_implicit_transfers_and_fetch_once_per_chunk(
    sitewise_from_the_start,
):
    with backends.use_backend("jax", "double"):
        tempo = started_tempo()
        engine = tempo.engine.compiled
        fetches, chunks, redos = engine.fetches, engine.chunks, engine.redos
        with jax.transfer_guard("disallow"):
            tempo.compute(2.5, progress_type="silent")
    assert engine.sitewise
    assert engine.fetches - fetches == engine.chunks - chunks + engine.redos - redos
    assert engine.chunks - chunks < 15  # chunks of several steps
    expected, _ = run_tempo(spin_boson(), STABLE, 2.5, backend="numpy")
    numpy.testing.assert_allclose(
        numpy.asarray(tempo.get_dynamics().states), expected, rtol=0, atol=1e-10
    )


def test_kernels_compiled_ahead_are_the_ones_a_step_runs(sitewise_from_the_start):
    """The background compilation (abstract run of a step) prepares exactly the kernels
    that the step then runs, so that none is compiled while the steps wait."""
    with backends.use_backend("jax", "double"):
        tempo = started_tempo()
        engine = tempo.engine.compiled
        window = engine._sitewise
        assert window.ahead.result(timeout=300) is None  # the last chunk's job did not fail
        # a plan with larger buckets than any step used so far
        plan = sitewise.plan_buckets(window.profile, window.count + 2, margin=17)
        between, second = engine._device_propagators(*step_pair(tempo))
        state = (window._front, window._sites, window._log_scale)
        settings = (engine.memory, None, "trace", None)
        arguments = (between, second, engine._constants, engine._site_lags)
        abstract_state, abstract_arguments = sitewise._abstract((state, arguments))
        before = set(sitewise._executables)

        def job():
            sitewise.sitewise_step(
                *abstract_state, *abstract_arguments, plan, *settings, call=sitewise.prepare_kernel
            )

        assert compiler.compile_ahead(job).result(timeout=300) is None
        ready = set(sitewise._executables)
        used = []

        def run(name, static, *args):
            used.append(sitewise._signature(name, static, args))
            return sitewise.run_kernel(name, static, *args)

        sitewise.sitewise_step(*state, *arguments, plan, *settings, call=run)
    assert set(used) - before  # the plan needed new kernels ...
    assert set(used) <= ready  # ... and all of them were compiled ahead


def test_a_change_of_precision_first_stops_the_compilations_ahead():
    """No compilation ahead runs while JAX's configuration changes (x64 on or off): the
    queued ones are dropped, the one in progress is waited for; later ones work."""
    started = threading.Event()

    def many_kernels():
        started.set()
        for rows in range(1, 200):
            tensor = jax.ShapeDtypeStruct((rows, 4 * 5 * 3), numpy.complex128)
            sitewise.prepare_kernel("keep", {"dim_m": 4, "num_rows": 3}, tensor)

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
