"""The JAX window engine of the zip-up sweep: the planner as a pure function, and
the compiled zip-up step against the NumPy kernels through the public API."""

from __future__ import annotations

import dataclasses

import numpy
import pytest

import nonmarkov as nm
from models import spin_boson
from nonmarkov import backends
from nonmarkov.engines.jax import planner
from nonmarkov.options import EngineOptions


def stats(**changes) -> planner.WindowStats:
    base = dict(largest_rank=6, largest_seen=6, sites=30, steps_left=100, num_rows=3, dim_m=4)
    return planner.WindowStats(**{**base, **changes})


def test_the_planner_sketches_on_a_cpu_only_when_asked():
    # bucket 24 with 3 carrier rows and 4 classes: cuts of (72, 96), a sketch on the host
    assert planner.plain_cuts(20, 3, 4) and not planner.plain_cuts(24, 3, 4)
    wide = stats(largest_rank=21, steps_left=10_000, host_seconds=0.01)
    plan = planner.next_plan(planner.Plan(), wide, EngineOptions())
    assert plan.where == planner.HOST and "sketch" in plan.reason and plan.sketch == 16
    plan = planner.next_plan(planner.Plan(), wide, EngineOptions(compiled="on"))
    assert plan.where == planner.COMPILED and (plan.bond, plan.sketch) == (24, 16)
    accelerated = dataclasses.replace(wide, accelerator=True, kernel_ready=True)
    assert planner.next_plan(planner.Plan(), accelerated, EngineOptions()).where == planner.COMPILED
    # a sketch wider than its bucket: the bucket that holds it, at most the D c rows
    assert planner.wider(plan, 17, 3, 4).sketch == 32
    assert planner.wider(plan, 70, 3, 4).sketch == 72
    assert planner.sketch_bucket(40, 20, 3, 4) == 0  # bucket 20 compiles no sketch


def test_the_planner_compiles_only_what_the_steps_left_repay():
    options = EngineOptions()
    short = planner.next_plan(planner.Plan(), stats(steps_left=20, host_seconds=0.01), options)
    assert short.where == planner.HOST and not short.compile
    long = planner.next_plan(planner.Plan(), stats(steps_left=10_000, host_seconds=0.01), options)
    assert long.compile and long.where == planner.HOST  # host steps while it compiles
    ready = stats(steps_left=10_000, host_seconds=0.01, kernel_ready=True)
    assert planner.next_plan(long, ready, options).where == planner.COMPILED
    # a measured compiled step dearer than a host step sends the run back to the host
    compiled = planner.Plan(planner.COMPILED, 8, 4)
    dear = stats(host_seconds=0.01, compiled_seconds=0.02, kernel_ready=True)
    assert planner.next_plan(compiled, dear, options).where == planner.HOST
    assert planner.next_plan(compiled, dear, EngineOptions(compiled="off")).where == planner.HOST


def test_the_planner_chunks_grow_while_the_ranks_hold():
    options = EngineOptions(chunk=8)
    plan = planner.Plan(planner.COMPILED, 8, 1)
    lengths = []
    for rank in (6, 6, 6, 6, 7, 7):
        plan = planner.next_plan(plan, stats(largest_rank=rank, largest_seen=6), options)
        lengths.append(plan.chunk)
    assert lengths == [2, 4, 8, 8, 1, 1]
    options = EngineOptions()
    assert planner.grown(plan, 9, 3, 4, options, False).bond == 10  # the smallest that holds it
    assert planner.grown(plan, 9, 3, 4, options, False).where == planner.COMPILED
    assert planner.grown(plan, 21, 3, 4, options, False).where == planner.HOST  # 24: a sketch
    assert planner.grown(plan, 21, 3, 4, options, True).where == planner.COMPILED


@pytest.fixture
def jax_double():
    pytest.importorskip("jax")
    with backends.use_backend("jax", "double"):
        yield


def _tempo(options: EngineOptions | None, tcut: float = 1.0) -> tuple[numpy.ndarray, object]:
    system, bath, rho0 = spin_boson(alpha=0.3)
    parameters = nm.TempoParameters(dt=0.1, tcut=tcut, epsrel=1e-6)
    tempo = nm.Tempo(system, bath, parameters, rho0, 0.0, options=options)
    return tempo.compute(2.0, progress_type="silent").states, tempo.engine


def test_compiled_zip_up_tempo_agrees_with_numpy(jax_double):
    options = EngineOptions(compiled="on", deterministic=True)
    states, engine = _tempo(options)
    with backends.use_backend("numpy"):
        reference, _ = _tempo(None)
    assert engine.stats.compiled_steps > 0 and engine.stats.host_steps == 0
    # a handful of kernels for the whole run, not one per step or site
    assert 1 <= engine.stats.kernels_compiled <= 4
    numpy.testing.assert_allclose(states, reference, atol=1e-10, rtol=0)
    # a second run of the same shapes compiles nothing
    _, again = _tempo(options)
    assert again.stats.kernels_compiled == 0


def test_compiled_sketching_buckets_agree_with_numpy(jax_double):
    """Bonds to 30 at epsrel 1e-11: the compiled steps run buckets whose cuts sketch
    (the host sketches the same cuts); every redone chunk is a change of bucket."""
    system, bath, rho0 = spin_boson(alpha=0.1, temperature=0.5)
    parameters = nm.TempoParameters(dt=0.1, epsrel=1e-11, dkmax=6)

    def run(options):
        tempo = nm.Tempo(system, bath, parameters, rho0, 0.0, options=options)
        return tempo.compute(1.0, progress_type="silent").states, tempo.engine

    states, engine = run(EngineOptions(compiled="on", deterministic=True))
    with backends.use_backend("numpy"):
        reference, _ = run(None)
    numpy.testing.assert_allclose(states, reference, atol=1e-10, rtol=0)
    bonds = [decision[2] for decision in engine.stats.decisions]
    assert not planner.plain_cuts(max(bonds), 3, 4)  # a bucket of sketched cuts ran
    assert engine.stats.redos <= len(engine.stats.decisions)


def test_a_short_run_stays_on_the_host_and_says_why(jax_double):
    # (a memory no other test uses: no kernel of its shape is in the process)
    states, engine = _tempo(EngineOptions(deterministic=True), tcut=0.7)
    with backends.use_backend("numpy"):
        reference, _ = _tempo(None, tcut=0.7)
    assert engine.stats.compiled_steps == 0 and engine.stats.kernels_compiled == 0
    assert any("compile" in decision[3] for decision in engine.stats.decisions)
    numpy.testing.assert_allclose(states, reference, atol=1e-12, rtol=0)


def _pt_dynamics(options: EngineOptions | None) -> numpy.ndarray:
    # a model whose truncation decisions are far from their thresholds: there a change of
    # 1e-13 in the coupling moves the NumPy result by 2e-14 (at alpha 0.3, T 1 by 6e-7:
    # any two roundings of one algorithm may differ that much there)
    system, bath, rho0 = spin_boson(alpha=0.1, temperature=0.5)
    parameters = nm.TempoParameters(dt=0.1, tcut=0.5, epsrel=1e-6)
    pt = nm.pt_tempo_compute(bath, 0.0, 1.5, parameters, progress_type="silent", options=options)
    return nm.compute_dynamics(system, rho0, process_tensor=pt, progress_type="silent").states


def test_compiled_zip_up_process_tensor_agrees_with_numpy(jax_double):
    states = _pt_dynamics(EngineOptions(compiled="on", deterministic=True))
    with backends.use_backend("numpy"):
        reference = _pt_dynamics(None)
    numpy.testing.assert_allclose(states, reference, atol=1e-10, rtol=0)


def test_a_compilation_ahead_that_fails_is_done_again_in_the_foreground(jax_double, monkeypatch):
    """A compilation in the background thread that stops (the program ends, or JAX's
    configuration changes) leaves the kernel to the step that needs it."""
    from nonmarkov.engines.jax import compiler

    def stopped() -> None:
        raise RuntimeError("compilations ahead stopped")

    monkeypatch.setattr(compiler, "check_ahead", stopped)
    system, bath, rho0 = spin_boson(alpha=0.3)
    # unique classes and a memory no other test of the suite compiles: new kernel shapes
    parameters = nm.TempoParameters(dt=0.1, tcut=1.1, epsrel=1e-6)

    def run(options):
        tempo = nm.Tempo(system, bath, parameters, rho0, 0.0, unique=True, options=options)
        return tempo.compute(2.0, progress_type="silent").states, tempo.engine

    states, engine = run(EngineOptions(compiled="on", deterministic=True))
    with backends.use_backend("numpy"):
        reference, _ = run(None)
    assert engine.stats.compiled_steps > 0 and engine.stats.kernels_compiled > 0
    numpy.testing.assert_allclose(states, reference, atol=1e-10, rtol=0)


def _near_copies(groups: int, copies: int, classes: int, columns: int, seed: int) -> numpy.ndarray:
    """A zip-up matrix (groups copies, classes columns): rows in groups of nearly equal
    copies, singular values falling geometrically."""
    rng = numpy.random.default_rng(seed)
    width = classes * columns
    base = rng.standard_normal((groups, 100)) * 0.8 ** numpy.arange(100)
    base = base @ rng.standard_normal((100, width))
    apart = rng.standard_normal((groups, copies, 30)) * 1e-3 * 0.5 ** numpy.arange(30)
    apart = apart @ rng.standard_normal((30, width))
    return (base[:, None, :] + apart).reshape(groups * copies, width).astype(complex)


@pytest.mark.parametrize(
    ("epsrel", "sketch", "blocks"),
    [
        (1e-4, 16, "one block"),
        (1e-6, 32, "two blocks"),
        (1e-6, 16, "too narrow"),
        (1e-12, 128, "stops paying"),
    ],
)
def test_the_compiled_sketch_is_the_host_sketch(jax_double, epsrel, sketch, blocks):
    """The compiled zip-up cut of a padded matrix against the host's copies-aware sketch:
    the same test columns, blocks and growth give the same cut to rounding; a sketch
    that needs more than its bucket reports the width and cuts with a plain SVD; a
    sketch that stops paying before its bucket is full cuts with a plain SVD, as the
    host does, and wants no wider bucket."""
    import jax
    import jax.numpy as jnp

    from nonmarkov.engines.jax.cuts import zip_up_cut
    from nonmarkov.kernels.truncation import sketch_gaussians, sketched_truncated_svd

    groups, copies, classes, columns, bond, growth = 30, 3, 4, 28, 60, 2
    matrix = _near_copies(groups, copies, classes, columns, seed=1)
    if blocks == "stops paying":  # rows far from copies of each other: a full spectrum
        rng = numpy.random.default_rng(2)
        matrix = matrix + rng.standard_normal(matrix.shape) * 1e-3 * numpy.abs(matrix).max()
        bond = 96  # a bucket that holds the full rank
    u, s, vh = sketched_truncated_svd(
        matrix, epsrel, groups + growth, None, copies, column_classes=classes
    )
    padded = numpy.zeros((bond, copies, classes, bond), complex)
    padded[:groups, :, :, :columns] = matrix.reshape(groups, copies, classes, columns)
    gaussians = jnp.asarray(sketch_gaussians(classes, bond, 0, 2 * sketch))

    def cut(matrix, gaussians):
        sizes = jnp.int32(groups), jnp.int32(classes * columns), jnp.int32(growth)
        return zip_up_cut(matrix, *sizes, copies, bond, epsrel, None, gaussians, None)

    cu, cs, cvh, rank, wider = jax.jit(cut)(
        jnp.asarray(padded.reshape(bond * copies, -1)), gaussians
    )
    assert int(rank) == s.shape[0]
    if blocks == "too narrow":
        assert int(wider) > sketch
    else:
        assert int(wider) == 0
    kept = (numpy.asarray(cu) * numpy.asarray(cs)[None, :]) @ numpy.asarray(cvh)
    kept = kept.reshape(bond, copies, classes, bond)[:groups, :, :, :columns]
    if blocks in ("too narrow", "stops paying"):  # the plain SVD's cut: no sketch's miss
        u, s, vh = numpy.linalg.svd(matrix, full_matrices=False)
        u, s, vh = u[:, : int(rank)], s[: int(rank)], vh[: int(rank)]
    numpy.testing.assert_allclose(numpy.asarray(cs)[: int(rank)], s, rtol=1e-12, atol=1e-13 * s[0])
    numpy.testing.assert_allclose(
        kept.reshape(matrix.shape), (u * s[None, :]) @ vh, atol=1e-12 * s[0], rtol=0
    )
