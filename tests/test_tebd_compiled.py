"""The compiled TEBD engine (JAX, ``compiled='on'``) against the host engine (NumPy).

Both engines are made by :func:`nonmarkov.engines.tebd_engine` from the same
:class:`~nonmarkov.engines.base.TebdSpec` and driven by the same layers of
gates, site maps and read-outs (as PT-TEBD drives them): their read-outs agree
to 1e-10 and their bonds are equal, also where a rank outgrows the compiled
engine's bond bucket (the program is redone with a larger one) and with
``max_rank``. The compiled engine runs a step as one program: one kernel per
bucket and pattern of operations, one read-back per step.

Random gates near the identity give well-conditioned spectra (no singular value
at a truncation threshold), so that the two engines keep the same ranks.
"""

from __future__ import annotations

import numpy as np
import pytest
import scipy.linalg

from nonmarkov import backends
from nonmarkov.engines import tebd_engine
from nonmarkov.engines.base import TebdSpec
from nonmarkov.options import EngineOptions

pytestmark = pytest.mark.skip_backend("numpy", "compares the compiled JAX engine with NumPy")

SITES = 4
LEGS = (1, 2, 1, 3)  # augmented legs: sites 1 and 3 are split before a gate


def random_chain(seed):
    """Sites (1, 4, a, 1) of a product of random positive states, entangled with their
    augmented legs; the gates of two layers, a site map and the caps."""
    rng = np.random.default_rng(seed)
    sites = []
    for a in LEGS:
        vectors = []
        for _ in range(a):
            root = rng.normal(size=(2, 2)) + 1j * rng.normal(size=(2, 2))
            rho = root @ root.conj().T
            vectors.append((rho / np.trace(rho)).reshape(-1))
        sites.append(np.stack(vectors, axis=1).reshape(1, 4, a, 1))

    def gate(strength):
        generator = rng.normal(size=(16, 16)) + 1j * rng.normal(size=(16, 16))
        return scipy.linalg.expm(strength * generator / 8)

    site_map = scipy.linalg.expm((rng.normal(size=(4, 4)) + 1j * rng.normal(size=(4, 4))) / 8)
    caps = [rng.normal(size=a) + 1.0 for a in LEGS]
    return sites, (gate(0.6), gate(0.5)), site_map, caps


def run(spec, steps, seed, options=None):
    """The engine's read-outs and bonds after each of ``steps`` steps, and the engine."""
    _, (even, odd), site_map, caps = random_chain(seed)
    engine = tebd_engine(spec, options)
    history = []
    for _ in range(steps):
        engine.apply_gates([(0, even), (2, even)])
        engine.apply_gates([(1, odd)])
        engine.apply_site_maps([(3, site_map)])
        engine.apply_gates([(0, even), (2, even)])
        total, vectors = engine.read_out(caps, [(0,), (1, 2), (3,)])
        history.append((total, vectors, engine.bond_dimensions()))
    return history, engine


def assert_same(compiled, host):
    for (total, vectors, bonds), (total_h, vectors_h, bonds_h) in zip(compiled, host):
        scale = max(1.0, abs(total_h))
        assert abs(total - total_h) <= 1e-10 * scale
        for vector, vector_h in zip(vectors, vectors_h):
            np.testing.assert_allclose(vector, vector_h, rtol=0, atol=1e-10 * scale)
        assert bonds == bonds_h


@pytest.mark.parametrize(("epsrel", "max_rank"), [(1e-3, None), (1e-6, 5)])
def test_compiled_engine_equals_host_engine(epsrel, max_rank):
    sites, *_ = random_chain(1)
    spec = TebdSpec(sites, epsrel, max_rank)
    compiled, engine = run(spec, 3, 1, EngineOptions(compiled="on"))
    with backends.use_backend("numpy"):
        host, _ = run(spec, 3, 1)
    assert_same(compiled, host)
    bonds = [entry[2] for entry in compiled]
    largest = max(max(b) for b in bonds)
    if max_rank is not None:
        assert largest == max_rank  # the cap binds: without it the bonds grow beyond
    assert largest > 4  # beyond the first bucket: the program was redone in a larger one
    stats = engine.stats
    assert stats.redos >= 1
    assert any(entry[0] == "bond" for entry in engine.decisions)
    # one program a step (its read-out fused in) and its redos; few kernels
    assert stats.programs == 3 + stats.redos
    assert stats.kernels_compiled <= 2 * (stats.redos + 1)


def test_a_second_run_compiles_nothing():
    sites, *_ = random_chain(1)
    spec = TebdSpec(sites, 1e-6, 5)
    options = EngineOptions(compiled="on")
    first, _ = run(spec, 3, 1, options)
    second, engine = run(spec, 3, 1, options)
    assert engine.stats.kernels_compiled == 0  # its programs and buckets are cached
    assert_same(second, first)


def test_auto_stays_on_the_host_cpu():
    sites, *_ = random_chain(3)
    engine = tebd_engine(TebdSpec(sites, 1e-6), EngineOptions(compiled="auto", device="host"))
    assert engine.decisions[0][1] == "host"
